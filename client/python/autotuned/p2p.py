"""P2PGroup: the ranks of a torch.distributed group sharing peer buffers
through CUDA IPC, which the P2P kernels read and write.

    p2p = P2PGroup(tp_group, max_bytes=64 << 20)   # collective; one GPU per rank
    y = torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", p2p.name)

P2PGroup(process_group) is collective over a torch.distributed group (NCCL
or gloo; one GPU per rank, all ranks on one host). Each rank makes one
cudaMalloc holding its signal buffer (zeroed with at_p2p_signal_init), the
two-shot scratch, the push one-shot's buffer for messages up to
`push_max_bytes` (3 x world slots; prepared with at_p2p_scratch_init) and a
staging input buffer of `max_bytes`; with `ce_max_bytes` > 0 (off by
default) the scratch also holds the copy engine's world copies of a message
of that size; exports it with cudaIpcGetMemHandle, exchanges the handles
with dist.all_gather_object and opens the peers' with cudaIpcOpenMemHandle
(cudaIpcMemLazyEnablePeerAccess). cudart is the libcudart that torch loaded.
The group registers itself (autotuned.ops.register_group) under its name and
as the default; close() unregisters it. The ops launch through launch()
below on the Python backend; on the C++ one (autotuned.ops.backend() ==
"cpp") they launch from C++, the same way, with what torch_ops_state() hands
over at registration.

Each launch copies x into the staging buffer (the push one-shot and the
copy engine read x itself, when 16-byte aligned) and runs on the current
stream. Calls on one rank must be ordered (one stream, as the signal buffer
is shared); every rank makes the same calls in the same order; a CUDA graph
may capture them.
"""
from __future__ import annotations

import ctypes
import os
import socket
from typing import Any, Optional

from autotuned.kernels_lib import (
    ALGO_ALL_REDUCE_CE_RING,
    ALGO_ALL_REDUCE_COPY_ENGINE,
    ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
    ALGO_ALL_REDUCE_PUSH_PIPELINED,
    ALGO_ALL_REDUCE_RING,
    ALGO_ALL_REDUCE_TWO_SHOT,
    ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
    ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
    ALGO_REDUCE_SCATTER,
    AT_OK,
    CUDA_IPC_LAZY_ENABLE_PEER_ACCESS,
    CUDA_MEMCPY_DEVICE_TO_DEVICE,
    DTYPE_BFLOAT16,
    DTYPE_FLOAT16,
    DTYPE_FLOAT32,
    IMPLEMENTATIONS,
    OP_MAX,
    OP_MIN,
    OP_SUM,
    VOIDPP,
    AtP2PArgs,
    Implementation,
    IpcHandle,
    KernelsError,
    cuda_check,
    cudart,
    load_library,
)
from autotuned.ops import register_group, unregister_group

_OPS = {"sum": OP_SUM, "max": OP_MAX, "min": OP_MIN}
# Implementations that read only the calling rank's input: x itself is passed
# (when 16-byte aligned), not a staged copy.
_READS_OWN_INPUT = (ALGO_ALL_REDUCE_ONE_SHOT_PUSH, ALGO_ALL_REDUCE_COPY_ENGINE,
                    ALGO_ALL_REDUCE_PUSH_PIPELINED, ALGO_ALL_REDUCE_RING, ALGO_ALL_REDUCE_CE_RING)
# Those that use the group's scratch, and those given chunk_elems.
_USES_SCRATCH = (ALGO_ALL_REDUCE_TWO_SHOT, ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                 ALGO_ALL_REDUCE_TWO_SHOT_PUSH, ALGO_ALL_REDUCE_COPY_ENGINE,
                 ALGO_ALL_REDUCE_PUSH_PIPELINED, ALGO_ALL_REDUCE_RING, ALGO_ALL_REDUCE_CE_RING)
_CHUNKED = (ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, ALGO_ALL_REDUCE_COPY_ENGINE,
            ALGO_ALL_REDUCE_PUSH_PIPELINED, ALGO_ALL_REDUCE_RING, ALGO_ALL_REDUCE_CE_RING)
# The same, as the C++ torch ops take them (client/torch_ops/groups.h, Impl::flags).
_FLAG_READS_OWN_INPUT, _FLAG_USES_SCRATCH, _FLAG_USES_PUSH, _FLAG_CHUNKED = 1, 2, 4, 8


def _flags(algo: int) -> int:
    return ((_FLAG_READS_OWN_INPUT if algo in _READS_OWN_INPUT else 0)
            | (_FLAG_USES_SCRATCH if algo in _USES_SCRATCH else 0)
            | (_FLAG_USES_PUSH if algo == ALGO_ALL_REDUCE_ONE_SHOT_PUSH else 0)
            | (_FLAG_CHUNKED if algo in _CHUNKED else 0))


def _align(n: int, a: int = 256) -> int:
    return (n + a - 1) // a * a


def _address(p: ctypes.c_void_p, what: str) -> int:
    """The address a CUDA call wrote into `p` (KernelsError when null)."""
    if not p.value:
        raise KernelsError(f"{what}: null pointer")
    return int(p.value)


def _torch_dtype_code(dtype: Any) -> int:
    import torch
    codes = {torch.float32: DTYPE_FLOAT32, torch.bfloat16: DTYPE_BFLOAT16,
             torch.float16: DTYPE_FLOAT16}
    try:
        return codes[dtype]
    except KeyError:
        raise KernelsError(f"dtype {dtype}: the P2P kernels take float32, bfloat16, "
                           "float16") from None


class P2PGroup:
    """The ranks of a torch.distributed group sharing peer buffers through
    CUDA IPC (see the module docstring). Collective to make and to close()."""

    def __init__(self, process_group: Any = None, *, max_bytes: int = 64 << 20,
                 chunk_kib: int = 2048, spin_limit: int = 0, name: Optional[str] = None,
                 library: Optional[str] = None, device: Any = None,
                 push_max_bytes: Optional[int] = None, ce_max_bytes: int = 0) -> None:
        import torch
        import torch.distributed as dist

        if not torch.cuda.is_available():
            raise KernelsError("P2PGroup: no CUDA device")
        self.lib = load_library(library)
        self.process_group = process_group
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        lim = self.lib.limits
        if not lim.min_world <= self.world <= lim.max_world:
            raise KernelsError(f"P2PGroup: world size {self.world}, the kernels take "
                               f"{lim.min_world}..{lim.max_world}")
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        torch.cuda.set_device(self.device)
        torch.cuda.init()
        self.max_bytes = _align(max(int(max_bytes), 16), 16)
        self.spin_limit = int(spin_limit)
        # WORLD is set: get_world_size succeeded above.
        self.name = name or ("p2p:" + (getattr(process_group, "group_name", None)
                                       or dist.group.WORLD.group_name))  # type: ignore[union-attr]
        # The copy engine's world copies of its largest message (0: none);
        # the push one-shot's own buffer, 3 x world slots of its largest
        # message, so by default only up to 8 MiB (0: none).
        self.ce_max_bytes = self._within_max_bytes(ce_max_bytes)
        push_max = min(self.max_bytes, 8 << 20) if push_max_bytes is None else push_max_bytes
        self.push_max_bytes = self._within_max_bytes(push_max)
        # Scratch for the two-shots up to max_bytes, the chunked two-shot with
        # chunks up to chunk_kib, and the copy engine; the push buffer: the
        # library's at_p2p_group_sizes_for, as the daemon's groups size theirs.
        self.scratch_bytes, self.push_bytes = self.lib.group_sizes(
            self.world, self.max_bytes, chunk_kib * 1024, self.ce_max_bytes,
            self.push_max_bytes)
        self.signal_offset = 0
        self.scratch_offset = _align(self.lib.signal_bytes)
        self.push_offset = self.scratch_offset + self.scratch_bytes
        self.staging_offset = self.push_offset + self.push_bytes
        self.total_bytes = self.staging_offset + self.max_bytes

        rt = cudart()
        cuda_check(rt.cudaSetDevice(self.device.index), "cudaSetDevice")
        base = ctypes.c_void_p()
        cuda_check(rt.cudaMalloc(ctypes.byref(base), self.total_bytes),
                    f"cudaMalloc({self.total_bytes})")
        self._base = _address(base, "cudaMalloc")
        self._opened: list[int] = []
        self._closed = False
        try:
            stream = torch.cuda.current_stream(self.device)
            rc = self.lib.lib.at_p2p_signal_init(ctypes.c_void_p(self._base + self.signal_offset),
                                                 ctypes.c_void_p(stream.cuda_stream or None))
            if rc != AT_OK:
                raise KernelsError(f"at_p2p_signal_init: {self.lib.error_string(rc)}")
            if self.push_bytes:
                rc = self.lib.lib.at_p2p_scratch_init(
                    ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                    ctypes.c_void_p(self._base + self.push_offset), self.push_bytes,
                    ctypes.c_void_p(stream.cuda_stream or None))
                if rc != AT_OK:
                    raise KernelsError(f"at_p2p_scratch_init: {self.lib.error_string(rc)}")
            stream.synchronize()
            handle = IpcHandle()
            cuda_check(rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(self._base)),
                        "cudaIpcGetMemHandle")
            mine = {"host": socket.gethostname(), "pid": os.getpid(),
                    "device": self.device.index,
                    "handle": ctypes.string_at(ctypes.addressof(handle), 64),
                    "total": self.total_bytes, "max_bytes": self.max_bytes,
                    "scratch": self.scratch_bytes, "push": self.push_bytes}
            everyone: list[Any] = [None] * self.world
            dist.all_gather_object(everyone, mine, group=process_group)
            hosts = {e["host"] for e in everyone}
            if len(hosts) != 1:
                raise KernelsError(f"P2PGroup: ranks on several hosts ({sorted(hosts)}); "
                                   "CUDA IPC needs one host")
            layout = {(e["total"], e["max_bytes"], e["scratch"], e["push"]) for e in everyone}
            if len(layout) != 1:
                raise KernelsError("P2PGroup: ranks disagree on max_bytes/chunk_kib/"
                                   f"push_max_bytes/ce_max_bytes: {layout}")
            bases = []
            for r, e in enumerate(everyone):
                if r == self.rank:
                    bases.append(self._base)
                    continue
                h = IpcHandle()
                ctypes.memmove(ctypes.addressof(h), e["handle"], 64)
                ptr = ctypes.c_void_p()
                cuda_check(rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), h,
                                                    CUDA_IPC_LAZY_ENABLE_PEER_ACCESS),
                            f"cudaIpcOpenMemHandle(rank {r}, device {e['device']})")
                self._opened.append(_address(ptr, "cudaIpcOpenMemHandle"))
                bases.append(self._opened[-1])
        except BaseException:
            self._release()
            raise
        arr = ctypes.c_void_p * self.world
        self._peer_signals = arr(*[b + self.signal_offset for b in bases])
        self._peer_scratch = arr(*[b + self.scratch_offset for b in bases])
        self._peer_push = arr(*[b + self.push_offset for b in bases])
        self._peer_inputs = arr(*[b + self.staging_offset for b in bases])
        register_group(self.name, self)
        # Everyone has opened everyone's buffer before anyone launches.
        dist.barrier(group=process_group)

    def _within_max_bytes(self, n: int) -> int:
        """A per-implementation message limit: 0..max_bytes, whole vectors."""
        return min(self.max_bytes, max(int(n), 0)) // 16 * 16

    # -- launching --

    def args(self, algo: int, dtype: int, count: int, output_ptr: int, *, op: int = OP_SUM,
             blocks: int, threads: int, chunk_elems: int = 0,
             input_ptr: Optional[int] = None) -> AtP2PArgs:
        """at_p2p_args for a launch reading the staging buffers, or, for the
        push one-shot and the copy engine given `input_ptr`, this rank's own
        input there (the only one they read)."""
        a = AtP2PArgs()
        a.world, a.rank, a.dtype, a.op, a.count = self.world, self.rank, dtype, op, count
        if input_ptr is None:
            a.peer_inputs = ctypes.cast(self._peer_inputs, VOIDPP)
        else:
            own = (ctypes.c_void_p * self.world)()
            own[self.rank] = input_ptr
            a.peer_inputs = ctypes.cast(own, VOIDPP)  # keeps `own` alive with `a`
        a.output = output_ptr
        if algo in _USES_SCRATCH:
            a.peer_scratch = ctypes.cast(self._peer_scratch, VOIDPP)
            a.scratch_bytes = self.scratch_bytes
        elif algo == ALGO_ALL_REDUCE_ONE_SHOT_PUSH:
            a.peer_scratch = ctypes.cast(self._peer_push, VOIDPP)
            a.scratch_bytes = self.push_bytes
        a.peer_signals = ctypes.cast(self._peer_signals, VOIDPP)
        a.blocks, a.threads, a.chunk_elems, a.spin_limit = blocks, threads, chunk_elems, \
            self.spin_limit
        return a

    def launch(self, impl: Implementation, x: Any, out: Any, *, op: str = "sum", blocks: int = 0,
               threads: int = 0, chunk_kib: int = 0) -> None:
        """Copies x into the staging buffer (the push one-shot reads a 16-byte
        aligned x where it is) and launches impl's kernel into `out` on the
        current stream."""
        import torch

        if self._closed:
            raise KernelsError(f"P2PGroup {self.name}: closed")
        if x.device != self.device or out.device != self.device:
            raise KernelsError(f"P2PGroup {self.name}: tensors on {x.device}/{out.device}, "
                               f"the group is on {self.device}")
        dtype = _torch_dtype_code(x.dtype)
        nbytes = x.numel() * x.element_size()
        if nbytes > self.limit(impl):
            raise KernelsError(
                f"P2PGroup {self.name}: {nbytes} bytes > {self.limit(impl)}, the largest "
                f"{impl.name} runs on in this group "
                f"({impl.max_bytes_attr})")
        try:
            op_code = _OPS[op]
        except KeyError:
            raise KernelsError(f"op {op!r}: one of sum, max, min") from None
        count = x.numel()
        if impl.algo == ALGO_REDUCE_SCATTER:
            count //= self.world
        size = x.element_size()
        vec = 16 // size
        chunk_elems = 0
        kib = chunk_kib or impl.chunk_kib
        if impl.algo in _CHUNKED and kib > 0:  # 0: the ring's whole shards
            chunk_elems = max(vec, kib * 1024 // size // vec * vec)
        x = x.contiguous()
        # Own input only: x itself, unless misaligned.
        direct = impl.algo in _READS_OWN_INPUT and x.data_ptr() % 16 == 0
        a = self.args(impl.algo, dtype, count, out.data_ptr(), op=op_code,
                      blocks=blocks or impl.blocks, threads=threads or impl.threads,
                      chunk_elems=chunk_elems, input_ptr=x.data_ptr() if direct else None)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        if nbytes and not direct:
            cuda_check(cudart().cudaMemcpyAsync(
                ctypes.c_void_p(self._base + self.staging_offset), ctypes.c_void_p(x.data_ptr()),
                nbytes, CUDA_MEMCPY_DEVICE_TO_DEVICE, ctypes.c_void_p(stream or None)),
                "cudaMemcpyAsync (staging)")
        self.lib.launch(impl.algo, a, stream)

    def limit(self, impl: Implementation) -> int:
        """The largest tensor (bytes) `impl` runs on in this group."""
        return int(getattr(self, impl.max_bytes_attr))

    def torch_ops_state(self) -> dict[str, Any]:
        """What the C++ torch ops need to launch in this group (the keyword
        arguments of torch.ops.autotuned._register_group but name and
        is_default): this rank's peer pointers and sizes, the kernels
        library's functions, and every implementation of
        kernels_lib.IMPLEMENTATIONS with its defaults and limit here."""
        import torch.distributed as dist

        impls = list(IMPLEMENTATIONS.values())
        pg = self.process_group if self.process_group is not None else dist.group.WORLD
        fn = self.lib.lib
        return dict(
            world=self.world, rank=self.rank, device=int(self.device.index),
            process_group=str(getattr(pg, "group_name", "") or ""),
            inputs=list(self._peer_inputs), scratch=list(self._peer_scratch),
            scratch_bytes=self.scratch_bytes, push=list(self._peer_push),
            push_bytes=self.push_bytes, signals=list(self._peer_signals),
            spin_limit=self.spin_limit,
            impls=[i.name for i in impls], collectives=[i.collective for i in impls],
            algos=[i.algo for i in impls], blocks=[i.blocks for i in impls],
            threads=[i.threads for i in impls], chunk_kib=[i.chunk_kib for i in impls],
            max_bytes=[self.limit(i) for i in impls],
            max_bytes_names=[i.max_bytes_attr for i in impls],
            flags=[_flags(i.algo) for i in impls],
            launch=ctypes.cast(fn.at_p2p_launch, ctypes.c_void_p).value,
            check_args=ctypes.cast(fn.at_p2p_check_args, ctypes.c_void_p).value,
            error_string=ctypes.cast(fn.at_error_string, ctypes.c_void_p).value,
            abi_version=self.lib.version, args_size=ctypes.sizeof(AtP2PArgs))

    def error(self) -> int:
        """This rank's signal error word (0 = none; see at_p2p_signal_error).
        Synchronizes the current stream."""
        import torch

        word = ctypes.c_uint32()
        stream = torch.cuda.current_stream(self.device).cuda_stream
        rc = self.lib.lib.at_p2p_signal_error(ctypes.c_void_p(self._base + self.signal_offset),
                                              ctypes.c_void_p(stream or None),
                                              ctypes.byref(word))
        if rc != AT_OK:
            raise KernelsError(f"at_p2p_signal_error: {self.lib.error_string(rc)}")
        return int(word.value)

    # -- teardown --

    def _release(self) -> None:
        rt = cudart()
        rt.cudaSetDevice(self.device.index)
        for p in self._opened:
            rt.cudaIpcCloseMemHandle(ctypes.c_void_p(p))
        self._opened = []

    def close(self) -> None:
        """Collective: closes the peers' buffers, waits for every rank, frees."""
        import torch
        import torch.distributed as dist

        if self._closed:
            return
        self._closed = True
        unregister_group(self.name, self)  # before the buffers go: the C++ ops hold pointers
        torch.cuda.synchronize(self.device)
        self._release()
        dist.barrier(group=self.process_group)
        cudart().cudaFree(ctypes.c_void_p(self._base))
