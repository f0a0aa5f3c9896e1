"""Runs a function on N ranks as N spawned processes with a gloo process
group (FileStore rendezvous, no ports), with a deadline.

    results = run_ranks(fn, world=2, timeout=120, args=(...))

`fn(rank, world, *args)` runs after init_process_group (its timeout
`pg_timeout`; `env` and `rank_env[rank]` set in the rank's environment); its return value
(picklable) comes back per rank, or the exception it raised, as
RankError(type name, message). A rank that has not finished by the deadline
is killed, and TimeoutError is raised.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import Any, Callable


class RankError:
    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message

    def __repr__(self) -> str:
        return f"RankError({self.kind}: {self.message})"


def _main(fn: Callable, rank: int, world: int, store: str, q: Any, args: Sequence[Any],
          env: dict, pg_timeout: float) -> None:
    os.environ.update(env)
    os.environ["LOCAL_RANK"] = str(rank)
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world)
    import datetime
    import faulthandler

    import torch.distributed as dist

    # A rank stuck this long shows where, on stderr.
    faulthandler.dump_traceback_later(90, exit=False)

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=pg_timeout))
    # Every rank past gloo's connection setup before any runs `fn`: a rank
    # that finished `fn` and exited while a peer was still connecting left
    # that peer with "Gloo connectFullMesh failed ... Connection closed by
    # peer" (seen once in rankrun_test under a full suite).
    dist.barrier()
    try:
        q.put((rank, fn(rank, world, *args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        q.put((rank, RankError(type(e).__name__, f"{e}\n{traceback.format_exc()}")))
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass


def run_ranks(fn: Callable, world: int = 2, timeout: float = 120.0,
              args: Sequence[Any] = (), env: dict | None = None,
              pg_timeout: float = 240.0, rank_env: dict | None = None) -> list[Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    fd, store = tempfile.mkstemp(prefix="atpy-store")
    os.close(fd)
    os.unlink(store)
    procs = [ctx.Process(target=_main, args=(fn, r, world, store, q, args,
                                             {**(env or {}), **(rank_env or {}).get(r, {})},
                                             pg_timeout))
             for r in range(world)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world:
            if any(isinstance(v, RankError) for v in results.values()):
                # A rank failed: the others may wait for it in a collective.
                deadline = min(deadline, time.monotonic() + 20)
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(world)) - set(results))
                if not results:
                    raise TimeoutError(f"ranks {missing} did not finish within {timeout:g} s")
                others = [results[k] for k in sorted(results)]
                for r in missing:
                    results[r] = RankError("TimeoutError",
                                           f"rank {r} did not finish; the others: {others}")
                break
            try:
                rank, value = q.get(timeout=min(left, 1.0))
                results[rank] = value
            except queue.Empty:
                for r, p in enumerate(procs):
                    if p.exitcode not in (None, 0) and r not in results:
                        results[r] = RankError("Exited", f"rank {r} exited with {p.exitcode}")
    finally:
        for p in procs:
            p.join(timeout=10 if len(results) == world else 0)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        if os.path.exists(store):
            os.unlink(store)
    return [results[r] for r in range(world)]
