"""Inductor's collective autotuning, timed by the daemon.

    import autotuned.inductor
    autotuned.inductor.enable(impls={one_shot: "all_reduce/one_shot",
                                     two_shot: "all_reduce/two_shot"},
                              default_impl="all_reduce/nccl")

One explicit call switches it on (disable() switches it off). It applies to
custom ops autotuned with torch._inductor.kernel.custom_op's
register_custom_op_autotuning / CustomOpConfig: a choice whose decomposition
is named in `impls` (by the function or its __name__, or marked with
@daemon_impl("all_reduce/one_shot")), and the op's own default (the
`<name>_fallback_default` choice) when `default_impl` is given, is timed by
the daemon instead of in this process. Choices that map to no daemon
implementation are left out of such a selection; selections with no mapped
choice are Inductor's own, untouched.

The seam is AlgorithmSelectorCache (PyTorch 2.11,
torch/_inductor/select_algorithm.py):
  * benchmark() is where Inductor turns choices into {choice: ms}. For mapped
    choices it becomes one per-rank Tune of the group (autotuned.group), and
    the daemon's medians come back as {choice: ms}, failed candidates as inf.
    In 2.11 the `is_collective` path would time each choice here with CUDA
    events and average per-rank means over the default group only.
  * __call__ (immediate path, the default): Inductor picks the fastest of the
    daemon's timings, which is the daemon's winner (ties in request order).
  * __call__ with deferred=True: the selection returns a MultiTemplateBuffer
    whose choice_timings is lazy; when the scheduler first asks for the
    timings of any of a graph's collective nodes, all of that graph's pending
    collective nodes go to the daemon as one batch (one Tune, one problem
    each), per size hint (hint_override) asked for.

The tensor the collective moves is the op's first tensor input; its size
(per the graph's size hints) and dtype make the problem: count = numel for
all_reduce, all_gather and broadcast, numel / world_size for reduce_scatter
and all_to_all.

Failure: every rank ends with the same choice. Where the daemon is absent,
unreachable, dies mid-call or answers differently on some rank, every rank
takes the first mapped choice (timings {first: 0.0, others: inf}, logged as a
fallback with the reason); a candidate the daemon does not know, or a group
description that does not match the process group, raises InvalidArgument /
GroupMismatch on every rank. No rank benchmarks alone.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import candidate, candidate_spec, dtype_enum, problem
from autotuned.errors import InvalidArgument
from autotuned.group import GroupDescription, describe_group
from autotuned.rankrun import tune_group

log = logging.getLogger("autotuned.inductor")

_ATTR = "__autotuned_impl__"


def daemon_impl(spec: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Marks a decomposition as the daemon implementation `spec`
    ("impl" or "impl:name=int,...")."""
    candidate(spec)

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _ATTR, spec)
        return fn

    return mark


@dataclasses.dataclass
class _State:
    impls: dict[Any, str]
    default_impl: Optional[str]
    deferred: bool
    process_group: Any
    group: Optional[GroupDescription]
    target: Optional[str]
    options: Optional[pb.Options]
    timeout: float
    # Per-selection records, for callers and tests: (name, {impl: ms}, winner, status, reason).
    decisions: list[tuple[str, dict[str, float], str, str, str]]
    original_call: Callable[..., Any]
    original_benchmark: Callable[..., Any]
    batches: weakref.WeakKeyDictionary[Any, _Batch]


_state: Optional[_State] = None
# The selection being made by the immediate path (compilation is single-threaded).
_current_name: Optional[str] = None


def enable(*, impls: Optional[Mapping[Union[str, Callable[..., Any]], str]] = None,
           default_impl: Optional[str] = None, deferred: bool = False,
           process_group: Any = None, group: Optional[GroupDescription] = None,
           target: Optional[str] = None, options: Optional[pb.Options] = None,
           timeout: float = 600.0) -> None:
    """Switches daemon timing on for mapped collective choices (see the module
    docstring). `process_group` (default: the world) is the group the
    collectives run on; `group` its description (default: describe_group on
    first use, a collective call); `target` this rank's daemon. Calling it
    again replaces the settings."""
    import torch._inductor.select_algorithm as sa

    global _state
    table = {}
    for key, spec in (impls or {}).items():
        candidate(spec)
        table[key] = spec
    if default_impl is not None:
        candidate(default_impl)
    cls = sa.AlgorithmSelectorCache
    if _state is None:
        original_call, original_benchmark = cls.__call__, cls.benchmark
    else:
        original_call, original_benchmark = _state.original_call, _state.original_benchmark
    _state = _State(impls=table, default_impl=default_impl, deferred=deferred,
                    process_group=process_group, group=group, target=target, options=options,
                    timeout=timeout, decisions=[], original_call=original_call,
                    original_benchmark=original_benchmark, batches=weakref.WeakKeyDictionary())
    # The seam (module docstring): Inductor's selector, patched in place.
    cls.__call__ = _patched_call  # type: ignore[method-assign]
    cls.benchmark = _patched_benchmark  # type: ignore[method-assign]


def disable() -> None:
    """Restores Inductor's own selection and benchmarking."""
    import torch._inductor.select_algorithm as sa

    global _state
    if _state is None:
        return
    sa.AlgorithmSelectorCache.__call__ = _state.original_call  # type: ignore[method-assign]
    sa.AlgorithmSelectorCache.benchmark = _state.original_benchmark  # type: ignore[method-assign]
    _state = None


def decisions() -> list[tuple[str, dict[str, float], str, str, str]]:
    """What each daemon-timed selection decided so far, in order:
    (selection name, {candidate: ms}, winner, status, reason)."""
    return list(_state.decisions) if _state else []


def _impl_of(choice: Any) -> Optional[str]:
    state = _state
    assert state is not None
    decomposition = getattr(choice, "decomposition", None)
    if decomposition is not None:
        if getattr(decomposition, _ATTR, None):
            return getattr(decomposition, _ATTR)
        for key in (decomposition, getattr(decomposition, "__name__", None)):
            if key is not None and key in state.impls:
                return state.impls[key]
        return None
    if state.default_impl and str(getattr(choice, "name", "")).endswith("_fallback_default"):
        return state.default_impl
    return None


def _specs_of(choices: Sequence[Any]) -> list[str]:
    """The daemon implementations of the choices that map to one."""
    return [s for s in map(_impl_of, choices) if s is not None]


def _group() -> GroupDescription:
    state = _state
    assert state is not None
    if state.group is None:
        state.group = describe_group(state.process_group, target=state.target)
    return state.group


def _problem(name: str, specs: Sequence[str], input_nodes: Sequence[Any],
             hint_override: Optional[int]) -> pb.Problem:
    from torch._inductor.virtualized import V

    collectives = {s.split("/", 1)[0] for s in specs}
    if len(collectives) != 1:
        raise InvalidArgument(f"{name}: candidates of different collectives: {sorted(specs)}")
    collective = collectives.pop()
    node = input_nodes[0]
    sizes = V.graph.sizevars.optimization_hints_with_override(node.get_size(), hint_override)
    numel = math.prod(int(s) for s in sizes)
    count = numel
    if collective in ("reduce_scatter", "all_to_all"):
        count = numel // _group().world_size
    return problem(collective, dtype_enum(node.get_dtype()), count, list(specs), label=name)


def _timings(choices: Sequence[Any], result: pb.ProblemResult, fallback: bool,
             reason: str, name: str) -> dict[Any, float]:
    """{choice: ms} from one ProblemResult (choices in request order)."""
    state = _state
    assert state is not None
    if fallback or not any(c.ok for c in result.ranked):
        why = reason or result.reason or "no candidate succeeded"
        out = {c: (0.0 if i == 0 else math.inf) for i, c in enumerate(choices)}
        log.warning("autotuned: %s: FALLBACK to %s on every rank: %s", name,
                    getattr(choices[0], "name", choices[0]), why)
        state.decisions.append((name, {}, _impl_of(choices[0]) or "", "FALLBACK", why))
        return out
    by_index = {c.index: c for c in result.ranked}
    out = {}
    shown = {}
    for i, choice in enumerate(choices):
        c = by_index.get(i)
        ms = c.median_us / 1000.0 if c is not None and c.ok else math.inf
        out[choice] = ms
        shown[candidate_spec(result.problem.candidates[i])] = ms
    status = pb.DecisionStatus.Name(result.status)
    log.warning("autotuned: %s %s count=%d: %s -> %s (%s, daemon medians)", name,
                pb.DType.Name(result.problem.dtype).lower(), result.problem.count,
                ", ".join(f"{k} {v:.4f} ms" for k, v in shown.items()), result.winner, status)
    state.decisions.append((name, shown, result.winner, status, ""))
    return out


def _ask(items: Sequence[tuple[str, Sequence[Any], pb.Problem]]) -> list[dict[Any, float]]:
    """One Tune for every (name, choices, problem); {choice: ms} for each."""
    state = _state
    assert state is not None
    decision = tune_group(_group(), [p for _, _, p in items], process_group=state.process_group,
                          options=state.options, timeout=state.timeout)
    return [_timings(choices, r, decision.fallback, decision.reason, name)
            for (name, choices, _), r in zip(items, decision.results)]


def _patched_benchmark(self: Any, choices: Sequence[Any], input_nodes: Any, layout: Any,
                       input_gen_fns: Any, hint_override: Optional[int] = None,
                       is_collective: bool = False) -> dict[Any, float]:
    state = _state
    assert state is not None
    specs = _specs_of(choices)
    if not choices or len(specs) != len(choices):
        return state.original_benchmark(self, choices, input_nodes, layout, input_gen_fns,
                                        hint_override=hint_override,
                                        is_collective=is_collective)
    name = _current_name or str(getattr(choices[0], "name", "collective"))
    p = _problem(name, specs, input_nodes, hint_override)
    return _ask([(name, list(choices), p)])[0]


class _Deferred:
    """Stands for the winner while it is not known yet: autotune_custom_op
    inlines a winner's graph (gm) only when it has one."""

    gm = None
    name = "autotuned_deferred"


@dataclasses.dataclass
class _Pending:
    name: str
    choices: list[Any]
    input_nodes: list[Any]
    timings: dict[Optional[int], dict[Any, float]]


class _Batch:
    """The collective selections of one graph awaiting their daemon timings."""

    def __init__(self) -> None:
        self.pending: list[_Pending] = []

    def timings(self, entry: _Pending, hint_override: Optional[int]) -> dict[Any, float]:
        if hint_override not in entry.timings:
            todo = [e for e in self.pending if hint_override not in e.timings]
            items = [(e.name, e.choices,
                      _problem(e.name, _specs_of(e.choices), e.input_nodes, hint_override))
                     for e in todo]
            log.info("autotuned: %d collective selection(s) of this graph sent as one batch",
                     len(items))
            for e, t in zip(todo, _ask(items)):
                e.timings[hint_override] = t
        return entry.timings[hint_override]


def _patched_call(self: Any, name: str, choices: list[Any], input_nodes: Any, layout: Any,
                  input_gen_fns: Any = None, *args: Any, **kwargs: Any) -> Any:
    state = _state
    assert state is not None
    mapped = [c for c in choices if _impl_of(c) is not None]
    if not mapped:
        return state.original_call(self, name, choices, input_nodes, layout, input_gen_fns,
                                   *args, **kwargs)
    left_out = [getattr(c, "name", str(c)) for c in choices if _impl_of(c) is None]
    if left_out:
        log.info("autotuned: %s: choices with no daemon implementation left out: %s", name,
                 ", ".join(left_out))
    if len(mapped) == 1:
        return state.original_call(self, name, mapped, input_nodes, layout, input_gen_fns,
                                   *args, **kwargs)
    if not state.deferred:
        # Inductor's own path would consult its on-disk autotune cache first,
        # which ranks sharing a cache directory can see in different states:
        # a rank that skips the ask leaves the others waiting for it. Every
        # rank asks instead (a repeat is a daemon cache hit) and takes the
        # fastest of {choice: ms} from the benchmark seam, ties in order.
        global _current_name
        _current_name = name
        try:
            timings = self.benchmark(mapped, input_nodes, layout, input_gen_fns)
        finally:
            _current_name = None
        winner = min(mapped, key=lambda c: timings[c])
        node = winner.output_node()
        return (node, winner) if kwargs.get("return_choice") else node
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    for c in mapped:
        # The winner becomes a SubgraphBuffer whose name names Python functions
        # in the generated code: "mylib::op_autotuned_x" would not parse.
        if getattr(c, "gm", None) is not None:
            c.name = re.sub(r"\W", "_", str(c.name))
    batch = state.batches.get(V.graph)
    if batch is None:
        batch = state.batches[V.graph] = _Batch()
    entry = _Pending(name=name, choices=mapped, input_nodes=list(input_nodes), timings={})
    batch.pending.append(entry)
    buffer = ir.MultiTemplateBuffer(layout, input_nodes,
                                    functools.partial(batch.timings, entry), mapped,
                                    OrderedSet())
    # A collective's epilogue cannot run inside it; left unfused, the scheduler
    # finalizes the buffer as its fastest choice (finalize_multi_template_buffers).
    V.graph.no_fuse_buffer_names.add(buffer.get_name())
    node = ir.TensorBox.create(buffer)
    if kwargs.get("return_choice"):
        return node, _Deferred()
    return node
