"""One channel per daemon for the life of the process, and what is known of
the daemons that did not answer.

    from autotuned import channels
    daemon = channels.channel(target)           # the same Client for every ask
    if channels.down_reason(target) is None:    # not found dead lately
        ...

A fresh gRPC channel costs about 200 ms to close; a daemon answers a cached
ask in well under a millisecond. So the package's helpers never open their
own: channel() keeps ONE Client per normalized target (created lazily, with
no connect wait; closed at exit), safe to share between threads.

A daemon found dead or absent is marked down (mark_down, by the helper whose
call failed) and every later ask to it fails fast: down_reason() answers the
reason without calling. At most once every DOWN_RETRY_S a caller of
down_reason() probes the daemon (a connect of at most PROBE_TIMEOUT_S);
when it answers, it is marked up again. The channels reconnect with a
backoff of at most one second, so a restarted daemon is found soon after.
"""
from __future__ import annotations

import atexit
import threading
import time
from typing import Optional

from autotuned.client import Client, default_target, normalize_target

DOWN_RETRY_S = 30.0
PROBE_TIMEOUT_S = 0.5
# gRPC reconnects with an exponential backoff (up to 2 minutes by default):
# bounded here, so that a channel finds a restarted daemon within a second.
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)

_lock = threading.Lock()
_clients: dict[str, Client] = {}
_down: dict[str, tuple[str, float]] = {}   # target -> (reason, when last tried)


def _target(target: Optional[str]) -> str:
    return normalize_target(target) if target else default_target()


def channel(target: Optional[str] = None) -> Client:
    """The process's Client for `target` (default: $AUTOTUNED_SOCKET, else
    the default socket). Never close it: it lives as long as the process."""
    t = _target(target)
    with _lock:
        client = _clients.get(t)
        if client is None:
            client = Client(t, connect_timeout=None, channel_options=_CHANNEL_OPTIONS)
            _clients[t] = client
        return client


def mark_down(target: Optional[str], reason: str) -> None:
    """Records that the daemon at `target` did not answer, and why."""
    with _lock:
        _down[_target(target)] = (reason, time.monotonic())


def mark_up(target: Optional[str]) -> None:
    with _lock:
        _down.pop(_target(target), None)


def down_reason(target: Optional[str] = None) -> Optional[str]:
    """Why the daemon at `target` is believed dead or absent; None when it is
    believed up. Past DOWN_RETRY_S since the last try, probes it first (one
    caller at a time; the others get the reason meanwhile)."""
    t = _target(target)
    with _lock:
        entry = _down.get(t)
        if entry is None:
            return None
        reason, since = entry
        if time.monotonic() - since < DOWN_RETRY_S:
            return reason
        _down[t] = (reason, time.monotonic())   # this caller probes; the others wait
    if channel(t).ready(PROBE_TIMEOUT_S):
        mark_up(t)
        return None
    return reason


@atexit.register
def close_all() -> None:
    """Closes every channel (at exit; a later channel() opens a new one)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for c in clients:
        c.close()
