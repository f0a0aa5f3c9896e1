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
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotuned.kernels_lib import KernelsError, implementation

_GROUPS: dict[str, Any] = {}
_LAST_GROUP: list[str] = []


def register_group(name: str, group: Any, default: bool = True) -> None:
    """Makes `group` (a P2PGroup, or anything with .world, .process_group and
    .launch) the one the ops find under `name`, and with `default` the one
    they find under ""."""
    _GROUPS[name] = group
    if default:
        _LAST_GROUP[:] = [name]


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


_REGISTERED = False


def register_ops() -> None:
    """Registers torch.ops.autotuned.{all_reduce, all_gather, reduce_scatter}
    (once; importing the module does it when torch is importable)."""
    global _REGISTERED
    if _REGISTERED:
        return
    import torch

    # Explicit schemas: this module's annotations are strings (__future__).
    @torch.library.custom_op(
        "autotuned::all_reduce", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
               "int chunk_kib=0, str op=\"sum\") -> Tensor")
    def all_reduce(x, impl, group="", blocks=0, threads=0, chunk_kib=0, op="sum"):
        return _run("all_reduce", x, impl, group, list(x.shape), blocks, threads, chunk_kib, op)

    @all_reduce.register_fake
    def _(x, impl, group="", blocks=0, threads=0, chunk_kib=0, op="sum"):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.custom_op(
        "autotuned::all_gather", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0) -> Tensor")
    def all_gather(x, impl, group="", blocks=0, threads=0):
        world = get_group(group).world
        return _run("all_gather", x, impl, group, _gather_shape(x, world), blocks, threads, 0,
                    "sum")

    @all_gather.register_fake
    def _(x, impl, group="", blocks=0, threads=0):
        return x.new_empty(_gather_shape(x, get_group(group).world))

    @torch.library.custom_op(
        "autotuned::reduce_scatter", mutates_args=(),
        schema="(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
               "str op=\"sum\") -> Tensor")
    def reduce_scatter(x, impl, group="", blocks=0, threads=0, op="sum"):
        world = get_group(group).world
        return _run("reduce_scatter", x, impl, group, _scatter_shape(x, world), blocks,
                    threads, 0, op)

    @reduce_scatter.register_fake
    def _(x, impl, group="", blocks=0, threads=0, op="sum"):
        return x.new_empty(_scatter_shape(x, get_group(group).world))

    _REGISTERED = True
