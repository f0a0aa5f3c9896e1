"""No test may hang: `guard(seconds)` raises TimeoutError in the test's
thread (SIGALRM) once `seconds` have passed, and restores the previous
handler on the way out. Used by every test module's autouse fixture:

    @pytest.fixture(autouse=True)
    def deadline():
        with guard(240):
            yield
"""
from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def guard(seconds: int) -> Iterator[None]:
    def expire(signum, frame):
        raise TimeoutError(f"test exceeded {seconds} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
