"""The C libraries behind autotuned.kernels, driven through ctypes: the
kernels library (kernels/autotuned_kernels.h, libautotuned_kernels_abi.so)
with a mirror of its ABI, and the libcudart that torch loaded.

load_library(path) opens, in order: `path`, $AUTOTUNED_KERNELS_LIB,
libautotuned_kernels_abi.so next to this package (autotuned/ or its parent).
It checks the ABI major version and that sizeof(at_p2p_args) in the library
equals the ctypes mirror AtP2PArgs; a mismatch raises KernelsError naming
both. Nothing here needs torch or a GPU: cudart starts only on a CUDA call.

IMPLEMENTATIONS lists the daemon implementations that run in this process
(the catalogue's names and defaults, daemon/measure/backend/cuda/cuda_catalogue.cc).
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
from collections.abc import Sequence
from typing import Optional

ABI_MAJOR = 2  # AT_KERNELS_VERSION // 10000 this module was written against
LIB_NAME = "libautotuned_kernels_abi.so"
LIB_ENV = "AUTOTUNED_KERNELS_LIB"

AT_OK = 0
DTYPE_FLOAT32, DTYPE_BFLOAT16, DTYPE_FLOAT16 = 1, 2, 3
OP_SUM, OP_MAX, OP_MIN = 1, 2, 3
ALGO_ALL_REDUCE_ONE_SHOT = 1
ALGO_ALL_REDUCE_TWO_SHOT = 2
ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED = 3
ALGO_ALL_GATHER = 4
ALGO_REDUCE_SCATTER = 5
ALGO_ALL_REDUCE_TWO_SHOT_PUSH = 6  # since ABI 1.1 (AT_KERNELS_VERSION 10100)
ALGO_ALL_REDUCE_ONE_SHOT_PUSH = 7  # since ABI 1.2 (bfloat16 and float16 only)
ALGO_ALL_REDUCE_COPY_ENGINE = 8    # since ABI 1.2
ALGO_ALL_TO_ALL = 9                # since ABI 2.0 (even splits)
ALGO_BROADCAST = 10                # since ABI 2.0 (at_p2p_args.root)
ALGO_ALL_REDUCE_PUSH_PIPELINED = 11  # since ABI 2.2 (reads its own input only)
ALGO_BROADCAST_PUSH_PIPELINED = 12   # since ABI 2.2
ALGO_ALL_TO_ALL_V = 13  # since ABI 2.3 (uneven splits: Library.all_to_all_v, not launch)
ALL_TO_ALL_V_VERSION = 20300  # the first AT_KERNELS_VERSION with it
ALGO_ALL_REDUCE_RING = 14  # since ABI 2.4 (reads its own input only)
ALGO_ALL_REDUCE_CE_RING = 15  # since ABI 2.4 (the copy engine beside the ring; own input only)

VOIDPP = ctypes.POINTER(ctypes.c_void_p)


class KernelsError(RuntimeError):
    """The kernels library is missing or does not match, or a call failed."""


class AtP2PArgs(ctypes.Structure):
    """Mirror of at_p2p_args (autotuned_kernels.h), field for field."""

    _fields_ = [
        ("world", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("count", ctypes.c_int64),
        ("peer_inputs", VOIDPP),       # const void* const*
        ("output", ctypes.c_void_p),
        ("peer_scratch", VOIDPP),      # void* const*
        ("scratch_bytes", ctypes.c_int64),
        ("peer_signals", VOIDPP),      # void* const*
        ("blocks", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("chunk_elems", ctypes.c_int64),
        ("spin_limit", ctypes.c_int64),
        ("root", ctypes.c_int),        # broadcast (since ABI 2.0)
    ]


class AtP2PGroupSizes(ctypes.Structure):
    """Mirror of at_p2p_group_sizes."""

    _fields_ = [("scratch_bytes", ctypes.c_int64), ("push_bytes", ctypes.c_int64)]


class AtP2PLimits(ctypes.Structure):
    """Mirror of at_p2p_limits."""

    _fields_ = [
        ("min_world", ctypes.c_int),
        ("max_world", ctypes.c_int),
        ("max_blocks", ctypes.c_int),
        ("max_threads", ctypes.c_int),
        ("alignment", ctypes.c_int),
        ("signal_alignment", ctypes.c_int),
        ("pipeline_depth", ctypes.c_int),
        ("signal_bytes", ctypes.c_int64),
    ]


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A daemon implementation that runs in this process: its algo and catalogue
    defaults (daemon/measure/backend/cuda/cuda_catalogue.cc)."""

    name: str
    collective: str
    algo: int            # 0: torch.distributed's collective
    blocks: int = 0
    threads: int = 0
    chunk_kib: int = 0
    # The P2PGroup attribute holding the largest message (bytes) it runs on.
    max_bytes_attr: str = "max_bytes"


IMPLEMENTATIONS: dict[str, Implementation] = {i.name: i for i in (
    Implementation("all_reduce/nccl", "all_reduce", 0),
    Implementation("all_reduce/one_shot", "all_reduce", ALGO_ALL_REDUCE_ONE_SHOT, 32, 512),
    Implementation("all_reduce/two_shot", "all_reduce", ALGO_ALL_REDUCE_TWO_SHOT, 32, 512),
    Implementation("all_reduce/two_shot_push", "all_reduce", ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                   32, 512),
    Implementation("all_reduce/one_shot_push", "all_reduce", ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                   32, 512, max_bytes_attr="push_max_bytes"),
    Implementation("all_reduce/copy_engine", "all_reduce", ALGO_ALL_REDUCE_COPY_ENGINE,
                   64, 1024, 8192, max_bytes_attr="ce_max_bytes"),
    Implementation("all_reduce/two_shot_chunked", "all_reduce",
                   ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, 64, 1024, 2048),
    Implementation("all_reduce/push_pipelined", "all_reduce", ALGO_ALL_REDUCE_PUSH_PIPELINED,
                   64, 512, 2048),
    Implementation("all_reduce/p2p_ring", "all_reduce", ALGO_ALL_REDUCE_RING, 132, 1024),
    Implementation("all_reduce/ce_ring", "all_reduce", ALGO_ALL_REDUCE_CE_RING,
                   100, 1024, 32768, max_bytes_attr="ce_max_bytes"),
    Implementation("all_gather/nccl", "all_gather", 0),
    Implementation("all_gather/p2p", "all_gather", ALGO_ALL_GATHER, 32, 512),
    Implementation("reduce_scatter/nccl", "reduce_scatter", 0),
    Implementation("reduce_scatter/p2p", "reduce_scatter", ALGO_REDUCE_SCATTER, 32, 512),
)}


def implementation(name: str, collective: Optional[str] = None) -> Implementation:
    """The Implementation called `name`; KernelsError for one this module
    cannot run, or of another collective."""
    impl = IMPLEMENTATIONS.get(name)
    if impl is None:
        raise KernelsError(f"implementation {name!r} does not run in-process "
                           f"(known: {', '.join(IMPLEMENTATIONS)})")
    if collective is not None and impl.collective != collective:
        raise KernelsError(f"implementation {name!r} is an {impl.collective}, not an "
                           f"{collective}")
    return impl


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_i64, c_vp = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    args_p = ctypes.POINTER(AtP2PArgs)
    sig = {
        "at_kernels_version": (c_int, []),
        "at_error_string": (ctypes.c_char_p, [c_int]),
        "at_p2p_get_limits": (None, [ctypes.POINTER(AtP2PLimits)]),
        "at_p2p_algo_name": (ctypes.c_char_p, [c_int]),
        "at_p2p_args_size": (ctypes.c_size_t, []),
        "at_p2p_check_args": (c_int, [c_int, args_p, ctypes.c_char_p, ctypes.c_size_t]),
        "at_p2p_scratch_bytes": (c_i64, [c_int, c_int, c_int, c_i64, c_i64]),
        "at_p2p_group_sizes_for": (c_int, [c_int, c_i64, c_i64, c_i64, c_i64,
                                           ctypes.POINTER(AtP2PGroupSizes)]),
        "at_p2p_is_vectorized": (c_int, [c_int, args_p]),
        "at_p2p_launch": (c_int, [c_int, args_p, c_vp]),
        "at_p2p_signal_bytes": (c_i64, []),
        "at_p2p_signal_init": (c_int, [c_vp, c_vp]),
        "at_p2p_signal_error": (c_int, [c_vp, c_vp, ctypes.POINTER(ctypes.c_uint32)]),
        "at_p2p_scratch_init": (c_int, [c_int, c_vp, c_i64, c_vp]),
    }
    for name, (restype, argtypes) in sig.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise KernelsError(f"{lib._name}: no symbol {name}: not the autotuned kernels "
                               "library, or an older one") from None
        fn.restype, fn.argtypes = restype, argtypes
    # Since ABI 2.3; an older library of the same major has none (Library
    # says so when they are called).
    splits_p = ctypes.POINTER(c_i64)
    since_23 = {
        "at_p2p_all_to_all_v": (c_int, [args_p, splits_p, c_vp]),
        "at_p2p_check_all_to_all_v": (c_int, [args_p, splits_p, ctypes.c_char_p,
                                              ctypes.c_size_t]),
    }
    for name, (restype, argtypes) in since_23.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = restype, argtypes


class Library:
    """The loaded kernels library with its ABI checked."""

    def __init__(self, path: str, lib: ctypes.CDLL) -> None:
        self.path = path
        self.lib = lib
        _declare(lib)
        self.version = int(lib.at_kernels_version())
        check_abi(self.version, int(lib.at_p2p_args_size()), path)
        limits = AtP2PLimits()
        lib.at_p2p_get_limits(ctypes.byref(limits))
        self.limits = limits
        self.signal_bytes = int(lib.at_p2p_signal_bytes())

    def error_string(self, code: int) -> str:
        s = self.lib.at_error_string(code)
        return s.decode() if s else f"error {code}"

    def algo_name(self, algo: int) -> Optional[str]:
        s = self.lib.at_p2p_algo_name(algo)
        return s.decode() if s else None

    def check_args(self, algo: int, args: AtP2PArgs) -> Optional[str]:
        """None when the launch would be accepted, else the library's reason."""
        buf = ctypes.create_string_buffer(256)
        rc = self.lib.at_p2p_check_args(algo, ctypes.byref(args), buf, len(buf))
        return None if rc == AT_OK else (buf.value.decode() or self.error_string(rc))

    def scratch_bytes(self, algo: int, dtype: int, world: int, count: int,
                      chunk_elems: int = 0) -> int:
        return int(self.lib.at_p2p_scratch_bytes(algo, dtype, world, count, chunk_elems))

    def group_sizes(self, world: int, max_bytes: int, chunk_bytes: int, ce_max_bytes: int,
                    push_max_bytes: int) -> tuple[int, int]:
        """(scratch bytes, push one-shot buffer bytes) of a group of `world`
        ranks for messages up to max_bytes (at_p2p_group_sizes_for)."""
        out = AtP2PGroupSizes()
        rc = self.lib.at_p2p_group_sizes_for(world, max_bytes, chunk_bytes, ce_max_bytes,
                                             push_max_bytes, ctypes.byref(out))
        if rc != AT_OK:
            raise KernelsError(f"at_p2p_group_sizes_for(world {world}, max_bytes {max_bytes}, "
                               f"chunk_bytes {chunk_bytes}, ce_max_bytes {ce_max_bytes}, "
                               f"push_max_bytes {push_max_bytes}): {self.error_string(rc)}")
        return int(out.scratch_bytes), int(out.push_bytes)

    def _splits(self, args: AtP2PArgs, split_counts: Sequence[int]) -> ctypes.Array:
        """split_counts as the C array the all_to_all_v functions read (world *
        world entries); KernelsError for a library older than ABI 2.3 or a
        matrix of another size."""
        if self.version < ALL_TO_ALL_V_VERSION:
            raise KernelsError(f"{self.path}: ABI version {self.version} has no all_to_all_v "
                               f"(since {ALL_TO_ALL_V_VERSION})")
        n = args.world * args.world
        if len(split_counts) != n:
            raise KernelsError(f"split_counts has {len(split_counts)} entries, world "
                               f"{args.world} needs {n}")
        return (ctypes.c_int64 * n)(*split_counts)

    def check_all_to_all_v(self, args: AtP2PArgs, split_counts: Sequence[int]) -> Optional[str]:
        """None when at_p2p_all_to_all_v would accept `args` and the split
        matrix (row-major, split_counts[src * world + dst]), else the
        library's reason."""
        buf = ctypes.create_string_buffer(256)
        rc = self.lib.at_p2p_check_all_to_all_v(ctypes.byref(args),
                                                self._splits(args, split_counts), buf,
                                                len(buf))
        return None if rc == AT_OK else (buf.value.decode() or self.error_string(rc))

    def all_to_all_v(self, args: AtP2PArgs, split_counts: Sequence[int], stream: int) -> None:
        """at_p2p_all_to_all_v: the all_to_all of uneven splits (args.count
        is ignored); KernelsError with the reason when it is rejected."""
        rc = self.lib.at_p2p_all_to_all_v(ctypes.byref(args), self._splits(args, split_counts),
                                          ctypes.c_void_p(stream or None))
        if rc != AT_OK:
            reason = self.check_all_to_all_v(args, split_counts) if rc == 1 else None
            raise KernelsError(f"at_p2p_all_to_all_v: {reason or self.error_string(rc)}")

    def launch(self, algo: int, args: AtP2PArgs, stream: int) -> None:
        rc = self.lib.at_p2p_launch(algo, ctypes.byref(args), ctypes.c_void_p(stream or None))
        if rc != AT_OK:
            reason = self.check_args(algo, args) if rc == 1 else None
            raise KernelsError(f"at_p2p_launch({self.algo_name(algo)}): "
                               f"{reason or self.error_string(rc)}")


def check_abi(version: int, args_size: int, path: str = LIB_NAME) -> None:
    """KernelsError unless the library's major version and sizeof(at_p2p_args)
    match this module's."""
    if version // 10000 != ABI_MAJOR:
        raise KernelsError(f"{path}: ABI version {version} (major {version // 10000}); "
                           f"this module needs major {ABI_MAJOR}")
    if args_size != ctypes.sizeof(AtP2PArgs):
        raise KernelsError(f"{path}: sizeof(at_p2p_args) is {args_size} in the library but "
                           f"{ctypes.sizeof(AtP2PArgs)} in autotuned.kernels.AtP2PArgs: "
                           "the struct changed; update the mirror")


def library_candidates(path: Optional[str] = None) -> list[str]:
    """Where load_library looks, in order (only `path` when one is given)."""
    if path:
        return [path]
    out = []
    if os.environ.get(LIB_ENV):
        out.append(os.environ[LIB_ENV])
    here = os.path.dirname(os.path.abspath(__file__))
    out += [os.path.join(here, LIB_NAME), os.path.join(os.path.dirname(here), LIB_NAME)]
    return out


_LIB: Optional[Library] = None
_LIB_LOCK = threading.Lock()


def load_library(path: Optional[str] = None) -> Library:
    """The kernels library (loaded once per process unless `path` names
    another file); see the module docstring for where it is looked for."""
    global _LIB
    with _LIB_LOCK:
        if path is None and _LIB is not None:
            return _LIB
        tried = library_candidates(path)
        for p in tried:
            if not os.path.exists(p):
                continue
            p = os.path.abspath(p)
            if _LIB is not None and _LIB.path == p:
                return _LIB
            try:
                lib = ctypes.CDLL(p)
            except OSError as e:
                raise KernelsError(f"cannot load {p}: {e}") from None
            loaded = Library(p, lib)
            if _LIB is None or path is None:
                _LIB = loaded
            return loaded
        raise KernelsError(f"{LIB_NAME} not found (tried: {', '.join(tried)}); build it with "
                           f"`bazel build //kernels:{LIB_NAME}` and pass its path or set "
                           f"${LIB_ENV}")


# ---- cudart (the one torch loaded) ------------------------------------------


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


CUDA_IPC_LAZY_ENABLE_PEER_ACCESS = 1
CUDA_MEMCPY_DEVICE_TO_DEVICE = 3
_CUDART: Optional[ctypes.CDLL] = None


def _loaded_cudart() -> Optional[str]:
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "/libcudart.so" in path:
                    return path
    except OSError:
        pass
    return None


def cudart() -> ctypes.CDLL:
    """libcudart as a ctypes library: the copy torch loaded when there is
    one (so both share one runtime), else libcudart.so.13 / .12 / .so."""
    global _CUDART
    if _CUDART is not None:
        return _CUDART
    names = [n for n in (_loaded_cudart(),) if n] + [
        "libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    errors = []
    for n in names:
        try:
            lib = ctypes.CDLL(n)
            break
        except OSError as e:
            errors.append(f"{n}: {e}")
    else:
        raise KernelsError("no libcudart: " + "; ".join(errors))
    c_int, c_vp, c_sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
    for name, restype, argtypes in (
            ("cudaSetDevice", c_int, [c_int]),
            ("cudaGetDevice", c_int, [ctypes.POINTER(c_int)]),
            ("cudaMalloc", c_int, [ctypes.POINTER(c_vp), c_sz]),
            ("cudaFree", c_int, [c_vp]),
            ("cudaMemcpyAsync", c_int, [c_vp, c_vp, c_sz, c_int, c_vp]),
            ("cudaDeviceSynchronize", c_int, []),
            ("cudaIpcGetMemHandle", c_int, [ctypes.POINTER(IpcHandle), c_vp]),
            ("cudaIpcOpenMemHandle", c_int, [ctypes.POINTER(c_vp), IpcHandle, ctypes.c_uint]),
            ("cudaIpcCloseMemHandle", c_int, [c_vp]),
            ("cudaGetErrorString", ctypes.c_char_p, [c_int])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    _CUDART = lib
    return lib


def cuda_check(rc: int, what: str) -> None:
    if rc != 0:
        msg = cudart().cudaGetErrorString(rc)
        raise KernelsError(f"{what}: {msg.decode() if msg else rc} ({rc})")
