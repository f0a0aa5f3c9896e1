"""A collective selection's choices as client candidates (docs/python.md,
"Inductor"; docs/protocol.md, "Candidates the ranks run").

Each choice of a collective custom-op selection becomes one client
candidate: its key is a digest of the code the choice runs (a
SubgraphChoiceCaller's traced graph and its input layouts; the op's own
default: its kernel's source) and of the versions that shape it; its name is
the choice's name without Inductor's process-wide counter. Its runner is the
code PyTorch 2.11's own collective benchmark runs
(SubgraphChoiceCaller/ExternKernelCaller.benchmark_collective) on the inputs
AlgorithmSelectorCache.get_inputs makes, keeping the output to compare.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Sequence
from typing import Any, Optional

import autotuned
from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import collective_enum, dtype_enum

# Collective ops as make_fx records them (namespace, op name) -> collective.
_COLLECTIVE_WORDS = (("all_reduce", "all_reduce"), ("allreduce", "all_reduce"),
                     ("all_gather", "all_gather"), ("allgather", "all_gather"),
                     ("reduce_scatter", "reduce_scatter"), ("all_to_all", "all_to_all"),
                     ("alltoall", "all_to_all"), ("broadcast", "broadcast"))
_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d")
_REDUCING = ("all_reduce", "reduce_scatter")


@dataclasses.dataclass
class CollectiveCall:
    """The first collective a selection's choices run, as make_fx traced it."""

    collective: str
    op: str      # reduce op for all_reduce / reduce_scatter, else ""
    root: int    # broadcast's source rank


def _call_of(node: Any) -> Optional[CollectiveCall]:
    target = node.target
    if node.op != "call_function" or getattr(target, "namespace", None) not in _NAMESPACES:
        return None
    collective = next((c for word, c in _COLLECTIVE_WORDS if word in str(target)), None)
    if collective is None:
        return None
    op = ""
    if collective in _REDUCING:
        op = next((a.lower() for a in node.args if isinstance(a, str)
                   and a.lower() in ("sum", "max", "min")), "sum")
    root = 0
    if collective == "broadcast" and len(node.args) > 1 and isinstance(node.args[1], int):
        root = node.args[1]
    return CollectiveCall(collective, op, root)


def collective_of(choices: Sequence[Any]) -> Optional[CollectiveCall]:
    """The collective of a selection whose choices trace one (None: not a
    collective selection). Broadcast counts too, which 2.11's own
    is_collective_op does not list."""
    for choice in choices:
        gm = getattr(choice, "gm", None)
        if gm is None:
            continue
        for node in gm.graph.nodes:
            call = _call_of(node)
            if call is not None:
                return call
    return None


def is_default(choice: Any) -> bool:
    """The op's own implementation (custom_op._create_fallback_choice)."""
    return getattr(choice, "gm", None) is None and \
        str(getattr(choice, "name", "")).endswith("_fallback_default")


def display_name(choice: Any) -> str:
    """The choice's name without the process-wide counter SubgraphTemplate
    appends (ranks that compiled different graphs before count differently)."""
    name = str(getattr(choice, "name", type(choice).__name__))
    if getattr(choice, "gm", None) is not None:
        name = re.sub(r"_\d+$", "", name)
    name = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in name)
    return name[:128] or "choice"


def _default_source(choice: Any) -> str:
    """What the op's default runs: the custom op's Python source when it has
    one, else its qualified name."""
    overload = getattr(getattr(choice, "choice", None), "op_overload", None)
    parts = [str(overload)]
    try:
        from torch._library.custom_ops import _maybe_get_opdef

        opdef = _maybe_get_opdef(overload) if overload is not None else None
        fn = getattr(opdef, "_init_fn", None)
        if fn is not None:
            parts.append(inspect.getsource(fn))
    except Exception:  # noqa: BLE001 - the name alone still identifies the op
        pass
    return "\n".join(parts)


def content_of(choice: Any) -> tuple[str, ...]:
    """The text that identifies the code a choice runs."""
    gm = getattr(choice, "gm", None)
    if gm is not None:
        layouts = [f"{i.get_size()}/{i.get_stride()}/{i.get_dtype()}"
                   for i in choice.input_nodes]
        kwargs = repr(sorted(getattr(choice, "decomposition_kwargs", {}).items()))
        return ("subgraph", gm.code, *layouts, kwargs)
    kwargs = repr(sorted(getattr(choice, "kwargs", {}).items()))
    return ("extern", str(getattr(choice, "name", "")), _default_source(choice), kwargs)


def choice_key(choice: Any) -> str:
    """content_key of the choice's code and of the versions that shape it."""
    import torch

    from autotuned.rankrun import content_key

    return content_key(*content_of(choice), "torch " + torch.__version__,
                       "autotuned " + autotuned.__version__)


def problem_of(name: str, call: CollectiveCall, input_node: Any, world_size: int,
               candidates: Sequence[pb.Candidate], hint_override: Optional[int]) -> pb.Problem:
    """The Problem of a selection: the collective its choices run, on the
    op's first tensor input (per the graph's size hints)."""
    from torch._inductor.virtualized import V

    sizes = V.graph.sizevars.optimization_hints_with_override(input_node.get_size(),
                                                              hint_override)
    numel = math.prod(int(s) for s in sizes)
    count = numel // world_size if call.collective in ("reduce_scatter", "all_to_all") \
        else numel
    p = pb.Problem(collective=collective_enum(call.collective),
                   dtype=dtype_enum(input_node.get_dtype()), count=max(count, 1),
                   candidates=list(candidates), label=name[:128])
    if call.op:
        p.op = {"sum": pb.SUM, "max": pb.MAX, "min": pb.MIN}[call.op]
    if call.collective == "broadcast":
        p.root = call.root
    return p
