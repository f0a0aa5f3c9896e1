"""Collective selections over a dynamic dimension: a winner per size range,
dispatched at run time (docs/python.md, "Inductor", "Dynamic shapes").

PyTorch 2.11's range-based custom-op autotuning
(torch/_inductor/kernel/custom_op.py, _range_based_lowering_fn, for
register_custom_op_autotuning(..., dispatch_on={"tensor_name", "dim",
"range_upper_bound"}, split_points=[p0, p1, ...])): the ranges are
[1, p0], [p0 + 1, p1], ..., [pn + 1, inf]; each range is a selection of its
own (autotune_custom_op named "<name>_range_<start>_<end>") whose choices are
traced and benchmarked on inputs with the dispatch dimension at the range's
upper bound (range_upper_bound, default 65536, for the last one); the
winners are grouped by implementation (name and kwargs, neighbours or not);
one group is inlined, more become nested torch.cond whose predicates test
start <= size <= end for each of a group's ranges.

With the integration on, a collective's range selection instead:
  * collects the selection of every range (its choices made by 2.11's own
    autotune_custom_op with the range's input generators; _select.collecting)
    and asks them all in ONE Tune, one problem per range, whose count is
    taken at the range's representative size: 2.11's, its upper bound, and
    for the last range range_upper_bound, or its start if that is larger.
    Each choice is timed as itself at each size by the ranks' run. In
    deferred mode the Tune also carries the graph's collective selections
    pending so far (_select.ask_with_batch);
  * merges neighbouring ranges whose winner is the same candidate (the same
    content key; the op's default, whose key names its range's selection,
    is one candidate in every range), or whose winners are not measurably
    different: a range
    joins the ranges before it while some candidate is, by the daemon's
    answer for each of them (the paired ratios or the intervals of its
    ranking), not slower than that range's winner beyond the noise
    (merge()), so noise does not flip the table back and forth. One range
    left is its winner alone, no dispatch; more become nested torch.cond on
    the size with one comparison `size <= end`
    per boundary passed (the ranges are in order, so the lower bound is
    implied), a Python `if` on a size in the wrapper Inductor generates;
  * runs the op itself (a FallbackKernel, the code that was timed) in a
    range that the op's default won; 2.11 traces the op's body there, which
    fails for a body that calls torch.distributed in place;
  * lowers a dispatch dimension that is static as one selection at its size,
    as an op without ranges.
Selections that are not collectives keep 2.11's own range lowering. Any
error: the op's default everywhere, with a warning, as for any selection
(_select.ask says why that is the same on every rank).

An op registered without split_points (custom_op._standard_lowering_fn)
has, in 2.11, each symbolic dimension of its inputs specialized: making
its choices (SubgraphChoiceCaller._compute_sym_input_values) takes int()
of the example inputs' symbolic sizes, a guard `size == hint`, so the graph
is recompiled at every new size and each compile tunes its own size. With
the integration on, a collective selection whose first tensor input (the
collective's input, whose bytes are the message) has one symbolic
dimension, and whose other tensor inputs are static, is lowered as above
over that dimension instead (lower_standard()), its ranges from a short
probe ladder: PROBE_BYTES, message sizes from a decode step to a prefill,
a factor of 8 apart (its comment says why these), in units of the
dimension (the input's other dimensions times its element size, rounded
down; probe_ranges()): every step but the last a split point, the last the
range_upper_bound, so each range is tuned at the step that ends it and the
last one at the ladder's top, by the rules above. Steps below one unit or
outside the dimension's known values are left out; with none left, one
range is tuned at the top (or one unit) and inlined, no dispatch. The
merging, the Tune, the dispatch and the fallbacks are the same code.
Several symbolic dimensions (torch.compile(dynamic=True) makes every
dimension of a graph input symbolic; mark_dynamic one to dispatch on it),
or a symbolic dimension in another tensor input: 2.11's specialization,
with a log line at INFO. A static selection, or a selection that is not a
collective's (found on its first range's choices), is 2.11's own, unchanged.

A functional collective whose input has one symbolic dimension
(_functional, "Symbolic sizes") is ranged by the same ladder, asked and
merged by decide() and dispatched by _dispatch(), with choices of its own.
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import math
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from autotuned.inductor import _caches, _choices, _select

log = logging.getLogger("autotuned.inductor")

# (op name, [(first size, last size or None, winner name), ...]): the merged
# ranges a compiled graph dispatches among (autotuned.inductor.dispatches()).
Dispatch = tuple[str, list[tuple[int, Optional[int], str]]]

# The message sizes, in bytes of the collective's input, at which a
# collective selection over a dynamic dimension registered without
# split_points is tuned (probe_ranges(), module docstring): powers of 8
# from 16 KiB to 64 MiB. 16 KiB is one decode token of an 8192-wide bf16
# activation: below it a collective's time is mostly its latency, and
# smaller messages run the first step's winner. 64 MiB is the top of what
# the project sweeps by default (autotunectl sweep's --to, the vLLM
# helper's DEFAULT_SIZES_BYTES, P2PGroup's default max_bytes), a prefill of
# 4096 such tokens; larger messages run its winner. Every step is a problem
# of the one Tune, every choice timed at each: steps of 8 make five, steps
# of 4 would make seven, to place a crossover within a factor of 4 instead
# of 8.
PROBE_BYTES = (16 << 10, 128 << 10, 1 << 20, 8 << 20, 64 << 20)


def representative(start: int, end: float, upper_bound: int) -> int:
    """The size a range [start, end] is tuned at: its upper bound; for the
    unbounded one, `upper_bound` (dispatch_on's range_upper_bound), not less
    than its start."""
    return int(end) if end != math.inf else max(int(upper_bound), int(start))


def tuned_at(ranges: Sequence[tuple[Any, Any]], upper_bound: int
             ) -> tuple[list[tuple[int, float]], list[int]]:
    """The ranges as (start, end) and the size each is tuned at
    (representative())."""
    bounds = [(int(s), float(e)) for s, e in ranges]
    return bounds, [representative(s, e, upper_bound) for s, e in bounds]


def fell_back(state: Any, name: str, default: str, e: BaseException, why: str,
              to: str) -> None:
    """A selection over ranges that fell back to `default` (`to` names it
    in the warning) on this rank: its decision and its one-range dispatch
    recorded, its graph kept out of Inductor's caches, a warning."""
    reason = _select._why(e)
    state.decisions.append((name, {}, default, "FALLBACK", reason))
    state.dispatches.append((name, [(1, None, default)]))
    _caches.note_fallback(f"{name}: {reason}")
    log.warning("autotuned: %s: FALLBACK to %s, %s: %s", name, to, why, reason)


def probe(name: str, node: Any, dim: int) -> tuple[list[int], int]:
    """The probe ladder's split points and range_upper_bound over dimension
    `dim` of the tensor IR `node` (probe_ranges, in units of that dimension
    within its value range), logged."""
    size = node.get_size()
    unit = node.get_dtype().itemsize * math.prod(
        int(s) for i, s in enumerate(size) if i != dim)
    points, upper = probe_ranges(unit, *_value_range(size[dim]))
    log.info("autotuned: %s: dispatch on its input's dimension %d (%s), split points %s, "
             "range_upper_bound %d", name, dim, size[dim], points, upper)
    return points, upper


def range_name(name: str, start: int, end: float) -> str:
    """2.11's name of a range's selection."""
    return f"{name}_range_{int(start)}_{'inf' if end == math.inf else int(end)}"


def _slower(c: Any, w: Any) -> bool:
    """Whether candidate `c` of an answer is slower than its winner `w`
    beyond the noise, by the daemon's own test (docs/protocol.md, "How a
    decision is made"): paired, the interval of its ratio to the winner
    wholly above 1; unpaired, the winner's interval of the median wholly
    below its own. Without intervals (a daemon that predates them): yes."""
    if c.paired > 0:
        return c.vs_winner_low > 1.0
    if c.median_low_us <= 0.0 or w.median_high_us <= 0.0:
        return True
    return w.median_high_us < c.median_low_us


def ties(answer: Any, keys: Sequence[str], winner: str) -> frozenset[str]:
    """The tie set of a range: the key of its winner and of every working
    candidate that `answer` (a ProblemResult, or None) does not find slower
    than the winner beyond the noise (tied, or faster by less than the
    margin where the default was kept). `keys`: per candidate index."""
    from autotuned._proto import autotuned_pb2 as pb

    if answer is None or answer.status not in (pb.TUNED, pb.CACHED):
        return frozenset([winner])
    w = next((c for c in answer.ranked if c.index == answer.winner_index and c.ok), None)
    if w is None:
        return frozenset([winner])
    return frozenset([winner]) | frozenset(
        keys[c.index] for c in answer.ranked
        if c.ok and 0 <= c.index < len(keys) and not _slower(c, w))


def merge(bounds: Sequence[tuple[int, float]], winners: Sequence[str],
          tie_sets: Sequence[frozenset[str]] = ()) -> list[tuple[int, float, str]]:
    """The ranges as the dispatch runs them: (start, end, key of the winner),
    in order. A range joins the group before it while some candidate is in
    the tie set of every range of the group and of it (`tie_sets`, each
    holding its range's winner; by default each the winner alone, which
    merges only ranges with the same winner): measured at each of their
    sizes, that candidate is not slower than the range's winner beyond the
    noise, so a winner that changes within the noise does not split the
    table. The group runs, of those common candidates, the winner of its
    earliest range that is one of them, else the least key: a pure function
    of the answers, the same on every rank. Greedy from the left, which
    gives the fewest groups."""
    sets = list(tie_sets) or [frozenset([k]) for k in winners]
    out: list[tuple[int, float, str]] = []
    common: frozenset[str] = frozenset()
    first = 0
    for i, ((start, end), key, tied) in enumerate(zip(bounds, winners, sets)):
        tied = tied | {key}
        if out and common & tied:
            common &= tied
            out[-1] = (out[-1][0], end, _pick(common, winners[first:i + 1]))
        else:
            common, first = tied, i
            out.append((start, end, key))
    return out


def _pick(common: frozenset[str], winners: Sequence[str]) -> str:
    """The group's winner among the candidates it has in common: the winner
    of its earliest range that is one of them, else the least key."""
    return next((k for k in winners if k in common), min(common))


@contextlib.contextmanager
def _op_as_itself(op: Any) -> Iterator[None]:
    """Within it, the op lowers to a call of itself (a FallbackKernel), not
    to its autotuning lowering: the dispatch's branches call it where its
    default won."""
    from torch._inductor.lowering import fallback_handler, lowerings

    previous = lowerings.get(op)
    lowerings[op] = fallback_handler(op, add_to_fallback_set=False)
    try:
        yield
    finally:
        if previous is not None:
            lowerings[op] = previous
        else:
            lowerings.pop(op, None)


def _branch(choice: Any, op: Any, default_kwargs: dict[str, Any]) -> Callable[..., Any]:
    import torch

    if _choices.is_default(choice):
        def run_op(*ops: Any) -> Any:
            return op(*ops, **default_kwargs)
        return torch._dynamo.dont_skip_tracing(run_op)
    decomposition, kwargs = choice.decomposition, dict(choice.decomposition_kwargs)

    def run_decomposition(*ops: Any) -> Any:
        return decomposition(*ops, **kwargs)
    return torch._dynamo.dont_skip_tracing(run_decomposition)


def _dispatch(name: str, groups: Sequence[tuple[int, float, Any]], op: Any,
              default_kwargs: dict[str, Any], inputs: Sequence[Any], index: int,
              dim: int) -> Any:
    """The IR of nested torch.cond over the groups' winners (more than one):
    size <= end of the first group, else of the next, ...; one group: its
    winner traced alone (a choice that is the op's default needs `op`; None
    where none is: a functional collective's, _functional).

    Each cond's bounds are a default argument of its function, not a
    closure: torch.cond traces a branch with Dynamo, which lifts the ints a
    nested cond's function closes over into the operands of the cond around
    it, and 2.11's Conditional.create takes only fx nodes as operands (an
    AssertionError from three groups on). 2.11's own dispatch passes its
    ranges the same way (custom_op.py, cond_wrapper's `_ranges`)."""
    import torch
    from torch._inductor.codegen.subgraph import inline_subgraph_to_ir_nodes
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.ir import ir_node_to_tensor
    from torch._inductor.virtualized import V
    from torch.fx.experimental.proxy_tensor import make_fx

    branches = [_branch(choice, op, default_kwargs) for _, _, choice in groups]

    def nested(i: int) -> Callable[..., Any]:
        if i == len(groups) - 1:
            return branches[i]
        end, then, otherwise = int(groups[i][1]), branches[i], nested(i + 1)

        def cond(*ops: Any, _at: tuple[int, int, int] = (index, dim, end)) -> Any:
            at_index, at_dim, at_end = _at
            return torch.cond(ops[at_index].size(at_dim) <= at_end, then, otherwise, ops)
        return torch._dynamo.dont_skip_tracing(cond)

    with V.fake_mode:
        fakes = tuple(ir_node_to_tensor(node) for node in inputs)
        gm = make_fx(nested(0), decomposition_table=select_decomp_table(),
                     tracing_mode="symbolic")(*fakes)
    with _op_as_itself(op) if op is not None else contextlib.nullcontext():
        return inline_subgraph_to_ir_nodes(gm, list(inputs), f"{name}_dispatch")


# The op's default in every range: its key names the range's selection
# (_choices.content_of of an extern choice), the same code under another name.
DEFAULT_KEY = "<the op's default>"


def _merge_key(choice: Any, key: str) -> str:
    """A choice's key for merging: the same code in every range, the same key."""
    return DEFAULT_KEY if _choices.is_default(choice) else key


def _key_of(selection: _select.Selection, winner: Any) -> str:
    return next(_merge_key(c, k) for c, k in zip(selection.choices, selection.keys)
                if c is winner)


def _keys_of(selection: _select.Selection) -> list[str]:
    """The merge keys of the selection's candidates, by candidate index."""
    return [_merge_key(selection.choice(i), c.client.key)
            for i, c in enumerate(selection.candidates)]


def _choice_of(selections: Sequence[_select.Selection], key: str) -> Any:
    """The choice of merge key `key` in the first range that has it: the
    same code in every range (the key is its content)."""
    return next(c for s in selections for c, k in zip(s.choices, s.keys)
                if _merge_key(c, k) == key)


def decide(state: Any, name: str, selections: Sequence[_select.Selection],
           bounds: Sequence[tuple[int, float]], size: Any, sizes: Sequence[int],
           batch: bool = True) -> tuple[list[tuple[int, float, Any]], Dispatch]:
    """The ranges' selections (one per range of `bounds`, each tuned with
    the size expression `size` at its entry of `sizes`) asked in one Tune
    (with the graph's pending deferred selections where `batch`), merged
    (merge()): (start, end, choice) of each group, in order, and the
    table of them for dispatches(). Never raises for the daemon's sake:
    ask() falls back to each range's first choice."""
    for selection, at in zip(selections, sizes):
        selection.at = {size: at}
    answers: list[tuple[Any, dict[Any, float]]]
    if not all(len(s.candidates) > 1 for s in selections):
        answers = [(s.choices[0], {}) for s in selections]
    elif batch:
        answers = _select.ask_with_batch(state, selections)
    else:
        answers = _select.ask(state, selections)
    winners = [w for w, _ in answers]
    keys = [_key_of(s, w) for s, w in zip(selections, winners)]
    groups = merge(bounds, keys, [
        ties(s.answer, _keys_of(s), k)
        for s, k in zip(selections, keys)])
    # Each group's choice from its first range's selection: the same code
    # in every range, named after the range it starts at.
    starts = [s for s, _ in bounds]
    choices = [_choice_of(selections[starts.index(s):], k) for s, _, k in groups]
    table = (name, [(int(s), None if e == math.inf else int(e), _choices.display_name(c))
                    for (s, e, _), c in zip(groups, choices)])
    log.info("autotuned: %s: %s", name, ", ".join(
        f"[{s}, {'inf' if e is None else e}] -> {w}" for s, e, w in table[1]))
    return [(s, e, c) for (s, e, _), c in zip(groups, choices)], table


def lower(state: Any, original: Callable[..., Any], **kw: Any) -> Any:
    """custom_op._range_based_lowering_fn while enabled (module docstring);
    `kw` are its keyword arguments (tensor_name None: the first tensor
    input, as lower_standard() passes it). `original(**kw)` lowers a
    selection that is not a collective's."""
    import torch._inductor.kernel.custom_op as custom_op
    from torch._inductor.lowering import fallback_handler, validate_ir

    name, op, inputs = kw["name"], kw["op_overload"], list(kw["tensor_inputs"])
    dim = kw["dim_index"]
    input_gen_fns = kw.get("input_gen_fns") or {}
    for node in inputs:
        node.realize()
    decompositions, non_tensor_args = custom_op._prepare_configs_and_decompositions(
        kw["processed_configs"], kw.get("config_generator"), inputs, kw["default_impl"],
        kw["runtime_kwargs"], name)
    default_kwargs = dict(non_tensor_args[0]) if non_tensor_args else dict(kw["runtime_kwargs"])
    names = list(inspect.signature(decompositions[0]).parameters) if decompositions else []
    # None: the first tensor input, under the name 2.11 gives its input
    # generator (the first decomposition's first parameter).
    tensor_name = kw["tensor_name"] if kw["tensor_name"] is not None else \
        (names[0] if names else "")
    index = names.index(tensor_name) if tensor_name in names else -1
    size = inputs[index].get_size()[dim] if 0 <= index < len(inputs) and \
        dim < len(inputs[index].get_size()) else None
    if size is None or not getattr(size, "free_symbols", None):
        if size is None:
            log.warning("autotuned: %s: dispatch_on %s[%d] is not a dimension of a tensor "
                        "input: tuned at its size, without ranges", name, tensor_name, dim)
        # A static size: one selection at it, as an op without ranges.
        result = custom_op.autotune_custom_op(
            name=name, decompositions=decompositions, inputs=inputs,
            non_tensor_args=non_tensor_args, op_overload=op,
            user_input_gen_fns=input_gen_fns or None)
        validate_ir(result)
        return result
    bounds, sizes = tuned_at(kw["ranges"], kw["range_upper_bound"])
    base = input_gen_fns.get(tensor_name, custom_op._default_input_gen_fn)

    def fallback(e: BaseException, why: str) -> Any:
        fell_back(state, name, f"{name}_fallback_default", e, why, "the op's default")
        return fallback_handler(op, add_to_fallback_set=False)(*inputs, **default_kwargs)

    try:
        with _select.collecting() as collected:
            for (start, end), at in zip(bounds, sizes):
                gen = custom_op._create_range_input_gen_fn(base, dim, start, end, at)
                custom_op.autotune_custom_op(
                    name=range_name(name, start, end), decompositions=decompositions,
                    inputs=inputs, non_tensor_args=non_tensor_args, op_overload=op,
                    user_input_gen_fns={**input_gen_fns, tensor_name: gen},
                    return_choice=True)
                if collected and collected[-1] is None:  # not a collective's
                    break
    except Exception as e:  # noqa: BLE001 - this rank asks nothing (see _select.ask)
        return fallback(e, "on this rank, without a round")
    if any(s is None for s in collected):  # not a collective: Inductor's own
        return original(**kw)
    selections: list[_select.Selection] = [s for s in collected if s is not None]
    chosen, table = decide(state, name, selections, bounds, size, sizes)
    try:
        if len(chosen) == 1:
            winner = chosen[0][2]
            if _choices.is_default(winner):
                state.dispatches.append(table)
                return winner.output_node()
            result = custom_op._lower_single_impl(winner.decomposition,
                                                  winner.decomposition_kwargs, {}, inputs,
                                                  name)
        else:
            result = _dispatch(name, chosen, op, default_kwargs, inputs, index, dim)
        validate_ir(result)
        state.dispatches.append(table)
        return result
    except Exception as e:  # noqa: BLE001 - the same on every rank: a pure function
        # of the answer, which every rank has alike.
        return fallback(e, "without a dispatch")


def patched(state: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of custom_op._range_based_lowering_fn for `state`."""
    def range_based_lowering_fn(**kw: Any) -> Any:
        return lower(state, original, **kw)
    return range_based_lowering_fn


def probe_ranges(unit_bytes: int, low: int = 1, high: float = math.inf,
                 ladder: Optional[Sequence[int]] = None) -> tuple[list[int], int]:
    """The split points and the range_upper_bound, in units of a dynamic
    dimension, of a collective selection over it registered without
    split_points: the `ladder` (default PROBE_BYTES) of message sizes, in
    bytes of the collective's input, divided by `unit_bytes` (one unit of
    the dimension: the input's other dimensions times its element size),
    rounded down. Every size but the largest is a split point, where it is
    at least one unit, above the previous one, and leaves both of its sides
    within [low, high] (the dimension's value range); the largest, at most
    `high`, is the upper bound, at which the last range is tuned (not less
    than its start: representative())."""
    sizes = [int(b) // max(int(unit_bytes), 1) for b in (PROBE_BYTES if ladder is None
                                                        else ladder)]
    points: list[int] = []
    for p in sizes[:-1]:
        if p >= max(low, 1) and p + 1 <= high and (not points or p > points[-1]):
            points.append(p)
    upper = max(sizes[-1], 1)
    return points, int(min(upper, high))


def _value_range(size: Any) -> tuple[int, float]:
    """The values the size expression `size` can take in this graph, by its
    symbols' ranges; (1, inf) where they are not known."""
    from torch._inductor.virtualized import V

    try:
        bounds = V.graph.sizevars.shape_env.bound_sympy(size)
        # An unbounded end is int_oo, whose is_finite is True: is_Integer
        # tells a bound.
        low = int(bounds.lower) if bounds.lower.is_Integer else 1
        high = float(int(bounds.upper)) if bounds.upper.is_Integer else math.inf
        return max(low, 1), high
    except Exception:  # noqa: BLE001 - no bound known: the whole ladder
        return 1, math.inf


def _probe_dimension(name: str, inputs: Sequence[Any]) -> Optional[int]:
    """The dimension of the collective's input (the op's first tensor input)
    to dispatch on: its only symbolic one; None where it has none (a static
    selection) or where the inputs hold more than that one (logged)."""
    if not inputs:
        return None
    dims = [i for i, s in enumerate(inputs[0].get_size()) if getattr(s, "free_symbols", None)]
    others = [j for j, node in enumerate(inputs[1:], 1)
              if any(getattr(s, "free_symbols", None) for s in node.get_size())]
    if not dims:
        return None
    if len(dims) > 1 or others:
        log.info("autotuned: %s: symbolic dimensions %s of its first tensor input%s: no "
                 "dispatch by size (one symbolic dimension, of the first input, only); "
                 "PyTorch specializes them, a selection per size", name, dims,
                 f" and of tensor inputs {others}" if others else "")
        return None
    return dims[0]


def lower_standard(state: Any, original: Callable[..., Any], **kw: Any) -> Any:
    """custom_op._standard_lowering_fn while enabled: a selection whose
    collective's input has a symbolic dimension is lowered as one over
    that dimension (lower()), with the ranges of probe_ranges(); any other
    is `original`'s, unchanged, as is one whose ranges could not be made
    (with a warning). `kw` are its keyword arguments."""
    import torch._inductor.kernel.custom_op as custom_op

    name, inputs = kw["name"], list(kw["tensor_inputs"])
    try:
        dim = _probe_dimension(name, inputs)
        if dim is not None:
            points, upper = probe(name, inputs[0], dim)
    except Exception as e:  # noqa: BLE001 - a pure function of the graph: the same
        # on every rank; 2.11's lowering, which the integration still serves.
        log.warning("autotuned: %s: no ranges by size: %s", name, _select._why(e))
        dim = None
    if dim is None:
        return original(**kw)
    return lower(state, lambda **_: original(**kw), **kw, tensor_name=None, dim_index=dim,
                 ranges=custom_op._create_ranges_from_split_points(points),
                 range_upper_bound=upper)


def patched_standard(state: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of custom_op._standard_lowering_fn for `state`."""
    def standard_lowering_fn(**kw: Any) -> Any:
        return lower_standard(state, original, **kw)
    return standard_lowering_fn

