"""The daemon's P2P collectives, run in this process: the kernels library
(kernels/autotuned_kernels.h, //kernels:libautotuned_kernels_abi.so) loaded
through its C ABI with ctypes and exposed as torch ops, so that the
implementation the daemon measured as the winner is the code that runs.

    import autotuned.kernels as K
    p2p = K.P2PGroup(tp_group, max_bytes=64 << 20)   # collective; one GPU per rank
    y = torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", p2p.name, 0, 0, 0, "sum")
    run = K.Dispatcher(table, p2p)                   # table from autotuned.vllm.tune_dispatch
    y = run(x)                                       # the table's winner for x's size

Library. load_library(path) opens, in order: `path`, $AUTOTUNED_KERNELS_LIB,
libautotuned_kernels_abi.so next to this package (autotuned/ or its parent).
It checks the ABI major version and that sizeof(at_p2p_args) in the library
equals the ctypes mirror below; a mismatch raises KernelsError naming both.

Group. P2PGroup(process_group) is collective over a torch.distributed group
(NCCL or gloo; one GPU per rank, all ranks on one host). Each rank makes one
cudaMalloc holding its signal buffer (zeroed with at_p2p_signal_init), the
two-shot scratch, the push one-shot's buffer for messages up to
`push_max_bytes` (3 x world slots; prepared with at_p2p_scratch_init) and a
staging input buffer of `max_bytes`; with `ce_max_bytes` > 0 (off by
default) the scratch also holds the copy engine's world copies of a message
of that size; exports it with
cudaIpcGetMemHandle, exchanges the handles with dist.all_gather_object and
opens the peers' with cudaIpcOpenMemHandle (cudaIpcMemLazyEnablePeerAccess).
cudart is the libcudart that torch loaded (found in /proc/self/maps).

Ops (namespace `autotuned`, with fake implementations for torch.compile):
    all_reduce(Tensor x, str impl, str group, int blocks, int threads,
               int chunk_kib, str op) -> Tensor
    all_gather(Tensor x, str impl, str group, int blocks, int threads) -> Tensor
    reduce_scatter(Tensor x, str impl, str group, int blocks, int threads,
                   str op) -> Tensor
`impl` is the daemon's implementation name ("all_reduce/one_shot",
"all_reduce/two_shot", "all_reduce/two_shot_push", "all_reduce/one_shot_push",
"all_reduce/two_shot_chunked", "all_reduce/copy_engine" (with ce_max_bytes),
"all_gather/p2p", "reduce_scatter/p2p";
"<collective>/nccl" runs torch.distributed's own collective); `group` is
P2PGroup.name ("" = the last group made); blocks, threads and chunk_kib 0 =
the daemon catalogue's defaults. Each call copies x
into the staging buffer (the push one-shot and the copy engine read x
itself, when 16-byte aligned) and launches on the current stream; the result
is a
new tensor (all_gather: dim 0 times world; reduce_scatter: dim 0 / world).
Calls on one rank must be ordered (one stream, as the signal buffer is
shared); every rank makes the same calls in the same order; a CUDA graph may
capture them.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import socket
import threading
from typing import Any, Callable, Mapping, Optional, Sequence

# ---- The C ABI --------------------------------------------------------------

ABI_MAJOR = 1  # AT_KERNELS_VERSION // 10000 this module was written against
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

_OPS = {"sum": OP_SUM, "max": OP_MAX, "min": OP_MIN}
# Implementations whose largest message in a P2PGroup is not max_bytes: the
# P2PGroup attribute that holds it.
_OWN_LIMIT = {"all_reduce/one_shot_push": "push_max_bytes",
              "all_reduce/copy_engine": "ce_max_bytes"}
# Implementations that read only the calling rank's input: x itself is passed
# (when 16-byte aligned), not a staged copy.
_READS_OWN_INPUT = (ALGO_ALL_REDUCE_ONE_SHOT_PUSH, ALGO_ALL_REDUCE_COPY_ENGINE)
_VOIDPP = ctypes.POINTER(ctypes.c_void_p)


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
        ("peer_inputs", _VOIDPP),       # const void* const*
        ("output", ctypes.c_void_p),
        ("peer_scratch", _VOIDPP),      # void* const*
        ("scratch_bytes", ctypes.c_int64),
        ("peer_signals", _VOIDPP),      # void* const*
        ("blocks", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("chunk_elems", ctypes.c_int64),
        ("spin_limit", ctypes.c_int64),
    ]


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
    """A daemon implementation this module runs: its algo and catalogue
    defaults (daemon/backend/cuda/cuda_catalogue.cc)."""

    name: str
    collective: str
    algo: int            # 0: torch.distributed's collective
    blocks: int = 0
    threads: int = 0
    chunk_kib: int = 0


IMPLEMENTATIONS: dict[str, Implementation] = {i.name: i for i in (
    Implementation("all_reduce/nccl", "all_reduce", 0),
    Implementation("all_reduce/one_shot", "all_reduce", ALGO_ALL_REDUCE_ONE_SHOT, 32, 512),
    Implementation("all_reduce/two_shot", "all_reduce", ALGO_ALL_REDUCE_TWO_SHOT, 32, 512),
    Implementation("all_reduce/two_shot_push", "all_reduce", ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                   32, 512),
    Implementation("all_reduce/one_shot_push", "all_reduce", ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                   32, 512),
    Implementation("all_reduce/copy_engine", "all_reduce", ALGO_ALL_REDUCE_COPY_ENGINE,
                   64, 1024, 8192),
    Implementation("all_reduce/two_shot_chunked", "all_reduce",
                   ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, 64, 1024, 2048),
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

class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_CUDA_IPC_LAZY_ENABLE_PEER_ACCESS = 1
_CUDA_MEMCPY_DEVICE_TO_DEVICE = 3
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
            ("cudaIpcGetMemHandle", c_int, [ctypes.POINTER(_IpcHandle), c_vp]),
            ("cudaIpcOpenMemHandle", c_int, [ctypes.POINTER(c_vp), _IpcHandle, ctypes.c_uint]),
            ("cudaIpcCloseMemHandle", c_int, [c_vp]),
            ("cudaGetErrorString", ctypes.c_char_p, [c_int])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    _CUDART = lib
    return lib


def _cuda_check(rc: int, what: str) -> None:
    if rc != 0:
        msg = cudart().cudaGetErrorString(rc)
        raise KernelsError(f"{what}: {msg.decode() if msg else rc} ({rc})")


def _align(n: int, a: int = 256) -> int:
    return (n + a - 1) // a * a


# ---- The group ----------------------------------------------------------------

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
    if not name:
        if not _LAST_GROUP:
            raise KernelsError("no P2PGroup: make one with autotuned.kernels.P2PGroup(pg)")
        name = _LAST_GROUP[0]
    try:
        return _GROUPS[name]
    except KeyError:
        raise KernelsError(f"no P2PGroup named {name!r} (have: {', '.join(_GROUPS)})") from None


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
        self.name = name or ("p2p:" + (getattr(process_group, "group_name", None)
                                       or dist.group.WORLD.group_name))
        # Scratch for the two-shots up to max_bytes (either element size; the
        # push two-shot's is about max_bytes, `world` slices) and the chunked
        # two-shot with chunks up to chunk_kib.
        scratch = 0
        for dt, size in ((DTYPE_FLOAT32, 4), (DTYPE_BFLOAT16, 2)):
            n = self.max_bytes // size
            for algo in (ALGO_ALL_REDUCE_TWO_SHOT, ALGO_ALL_REDUCE_TWO_SHOT_PUSH):
                scratch = max(scratch, self.lib.scratch_bytes(algo, dt, self.world, n))
            vec = 16 // size
            chunk = max(vec, chunk_kib * 1024 // size // vec * vec)
            scratch = max(scratch, self.lib.scratch_bytes(ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                                                          dt, self.world, n, chunk))
        # The copy engine's world copies of its largest message (0: none).
        self.ce_max_bytes = self._within_max_bytes(ce_max_bytes)
        if self.ce_max_bytes:
            scratch = max(scratch, self.lib.scratch_bytes(
                ALGO_ALL_REDUCE_COPY_ENGINE, DTYPE_BFLOAT16, self.world, self.ce_max_bytes // 2))
        self.scratch_bytes = _align(scratch)
        # The push one-shot's own buffer: 3 x world slots of its largest
        # message, so by default only up to 8 MiB (0: none).
        push_max = min(self.max_bytes, 8 << 20) if push_max_bytes is None else push_max_bytes
        self.push_max_bytes = self._within_max_bytes(push_max)
        self.push_bytes = _align(self.lib.scratch_bytes(
            ALGO_ALL_REDUCE_ONE_SHOT_PUSH, DTYPE_BFLOAT16, self.world,
            self.push_max_bytes // 2)) if self.push_max_bytes else 0
        self.signal_offset = 0
        self.scratch_offset = _align(self.lib.signal_bytes)
        self.push_offset = self.scratch_offset + self.scratch_bytes
        self.staging_offset = self.push_offset + self.push_bytes
        self.total_bytes = self.staging_offset + self.max_bytes

        rt = cudart()
        _cuda_check(rt.cudaSetDevice(self.device.index), "cudaSetDevice")
        base = ctypes.c_void_p()
        _cuda_check(rt.cudaMalloc(ctypes.byref(base), self.total_bytes),
                    f"cudaMalloc({self.total_bytes})")
        self._base = int(base.value)
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
            handle = _IpcHandle()
            _cuda_check(rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(self._base)),
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
                h = _IpcHandle()
                ctypes.memmove(ctypes.addressof(h), e["handle"], 64)
                ptr = ctypes.c_void_p()
                _cuda_check(rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), h,
                                                    _CUDA_IPC_LAZY_ENABLE_PEER_ACCESS),
                            f"cudaIpcOpenMemHandle(rank {r}, device {e['device']})")
                self._opened.append(int(ptr.value))
                bases.append(int(ptr.value))
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
            a.peer_inputs = ctypes.cast(self._peer_inputs, _VOIDPP)
        else:
            own = (ctypes.c_void_p * self.world)()
            own[self.rank] = input_ptr
            a.peer_inputs = ctypes.cast(own, _VOIDPP)  # keeps `own` alive with `a`
        a.output = output_ptr
        if algo in (ALGO_ALL_REDUCE_TWO_SHOT, ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                    ALGO_ALL_REDUCE_TWO_SHOT_PUSH, ALGO_ALL_REDUCE_COPY_ENGINE):
            a.peer_scratch = ctypes.cast(self._peer_scratch, _VOIDPP)
            a.scratch_bytes = self.scratch_bytes
        elif algo == ALGO_ALL_REDUCE_ONE_SHOT_PUSH:
            a.peer_scratch = ctypes.cast(self._peer_push, _VOIDPP)
            a.scratch_bytes = self.push_bytes
        a.peer_signals = ctypes.cast(self._peer_signals, _VOIDPP)
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
                f"({_OWN_LIMIT.get(impl.name, 'max_bytes')})")
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
        if impl.algo in (ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, ALGO_ALL_REDUCE_COPY_ENGINE):
            chunk_elems = max(vec, (chunk_kib or impl.chunk_kib) * 1024 // size // vec * vec)
        x = x.contiguous()
        # Own input only: x itself, unless misaligned.
        direct = impl.algo in _READS_OWN_INPUT and x.data_ptr() % 16 == 0
        a = self.args(impl.algo, dtype, count, out.data_ptr(), op=op_code,
                      blocks=blocks or impl.blocks, threads=threads or impl.threads,
                      chunk_elems=chunk_elems, input_ptr=x.data_ptr() if direct else None)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        if nbytes and not direct:
            _cuda_check(cudart().cudaMemcpyAsync(
                ctypes.c_void_p(self._base + self.staging_offset), ctypes.c_void_p(x.data_ptr()),
                nbytes, _CUDA_MEMCPY_DEVICE_TO_DEVICE, ctypes.c_void_p(stream or None)),
                "cudaMemcpyAsync (staging)")
        self.lib.launch(impl.algo, a, stream)

    def limit(self, impl: Implementation) -> int:
        """The largest tensor (bytes) `impl` runs on in this group."""
        return int(getattr(self, _OWN_LIMIT.get(impl.name, "max_bytes")))

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
        torch.cuda.synchronize(self.device)
        self._release()
        dist.barrier(group=self.process_group)
        cudart().cudaFree(ctypes.c_void_p(self._base))
        if _GROUPS.get(self.name) is self:
            del _GROUPS[self.name]
            if _LAST_GROUP == [self.name]:
                _LAST_GROUP.clear()


# ---- torch ops ----------------------------------------------------------------

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


# ---- Winner dispatch ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Choice:
    """A candidate spec ("impl:blocks=16,threads=256") as op arguments."""

    spec: str
    impl: str
    blocks: int = 0
    threads: int = 0
    chunk_kib: int = 0


def parse_spec(spec: str) -> Choice:
    """A Choice from a candidate spec as the daemon and autotuned.vllm write it."""
    impl, _, rest = spec.strip().partition(":")
    params: dict[str, int] = {}
    for piece in filter(None, rest.split(",")):
        k, eq, v = piece.partition("=")
        if not eq:
            raise KernelsError(f"candidate {spec!r}: parameter {piece!r} is not name=int")
        params[k.strip()] = int(v)
    unknown = set(params) - {"blocks", "threads", "chunk_kib"}
    if unknown:
        raise KernelsError(f"candidate {spec!r}: unknown parameters {sorted(unknown)}")
    return Choice(spec, impl, params.get("blocks", 0), params.get("threads", 0),
                  params.get("chunk_kib", 0))


class Dispatcher:
    """Runs the table's winner for each tensor: table.pick(x) -> the op.

        run = Dispatcher(table, p2p)     # table: autotuned.vllm.DispatchTable
        y = run(x)

    Every candidate of the table must be one this module runs, or be given in
    `others` (spec or implementation name -> callable(x) -> Tensor), checked
    when the Dispatcher is made. Tensors larger than the group's staging
    buffer (for the push one-shot and the copy engine, push_max_bytes and
    ce_max_bytes) go to torch.distributed's collective ("<collective>/nccl").
    `p2p` may be None when every candidate is NCCL or in `others`.
    """

    def __init__(self, table: Any, p2p: Optional[P2PGroup] = None, *, op: str = "sum",
                 others: Optional[Mapping[str, Callable[[Any], Any]]] = None,
                 process_group: Any = None) -> None:
        register_ops()
        self.table = table
        self.collective = table.collective
        self.p2p = p2p
        self.op = op
        self.others = dict(others or {})
        if p2p is None:
            # NCCL-only dispatch still needs the group the ops find.
            self._group_name = f"nccl-only:{id(self)}"
            register_group(self._group_name, _NcclOnly(process_group), default=False)
        else:
            self._group_name = p2p.name
        # A DispatchTable's sizes as plain ints: the pick traces in torch.compile.
        sizes = list(getattr(table, "sizes", None) or [])
        # Candidates that win no size (e.g. the P2P kernels on one rank, ruled
        # out) need not be runnable here: calling one says why it cannot run.
        winners = {s.winner_index for s in sizes} if sizes else None
        self._runs: list[Callable[[Any], Any]] = [
            self._make(s) if winners is None or i in winners else self._make_or_refuse(s)
            for i, s in enumerate(table.candidates)]
        self._fallback = self._make(f"{self.collective}/nccl")
        # The largest tensor each candidate runs on (bytes; None: any): the
        # staging buffer's, or the implementation's own (_OWN_LIMIT).
        self._limits: list[Optional[int]] = [None] * len(table.candidates)
        if p2p is not None:
            for i, s in enumerate(table.candidates):
                own = None if s in self.others else _OWN_LIMIT.get(s.split(":", 1)[0])
                self._limits[i] = int(getattr(p2p, own or "max_bytes"))
        self._counts = tuple(s.count for s in sizes)
        self._winners = tuple(s.winner_index for s in sizes)
        if self._counts:
            from autotuned.vllm import nearest_winner
            self._nearest = nearest_winner

    def pick_index(self, x: Any) -> int:
        """The table's pick for x (index in table.candidates)."""
        if not self._counts:
            return self.table.pick_index(x)
        return self._nearest(self._counts, self._winners, self.table.count_of(x))

    def _make_or_refuse(self, spec: str) -> Callable[[Any], Any]:
        try:
            return self._make(spec)
        except KernelsError as e:
            why = str(e)

            def refuse(x: Any) -> Any:
                raise KernelsError(f"{why} (it wins no size of the table)")
            return refuse

    def _make(self, spec: str) -> Callable[[Any], Any]:
        import torch

        if spec in self.others:
            return self.others[spec]
        c = parse_spec(spec)
        if c.impl in self.others:
            return self.others[c.impl]
        impl = implementation(c.impl, self.collective)
        if impl.algo != 0 and self.p2p is None:
            raise KernelsError(f"candidate {spec!r} runs on the P2P kernels: pass a P2PGroup")
        g = self._group_name
        if self.collective == "all_reduce":
            return lambda x: torch.ops.autotuned.all_reduce(x, c.impl, g, c.blocks, c.threads,
                                                            c.chunk_kib, self.op)
        if self.collective == "all_gather":
            return lambda x: torch.ops.autotuned.all_gather(x, c.impl, g, c.blocks, c.threads)
        return lambda x: torch.ops.autotuned.reduce_scatter(x, c.impl, g, c.blocks, c.threads,
                                                            self.op)

    def _too_large(self, x: Any, i: int) -> bool:
        limit = self._limits[i]
        return limit is not None and x.numel() * x.element_size() > limit

    def pick(self, x: Any) -> str:
        """The candidate spec that runs for x."""
        i = self.pick_index(x)
        return f"{self.collective}/nccl" if self._too_large(x, i) else self.table.candidates[i]

    def __call__(self, x: Any) -> Any:
        i = self.pick_index(x)
        return self._fallback(x) if self._too_large(x, i) else self._runs[i](x)


class _NcclOnly:
    """The group the ops find when every candidate is torch.distributed's."""

    def __init__(self, process_group: Any) -> None:
        import torch.distributed as dist
        self.process_group = process_group
        self.world = dist.get_world_size(process_group)


try:  # the ops exist as soon as the module is imported, where torch is
    import torch as _torch  # noqa: F401
except ImportError:  # pragma: no cover - the library part works without torch
    pass
else:
    register_ops()
