"""NCCL called directly through ctypes, as vLLM's PyNccl does: one
communicator over the ranks of torch.distributed's default group, and an
out-of-place ncclAllReduce on the current CUDA stream (capturable in a CUDA
graph). For the benchmarks only: the same call the daemon's worker makes,
run by the ranks as a caller's candidate, with no process group around it.

The library is the libnccl.so.2 torch has loaded (dlopen by soname finds it).
"""
from __future__ import annotations

import ctypes

import torch
import torch.distributed as dist

_NCCL_BFLOAT16, _NCCL_FLOAT16, _NCCL_FLOAT32 = 9, 6, 7
_NCCL_SUM = 0
_DTYPES = {torch.bfloat16: _NCCL_BFLOAT16, torch.float16: _NCCL_FLOAT16,
           torch.float32: _NCCL_FLOAT32}


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


class NcclDirect:
    """Every rank of the default group makes one (a collective)."""

    def __init__(self, library: str = "libnccl.so.2") -> None:
        self.lib = ctypes.CDLL(library)
        self.lib.ncclGetErrorString.restype = ctypes.c_char_p
        uid = _UniqueId()
        if dist.get_rank() == 0:
            self._check(self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        box = [bytes(uid.internal) if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(box, src=0)
        ctypes.memmove(uid.internal, box[0], 128)
        self.comm = ctypes.c_void_p()
        self._check(self.lib.ncclCommInitRank(ctypes.byref(self.comm), dist.get_world_size(),
                                              uid, dist.get_rank()), "ncclCommInitRank")
        self._outputs: dict = {}

    def _check(self, r: int, what: str) -> None:
        if r != 0:
            raise RuntimeError(f"{what}: {self.lib.ncclGetErrorString(r).decode()}")

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of x over the ranks into an output kept per shape (out of place,
        as the daemon's all_reduce/nccl)."""
        key = (x.shape, x.dtype, x.device)
        y = self._outputs.get(key)
        if y is None:
            y = self._outputs[key] = torch.empty_like(x)
        self.call(x, y, torch.cuda.current_stream().cuda_stream)
        return y

    def call(self, x: torch.Tensor, y: torch.Tensor, stream: int | None) -> None:
        """ncclAllReduce, sum of x into y (y may be x), on `stream` (a
        cudaStream_t as an int; 0 or None: the legacy default stream)."""
        self._check(self.lib.ncclAllReduce(
            ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
            ctypes.c_size_t(x.numel()), _DTYPES[x.dtype], _NCCL_SUM, self.comm,
            ctypes.c_void_p(stream)), "ncclAllReduce")

    def close(self) -> None:
        if self.comm:
            self.lib.ncclCommDestroy(self.comm)
            self.comm = ctypes.c_void_p()
