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
"""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Iterator


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

    clear_caches()
    try:
        with inductor_config.patch(fx_graph_cache=False), \
                functorch_config.patch(enable_autograd_cache=False):
            yield
    finally:
        clear_caches()
