"""Functional collectives in a compiled graph as selections (docs/python.md,
"Inductor", "Functional collectives").

PyTorch 2.11 lowers each functional collective (torch/_inductor/
comm_lowering.py, register_comm_lowerings) through the entry of
torch._inductor.lowering.lowerings for its OpOverload: all_reduce as an
in-place all_reduce_ on a clone (_AllReduce_Kernel), all_gather_into_tensor,
reduce_scatter_tensor and all_to_all_single as a _CollectiveKernel out of
place, broadcast as broadcast_ on a clone; wait_tensor as a _WaitKernel
later in the graph, so that the collective overlaps whatever the scheduler
puts between them. install() puts a lowering of its own in front of those
entries (those of the in-place all_reduce_ and broadcast_ too). It makes the
op a selection among implementations that compute the same thing, each a
decomposition (functional collectives and torch ops, traced by make_fx) that
is a choice of a custom-op selection, SubgraphTemplate's
generate_custom_op_choices, asked through _select.ask: one client candidate
per choice, timed as itself in the rank run, with the same rendezvous,
window, fallback and cache as every other selection:

  * `default`, the op followed by its wait: what Inductor emits today. It is
    the first choice, so every fallback (a late rank, no daemon, any error)
    keeps it; when it wins, the op goes to Inductor's own lowering, which
    stays asynchronous;
  * on any device: all_reduce as reduce_scatter then all_gather (sum; of
    the input itself where its first dimension is a multiple of the
    group's size, else of a flattened copy where its element count is:
    DTensor's decode shapes, a batch of one; "is" meaning at every size of
    a symbolic dimension); all_gather as an all_to_all of the input
    repeated for every rank (its first dimension static); reduce_scatter
    as an all_reduce and this rank's slice (sum); broadcast as a sum
    all_reduce of the input on the source rank and zeros elsewhere;
    all_to_all_single with equal splits as an all_gather and this rank's
    column;
  * on CUDA tensors of static size, where a P2PGroup of this process group
    is registered (autotuned.kernels), every implementation of the
    collective in autotuned.kernels_lib.IMPLEMENTATIONS that is not
    NCCL's, through torch.ops.autotuned (a symbolic size could exceed the
    group's buffers in the unbounded range).

A choice other than `default` is inlined into the graph
(inline_subgraph_to_ir_nodes) and waits inside itself: its wait_tensor is
skipped (comm_lowering.mark_as_skip_wait, as 2.11 does for its own one-shot
all_reduce). For an in-place op (DTensor's all_reduce_ on a view of a
matmul's output) its result is copied back into the input's buffer, and a
choice that reads the input otherwise than as a collective's input reads a
copy of it made in the graph (not timed): else 2.11's scheduler orders
that read after the write. Every choice is timed with its wait, alone: the
timing cannot see an overlap the default would have in the graph, and an
inlined choice has none. So an op that Inductor overlaps with compute is not
asked for (the overlap rule below).

The overlap rule. At lowering, the op's FX node (V.graph.current_node) and
its wait_tensor (a user of the node or, for the in-place ops, of the
node's input) are found in the graph as Inductor lowers it, after the
post-grad passes; the op keeps Inductor's asynchronous lowering, not
tuned, with one INFO line saying why and nothing in decisions(), where
  * a node between the op and its wait, in graph order, is compute that
    does not read the op's result (or, in place, its buffer): a
    call_function node with a tensor value that is not a getitem, a view,
    nor an op of the _c10d_functional or autotuned namespaces (other
    collectives and their waits: those of one process group run one
    after another on its stream, not under each other): the scheduler
    starts from that order, with the collective running under that
    compute;
  * no wait of it follows in the graph (it is waited in a later graph);
  * Inductor is configured to reorder for overlap itself:
    aten_distributed_optimizations.enable_overlap_scheduling (an FX pass
    before lowering, that may also wrap nodes in control_deps), or
    reorder_for_compute_comm_overlap with a non-empty
    reorder_for_compute_comm_overlap_passes and not deterministic (the
    scheduler's condition; its passes run after lowering, raise collectives
    and sink waits): every functional collective then keeps Inductor's
    lowering.
The rule reads only the graph and Inductor's configuration, the same on
every rank of an SPMD program, so no rank asks for an op its peers keep.
The graph cannot be read (an error) also keeps it, with the error in the
INFO line; a lowering that runs for no FX node of the op (no current node,
or another op's) has nothing to read, and the op is tuned.
An op whose wait directly follows (views, getitems and other collectives'
bookkeeping aside: the usual TP all_reduce, wait, add) is tuned. Neither
reordering is on by default in 2.11, so a graph whose order at lowering has
no overlap gets none from them. What does move nodes by default, before
lowering (the rule sees the graph after both): the post-grad
reorder_for_locality (inference graphs only) moves each node's producers,
waits included but no collective, right before their first user, so
compute used only after a wait lands after it, while the waits of results
the graph returns sink to its end, with the compute that feeds its other
outputs in their windows; and mm + add patterns become an addmm where the
add was. The scheduler's reorder_for_peak_memory
(on by default, after lowering) picks a topological order by estimated peak
memory and may move independent compute into or out of a window; that is
not predicted here. funcol's Python functions (all_reduce, ...) wait where
they are traced, so their graphs have a window only where the ops are
written out (torch.ops._c10d_functional, then wait_tensor later) or a pass
makes one.

Symbolic sizes. An all_reduce, all_reduce_, all_gather_into_tensor or
reduce_scatter_tensor whose input has exactly one symbolic dimension
(mark_dynamic on it) is a selection per size range of that dimension
(_ranged), by _ranges' machinery for a custom op registered without
split_points: the ranges of the probe ladder (_ranges.probe_ranges, in
units of the dimension), each range a selection of the choices above
(`<name>_range_<start>_<end>`, made on inputs whose dimension is the
range's representative size), all asked in one Tune and merged
(_ranges.decide), the overlap rule first as for any op. The default
winning every range merged into one: Inductor's own lowering,
asynchronous; else the merged winners traced and inlined in place of the
op as above (_ranges._dispatch: one group alone, more in nested
torch.cond on the size), where a range the default won runs its op and
wait inside the branch (lowered there by Inductor, not asynchronous). Not
_ranges.lower() itself: its choices and default come from a custom op
(configs, an extern kernel of the op), its default's range calls the op,
and it returns what it inlines, where here the default is Inductor's
lowering of an op that needs a wait, the choices are this module's and the
result needs the wait skipped and, in place, the copy back. Any failure
before the Tune: FALLBACK on this rank, Inductor's lowering; after it (the
dispatch, a pure function of the answer): the same on every rank.
dispatches() holds the table.

PyTorch's symm-mem all_reduce is not a choice here: Inductor 2.11 has no
lowering for its two-shot, and its one-shot's staging buffer is a
persistent symmetric allocation whose id several selections of a graph
share (a second size fails: "requested allocation size ... is different
from the size of a previous allocation with the same alloc_id"), and on
2 x H100 a graph with it inlined at eight sites computed a wrong result
though each choice passed the ranks' output check alone.

Not tuned (Inductor's own lowering): ops overlapped with compute (the
overlap rule), the coalesced and *_out variants,
shard_dim_alltoall, inputs of more than one symbolic dimension, or of one
for broadcast and all_to_all_single, reduce ops other than those named
above for the alternatives and shapes they do not fit (the op then has
only its default), ops
lowered inside a subgraph (a choice being compiled or inlined, a
torch.cond branch), and any compile inside `suspended()` or after
enable(functional=False).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Iterator
from typing import Any, Callable, Optional

from autotuned.group import GroupDescription, _group_id

log = logging.getLogger("autotuned.inductor")

# Op name in torch.ops._c10d_functional -> (collective, whether in place).
OPS = {
    "all_reduce": ("all_reduce", False),
    "all_reduce_": ("all_reduce", True),
    "all_gather_into_tensor": ("all_gather", False),
    "reduce_scatter_tensor": ("reduce_scatter", False),
    "all_to_all_single": ("all_to_all", False),
    "broadcast": ("broadcast", False),
    "broadcast_": ("broadcast", True),
}

# The collectives whose input may have one symbolic dimension: a selection
# per size range of it (_ranged).
RANGED = ("all_reduce", "all_gather", "reduce_scatter")

_originals: dict[Any, Callable[..., Any]] = {}
# > 0 while a selection of this module asks or inlines its winner, or while
# suspended(): the lowerings inside go to Inductor's own.
_depth = [0]
_suspended = [0]


@dataclasses.dataclass
class _Op:
    """One functional collective being lowered."""

    name: str           # the selection's name: the graph node's
    collective: str
    inplace: bool
    inp: Any            # the TensorBox
    reduce_op: str      # all_reduce, reduce_scatter; else ""
    root: int           # broadcast's source rank in the group
    group_name: Any     # torch.distributed GroupName (a str)
    group_size: int
    splits: tuple[Optional[list[Any]], Optional[list[Any]]]  # all_to_all's
    dim: Optional[int] = None  # the input's one symbolic dimension (RANGED)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Compiles inside leave functional collectives to Inductor's own
    lowering; part of Inductor's cache key (key())."""
    _suspended[0] += 1
    try:
        yield
    finally:
        _suspended[0] -= 1


@contextlib.contextmanager
def nested() -> Iterator[None]:
    """Lowerings inside are part of another selection (a custom op's choice
    inlined): functional collectives there go to Inductor's own lowering."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1


def key() -> str:
    """Whether functional collectives are tuned now, for Inductor's cache key."""
    return "functional=" + ("on" if _originals and not _suspended[0] else "off")


def _wait(t: Any) -> Any:
    import torch

    return torch.ops._c10d_functional.wait_tensor(t)


def _rank(group_name: Any) -> int:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    return dist.get_rank(_resolve_process_group(group_name))


def _decompositions(op: _Op) -> list[Callable[..., Any]]:
    """The choices of `op`, its default first (module docstring)."""
    import torch

    c10d = torch.ops._c10d_functional
    g, n, red, root = op.group_name, op.group_size, op.reduce_op, op.root
    out: list[Callable[..., Any]] = []
    shape = list(op.inp.get_size())
    numel = math.prod(shape)
    rows = _every_multiple(shape[0], 1) if shape else False

    if op.collective == "all_reduce":
        def default(x: Any) -> Any:
            return _wait(c10d.all_reduce(x, red, g))
        out.append(default)
        if red == "sum" and shape and _every_multiple(shape[0], n):
            def reduce_scatter_all_gather(x: Any) -> Any:
                part = _wait(c10d.reduce_scatter_tensor(x, "sum", n, g))
                return _wait(c10d.all_gather_into_tensor(part, n, g))
            out.append(reduce_scatter_all_gather)
        elif red == "sum" and _every_multiple(numel, n):
            def reduce_scatter_all_gather_flat(x: Any) -> Any:
                # 1-D: a symbolic size's halves are exact (n rows of a
                # 2-D view would be a floor division the shapes cannot
                # simplify, and a dispatch's branches would then differ).
                flat = x.reshape(-1).clone()
                part = _wait(c10d.reduce_scatter_tensor(flat, "sum", n, g))
                return _wait(c10d.all_gather_into_tensor(part, n, g)).reshape(x.shape)
            out.append(reduce_scatter_all_gather_flat)
    elif op.collective == "all_gather":
        def default(x: Any) -> Any:
            return _wait(c10d.all_gather_into_tensor(x, n, g))
        out.append(default)
        # Static rows only: all_to_all_single's split sizes symbolic, 2.11
        # lowers it in a dispatch's branch with an unbacked output size
        # that the generated code never defines.
        if rows and not getattr(shape[0], "free_symbols", None):
            def all_to_all_repeated(x: Any) -> Any:
                copies = torch.cat([x] * n)
                sizes = [x.shape[0]] * n
                return _wait(c10d.all_to_all_single(copies, sizes, sizes, g))
            out.append(all_to_all_repeated)
    elif op.collective == "reduce_scatter":
        def default(x: Any) -> Any:
            return _wait(c10d.reduce_scatter_tensor(x, red, n, g))
        out.append(default)
        if red == "sum" and shape and _every_multiple(shape[0], n):
            def all_reduce_slice(x: Any) -> Any:
                full = _wait(c10d.all_reduce(x, "sum", g))
                m, r = x.shape[0] // n, _rank(g)
                return full[r * m:(r + 1) * m].clone()
            out.append(all_reduce_slice)
    elif op.collective == "broadcast":
        def default(x: Any) -> Any:
            return _wait(c10d.broadcast(x, root, g))
        out.append(default)
        if op.inp.get_dtype() != torch.bool:
            def all_reduce_from_root(x: Any) -> Any:
                mine = x.clone() if _rank(g) == root else torch.zeros_like(x)
                return _wait(c10d.all_reduce(mine, "sum", g))
            out.append(all_reduce_from_root)
    elif op.collective == "all_to_all":
        outs, ins = op.splits

        def default(x: Any) -> Any:
            return _wait(c10d.all_to_all_single(x, outs, ins, g))
        out.append(default)
        equal = all(s is None or len({int(v) for v in s}) <= 1 for s in (outs, ins))
        if shape and _every_multiple(shape[0], n) and equal:
            def all_gather_column(x: Any) -> Any:
                every = _wait(c10d.all_gather_into_tensor(x, n, g))
                m, r = x.shape[0] // n, _rank(g)
                blocks = every.reshape(n, n, m, *x.shape[1:])
                return blocks[:, r].reshape(x.shape).clone()
            out.append(all_gather_column)
    if op.dim is None:
        out += _catalogue(op)
    return out


def _every_multiple(size: Any, n: int) -> bool:
    """Whether the size expression `size` is, at every value of the graph's
    symbols (a static size: at its value), positive and a multiple of n."""
    from torch._inductor.virtualized import V

    sizevars = V.graph.sizevars
    return sizevars.statically_known_gt(size, 0) and \
        sizevars.statically_known_multiple_of(size, n)


def _on_cuda(op: _Op) -> bool:
    device = op.inp.get_device()
    return device is not None and device.type == "cuda"


def _catalogue(op: _Op) -> list[Callable[..., Any]]:
    """The daemon's kernels through torch.ops.autotuned, where a P2PGroup of
    this process group is registered."""
    if op.collective not in ("all_reduce", "all_gather", "reduce_scatter") or \
            not _on_cuda(op) or op.reduce_op not in ("", "sum", "max", "min"):
        return []
    from torch.distributed.distributed_c10d import _resolve_process_group

    from autotuned import ops
    from autotuned.kernels_lib import IMPLEMENTATIONS

    pg = _resolve_process_group(op.group_name)
    names = [n for n in ops.group_names() if ops.get_group(n).process_group is pg]
    if not names:
        return []
    ops.register_ops()
    group, red = names[-1], op.reduce_op or "sum"
    out = []
    for impl in IMPLEMENTATIONS.values():
        if impl.collective != op.collective or impl.algo == 0:
            continue
        out.append(_catalogue_choice(op.collective, impl.name, group, red))
    return out


def _catalogue_choice(collective: str, impl: str, group: str, red: str
                      ) -> Callable[..., Any]:
    import re

    def run(x: Any) -> Any:
        import torch

        fn = getattr(torch.ops.autotuned, collective)
        if collective == "all_reduce":
            return fn(x, impl, group, 0, 0, 0, red)
        if collective == "reduce_scatter":
            return fn(x, impl, group, 0, 0, red)
        return fn(x, impl, group, 0, 0)

    run.__name__ = "autotuned_" + re.sub(r"\W", "_", impl)
    return run


def subgroup(base: GroupDescription, group_name: Any) -> GroupDescription:
    """The description of the process group `group_name`, from `base` (the
    group enable() learned) without a collective: its members are the
    ranks of `base` with the process group's global ranks, renumbered.
    ValueError when one of them is not in `base`."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    pg = _resolve_process_group(group_name)
    members = tuple(dist.get_process_group_ranks(pg))
    if members == base.global_ranks:
        return base
    by_global = {r.global_rank: r for r in base.ranks}
    missing = [m for m in members if m not in by_global]
    if missing:
        raise ValueError(f"process group {group_name!r} holds global ranks {missing}, "
                         f"which the group described at enable() does not "
                         f"({list(base.global_ranks)})")
    ranks = tuple(dataclasses.replace(by_global[m], rank=i) for i, m in enumerate(members))
    return GroupDescription(id=_group_id(f"{base.id}/{'-'.join(map(str, members))}"),
                            rank=members.index(dist.get_rank()), world_size=len(members),
                            global_ranks=members, ranks=ranks)


def _eligible() -> bool:
    from torch._inductor.graph import SubgraphLowering
    from torch._inductor.virtualized import V

    graph = V.graph
    return not (_depth[0] or _suspended[0] or isinstance(graph, SubgraphLowering)
                or str(getattr(graph, "name", "") or "").startswith("benchmark_"))


def _describe(op_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[_Op]:
    """The op being lowered, or None when it is not one this module tunes."""
    import torch.distributed as dist
    from torch._inductor.ir import TensorBox
    from torch._inductor.virtualized import V
    from torch.distributed.distributed_c10d import _resolve_process_group

    collective, inplace = OPS[op_name]
    a = list(args)
    inp = a[0] if a else None
    if kwargs or not isinstance(inp, TensorBox):
        return None
    symbolic = [i for i, s in enumerate(inp.get_size()) if getattr(s, "free_symbols", None)]
    if symbolic and (len(symbolic) > 1 or collective not in RANGED):
        return None
    reduce_op, root = "", 0
    splits: tuple[Optional[list[Any]], Optional[list[Any]]] = (None, None)
    if collective == "all_reduce":
        reduce_op, group_name = str(a[1]).lower(), a[2]
    elif collective == "all_gather":
        group_name = a[2]
    elif collective == "reduce_scatter":
        reduce_op, group_name = str(a[1]).lower(), a[3]
    elif collective == "broadcast":
        root, group_name = int(a[1]), a[2]
    else:
        splits = (None if a[1] is None else [int(v) for v in a[1]],
                  None if a[2] is None else [int(v) for v in a[2]])
        group_name = a[3]
    size = dist.get_world_size(_resolve_process_group(group_name))
    node = V.graph.current_node
    name = f"functional_{getattr(node, 'name', op_name)}"
    return _Op(name, collective, inplace, inp, reduce_op, root, group_name, size, splits,
               symbolic[0] if symbolic else None)


def _lower(state: Any, op_name: str, original: Callable[..., Any], *args: Any,
           **kwargs: Any) -> Any:
    """The lowering of a functional collective while installed: a selection
    (module docstring); Inductor's own lowering when the default wins, on
    any fallback, and for what is not tuned."""
    if not _eligible():
        return original(*args, **kwargs)
    from autotuned.inductor import _select

    try:
        op = _describe(op_name, args, kwargs)
        decompositions = _decompositions(op) if op is not None else []
    except Exception as e:  # noqa: BLE001 - Inductor's own lowering
        log.warning("autotuned: %s left to Inductor's lowering: %s", op_name, _select._why(e))
        return original(*args, **kwargs)
    if op is None or len(decompositions) < 2:
        return original(*args, **kwargs)
    try:
        overlapped = _overlapped(op_name)
    except Exception as e:  # noqa: BLE001 - Inductor's own lowering
        overlapped = f"its overlap with compute could not be read: {_select._why(e)}"
    if overlapped:
        log.info("autotuned: %s keeps Inductor's asynchronous lowering, not tuned: %s",
                 op.name, overlapped)
        return original(*args, **kwargs)
    with nested():
        if op.dim is not None:
            return _ranged(state, op, decompositions, lambda: original(*args, **kwargs))
        winner = _select_winner(state, op, decompositions)
        if winner is None:
            return original(*args, **kwargs)
        return _apply(op, lambda inputs: _inline(winner.gm, inputs, op.name),
                      _feeds_collectives_only(winner.gm))


def _trivial(node: Any) -> bool:
    """Whether an FX node is no compute to overlap a collective with: a
    getitem, a view, another collective or wait (the _c10d_functional and
    autotuned namespaces), or a node with no tensor value (size
    arithmetic)."""
    import operator

    import torch

    target = node.target
    if target is operator.getitem or getattr(target, "is_view", False):
        return True
    if getattr(target, "namespace", "") in ("_c10d_functional", "c10d_functional", "autotuned"):
        return True
    val = node.meta.get("val")
    values = val if isinstance(val, (list, tuple)) else [val]
    return not any(isinstance(v, torch.Tensor) for v in values)


def _overlapped(op_name: str) -> str:
    """Why the op being lowered keeps Inductor's asynchronous lowering (the
    overlap rule of the module docstring); "" where it is tuned."""
    import torch
    from torch._inductor import config
    from torch._inductor.virtualized import V

    if config.aten_distributed_optimizations.enable_overlap_scheduling:
        return "aten_distributed_optimizations.enable_overlap_scheduling is on"
    if config.reorder_for_compute_comm_overlap and \
            config.reorder_for_compute_comm_overlap_passes and not config.deterministic:
        return "reorder_for_compute_comm_overlap is on"
    node = V.graph.current_node
    overload = getattr(torch.ops._c10d_functional, op_name).default
    if node is None or node.target is not overload:
        return ""
    wait = torch.ops._c10d_functional.wait_tensor.default
    waits = {u for u in node.users if u.target is wait}
    # The collective and what reads its result, or (in place) its buffer,
    # whose wait may name either.
    after = {node}
    if OPS[op_name][1] and node.args and isinstance(node.args[0], torch.fx.Node):
        after.add(node.args[0])
        waits |= {u for u in node.args[0].users if u.target is wait}
    compute = []
    cursor = node.next
    while cursor.op != "root" and cursor not in waits:
        if any(a in after for a in cursor.all_input_nodes):
            after.add(cursor)
        elif cursor.op == "call_function" and not _trivial(cursor):
            compute.append(cursor.name)
        cursor = cursor.next
    if cursor.op == "root":
        return "no wait_tensor of it follows in this graph"
    if compute:
        shown = ", ".join(compute[:4]) + (", ..." if len(compute) > 4 else "")
        return f"{len(compute)} node(s) of independent compute ({shown}) lie " \
               f"between it and its {cursor.name}"
    return ""


def _select_winner(state: Any, op: _Op, decompositions: list[Callable[..., Any]]) -> Any:
    """The winning choice, or None for the default (also where no choice
    but the default could be traced: nothing to ask)."""
    from autotuned.inductor import _caches, _choices, _select

    try:
        op.inp.realize()
        choices = _traced(op, decompositions)
        if len(choices) < 2:
            return None
        call = _choices.CollectiveCall(op.collective, op.reduce_op, op.root)
        selection = _select.Selection.make(op.name, choices, call, [op.inp],
                                           choices[0].layout, None)
        group = subgroup(state.group, op.group_name)
    except Exception as e:  # noqa: BLE001 - this rank asks nothing (as _select.select)
        reason = _select._why(e)
        state.decisions.append((op.name, {}, f"{op.name}_default", "FALLBACK", reason))
        _caches.note_fallback(f"{op.name}: {reason}")
        log.warning("autotuned: %s: FALLBACK to the default on this rank, without a round: %s",
                    op.name, reason)
        return None
    # The decisions list is shared: replace() copies the reference.
    winner, _ = _select.ask(dataclasses.replace(state, group=group), [selection])[0]
    return None if winner is selection.choices[0] else winner


def _ranged(state: Any, op: _Op, decompositions: list[Callable[..., Any]],
            original: Callable[[], Any]) -> Any:
    """The op whose input has one symbolic dimension (op.dim): a selection
    per range of the probe ladder over it, all asked in one Tune, the
    merged winners dispatched on the size (_ranges.decide, _ranges._dispatch;
    module docstring). `original()`: Inductor's own lowering, where the
    default wins every range and on any failure."""
    import torch._inductor.kernel.custom_op as custom_op

    from autotuned.inductor import _choices, _ranges, _select

    def fallback(e: BaseException, why: str) -> Any:
        _ranges.fell_back(state, op.name, f"{op.name}_default", e, why, "the default")
        return original()

    size, dim = op.inp.get_size(), int(op.dim or 0)
    try:
        op.inp.realize()
        points, upper = _ranges.probe(op.name, op.inp, dim)
        bounds, sizes = _ranges.tuned_at(
            custom_op._create_ranges_from_split_points(points), upper)
        call = _choices.CollectiveCall(op.collective, op.reduce_op, op.root)
        selections = []
        for (start, end), at in zip(bounds, sizes):
            gen = custom_op._create_range_input_gen_fn(custom_op._default_input_gen_fn,
                                                       dim, start, end, at)
            gens = custom_op._adapt_user_input_gen_fns([op.inp], ["x"], {"x": gen})
            name = _ranges.range_name(op.name, start, end)
            choices = _traced(op, decompositions, name, gens)
            selections.append(_select.Selection.make(name, choices, call, [op.inp],
                                                     choices[0].layout, gens))
        group = subgroup(state.group, op.group_name)
    except Exception as e:  # noqa: BLE001 - this rank asks nothing (as _select.select)
        return fallback(e, "on this rank, without a round")
    # The decisions list is shared: replace() copies the reference. The
    # graph's pending deferred selections go with a Tune of their group.
    chosen, table = _ranges.decide(dataclasses.replace(state, group=group), op.name,
                                   selections, bounds, size[dim], sizes,
                                   batch=group is state.group)
    if len(chosen) == 1 and getattr(chosen[0][2], "decomposition", None) is decompositions[0]:
        state.dispatches.append(table)
        return original()
    try:
        result = _apply(op, lambda inputs: _ranges._dispatch(
            op.name, chosen, None, {}, inputs, 0, dim), False)
        state.dispatches.append(table)
        return result
    except Exception as e:  # noqa: BLE001 - the same on every rank: a pure function
        # of the answer, which every rank has alike.
        return fallback(e, "without a dispatch")


def _traced(op: _Op, decompositions: list[Callable[..., Any]], name: Optional[str] = None,
            input_gen_fns: Optional[dict[int, Any]] = None) -> list[Any]:
    """The choices of `decompositions`, one at a time, so that one Inductor
    cannot trace or lower (symm_mem.two_shot_all_reduce_ has no lowering in
    2.11: UnsupportedOperatorException) is left out, with a warning, rather
    than failing the selection; so is one whose output layout differs from
    the default's. Every rank leaves out the same ones (the same code on the
    same shapes). The default (the first) must trace: its failure raises."""
    from torch._inductor.codegen.subgraph import SubgraphTemplate

    from autotuned.inductor import _select

    name = name or op.name
    template = SubgraphTemplate(name=name)
    choices: list[Any] = []
    for i, decomposition in enumerate(decompositions):
        try:
            made = template.generate_custom_op_choices(
                name=name, decompositions=[decomposition], input_nodes=[op.inp],
                non_tensor_args=[{}], input_gen_fns=input_gen_fns)
            if choices:
                template._validate_layout_equivalence(
                    name, [decompositions[0], decomposition],
                    [choices[0].layout, made[0].layout])
        except Exception as e:  # noqa: BLE001 - one choice left out, the others tuned
            if i == 0:
                raise
            log.warning("autotuned: %s: choice %s left out: %s", name,
                        decomposition.__name__, _select._why(e))
            continue
        choices += made
    return choices


def _feeds_collectives_only(gm: Any) -> bool:
    """Whether the graph's input goes only into collectives (functional
    ones, torch.ops.autotuned's), each of which reads a realized buffer."""
    return all(getattr(user.target, "namespace", "") in ("_c10d_functional", "autotuned")
               for node in gm.graph.nodes if node.op == "placeholder" for user in node.users)


def _inline(gm: Any, inputs: list[Any], name: str) -> Any:
    from torch._inductor.codegen.subgraph import inline_subgraph_to_ir_nodes

    return inline_subgraph_to_ir_nodes(gm, inputs, name)


def _apply(op: _Op, lower: Callable[[list[Any]], Any], collectives_only: bool) -> Any:
    """The winner, `lower(inputs)` (its IR on `inputs`), in place of the op;
    its wait is skipped. `collectives_only`: the winner reads its input only
    as a collective's input (_feeds_collectives_only)."""
    from torch._inductor.comm_lowering import mark_as_skip_wait
    from torch._inductor.lowering import copy_

    inp = op.inp
    if op.inplace and not collectives_only:
        # The result is copied back into the input's buffer: a choice that
        # reads that buffer otherwise than as a collective's input (a clone,
        # a reshape) reads a copy, or 2.11's scheduler orders the read after
        # the write (KeyError in compute_ancestors).
        from torch._inductor.lowering import clone

        inp = clone(op.inp)
        inp.realize()
    result = lower([inp])
    if op.inplace:
        done = copy_(op.inp, result)
        mark_as_skip_wait(done)
        return op.inp
    result.realize()
    mark_as_skip_wait(result)
    return result


def install(state: Any) -> None:
    """Puts this module's lowering in front of Inductor's for the ops of OPS."""
    import functools

    import torch
    from torch._inductor.lowering import lowerings

    uninstall()
    for op_name in OPS:
        overload = getattr(torch.ops._c10d_functional, op_name).default
        original = lowerings[overload]
        _originals[overload] = original
        lowerings[overload] = functools.partial(_lower, state, op_name, original)


def uninstall() -> None:
    """Restores Inductor's lowerings."""
    from torch._inductor.lowering import lowerings

    for overload, original in _originals.items():
        lowerings[overload] = original
    _originals.clear()
