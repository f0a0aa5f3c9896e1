"""Starts the real daemon (//daemon:autotuned) on the sim backend for tests.

Every wait has a deadline; the daemon is SIGKILLed at the end if it still runs.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Optional

from autotuned import Client
from autotuned.errors import Unavailable

# The pre-sync window cap of conftest.py's `wide_daemon`, and the window its
# cases ask with.
WIDE_WINDOW_US = 60_000_000


def daemon_binary() -> str:
    """The daemon in the test's runfiles, or $AUTOTUNED_DAEMON."""
    if os.environ.get("AUTOTUNED_DAEMON"):
        return os.environ["AUTOTUNED_DAEMON"]
    base = os.environ.get("TEST_SRCDIR", "")
    path = os.path.join(base, "autotuned", "daemon", "autotuned")
    if not os.path.exists(path):
        raise RuntimeError(f"daemon binary not found at {path}; set AUTOTUNED_DAEMON")
    return path


# 4 sim GPUs and all_reduce/hangs, a ring that hangs on rank 1: for the
# tests of a daemon that stops answering mid-round.
HANG_CONF = ('sim { gpus: 4 faults { name: "all_reduce/hangs" base: "all_reduce/ring" '
             'kind: HANG rank: 1 } }')


class Daemon:
    """One daemon process with a private socket and cache under /tmp."""

    def __init__(self, extra_args: Sequence[str] = (), config_text: Optional[str] = None,
                 sim_gpus: int = 4) -> None:
        # Unix socket paths are limited to 107 bytes: keep them short, under /tmp.
        self.dir = tempfile.mkdtemp(prefix="atpy", dir="/tmp")
        self.socket = os.path.join(self.dir, "s.sock")
        self.log_path = os.path.join(self.dir, "daemon.log")
        args = [daemon_binary(), f"--socket={self.socket}", "--backend=sim",
                f"--sim_gpus={sim_gpus}", f"--cache_dir={self.dir}/cache"]
        if config_text is not None:
            conf = os.path.join(self.dir, "test.conf")
            with open(conf, "w") as f:
                f.write(config_text)
            args.append(f"--config={conf}")
        args.extend(extra_args)
        self._args = args
        self._log = open(self.log_path, "w")
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self._args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            if os.path.exists(self.socket):
                try:
                    Client(self.socket, connect_timeout=1.0).close()
                    break
                except Unavailable:
                    pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"daemon did not listen within 30 s:\n{self.log()}")
            time.sleep(0.05)

    def restart(self) -> None:
        """SIGKILLs the daemon and starts it again on the same socket and
        cache directory; returns once it answers."""
        self.kill()
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        self._start()

    @property
    def target(self) -> str:
        return "unix:" + self.socket

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def torchrun_env(world: int) -> dict:
    """torchrun's variables that autotuned.group.describe_from_env reads, for
    `world` ranks on this node, with a fresh group id."""
    return {"LOCAL_WORLD_SIZE": str(world), "TORCHELASTIC_RUN_ID": f"t{time.time_ns()}"}



def restart_when_marked(d: Daemon, n: int, delay_s: float = 0.0) -> str:
    """A directory (returned) for the ranks' marks, and a thread that, once
    it holds `n` files (or after 120 s), waits `delay_s`, restarts `d` and
    leaves the mark "restarted" there."""
    marks = os.path.join(d.dir, "marks")
    os.mkdir(marks)

    def restart() -> None:
        deadline = time.monotonic() + 120
        while len(os.listdir(marks)) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay_s)
        d.restart()
        open(os.path.join(marks, "restarted"), "w").close()

    threading.Thread(target=restart, daemon=True).start()
    return marks
