"""A collective selection's choices as client candidates (docs/python.md,
"Inductor"; docs/protocol.md, "Candidates the ranks run").

Each choice of a collective custom-op selection becomes one client
candidate: its key is a digest of the code the choice runs, as every rank
sees it alike (a decomposition: its function's code and that of the
functions it calls, its parameters and its input layouts; the op's own
default: its kernel's source) and of the versions that shape it; its name is
the choice's name without Inductor's process-wide counter. Its runner is the
code PyTorch 2.11's own collective benchmark runs
(SubgraphChoiceCaller/ExternKernelCaller.benchmark_collective) on the inputs
AlgorithmSelectorCache.get_inputs makes, keeping the output to compare.

Why not the traced graph: a decomposition may trace to different code on
each rank (`full[rank * n:(rank + 1) * n]`, the rank read at trace time), and
ranks whose keys differ ask for different problem sets, which the daemon
refuses (INVALID_ARGUMENT). A function's code is the same on every rank; the
values it reads (closure variables, globals, the rank) are not part of the
key, so a change of those alone is not measured again (a CustomOpConfig
parameter is: it is part of the key).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import sys
import types
from collections.abc import Mapping, Sequence
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


# Functions whose code is part of a decomposition's key: the decomposition
# and the functions it reaches through its closure and globals, at most this
# many, not those of these packages (their versions are in the key).
MAX_FUNCTIONS = 64
_LIBRARIES = ("torch", "autotuned", "triton", "numpy", "functools", "builtins")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _canonical(value: Any) -> str:
    """A text of `value` that is the same in every process: no addresses,
    no set order (string hashes differ between processes), functions by
    name."""
    if isinstance(value, types.CodeType):
        return _code_text(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_canonical(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{_canonical(k)}: {_canonical(v)}"
                                      for k, v in value.items())) + "}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return _ADDRESS.sub("", repr(value))


def _code_text(code: types.CodeType) -> str:
    """A code object's bytecode, names and constants (nested code included)."""
    consts = ", ".join(_canonical(c) for c in code.co_consts)
    return f"{code.co_name}:{code.co_code.hex()}:{code.co_names}:{code.co_varnames}:({consts})"


def _names(code: types.CodeType) -> list[str]:
    """The global names a code object (and the code nested in it) reads."""
    out = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(_names(c))
    return out


def _is_library(fn: Any) -> bool:
    module = str(getattr(fn, "__module__", None) or "")
    return module.split(".")[0] in _LIBRARIES


def code_identity(fn: Any) -> str:
    """The code of a decomposition, the same text on every rank: its
    bytecode, names and constants, those of the functions it reaches through
    its closure and its globals (its own package's, not a library's), and a
    functools.partial's arguments. Not the values it reads."""
    parts: list[str] = []
    seen: set[int] = set()
    todo = [fn]
    while todo and len(seen) < MAX_FUNCTIONS:
        f = todo.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        if isinstance(f, functools.partial):
            parts.append(f"partial({_canonical(f.args)}, {_canonical(f.keywords)})")
            todo.append(f.func)
            continue
        f = getattr(f, "__func__", f)  # a bound method: its function
        code = getattr(f, "__code__", None)
        if code is None:
            # A callable object: its class's __call__.
            call = type(f).__dict__.get("__call__") if callable(f) else None
            if getattr(call, "__code__", None) is not None and not _is_library(call):
                todo.append(call)
            parts.append(_canonical(f) if callable(f) else type(f).__qualname__)
            continue
        parts.append(f"{f.__module__}.{f.__qualname__}/{f.__name__}:{_code_text(code)}"
                     f":{_canonical(f.__defaults__)}")
        reached = [c.cell_contents for c in (f.__closure__ or ()) if _filled(c)]
        globs = getattr(f, "__globals__", {})
        reached += [globs[n] for n in _names(code) if n in globs]
        todo += [r for r in reached if isinstance(r, (types.FunctionType, functools.partial))
                 and not _is_library(r)]
    return "\n".join(parts)


def _filled(cell: Any) -> bool:
    try:
        return cell.cell_contents is not _EMPTY
    except ValueError:  # an empty cell
        return False


_EMPTY = object()


def content_of(choice: Any) -> tuple[str, ...]:
    """The text that identifies the code a choice runs, the same on every
    rank (module docstring)."""
    gm = getattr(choice, "gm", None)
    if gm is not None:
        layouts = [f"{i.get_size()}/{i.get_stride()}/{i.get_dtype()}"
                   for i in choice.input_nodes]
        kwargs = _canonical(getattr(choice, "decomposition_kwargs", {}))
        decomposition = getattr(choice, "decomposition", None)
        # A subgraph of no known decomposition: its traced code.
        code = code_identity(decomposition) if decomposition is not None else gm.code
        return ("subgraph", code, *layouts, kwargs)
    kwargs = _canonical(getattr(choice, "kwargs", {}))
    return ("extern", str(getattr(choice, "name", "")), _default_source(choice), kwargs)


def choice_key(choice: Any) -> str:
    """content_key of the choice's code and of the versions that shape it."""
    import torch

    from autotuned.rankrun import content_key

    return content_key(*content_of(choice), "torch " + torch.__version__,
                       "autotuned " + autotuned.__version__, "python " + sys.version)


def problem_of(name: str, call: CollectiveCall, input_node: Any, world_size: int,
               candidates: Sequence[pb.Candidate], hint_override: Optional[int],
               at: Optional[Mapping[Any, int]] = None) -> pb.Problem:
    """The Problem of a selection: the collective its choices run, on the
    op's first tensor input (per the graph's size hints; `at` replaces the
    size expressions it maps first: a range's representative size of a
    dynamic dimension, _ranges)."""
    from torch._inductor.virtualized import V

    size = [s.subs(at) if at and hasattr(s, "subs") else s for s in input_node.get_size()]
    sizes = V.graph.sizevars.optimization_hints_with_override(size, hint_override)
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
