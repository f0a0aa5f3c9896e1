"""Compiles that lower their graph again every time, with the compiled C++
kernels shared: for the Inductor tests whose point is the daemon's
selections, not Inductor's own caches.

torch._inductor.utils.fresh_cache() gives each compile an empty cache
directory, so every C++ kernel is compiled again with g++ (seconds each, on
every rank). relowering() keeps the cache directory, shared() names one for
every rank and case of a test process, and turns off the two caches that
would skip lowering, and with it the selections the tests check:
  * Inductor's FX graph cache (config.fx_graph_cache, read by
    compile_fx._compile_fx_inner: with it off, no lookup and no save);
  * AOTAutograd's cache (functorch config.enable_autograd_cache, read by
    should_use_local_autograd_cache before aot_autograd's try_load).
A C++ kernel is still found in the code cache by the digest of its source
and compile command (CppCodeCache.load_async; _worker_compile_cpp builds
under a file lock only what is not on disk yet), so the ranks compile each
kernel once between them, and a case compiles only kernels no earlier one
did. The in-memory caches are cleared before and after, as fresh_cache
clears them.

isa_probes_shared() (which relowering() calls) shares another cost of
every process's first compile between the processes of a test: Inductor
probes the CPU's vector ISA extensions (AVX512-BF16, VNNI, AMX where the
CPU reports them) by building a small library and loading it in a new
Python that imports torch, about 1.5 s of CPU each, and keeps the answer
in memory only. With it, the first process of the test ($TEST_TMPDIR)
probes, under a file lock, and writes each answer down; the others read
it. The answers are the probes' own, on the same machine, torch and
compiler.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any


@functools.cache
def shared() -> str:
    """The Inductor cache directory of the cases that use relowering(): one
    per test process (TORCHINDUCTOR_CACHE_DIR in the ranks' environment)."""
    return tempfile.mkdtemp(prefix="atpy-kernels", dir=os.environ.get("TEST_TMPDIR"))


@contextlib.contextmanager
def relowering() -> Iterator[None]:
    """Inside: graphs are lowered afresh (no FX graph or AOTAutograd cache),
    kernels come from the code cache of $TORCHINDUCTOR_CACHE_DIR."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import clear_caches

    isa_probes_shared()
    clear_caches()
    try:
        with inductor_config.patch(fx_graph_cache=False), \
                functorch_config.patch(enable_autograd_cache=False):
            yield
    finally:
        clear_caches()


def isa_probes_shared() -> None:
    """Inductor's ISA probes answered once per test (the module docstring);
    nothing outside a Bazel test ($TEST_TMPDIR unset)."""
    from torch._inductor import cpu_vec_isa

    tmp = os.environ.get("TEST_TMPDIR")
    probe = cpu_vec_isa.VecISA.check_build
    if not tmp or getattr(probe, "shared", False):
        return
    directory = os.path.join(tmp, "isa_probes")
    os.makedirs(directory, exist_ok=True)

    def check_build(self: Any, code: str) -> bool:
        key = hashlib.sha256(f"{type(self).__name__}\n{self._arch_flags}\n{code}".encode())
        path = os.path.join(directory, key.hexdigest()[:32])
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.exists(path):
                with open(path) as f:
                    return f.read() == "1"
            ok = bool(probe(self, code))
            with open(path + ".tmp", "w") as f:
                f.write("1" if ok else "0")
            os.replace(path + ".tmp", path)
            return ok

    check_build.shared = True  # type: ignore[attr-defined]
    cpu_vec_isa.VecISA.check_build = check_build  # type: ignore[method-assign]
