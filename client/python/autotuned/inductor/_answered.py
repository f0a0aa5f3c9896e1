"""Asks the daemon's cache answered before: their choices are not compiled
before the Tune (docs/python.md, "Inductor").

A rank compiles its choices before it sends the Tune (the runners'
prepare), so that compiling is outside the round's bounds. The API has no
lookup that leaves a round unstarted on a miss, so without more a CACHED
answer would come after the same compiles (seconds per choice). After a
TUNED or CACHED answer to an ask, a marker file records it, in
$XDG_CACHE_HOME/autotuned/answered (default ~/.cache/autotuned/answered;
not Inductor's cache directory: a fresh one of those still finds the
daemon's cache warm), named by a digest of the ask as the daemon's
cache sees it (the group's shape, the problems, the options that are not
the window or the timeout) and of the daemon's cache identity (its
fingerprint and cache_epoch, which changes whenever a cached entry is
removed). The same ask later finds the marker and sends its Tune first:
the daemon answers it from its cache, and the choices are compiled only if
the answer is a run after all (tune_rank's prepare_first=False: then before
the run's first step, inside its bounds). Groups whose ranks' daemons are
not all this rank's, a daemon with its cache off, and asks with
options.refresh get no marker: their choices are always compiled first.

Whether a rank compiles first changes nothing the daemon sees: ranks that
differ here still ask the same and get the same answer.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from typing import Any, Optional

from autotuned._proto import autotuned_pb2 as pb

log = logging.getLogger("autotuned.inductor")



def _identity(target: str) -> Optional[str]:
    """The daemon's cache identity; None when unknown or the cache is off."""
    from autotuned import channels

    if channels.down_reason(target):
        return None
    try:
        info = channels.channel(target).node_info(timeout=2.0)
    except Exception:  # noqa: BLE001 - unknown: compile first
        return None
    if not info.cache_epoch:
        return None
    return f"{info.fingerprint}/{info.cache_epoch}"


def _marker(group: Any, problems: Sequence[pb.Problem], options: Optional[pb.Options]
            ) -> Optional[str]:
    """The marker file of an ask, or None when it gets none."""
    if any(r.target != group.target for r in group.ranks):
        return None
    opts = pb.Options()
    if options is not None:
        opts.CopyFrom(options)
    if opts.refresh:
        return None
    opts.ClearField("presync_window_us")
    opts.ClearField("timeout_ms")
    identity = _identity(group.target)
    if identity is None:
        return None
    digest = hashlib.sha256()
    digest.update(f"{group.target}\n{identity}\n{group.world_size}\n".encode())
    for r in group.ranks:
        digest.update(f"{r.daemon}/{r.local_gpu}\n".encode())
    for p in problems:
        digest.update(p.SerializeToString(deterministic=True))
    digest.update(opts.SerializeToString(deterministic=True))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autotuned", "answered", digest.hexdigest()[:40])


def lookup(group: Any, problems: Sequence[pb.Problem], options: Optional[pb.Options]
           ) -> tuple[Optional[str], bool]:
    """(the ask's marker or None, whether it exists: the daemon's cache
    answered this ask before, under the same cache identity)."""
    try:
        path = _marker(group, problems, options)
    except Exception as e:  # noqa: BLE001 - no marker: compile first
        log.info("autotuned: no record of earlier answers: %s: %s", type(e).__name__, e)
        return None, False
    return path, path is not None and os.path.exists(path)


def record(path: Optional[str], results: Sequence[pb.ProblemResult]) -> None:
    """Marks the ask answered when every problem was TUNED or CACHED."""
    if path is None or not results or \
            any(r.status not in (pb.TUNED, pb.CACHED) for r in results):
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as e:
        log.info("autotuned: could not record an answered ask at %s: %s", path, e)
