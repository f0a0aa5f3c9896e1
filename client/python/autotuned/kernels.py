"""The daemon's P2P collectives, run in this process: the kernels library
(kernels/autotuned_kernels.h, //kernels:libautotuned_kernels_abi.so) loaded
through its C ABI with ctypes and exposed as torch ops, so that the
implementation the daemon measured as the winner is the code that runs.

    import autotuned.kernels as K
    p2p = K.P2PGroup(tp_group, max_bytes=64 << 20)   # collective; one GPU per rank
    y = torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", p2p.name, 0, 0, 0, "sum")
    run = K.Dispatcher(table, p2p)                   # table from autotuned.vllm.tune_dispatch
    y = run(x)                                       # the table's winner for x's size

This module gathers the public names of the modules that do the work, and
registers the ops when imported where torch is:
  autotuned.kernels_lib  the library (load_library, the ABI mirror, KernelsError),
                         the implementations that run here (IMPLEMENTATIONS),
                         and cudart;
  autotuned.p2p          P2PGroup: peer buffers through CUDA IPC, and what a
                         launch needs (call order, streams, CUDA graphs);
  autotuned.ops          the ops torch.ops.autotuned.{all_reduce, all_gather,
                         reduce_scatter} (their schemas, fake implementations
                         for torch.compile) and the registry of groups they find;
  autotuned.dispatch     Dispatcher: a dispatch table's winner per tensor.
None of them needs grpc or protobuf.
"""
from __future__ import annotations

from autotuned.dispatch import Choice, Dispatcher, nearest_winner, parse_spec
from autotuned.kernels_lib import (
    ABI_MAJOR,
    ALGO_ALL_GATHER,
    ALGO_ALL_REDUCE_CE_RING,
    ALGO_ALL_REDUCE_COPY_ENGINE,
    ALGO_ALL_REDUCE_ONE_SHOT,
    ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
    ALGO_ALL_REDUCE_PUSH_PIPELINED,
    ALGO_ALL_REDUCE_RING,
    ALGO_ALL_REDUCE_TWO_SHOT,
    ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
    ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
    ALGO_ALL_TO_ALL,
    ALGO_ALL_TO_ALL_V,
    ALGO_BROADCAST,
    ALGO_BROADCAST_PUSH_PIPELINED,
    ALGO_REDUCE_SCATTER,
    ALL_TO_ALL_V_VERSION,
    AT_OK,
    DTYPE_BFLOAT16,
    DTYPE_FLOAT16,
    DTYPE_FLOAT32,
    IMPLEMENTATIONS,
    LIB_ENV,
    LIB_NAME,
    OP_MAX,
    OP_MIN,
    OP_SUM,
    AtP2PArgs,
    AtP2PLimits,
    Implementation,
    KernelsError,
    Library,
    check_abi,
    cudart,
    implementation,
    library_candidates,
    load_library,
)
from autotuned.ops import get_group, group_names, register_group, register_ops, unregister_group
from autotuned.p2p import P2PGroup

__all__ = [
    "ABI_MAJOR", "ALL_TO_ALL_V_VERSION", "ALGO_ALL_GATHER", "ALGO_ALL_REDUCE_CE_RING",
    "ALGO_ALL_REDUCE_COPY_ENGINE",
    "ALGO_ALL_REDUCE_ONE_SHOT",
    "ALGO_ALL_REDUCE_ONE_SHOT_PUSH", "ALGO_ALL_REDUCE_PUSH_PIPELINED", "ALGO_ALL_REDUCE_RING",
    "ALGO_ALL_REDUCE_TWO_SHOT",
    "ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED", "ALGO_ALL_REDUCE_TWO_SHOT_PUSH", "ALGO_ALL_TO_ALL",
    "ALGO_ALL_TO_ALL_V", "ALGO_BROADCAST", "ALGO_BROADCAST_PUSH_PIPELINED", "ALGO_REDUCE_SCATTER",
    "AT_OK", "DTYPE_BFLOAT16", "DTYPE_FLOAT16", "DTYPE_FLOAT32", "IMPLEMENTATIONS", "LIB_ENV",
    "LIB_NAME", "OP_MAX", "OP_MIN", "OP_SUM", "AtP2PArgs", "AtP2PLimits", "Choice", "Dispatcher",
    "Implementation", "KernelsError", "Library", "P2PGroup", "check_abi", "cudart", "get_group",
    "group_names", "implementation", "library_candidates", "load_library", "nearest_winner",
    "parse_spec", "register_group", "register_ops", "unregister_group",
]

try:  # the ops exist as soon as the module is imported, where torch is
    import torch as _torch  # noqa: F401
except ImportError:  # pragma: no cover - the library part works without torch
    pass
else:
    register_ops()
