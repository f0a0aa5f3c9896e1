"""The seam in Inductor: AlgorithmSelectorCache.__call__ (PyTorch 2.11,
torch/_inductor/select_algorithm.py) for collective selections.

Immediate path: the selection's choices become one problem of client
candidates (autotuned.inductor._choices), one per-rank Tune through
autotuned.rankrun.tune_rank (which runs the round's schedule when the daemon
answers with one), and Inductor keeps the winner's code, the code that was
timed. Deferred path: a MultiTemplateBuffer whose timings are lazy; the
first time the scheduler asks for the timings of any of a graph's collective
selections, all of that graph's pending ones go as one Tune (one problem
each). Ranges of a selection over a dynamic dimension (_ranges): select()
only collects them (collecting()), and ask_with_batch() asks them in one
Tune, with the graph's pending deferred selections.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import re
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from autotuned._proto import autotuned_pb2 as pb
from autotuned.inductor import _answered, _caches, _choices, _runners

log = logging.getLogger("autotuned.inductor")

# (selection name, {candidate name: ms}, winner name, status, reason)
Decision = tuple[str, dict[str, float], str, str, str]


@dataclasses.dataclass
class Selection:
    """One collective selection: its choices (the op's default first), one
    candidate each."""

    name: str
    choices: list[Any]
    keys: list[str]                 # per choice, distinct
    candidates: list[pb.Candidate]  # per choice
    call: _choices.CollectiveCall
    input_nodes: list[Any]
    layout: Any
    input_gen_fns: Any
    # Size expressions replaced before the problem's count is taken: a
    # range's representative size of a dynamic dimension (_ranges).
    at: dict[Any, int] = dataclasses.field(default_factory=dict)
    # The daemon's answer to the last ask() of it (its ranking: how far the
    # winner is ahead of each other candidate); None where that ask fell
    # back or had no round. _ranges merges ranges by it.
    answer: Optional[pb.ProblemResult] = None

    @classmethod
    def make(cls, name: str, choices: Sequence[Any], call: _choices.CollectiveCall,
             input_nodes: Sequence[Any], layout: Any, input_gen_fns: Any) -> Selection:
        from autotuned.rankrun import client_candidate

        ordered = sorted(choices, key=lambda c: not _choices.is_default(c))
        for c in ordered:
            # A subgraph's name names Python functions in the code Inductor
            # generates for it: a decomposition named "<lambda>", or an op
            # "mylib::op", would not parse.
            if getattr(c, "gm", None) is not None:
                c.name = re.sub(r"\W", "_", str(c.name))
        keys: list[str] = []
        bases: list[str] = []
        for c in ordered:
            base = _choices.choice_key(c)
            # The same code twice (one function with two parameter-less
            # closures of one factory) is two candidates: the values it reads
            # may differ, and its position is the same on every rank.
            repeats = bases.count(base)
            bases.append(base)
            keys.append(f"{base}:{repeats}" if repeats else base)
        candidates = [client_candidate(_choices.display_name(c), k)
                      for c, k in zip(ordered, keys)]
        return cls(name, ordered, keys, candidates, call, list(input_nodes), layout,
                   input_gen_fns)

    def choice(self, index: int) -> Any:
        """The first choice of candidate `index`."""
        return self.choices[self.keys.index(self.candidates[index].client.key)]

    def rank_problem(self, world_size: int, hint_override: Optional[int]) -> Any:
        from autotuned.rankrun import RankProblem

        inputs = _runners.SelectionInputs(self.choices, self.input_nodes, self.layout,
                                          self.input_gen_fns, hint_override)
        problem = _choices.problem_of(self.name, self.call, self.input_nodes[0], world_size,
                                      self.candidates, hint_override, self.at)
        runners = {i: _runners.runner(self.choice(i), inputs)
                   for i in range(len(self.candidates))}
        return RankProblem(problem, runners, device=self.layout.device)

    def outcome(self, result: pb.ProblemResult, fallback: bool, reason: str
                ) -> tuple[Any, dict[Any, float], Decision]:
        """The winner, {choice: ms} with the winner first and least, and the
        record of the decision."""
        status = pb.FALLBACK if fallback else result.status
        measured = {c.index: c.median_us / 1000.0 for c in result.ranked if c.ok}
        index = result.winner_index if status in (pb.TUNED, pb.CACHED) and measured else 0
        winner = self.choice(index)
        best = measured.get(index, 0.0)
        timings = {winner: best}
        for choice, key in zip(self.choices, self.keys):
            i = next(j for j, c in enumerate(self.candidates) if c.client.key == key)
            timings.setdefault(choice, max(measured.get(i, math.inf), best))
        shown = {c.client.name: measured.get(i, math.inf) for i, c in enumerate(self.candidates)}
        for c in result.ranked:
            if not c.ok and status in (pb.TUNED, pb.CACHED):
                log.warning("autotuned: %s: %s ruled out: %s", self.name,
                            self.candidates[c.index].client.name, c.reason)
        why = "" if status in (pb.TUNED, pb.CACHED) else \
            (reason or result.reason or "no candidate succeeded")
        return winner, timings, (self.name, shown, self.candidates[index].client.name,
                                 pb.DecisionStatus.Name(status), why)

    def fallback(self, reason: str) -> tuple[Any, dict[Any, float], Decision]:
        """outcome() of a round that could not be had: the first choice (the
        op's default, where the selection has it)."""
        timings = {c: (0.0 if i == 0 else math.inf) for i, c in enumerate(self.choices)}
        return self.choices[0], timings, (self.name, {}, self.candidates[0].client.name,
                                          "FALLBACK", reason)


def ask(state: Any, selections: Sequence[Selection], hint_override: Optional[int] = None
        ) -> list[tuple[Any, dict[Any, float]]]:
    """One per-rank Tune for the selections; (winner, {choice: ms}) for each."""
    from autotuned.rankrun import tune_rank

    try:
        problems = [s.rank_problem(state.group.world_size, hint_override) for s in selections]
        # An ask the daemon's cache answered before: its choices are
        # compiled only if a run comes after all (_answered).
        marker, answered = _answered.lookup(state.group, [p.problem for p in problems],
                                            state.options)
        decision = tune_rank(state.group, problems, options=state.options,
                             timeout=state.timeout, prepare_first=not answered)
        if not decision.fallback:
            _answered.record(marker, decision.results)
        answers = [s.outcome(result, decision.fallback, decision.reason)
                   for s, result in zip(selections, decision.results)]
        for s, result in zip(selections, decision.results):
            s.answer = None if decision.fallback else result
    except Exception as e:  # noqa: BLE001 - never a crash of the compile: the default
        # The same on every rank: the daemon answers every rank of a round
        # alike (its errors too: INVALID_ARGUMENT for ranks that disagree
        # goes to every rank of both rounds); a rank that fails before its
        # Tune never joins the round, whose other ranks then fall back at
        # the window; and what follows the answer is a pure function of it.
        reason = _why(e)
        answers = [s.fallback(reason) for s in selections]
    out = []
    for winner, timings, record in answers:
        state.decisions.append(record)
        name, shown, won, status, why = record
        if why:
            _caches.note_fallback(f"{name}: {why}")
            log.warning("autotuned: %s: %s to %s on every rank: %s", name, status, won, why)
        else:
            log.info("autotuned: %s: %s -> %s (%s)", name,
                     ", ".join(f"{k} {v:.4f} ms" for k, v in shown.items()), won, status)
        out.append((winner, timings))
    return out


class _Deferred:
    """Stands for the winner while it is not known yet: autotune_custom_op
    inlines a winner's graph (gm) only when it has one."""

    gm = None
    name = "autotuned_deferred"


class _Batch:
    """The collective selections of one graph awaiting their timings."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.pending: list[tuple[Selection, dict[Optional[int], dict[Any, float]]]] = []

    def timings(self, index: int, hint_override: Optional[int] = None) -> dict[Any, float]:
        selection, by_hint = self.pending[index]
        if hint_override not in by_hint:
            todo = [(s, t) for s, t in self.pending if hint_override not in t]
            log.info("autotuned: %d collective selection(s) of this graph sent as one batch",
                     len(todo))
            answers = ask(self.state, [s for s, _ in todo], hint_override)
            for (_, t), (_, timings) in zip(todo, answers):
                t[hint_override] = timings
        return by_hint[hint_override]


_batches: weakref.WeakKeyDictionary[Any, _Batch] = weakref.WeakKeyDictionary()


class Collected:
    """What select() leaves as the winner while collecting: nothing chosen
    yet (autotune_custom_op returns it as is with return_choice)."""

    gm = None
    name = "autotuned_collected"


# While not None, select() appends each selection it is given (None for one
# that is not a collective's) here instead of deciding it (_ranges: the
# ranges of a dynamic selection are asked in one Tune).
_collecting: Optional[list[Optional[Selection]]] = None


@contextlib.contextmanager
def collecting() -> Iterator[list[Optional[Selection]]]:
    """Within it, select() decides nothing: it collects (see _collecting)."""
    global _collecting
    outer, _collecting = _collecting, []
    try:
        yield _collecting
    finally:
        _collecting = outer


def ask_with_batch(state: Any, selections: Sequence[Selection]
                   ) -> list[tuple[Any, dict[Any, float]]]:
    """ask() for selections that cannot wait for the scheduler (a dynamic
    selection's ranges, decided while lowering): in deferred mode the same
    Tune also carries this graph's collective selections pending so far."""
    from torch._inductor.virtualized import V

    batch = _batches.get(V.graph) if state.deferred else None
    todo = [(s, t) for s, t in batch.pending if None not in t] if batch else []
    if todo:
        log.info("autotuned: %d pending collective selection(s) of this graph sent with "
                 "this one", len(todo))
    answers = ask(state, [s for s, _ in todo] + list(selections))
    for (_, t), (_, timings) in zip(todo, answers):
        t[None] = timings
    return answers[len(todo):]


def _deferred(state: Any, selection: Selection) -> Any:
    import functools

    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    batch = _batches.get(V.graph)
    if batch is None:
        batch = _batches[V.graph] = _Batch(state)
    batch.pending.append((selection, {}))
    buffer = ir.MultiTemplateBuffer(
        selection.layout, selection.input_nodes,
        functools.partial(batch.timings, len(batch.pending) - 1), selection.choices,
        OrderedSet())
    # 2.11 makes epilogue-fused variants only of Triton template choices
    # (Scheduler.speedup_by_fusion); these are subgraphs and extern kernels,
    # finalized as their own buffers. Left unfused, the scheduler finalizes
    # the buffer as its fastest choice (finalize_multi_template_buffers).
    V.graph.no_fuse_buffer_names.add(buffer.get_name())
    return ir.TensorBox.create(buffer)


def select(state: Any, original: Any, selector: Any, name: str, choices: list[Any],
           input_nodes: Any, layout: Any, input_gen_fns: Any = None, *args: Any,
           **kwargs: Any) -> Any:
    """AlgorithmSelectorCache.__call__ while enabled. Any error of the
    integration or the daemon ends in the op's default with a warning (ask),
    never in an exception out of the lowering."""
    try:
        call = _choices.collective_of(choices)
    except Exception as e:  # noqa: BLE001 - not known to be a collective: Inductor's own
        log.warning("autotuned: %s: left to Inductor's own selection: %s", name, _why(e))
        call = None
    if _collecting is not None:
        # Errors propagate: the collector falls back for the whole op.
        collected = None
        if call is not None:
            ordered = sorted(choices, key=lambda c: not _choices.is_default(c))
            collected = Selection.make(name, ordered, call, input_nodes, layout,
                                       input_gen_fns)
        _collecting.append(collected)
        return (None, Collected()) if kwargs.get("return_choice") else None
    if call is None:
        return original(selector, name, choices, input_nodes, layout, input_gen_fns,
                        *args, **kwargs)
    if state.deferred:
        # 2.11's finalize_multi_template_buffers places a winner by its
        # output_node(); the op's default makes a FallbackKernel there whose
        # MultiOutput wraps a buffer the scheduler never sees (the generated
        # code names an undefined buffer). Deferred selections leave it out.
        choices = [c for c in choices if not _choices.is_default(c)]
    choices = sorted(choices, key=lambda c: not _choices.is_default(c))
    try:
        selection = Selection.make(name, choices, call, input_nodes, layout, input_gen_fns)
        if len(selection.candidates) < 2:  # one code: nothing to choose
            winner = selection.choices[0]
        elif state.deferred:
            node = _deferred(state, selection)
            return (node, _Deferred()) if kwargs.get("return_choice") else node
        else:
            winner, _ = ask(state, [selection])[0]
    except Exception as e:  # noqa: BLE001 - this rank asks nothing (see ask)
        winner = choices[0]
        reason = _why(e)
        shown = re.sub(r"_\d+$", "", str(getattr(winner, "name", "choice"))) \
            if getattr(winner, "gm", None) is not None else str(getattr(winner, "name", ""))
        state.decisions.append((name, {}, shown, "FALLBACK", reason))
        _caches.note_fallback(f"{name}: {reason}")
        log.warning("autotuned: %s: FALLBACK to %s on this rank, without a round: %s", name,
                    shown, reason)
    node = winner.output_node()
    return (node, winner) if kwargs.get("return_choice") else node


def _why(e: BaseException) -> str:
    """An error as a decision's reason."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 1024 else text[:1021] + "..."
