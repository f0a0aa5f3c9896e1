"""autotuned.inductor against real PyTorch: 2 ranks (and once 4), gloo, CPU, a sim daemon.

A custom op whose collective candidates (register_custom_op_autotuning with
CustomOpConfig) map to the daemon's all_reduce/one_shot, two_shot and ring is
compiled with torch.compile on both ranks; both must pick the same winner
through the daemon and compute the right answer, on the immediate and the
deferred path, and fall back identically (or raise identically) on bad input.

Each case spawns its ranks and compiles afresh (tens of seconds): the default
tier runs each path once and the absent daemon once; the long tier
(//client/python:inductor_long_test, AUTOTUNED_LONG=1) runs them all.
"""

import os
import re
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import HANG_CONF, Daemon  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from tier import long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

LONG = long_only("//client/python:inductor_long_test")
IMPLS = {"one_shot": "all_reduce/one_shot", "two_shot": "all_reduce/two_shot",
         "ring": "all_reduce/ring"}


@pytest.fixture(autouse=True)
def deadline():
    with guard(500):
        yield


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(config_text=HANG_CONF)
    yield d
    d.stop()


def compile_and_run(rank, world, target, deferred, impls, mutate=None):
    """Registers the op, enables the daemon timing, compiles and runs."""
    import dataclasses

    import torch
    import torch.distributed as dist
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    import autotuned.inductor as ai
    from autotuned import pb
    from autotuned.group import describe_group

    group_name = dist.group.WORLD.group_name

    @torch.library.custom_op("autotuned_test::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    @all_reduce.register_fake
    def _(x):
        return torch.empty_like(x)

    def functional(x):
        c10d = torch.ops._c10d_functional
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group_name))

    # Three ways to the same sum; the daemon measures what each stands for.
    def one_shot(x):
        return functional(x)

    def two_shot(x):
        return functional(x.contiguous())

    def ring(x):
        return functional(x.clone())

    def hangs(x):
        return functional(x.clone())

    register_custom_op_autotuning(
        all_reduce, name="ar_autotuned",
        configs=[CustomOpConfig(one_shot), CustomOpConfig(two_shot), CustomOpConfig(ring)]
        + ([CustomOpConfig(hangs)] if "hangs" in impls else []))
    group = None
    if mutate == "wrong_rank":
        group = dataclasses.replace(describe_group(target=target), rank=1 - rank)
    ai.enable(impls=impls, target=target, deferred=deferred, group=group,
              options=pb.Options(warmup=1, iterations=5, timeout_ms=60000), timeout=120)

    def model(x, z):
        return all_reduce(x) * 2 + all_reduce(z).sum()

    x = torch.full((4096,), float(rank + 1))
    z = torch.ones(1024)
    start = time.monotonic()
    out = torch.compile(model)(x, z)
    wall = time.monotonic() - start
    expected = world * (world + 1) / 2 * 2 + 1024 * world  # x of rank r is r + 1
    return {"correct": bool(torch.allclose(out, torch.full_like(out, expected))),
            "decisions": ai.decisions(), "wall_s": wall}


def _fresh_cache_env():
    # One compile thread: no worker pool to start on a small, busy machine.
    return {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="atpy-inductor"),
            "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _rounds(daemon_log: str) -> list[str]:
    return [line for line in daemon_log.splitlines() if "round=" in line]


@pytest.mark.parametrize("deferred", [False, True], ids=["immediate", "deferred"])
def test_both_ranks_pick_the_daemons_winner(daemon, deferred):
    before = len(_rounds(daemon.log()))
    a, b = run_ranks(compile_and_run, args=(daemon.target, deferred, IMPLS),
                     env=_fresh_cache_env(), timeout=400)
    assert not isinstance(a, RankError), a
    assert not isinstance(b, RankError), b
    assert a["correct"] and b["correct"]
    assert a["decisions"] == b["decisions"]
    assert len(a["decisions"]) == 2
    for _name, timings, winner, status, reason in a["decisions"]:
        assert status in ("TUNED", "CACHED"), (status, reason)
        assert set(timings) == {"all_reduce/one_shot", "all_reduce/two_shot",
                                "all_reduce/ring:chunk_kib=256"}
        best = min(timings, key=timings.get)
        assert winner == best.split(":")[0]
        assert all(0 < ms < 100 for ms in timings.values())
    rounds = _rounds(daemon.log())[before:]
    # A round's line says problems=N when measured; one answered from the
    # leader's cache lists one winner per problem instead.
    def problems(line):
        m = re.search(r"problems=(\d+)", line)
        if m:
            return int(m.group(1))
        m = re.search(r"winners=\[(.*)\]", line)
        return len(m.group(1).split("; ")) if m else 0
    if deferred:
        # Both collective nodes of the graph went to the daemon as one batch.
        assert any(problems(r) == 2 for r in rounds), rounds
    else:
        assert any(problems(r) == 1 for r in rounds), rounds


@LONG
def test_four_ranks_pick_the_same_winner(daemon):
    """The deferred path on 4 ranks (the sim's 4 GPUs): one batch, one
    decision, the same on every rank, the right sum."""
    results = run_ranks(compile_and_run, world=4, args=(daemon.target, True, IMPLS),
                        env=_fresh_cache_env(), timeout=450)
    for r in results:
        assert not isinstance(r, RankError), r
        assert r["correct"]
        assert r["decisions"] == results[0]["decisions"]
    assert len(results[0]["decisions"]) == 2
    for _, timings, winner, status, reason in results[0]["decisions"]:
        assert status in ("TUNED", "CACHED"), (status, reason)
        assert winner == min(timings, key=timings.get).split(":")[0]
    assert any("world=4" in line for line in _rounds(daemon.log()))


@pytest.mark.parametrize("deferred", [False, pytest.param(True, marks=LONG)],
                         ids=["immediate", "deferred"])
def test_absent_daemon_same_fallback_on_every_rank(deferred):
    a, b = run_ranks(compile_and_run,
                     args=("/tmp/atpy-no-such-dir/none.sock", deferred, IMPLS),
                     env=_fresh_cache_env(), timeout=400)
    assert not isinstance(a, RankError), a
    assert a["correct"] and b["correct"]
    assert a["decisions"] == b["decisions"]
    for _, _, winner, status, reason in a["decisions"]:
        assert (winner, status) == ("all_reduce/one_shot", "FALLBACK")
        assert "none.sock" in reason


@LONG
def test_unknown_candidate_raises_on_every_rank(daemon):
    impls = dict(IMPLS, ring="all_reduce/nope")
    results = run_ranks(compile_and_run, args=(daemon.target, False, impls),
                        env=_fresh_cache_env(), timeout=400)
    for r in results:
        assert isinstance(r, RankError), r
        assert "INVALID_ARGUMENT" in r.message
        assert "problems[0].candidates[2].impl" in r.message


@LONG
def test_group_mismatch_raises_on_every_rank(daemon):
    results = run_ranks(compile_and_run, args=(daemon.target, False, IMPLS, "wrong_rank"),
                        env=_fresh_cache_env(), timeout=400)
    for r in results:
        assert isinstance(r, RankError), r
        assert "GroupMismatch" in r.message or "described for rank" in r.message


@LONG
def test_daemon_dies_mid_call_same_fallback_on_every_rank():
    from autotuned import Client

    d = Daemon(config_text=HANG_CONF)

    def kill_when_measuring():
        # The hanging candidate keeps the round open for its 60 s timeout.
        deadline = time.monotonic() + 200
        with Client(d.target, connect_timeout=5) as c:
            while time.monotonic() < deadline:
                if c.node_info().metrics.rounds_in_flight > 0:
                    time.sleep(1.0)
                    d.kill()
                    return
                time.sleep(0.1)

    try:
        threading.Thread(target=kill_when_measuring, daemon=True).start()
        impls = dict(IMPLS, hangs="all_reduce/hangs")
        a, b = run_ranks(compile_and_run, args=(d.target, False, impls),
                         env=_fresh_cache_env(), timeout=400)
        assert not isinstance(a, RankError), a
        assert a["correct"] and b["correct"]
        assert a["decisions"] == b["decisions"]
        first = a["decisions"][0]
        assert first[2:4] == ("all_reduce/one_shot", "FALLBACK")
        assert re.search("UNAVAILABLE", first[4]), first
    finally:
        d.stop()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
