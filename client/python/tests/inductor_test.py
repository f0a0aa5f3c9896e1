"""autotuned.inductor against real PyTorch: 2 ranks (and 4), gloo, CPU, a sim daemon.

A model whose collective custom ops (register_custom_op_autotuning with
CustomOpConfig) have only plain Python candidates, unknown to the daemon's
catalogue, is compiled with torch.compile; every choice is a client
candidate that the ranks run themselves through the daemon's round. Each
case checks that every rank ends with the same decision and the right
answer, and what the daemon's cache, Inductor's caches, a late rank and a
dead daemon do to it.

Each case spawns its ranks and compiles (tens of seconds on a small
machine, a launch and its first compile the most of it): deferred mode is
a step of the first case's launch, and the killed daemon a step of the
warm and cold caches' second launch. The compiles that are not about
Inductor's caches lower their graph afresh and share the compiled kernels
(relowering.py). The long twin
(//client/python:inductor_long_test) adds 4 ranks, a compile after an op's
choices changed not served the graph of the old ones, and CACHED after a
daemon restart (the daemon's cache surviving a restart is in the default
tier as //tests:daemon_integration_test).
"""

import logging
import os
import signal
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import WIDE_WINDOW_US  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from relowering import isa_probes_shared, relowering, shared  # noqa: E402
from tier import long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

THREE = ("all_reduce", "all_gather", "reduce_scatter")
FIVE = THREE + ("broadcast", "all_to_all")
WINDOW_US = 10_000_000  # ranks compiling side by side on a busy machine drift apart


@pytest.fixture(autouse=True)
def deadline():
    with guard(600):
        yield


def _register_ops(world, state):
    """The custom ops of the model, each with two plain Python candidates
    (functional collectives) besides its own default (torch.distributed)."""
    import torch
    import torch.distributed as dist
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    c10d = torch.ops._c10d_functional
    group = dist.group.WORLD.group_name
    ops, configs = {}, {}

    def define(name, eager, shape, direct, staged):
        direct.__name__, staged.__name__ = "direct", "staged"
        op = torch.library.custom_op(f"autotuned_test::{name}", mutates_args=())(eager)
        op.register_fake(lambda x: x.new_empty(shape(x)))
        register_custom_op_autotuning(op, name=f"{name}_autotuned",
                                      configs=[CustomOpConfig(direct), CustomOpConfig(staged)])
        ops[name] = op
        configs[name] = (direct, staged)

    def same(x):
        return tuple(x.shape)

    def gathered(x):
        return (x.shape[0] * world,) + tuple(x.shape[1:])

    def scattered(x):
        return (x.shape[0] // world,) + tuple(x.shape[1:])

    def staging_clone(x):
        return x.clone()

    def staging_scale(x):
        return x * 1.0

    # The code that the "changed candidate" case edits between compiles:
    # the function the staged decompositions call (part of their key).
    staging = staging_clone

    def set_variant(variant):
        nonlocal staging
        staging = staging_scale if variant else staging_clone
    state["set_variant"] = set_variant

    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    def all_gather(x: torch.Tensor) -> torch.Tensor:
        y = x.new_empty(gathered(x))
        dist.all_gather_into_tensor(y, x.contiguous())
        return y

    def reduce_scatter(x: torch.Tensor) -> torch.Tensor:
        y = x.new_empty(scattered(x))
        dist.reduce_scatter_tensor(y, x.contiguous())
        return y

    def broadcast(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.broadcast(y, 0)
        return y

    def all_to_all(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        dist.all_to_all_single(y, x.contiguous())
        return y

    def reregister():
        # all_reduce's choices changed in place: a third one (a scaled copy).
        def scaled(x):
            return c10d.wait_tensor(c10d.all_reduce(x * 1.0, "sum", group))
        register_custom_op_autotuning(
            ops["all_reduce"], name="all_reduce_autotuned",
            configs=[CustomOpConfig(c) for c in (*configs["all_reduce"], scaled)])
    state["reregister"] = reregister

    def split(x):
        return [x.shape[0] // world] * world
    define("all_reduce", all_reduce, same,
           lambda x: c10d.wait_tensor(c10d.all_reduce(x, "sum", group)),
           lambda x: c10d.wait_tensor(c10d.all_reduce(staging(x), "sum", group)))
    define("all_gather", all_gather, gathered,
           lambda x: c10d.wait_tensor(c10d.all_gather_into_tensor(x, world, group)),
           lambda x: c10d.wait_tensor(c10d.all_gather_into_tensor(x.clone(), world, group)))
    define("reduce_scatter", reduce_scatter, scattered,
           lambda x: c10d.wait_tensor(c10d.reduce_scatter_tensor(x, "sum", world, group)),
           lambda x: c10d.wait_tensor(c10d.reduce_scatter_tensor(x.clone(), "sum", world,
                                                                 group)))
    define("broadcast", broadcast, same,
           lambda x: c10d.wait_tensor(c10d.broadcast(x, 0, group)),
           lambda x: c10d.wait_tensor(c10d.broadcast(x.clone(), 0, group)))
    define("all_to_all", all_to_all, same,
           lambda x: c10d.wait_tensor(c10d.all_to_all_single(x, split(x), split(x), group)),
           lambda x: c10d.wait_tensor(c10d.all_to_all_single(x.clone(), split(x), split(x),
                                                             group)))
    return ops


def _gate(gate_dir, rank, world):
    """An opaque op the compiled model runs first: it waits (outside
    compilation) until every rank got there, so that a rank compiling late
    does not make the others' collectives time out."""
    import torch

    @torch.library.custom_op("autotuned_test::gate", mutates_args=())
    def gate(x: torch.Tensor) -> torch.Tensor:
        open(os.path.join(gate_dir, f"{rank}.{time.monotonic_ns()}"), "w").close()
        end = time.monotonic() + 120
        while len({n.split(".")[0] for n in os.listdir(gate_dir)}) < world:
            if time.monotonic() > end:
                raise TimeoutError("the other ranks never ran the model")
            time.sleep(0.05)
        return x.clone()

    gate.register_fake(lambda x: torch.empty_like(x))
    return gate


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def compile_steps(rank, world, target, plan):
    """Registers the ops, enables the integration, then compiles the model
    once per step of the plan; what each step saw comes back. A step's
    "ops", "deferred", "impls" and "size" (of the input) override the
    plan's."""
    import torch
    import torch.distributed as dist
    from torch._inductor.output_code import CompiledFxGraph

    import autotuned.inductor as ai
    import autotuned.rankrun as rankrun
    from autotuned import pb

    isa_probes_shared()  # the steps without relowering() too
    state = {}
    ops = _register_ops(world, state)
    gate = _gate(plan["gate_dir"], rank, world) if plan.get("gate_dir") else None
    names = list(plan.get("ops", THREE))
    tunes, codes, warnings = [], [], _Warnings()
    logging.getLogger("autotuned.inductor").addHandler(warnings)
    original_tune, original_prepared = rankrun.tune_rank, rankrun._prepared
    preparing = []
    # Seconds this rank sleeps once its choices are compiled, before its
    # Tune (the step's "ask_delay"): a late arrival at the daemon whatever
    # the compiles cost on a busy machine.
    ask_delay = {"s": 0.0}

    def prepared(problems):
        start = time.monotonic()
        try:
            return original_prepared(problems)
        finally:
            time.sleep(ask_delay["s"])
            ask_delay["s"] = 0.0
            preparing.append(time.monotonic() - start)
    rankrun._prepared = prepared

    def counted(group, problems, **kwargs):
        # The ask's time without the choices' compiles before it (prepare).
        start, before = time.monotonic(), len(preparing)
        try:
            return original_tune(group, problems, **kwargs)
        finally:
            tunes.append((len(problems),
                          time.monotonic() - start - sum(preparing[before:])))
    rankrun.tune_rank = counted
    original_call = CompiledFxGraph.__call__

    def recorded(self, inputs):
        codes.append(self.source_code)
        return original_call(self, inputs)
    CompiledFxGraph.__call__ = recorded

    def model(x):
        if gate is not None:
            x = gate(x)
        extra = {"all_reduce": lambda y: y * 2 + 1}  # a fused pointwise input
        return [ops[n](extra.get(n, lambda y: y)(x)) for n in names]

    desc = None
    out = []
    for step in plan["steps"]:
        names[:] = step.get("ops", plan.get("ops", THREE))
        x = torch.arange(step.get("size", 64), dtype=torch.float32) + 1000 * rank
        window = step.get("window_us", WINDOW_US)
        ai.enable(group=desc, target=target,
                  deferred=step.get("deferred", plan.get("deferred", False)),
                  impls=step.get("impls", plan.get("impls")), timeout=120,
                  options=pb.Options(warmup=1, iterations=5, timeout_ms=300000,
                                     presync_window_us=window))
        desc = ai._state.group
        state["set_variant"](step.get("variant", 0))
        if step.get("reregister"):
            state["reregister"]()
        if step.get("kill_daemon_pid") and rank == 0:
            os.kill(step["kill_daemon_pid"], signal.SIGKILL)
        dist.barrier()
        time.sleep(step.get("delay", {}).get(rank, 0))
        ask_delay["s"] = step.get("ask_delay", {}).get(rank, 0)
        torch._dynamo.reset()
        before, first_tune, first_code = len(ai.decisions()), len(tunes), len(codes)
        hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
        start = time.monotonic()
        # "fresh" (the default): lowered afresh, no FX graph cache; False:
        # Inductor's caches as a user has them.
        if step.get("fresh", True):
            with relowering():
                result = torch.compile(model)(x)
        else:
            result = torch.compile(model)(x)
        wall = time.monotonic() - start
        expected = [ops[n](x * 2 + 1 if n == "all_reduce" else x) for n in names]
        out.append({
            "decisions": ai.decisions()[before:], "tunes": tunes[first_tune:],
            "codes": codes[first_code:], "wall_s": wall,
            "fx_hits": torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - hits,
            "correct": all(bool(torch.equal(a, b)) for a, b in zip(result, expected)),
            "warnings": list(warnings.messages)})
        warnings.messages.clear()
    ai.disable()
    return out


def _env(kernels_shared=False):
    """The ranks' environment: an Inductor cache directory of the case's own
    (its FX graph cache starts empty), or, for cases whose compiles all use
    relowering(), the kernels compiled by the cases before."""
    # One compile thread: no worker pool to start on a small, busy machine.
    return {"TORCHINDUCTOR_CACHE_DIR": shared() if kernels_shared
            else tempfile.mkdtemp(prefix="atpy-inductor"),
            "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _ok(results):
    for r in results:
        assert not isinstance(r, RankError), r
    return results


def _statuses(step):
    return [(d[0], d[3]) for d in step["decisions"]]


def _same_on_every_rank(results, index):
    first = results[0][index]["decisions"]
    for r in results[1:]:
        assert [d[:4] for d in r[index]["decisions"]] == [d[:4] for d in first]
    assert all(r[index]["correct"] for r in results)


def _tuned_then_cached(daemon, world, more_steps=(), window_us=WINDOW_US):
    plan = {"steps": [{"window_us": window_us}, {"window_us": window_us}, *more_steps]}
    results = _ok(run_ranks(compile_steps, world=world, args=(daemon.target, plan),
                            env=_env(kernels_shared=True), timeout=500))
    names = [f"{n}_autotuned" for n in THREE]
    for i, status in enumerate(["TUNED", "CACHED"]):
        _same_on_every_rank(results, i)
        assert _statuses(results[0][i]) == [(n, status) for n in names], results[0][i]
    for _name, timings, winner, _status, _ in results[0][0]["decisions"]:
        # The op's default and both Python candidates, each timed as itself.
        assert len(timings) == 3, timings
        assert winner in timings, timings
        assert all(0 < ms < 1000 for ms in timings.values()), (timings,
                                                              results[0][0]["warnings"])
    return results


# Deferred mode's step: five collectives, on an input of its own size (the
# daemon's cache keys its problems by size: none answered from the steps
# before it in the same launch).
DEFERRED = {"ops": FIVE, "deferred": True, "size": 128,
            "impls": {"autotuned_test::all_reduce": "all_reduce/one_shot"}}


def test_two_ranks_tuned_cached_changed_body_then_deferred(daemon):
    """TUNED, CACHED on the next compile, and a changed candidate body
    measured again; with a fused pointwise input to the all_reduce
    (x * 2 + 1). Then, in the same launch (a launch and its first compile
    cost more than these compiles), deferred: the five collective
    selections of the graph go as one Tune (five problems); impls on CPU is
    left out with a warning."""
    results = _tuned_then_cached(daemon, 2, [{"variant": 1}, DEFERRED])
    _same_on_every_rank(results, 2)
    assert [s for _, s in _statuses(results[0][2])] == ["TUNED", "CACHED", "CACHED"]
    _same_on_every_rank(results, 3)
    step = results[0][3]
    assert [n for n, _ in step["tunes"]] == [5], step["tunes"]
    assert [s for _, s in _statuses(step)] == ["TUNED"] * 5, step["decisions"]
    assert any("left out" in w and "CUDA" in w for w in step["warnings"]), step["warnings"]


def test_late_rank_falls_back_without_waiting_then_tuned(daemon):
    """Rank 1 asks 10 s after rank 0 (once its choices are compiled), with a
    5 s process-group timeout and a 2 s window: no crash, rank 0 waits no
    more than the window, the
    same FALLBACK on both with a warning; the next compile, both on time, is
    measured (the daemon cannot measure the callers' code in the background):
    the graph with the fallback was not saved to Inductor's cache, which both
    compiles share."""
    gate = tempfile.mkdtemp(prefix="atpy-gate")
    plan = {"gate_dir": gate, "ops": ("all_reduce",),
            "steps": [{"ask_delay": {1: 10}, "window_us": 2_000_000, "fresh": False},
                      {"fresh": False}]}
    results = _ok(run_ranks(compile_steps, args=(daemon.target, plan), env=_env(),
                            timeout=500, pg_timeout=5))
    _same_on_every_rank(results, 0)
    late = results[0][0]
    assert _statuses(late) == [("all_reduce_autotuned", "FALLBACK")]
    assert "window" in late["decisions"][0][4], late["decisions"]
    assert sum(t for _, t in late["tunes"]) < 2 + 3  # the window, and some slack
    assert all(any("FALLBACK" in w for w in r[0]["warnings"]) for r in results)
    _same_on_every_rank(results, 1)
    assert _statuses(results[0][1]) == [("all_reduce_autotuned", "TUNED")]
    assert results[0][1]["fx_hits"] == 0


def test_warm_and_cold_inductor_caches_same_choice_then_daemon_killed(daemon):
    """Per-rank Inductor cache directories; in the second launch rank 0's is
    warm (its graph comes from the FX graph cache: no ask) and rank 1's cold
    (it asks: CACHED at once). Both run the same code, nobody hangs. Then,
    in the same launch, the daemon is killed before the next compile: every
    selection falls back at once, the same on both ranks; the graphs
    compiled with the daemon's decisions, in both ranks' caches, are not
    served from them (the daemon's identity is part of Inductor's key)."""
    dirs = [tempfile.mkdtemp(prefix="atpy-inductor") for _ in range(3)]
    plan = {"steps": [{"fresh": False}]}
    first = _ok(run_ranks(compile_steps, args=(daemon.target, plan), env=_env(), timeout=500,
                          rank_env={0: {"TORCHINDUCTOR_CACHE_DIR": dirs[0]},
                                    1: {"TORCHINDUCTOR_CACHE_DIR": dirs[1]}}))
    assert [s for _, s in _statuses(first[0][0])] == ["TUNED"] * 3
    plan = {"steps": [{"fresh": False},
                      {"fresh": False, "kill_daemon_pid": daemon.proc.pid}]}
    second = _ok(run_ranks(compile_steps, args=(daemon.target, plan), env=_env(),
                           timeout=500,
                           rank_env={0: {"TORCHINDUCTOR_CACHE_DIR": dirs[0]},
                                     1: {"TORCHINDUCTOR_CACHE_DIR": dirs[2]}}))
    warm, cold = second[0][0], second[1][0]
    assert warm["fx_hits"] >= 1 and warm["tunes"] == [], warm
    assert [s for _, s in _statuses(cold)] == ["CACHED"] * 3
    assert warm["correct"] and cold["correct"]
    assert warm["codes"] == cold["codes"] == first[1][0]["codes"]
    _same_on_every_rank(second, 1)
    for r in second:
        after = r[1]
        assert [s for _, s in _statuses(after)] == ["FALLBACK"] * 3
        assert sum(t for _, t in after["tunes"]) < 5, after["tunes"]
        assert after["fx_hits"] == 0


@long_only("//client/python:inductor_long_test")
def test_four_ranks_tuned_then_cached(wide_daemon):
    _tuned_then_cached(wide_daemon, 4, window_us=WIDE_WINDOW_US)


def test_registrations_in_inductor_key():
    """What the integration adds to Inductor's key changes with an op's
    choices and split points, and only with them (no ranks: the long twin
    has the compiles)."""
    import torch
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    from autotuned.inductor import _caches

    @torch.library.custom_op("autotuned_test::keyed", mutates_args=())
    def keyed(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    def one(x):
        return x.clone()

    def other(x):
        return x * 1.0

    def key(configs, **ranges):
        register_custom_op_autotuning(keyed, configs=[CustomOpConfig(c) for c in configs],
                                      **ranges)
        return repr(_caches._registrations())

    split = {"dispatch_on": {"tensor_name": "x", "dim": 0}}
    base = key([one, other])
    assert "autotuned_test.keyed.default" in base
    assert key([one, other]) == base
    assert key([one]) != base
    assert key([one, other], split_points=[32], **split) != key([one, other], split_points=[64],
                                                                **split)
    assert key([one, other], split_points=[32], **split) == key([one, other], split_points=[32],
                                                                **split)


@long_only("//client/python:inductor_long_test")
def test_changed_registration_not_served_from_inductor_cache(daemon):
    """Inductor's own key does not cover register_custom_op_autotuning: with
    the integration's, a compile after the op's choices changed is not
    served the graph of the old ones (it asks: the new choice is timed),
    and a compile with nothing changed is."""
    plan = {"ops": ("all_reduce",),
            "steps": [{"fresh": False}, {"fresh": False, "reregister": True},
                      {"fresh": False}]}
    results = _ok(run_ranks(compile_steps, args=(daemon.target, plan), env=_env(),
                            timeout=500))
    for i in range(3):
        _same_on_every_rank(results, i)
    first, changed, again = results[0]
    assert _statuses(first) == [("all_reduce_autotuned", "TUNED")], first
    assert changed["fx_hits"] == 0, changed
    assert _statuses(changed) == [("all_reduce_autotuned", "TUNED")], changed
    assert len(changed["decisions"][0][1]) == 4, changed["decisions"]  # default + 3
    assert again["fx_hits"] >= 1 and again["decisions"] == [], again


def test_version_guard():
    import autotuned.inductor as ai

    ai.check_version("2.11.0+cu130")
    with pytest.raises(RuntimeError, match=r"PyTorch 2\.11\.x .* this is PyTorch 2\.10\.1"):
        ai.check_version("2.10.1")


def test_enable_defaults_window_and_timeout_keeps_callers():
    """A compile's asks wait up to 10 s for the other ranks by default (ranks
    compile on their own, seconds apart); a caller's options are kept."""
    import autotuned.inductor as ai
    from autotuned._proto import autotuned_pb2 as pb
    from autotuned.group import GroupDescription, RankInfo

    info = RankInfo(rank=0, global_rank=0, hostname="h", target="unix:/nonexistent/at.sock",
                    local_gpu=0, daemon="", reachable=True, error="")
    desc = GroupDescription(id="defaults", rank=0, world_size=1, global_ranks=(0,),
                            ranks=(info,))
    try:
        ai.enable(group=desc, functional=False)
        opts = ai._state.options
        assert opts.presync_window_us == ai.DEFAULT_PRESYNC_WINDOW_US == 10_000_000
        assert opts.timeout_ms == ai.DEFAULT_CANDIDATE_TIMEOUT_MS
        ai.enable(group=desc, functional=False,
                  options=pb.Options(presync_window_us=250_000, timeout_ms=3_000))
        assert (ai._state.options.presync_window_us, ai._state.options.timeout_ms) == \
            (250_000, 3_000)
    finally:
        ai.disable()


@long_only("//client/python:inductor_long_test")
def test_two_ranks_cached_after_a_daemon_restart(daemon):
    """The daemon SIGKILLed and started again between two launches of the
    ranks: every selection CACHED. (Last in the file: the default tier's
    shards, by position, stay balanced.)"""
    _tuned_then_cached(daemon, 2)
    daemon.restart()
    plan = {"steps": [{}]}
    results = _ok(run_ranks(compile_steps, args=(daemon.target, plan),
                            env=_env(kernels_shared=True), timeout=500))
    _same_on_every_rank(results, 0)
    assert [s for _, s in _statuses(results[0][0])] == ["CACHED"] * 3


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
