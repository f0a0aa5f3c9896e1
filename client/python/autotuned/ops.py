"""The torch ops that run the daemon's implementations in this process, and
the groups they run in.

Ops (namespace `autotuned`, with fake implementations for torch.compile):
    all_reduce(Tensor x, str impl, str group, int blocks, int threads,
               int chunk_kib, str op) -> Tensor
    all_gather(Tensor x, str impl, str group, int blocks, int threads) -> Tensor
    reduce_scatter(Tensor x, str impl, str group, int blocks, int threads,
                   str op) -> Tensor
`impl` names an implementation of autotuned.kernels_lib.IMPLEMENTATIONS
("<collective>/nccl" runs torch.distributed's own collective, the others the
P2P kernels); `group` is a name given to register_group ("" = the last
default one); blocks, threads and chunk_kib 0 = the catalogue's defaults.
The result is a new tensor (all_gather: dim 0 times world; reduce_scatter:
dim 0 / world).

A group is a P2PGroup (autotuned.p2p), or anything with .world,
.process_group and .launch(impl, x, out, op=, blocks=, threads=,
chunk_kib=); the ops find it by name through this module's registry.
register_ops() needs torch; the rest of the module imports it only when used.

Two backends (backend() says which one register_ops chose):
  "cpp"     libautotuned_torch_ops.so (//client/torch_ops) defines the schemas
            and the CUDA kernels in C++: a CUDA call costs a dispatcher call,
            no Python. register_group hands it the group's state (a P2PGroup's
            .torch_ops_state(): peer pointers, sizes, the kernels library's
            functions, the implementations of kernels_lib.IMPLEMENTATIONS with
            their limits); the C++ ops raise RuntimeError with the messages of
            the Python path. Other devices (CPU on gloo) run the Python kernel,
            and the fake implementations are the Python ones.
  "python"  torch.library.custom_op functions: every call goes through P2PGroup.launch.
The library is the first that exists of: $AUTOTUNED_TORCH_OPS_LIB ("none":
the Python backend), libautotuned_torch_ops.so next to the kernels library
($AUTOTUNED_KERNELS_LIB's folder), next to this package (autotuned/ or its
parent). None: the Python backend. One that exists but does not load raises
KernelsError.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Optional

from autotuned.kernels_lib import IMPLEMENTATIONS, LIB_ENV, KernelsError, implementation

TORCH_OPS_LIB_NAME = "libautotuned_torch_ops.so"
TORCH_OPS_LIB_ENV = "AUTOTUNED_TORCH_OPS_LIB"

_GROUPS: dict[str, Any] = {}
_LAST_GROUP: list[str] = []
_BACKEND: list[str] = []  # "cpp" or "python" once register_ops ran


def register_group(name: str, group: Any, default: bool = True) -> None:
    """Makes `group` (a P2PGroup, or anything with .world, .process_group and
    .launch) the one the ops find under `name`, and with `default` the one
    they find under ""."""
    _GROUPS[name] = group
    if default:
        _LAST_GROUP[:] = [name]
    if _BACKEND == ["cpp"]:
        _register_cpp(name, group, default)


def get_group(name: str = "") -> Any:
    """The group registered under `name` ("" = the last default one);
    KernelsError when there is none."""
    if not name:
        if not _LAST_GROUP:
            raise KernelsError("no P2PGroup: make one with autotuned.kernels.P2PGroup(pg)")
        name = _LAST_GROUP[0]
    try:
        return _GROUPS[name]
    except KeyError:
        raise KernelsError(f"no P2PGroup named {name!r} (have: {', '.join(_GROUPS)})") from None


def unregister_group(name: str, group: Any) -> None:
    """Forgets `name` if `group` is the one registered under it (and as the
    default, if it is)."""
    if _GROUPS.get(name) is group:
        del _GROUPS[name]
        if _LAST_GROUP == [name]:
            _LAST_GROUP.clear()
        if _BACKEND == ["cpp"]:
            import torch
            torch.ops.autotuned._unregister_group(name)


def group_names() -> list[str]:
    """The names the ops find a group under, in registration order."""
    return list(_GROUPS)


def _run(collective: str, x: Any, impl_name: str, group: str, out_shape: Sequence[int],
         blocks: int, threads: int, chunk_kib: int, op: str) -> Any:
    import torch
    import torch.distributed as dist

    impl = implementation(impl_name, collective)
    g = get_group(group)
    x = x.contiguous()
    if impl.algo == 0:
        pg = g.process_group
        if collective == "all_reduce":
            out = x.clone()
            dist.all_reduce(out, op=getattr(dist.ReduceOp, op.upper()), group=pg)
            return out
        out = x.new_empty(out_shape)
        if collective == "all_gather":
            dist.all_gather_into_tensor(out, x, group=pg)
        else:
            dist.reduce_scatter_tensor(out, x, op=getattr(dist.ReduceOp, op.upper()), group=pg)
        return out
    out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    g.launch(impl, x, out, op=op, blocks=blocks, threads=threads, chunk_kib=chunk_kib)
    return out


def _gather_shape(x: Any, world: int) -> list[int]:
    shape = list(x.shape) or [1]
    shape[0] *= world
    return shape


def _scatter_shape(x: Any, world: int) -> list[int]:
    shape = list(x.shape) or [1]
    if shape[0] % world:
        raise KernelsError(f"reduce_scatter: dim 0 ({shape[0]}) is not a multiple of the "
                           f"world size {world}")
    shape[0] //= world
    return shape


def torch_ops_library_candidates() -> list[str]:
    """Where register_ops looks for libautotuned_torch_ops.so, in order (see
    the module docstring); [] when $AUTOTUNED_TORCH_OPS_LIB is "none"."""
    env = os.environ.get(TORCH_OPS_LIB_ENV, "")
    if env == "none":
        return []
    out = [env] if env else []
    if os.environ.get(LIB_ENV):
        out.append(os.path.join(os.path.dirname(os.path.abspath(os.environ[LIB_ENV])),
                                TORCH_OPS_LIB_NAME))
    here = os.path.dirname(os.path.abspath(__file__))
    out += [os.path.join(here, TORCH_OPS_LIB_NAME),
            os.path.join(os.path.dirname(here), TORCH_OPS_LIB_NAME)]
    return out


def torch_ops_library() -> Optional[str]:
    """The C++ ops' library register_ops loads (None: the Python backend)."""
    return next((p for p in torch_ops_library_candidates() if os.path.exists(p)), None)


def backend() -> str:
    """The ops' backend: "cpp" (libautotuned_torch_ops.so) or "python"
    (registers the ops first if needed)."""
    register_ops()
    return _BACKEND[0]


def _process_group_name(pg: Any) -> str:
    """c10d's name of `pg` (None: the default group), "" when there is none."""
    import torch.distributed as dist

    if pg is None:
        if not dist.is_available() or not dist.is_initialized():
            return ""
        pg = dist.group.WORLD
    return str(getattr(pg, "group_name", "") or "")


def _register_cpp(name: str, group: Any, default: bool) -> None:
    """Hands `group` to the C++ ops: a P2PGroup's torch_ops_state(), or, for
    another group, its world and process group (its NCCL implementations)."""
    import torch

    state = getattr(group, "torch_ops_state", None)
    if state is not None:
        kw = state()
    else:
        # Every implementation, so that a P2P one is refused as needing P2P buffers.
        impls = list(IMPLEMENTATIONS.values())
        kw = dict(world=int(group.world), rank=0, device=0, inputs=[], scratch=[],
                  scratch_bytes=0, push=[], push_bytes=0, signals=[], spin_limit=0,
                  impls=[i.name for i in impls], collectives=[i.collective for i in impls],
                  algos=[i.algo for i in impls], blocks=[i.blocks for i in impls],
                  threads=[i.threads for i in impls], chunk_kib=[i.chunk_kib for i in impls],
                  max_bytes=[0] * len(impls),
                  max_bytes_names=[i.max_bytes_attr for i in impls], flags=[0] * len(impls),
                  launch=0, check_args=0, error_string=0, abi_version=0, args_size=0)
        kw["process_group"] = _process_group_name(getattr(group, "process_group", None))
    torch.ops.autotuned._register_group(name=name, is_default=default, **kw)


_REGISTERED = False


def register_ops() -> None:
    """Registers torch.ops.autotuned.{all_reduce, all_gather, reduce_scatter}
    (once; importing autotuned.kernels does it when torch is importable): the
    C++ backend where its library is found, else the Python one."""
    global _REGISTERED
    if _REGISTERED:
        return
    import torch

    path = torch_ops_library()
    if path is not None:
        try:
            torch.ops.load_library(path)
        except (OSError, RuntimeError) as e:
            raise KernelsError(f"cannot load {path}: {e} (set {TORCH_OPS_LIB_ENV}=none for "
                               "the Python ops)") from None
        _register_python_parts(torch)
        _BACKEND[:] = ["cpp"]
        _REGISTERED = True
        for name, group in _GROUPS.items():
            _register_cpp(name, group, _LAST_GROUP == [name])
        return

    # Explicit schemas: this module's annotations are strings (__future__).
    @torch.library.custom_op(
        "autotuned::all_reduce", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
               "int chunk_kib=0, str op=\"sum\") -> Tensor")
    def all_reduce(x, impl, group="", blocks=0, threads=0, chunk_kib=0, op="sum"):
        return _all_reduce(x, impl, group, blocks, threads, chunk_kib, op)

    all_reduce.register_fake(_all_reduce_fake)

    @torch.library.custom_op(
        "autotuned::all_gather", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0) -> Tensor")
    def all_gather(x, impl, group="", blocks=0, threads=0):
        return _all_gather(x, impl, group, blocks, threads)

    all_gather.register_fake(_all_gather_fake)

    @torch.library.custom_op(
        "autotuned::reduce_scatter", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
               "str op=\"sum\") -> Tensor")
    def reduce_scatter(x, impl, group="", blocks=0, threads=0, op="sum"):
        return _reduce_scatter(x, impl, group, blocks, threads, op)

    reduce_scatter.register_fake(_reduce_scatter_fake)

    _BACKEND[:] = ["python"]
    _REGISTERED = True


_LIBRARY: list[Any] = []  # the torch.library.Library of the C++ backend's Python parts


def _all_reduce(x: Any, impl: str, group: str = "", blocks: int = 0, threads: int = 0,
                chunk_kib: int = 0, op: str = "sum") -> Any:
    return _run("all_reduce", x, impl, group, list(x.shape), blocks, threads, chunk_kib, op)


def _all_gather(x: Any, impl: str, group: str = "", blocks: int = 0, threads: int = 0) -> Any:
    return _run("all_gather", x, impl, group, _gather_shape(x, get_group(group).world), blocks,
                threads, 0, "sum")


def _reduce_scatter(x: Any, impl: str, group: str = "", blocks: int = 0, threads: int = 0,
                    op: str = "sum") -> Any:
    return _run("reduce_scatter", x, impl, group, _scatter_shape(x, get_group(group).world),
                blocks, threads, 0, op)


def _all_reduce_fake(x: Any, impl: str, group: str = "", blocks: int = 0, threads: int = 0,
                     chunk_kib: int = 0, op: str = "sum") -> Any:
    import torch
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _all_gather_fake(x: Any, impl: str, group: str = "", blocks: int = 0,
                     threads: int = 0) -> Any:
    return x.new_empty(_gather_shape(x, get_group(group).world))


def _reduce_scatter_fake(x: Any, impl: str, group: str = "", blocks: int = 0, threads: int = 0,
                         op: str = "sum") -> Any:
    return x.new_empty(_scatter_shape(x, get_group(group).world))


def _register_python_parts(torch: Any) -> None:
    """With the C++ schemas loaded: the Python kernel for every device but
    CUDA (CompositeExplicitAutograd; the C++ CUDA kernel takes precedence)
    and the fake implementations."""
    lib = torch.library.Library("autotuned", "IMPL")
    _LIBRARY.append(lib)
    lib.impl("all_reduce", _all_reduce, "CompositeExplicitAutograd")
    lib.impl("all_gather", _all_gather, "CompositeExplicitAutograd")
    lib.impl("reduce_scatter", _reduce_scatter, "CompositeExplicitAutograd")
    torch.library.register_fake("autotuned::all_reduce", _all_reduce_fake, lib=lib)
    torch.library.register_fake("autotuned::all_gather", _all_gather_fake, lib=lib)
    torch.library.register_fake("autotuned::reduce_scatter", _reduce_scatter_fake, lib=lib)
