"""autotuned.inductor's choices against real PyTorch: gloo, CPU, a sim daemon.

  * choices of clearly different costs: the fast one wins every compile (20
    compiles; 50 in the long tier);
  * a decomposition whose traced code depends on the rank (this rank's
    shard of a reduced tensor) has one key on every rank: TUNED, then CACHED
    in a fresh compile;
  * an ask recorded as answered that the daemon measures after all: its
    choices compiled before the run's first step (long tier);
  * all_reduce -> all_gather -> reduce_scatter, each with the caller's own
    choices, compiles and computes the right result on 2 and on 4 ranks;
  * errors inside compilation (ranks that ask for different candidates:
    the daemon's INVALID_ARGUMENT; a dtype the daemon does not take; the
    integration's own code raising on one rank) end in the op's default on
    every rank with a warning, and the compile succeeds;
  * impls with a parameter the ops do not take (NCCL's algo) are refused
    by enable().

Each compile lowers its graph afresh, the kernels shared (relowering.py).
The default tier's four cases run in one launch of 2 ranks, one case after
another in the same processes (`launch`): a launch and its first compile
cost more than a case's own compiles; each test checks its case's part.
The 4-rank chain is a launch of its own. The long twin
(//client/python:inductor_choices_long_test) makes 50 compiles of the first
case (20 in the default tier) and adds the ask recorded as answered.
"""

import logging
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import WIDE_WINDOW_US, Daemon  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from relowering import relowering, shared  # noqa: E402
from tier import LONG, long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

WINDOW_US = 10_000_000  # ranks compiling side by side on a busy machine drift apart
# The op's default of the cost case sleeps this long besides its all_reduce.
SLEEP_S = 0.05


@pytest.fixture(autouse=True)
def deadline():
    with guard(1800 if LONG else 600):
        yield


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _ops(case, rank, world):
    """The custom ops of a case and the model that calls them: (model,
    eager reference of the model)."""
    import torch
    import torch.distributed as dist
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    c10d = torch.ops._c10d_functional
    group = dist.group.WORLD.group_name

    def op(name, eager, shape, configs):
        defined = torch.library.custom_op(f"autotuned_choices::{name}", mutates_args=())(eager)
        defined.register_fake(lambda x: x.new_empty(shape(x)))
        register_custom_op_autotuning(defined, name=name, configs=configs)
        return defined

    def same(x):
        return tuple(x.shape)

    def shard(x):
        return (x.shape[0] // world,) + tuple(x.shape[1:])

    def gathered(x):
        return (x.shape[0] * world,) + tuple(x.shape[1:])

    if case == "cost":
        def slow_default(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            dist.all_reduce(y)
            time.sleep(SLEEP_S)
            return y

        def fast(x):
            return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

        def slow(x):
            # Its collective twice: about twice fast's cost, the same sum.
            a = c10d.wait_tensor(c10d.all_reduce(x, "sum", group))
            b = c10d.wait_tensor(c10d.all_reduce(x, "sum", group))
            return (a + b) * 0.5

        # Fast listed before slow: the fast one wins under a ranking that
        # breaks ties by request order too.
        ar = op("cost", slow_default, same, [CustomOpConfig(fast), CustomOpConfig(slow)])
        return (lambda x: ar(x)), slow_default

    if case == "rank_dependent":
        def keep_shard(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            dist.all_reduce(y)
            n = x.shape[0] // world
            r = dist.get_rank()
            return y[r * n:(r + 1) * n].clone()

        def reduce_then_slice(x):
            # Traced with this rank's offsets: different code on every rank.
            full = c10d.wait_tensor(c10d.all_reduce(x, "sum", group))
            n = x.shape[0] // world
            r = dist.get_rank()
            return full[r * n:(r + 1) * n].clone()

        def scatter(x):
            return c10d.wait_tensor(c10d.reduce_scatter_tensor(x, "sum", world, group))

        rs = op("shard", keep_shard, shard,
                [CustomOpConfig(reduce_then_slice), CustomOpConfig(scatter)])
        return (lambda x: rs(x)), keep_shard

    if case == "chain":
        def all_reduce(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            dist.all_reduce(y)
            return y

        def all_gather(x: torch.Tensor) -> torch.Tensor:
            y = x.new_empty(gathered(x))
            dist.all_gather_into_tensor(y, x.contiguous())
            return y

        def reduce_scatter(x: torch.Tensor) -> torch.Tensor:
            y = x.new_empty(shard(x))
            dist.reduce_scatter_tensor(y, x.contiguous())
            return y

        def ar_direct(x):
            return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

        def ar_split(x):
            # reduce_scatter + all_gather: the same sum.
            part = c10d.wait_tensor(c10d.reduce_scatter_tensor(x, "sum", world, group))
            return c10d.wait_tensor(c10d.all_gather_into_tensor(part, world, group))

        def ag_direct(x):
            return c10d.wait_tensor(c10d.all_gather_into_tensor(x, world, group))

        def ag_staged(x):
            return c10d.wait_tensor(c10d.all_gather_into_tensor(x.clone(), world, group))

        def rs_direct(x):
            return c10d.wait_tensor(c10d.reduce_scatter_tensor(x, "sum", world, group))

        def rs_sliced(x):
            full = c10d.wait_tensor(c10d.all_reduce(x, "sum", group))
            n = x.shape[0] // world
            r = dist.get_rank()
            return full[r * n:(r + 1) * n].clone()

        ar = op("chain_ar", all_reduce, same, [CustomOpConfig(ar_direct),
                                                CustomOpConfig(ar_split)])
        ag = op("chain_ag", all_gather, gathered, [CustomOpConfig(ag_direct),
                                                    CustomOpConfig(ag_staged)])
        rs = op("chain_rs", reduce_scatter, shard, [CustomOpConfig(rs_direct),
                                                     CustomOpConfig(rs_sliced)])

        def chain(x):
            return rs(ag(ar(x)) + 1)

        def eager(x):
            return reduce_scatter(all_gather(all_reduce(x)) + 1)
        return chain, eager

    if case == "errors":
        def all_reduce(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            dist.all_reduce(y)
            return y

        def scaled(x, scale=1):
            # `scale` is this rank's own (rank + 1 over itself): a
            # parameter, so part of the key, which differs between ranks.
            return c10d.wait_tensor(c10d.all_reduce(x * (scale / scale), "sum", group))

        def direct(x):
            return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

        # Ranks that disagree on a parameter: the daemon refuses their
        # problem sets (INVALID_ARGUMENT, to every rank of both rounds).
        # (The op's default is called with the first config's parameters.)
        mismatch = op("mismatch", all_reduce, same,
                      [CustomOpConfig(direct), CustomOpConfig(scaled, scale=rank + 1)])
        # float64: no dtype of the daemon's (InvalidArgument in this process).
        wide = op("wide", all_reduce, same, [CustomOpConfig(direct), CustomOpConfig(scaled)])
        # The integration's own code raises on rank 1 only (see _compile).
        broken = op("broken", all_reduce, same,
                    [CustomOpConfig(direct), CustomOpConfig(scaled)])

        def model(x):
            return mismatch(x) + 1, wide(x.double()), broken(x * 3)

        def eager(x):
            return all_reduce(x) + 1, all_reduce(x.double()), all_reduce(x * 3)
        return model, eager
    raise ValueError(case)


def _compile(rank, world, target, plan):
    """Enables the integration, then compiles the case's model `compiles`
    times, each lowered afresh (relowering); what each compile saw. What it
    patches is restored at the end, for the next case of the launch."""
    import torch
    import torch.distributed as dist

    import autotuned.inductor as ai
    import autotuned.inductor._choices as choices_module
    from autotuned import pb

    case = plan["case"]
    model, eager = _ops(case, rank, world)
    warnings = _Warnings()
    logging.getLogger("autotuned.inductor").addHandler(warnings)
    undo = []
    if case == "errors" and rank == 1:
        original = choices_module.display_name
        undo.append(lambda: setattr(choices_module, "display_name", original))

        def broken(choice):
            if "broken" in str(getattr(choice, "name", "")):
                raise RuntimeError("display_name broke on rank 1")
            return original(choice)
        choices_module.display_name = broken
    if plan.get("claim_answered"):
        # As if an earlier answer were recorded: the Tune goes first, and the
        # choices are compiled only when a run comes (before its first step).
        import autotuned.inductor._answered as answered
        lookup = answered.lookup
        undo.append(lambda: setattr(answered, "lookup", lookup))
        answered.lookup = lambda *_: (None, True)
    ai.enable(target=target, timeout=300,
              options=pb.Options(warmup=2, iterations=plan.get("iterations", 10),
                                 refresh=plan.get("refresh", False),
                                 presync_window_us=plan.get("window_us", WINDOW_US)))
    # Integer values: every sum and half below is exact in float32.
    x = torch.arange(plan.get("count", 16) * world, dtype=torch.float32) + 100 * rank
    out = []
    for _ in range(plan.get("compiles", 1)):
        dist.barrier()
        torch._dynamo.reset()
        before = len(ai.decisions())
        start = time.monotonic()
        with relowering():
            result = torch.compile(model)(x)
        wall = time.monotonic() - start
        expected = eager(x)
        if not isinstance(result, tuple):
            result, expected = (result,), (expected,)
        out.append({"decisions": ai.decisions()[before:], "wall_s": wall,
                    "correct": all(r.shape == e.shape and bool(torch.allclose(r, e))
                                   for r, e in zip(result, expected)),
                    "warnings": list(warnings.messages)})
        warnings.messages.clear()
    ai.disable()
    logging.getLogger("autotuned.inductor").removeHandler(warnings)
    for restore in undo:
        restore()
    return out


def _cases(rank, world, target, plans):
    """_compile of each plan in turn, in this rank's process."""
    return [_compile(rank, world, target, plan) for plan in plans]


def _env():
    # One compile thread: no worker pool to start on a small, busy machine.
    # No case here is about Inductor's caches: the kernels are shared.
    return {"TORCHINDUCTOR_CACHE_DIR": shared(), "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _run_cases(daemon, world, plans, timeout):
    """Every plan's case in one launch: per rank, per case, per compile."""
    results = run_ranks(_cases, world=world, args=(daemon.target, plans), env=_env(),
                        timeout=timeout)
    for r in results:
        assert not isinstance(r, RankError), r
    return results


def _checked(results):
    """One case's results (per rank, per compile), checked: (selection,
    winner, status) the same on every rank, the right result."""
    for i in range(len(results[0])):
        first = [(d[0], d[2], d[3]) for d in results[0][i]["decisions"]]
        for r in results[1:]:
            assert [(d[0], d[2], d[3]) for d in r[i]["decisions"]] == first, (results[0][i],
                                                                               r[i])
        assert all(r[i]["correct"] for r in results), [r[i] for r in results]
    return results


def _run(daemon, world, plan, timeout=900):
    results = _run_cases(daemon, world, [plan], timeout)
    return _checked([r[0] for r in results])


# 4 MiB per rank, and enough iterations, that each interleaved pass tells
# the two apart on a loaded machine, whichever way the ranking breaks ties.
COST = {"case": "cost", "refresh": True, "count": 1 << 20, "iterations": 24}
FAST_COMPILES = 50 if LONG else 20
# The default tier's cases, in the order `launch` runs them (errors last:
# rank 0 waits out a window there).
CASES = {"cost": {**COST, "compiles": FAST_COMPILES},
         "rank_dependent": {"case": "rank_dependent", "compiles": 2},
         "chain": {"case": "chain"},
         "errors": {"case": "errors"}}


@pytest.fixture(scope="module")
def launch():
    """The default tier's cases (CASES) in one launch of 2 ranks against one
    daemon: each case's results (per rank, per compile), checked by
    _checked when its test reads them."""
    d = Daemon()
    try:
        with guard(1800 if LONG else 600):
            results = _run_cases(d, 2, list(CASES.values()),
                                 timeout=900 + 120 * FAST_COMPILES)
    finally:
        d.stop()
    return {name: [r[i] for r in results] for i, name in enumerate(CASES)}


def _fast_wins(results):
    for step in _checked(results)[0]:
        [(_name, timings, winner, status, why)] = step["decisions"]
        assert status == "TUNED", step
        assert winner == "cost_fast", step
        # By construction: the default sleeps, the slow choice reduces twice.
        assert timings["cost_fast"] < timings["cost_slow"], timings
        assert timings["cost_fast"] < timings["cost_fallback_default"], timings


def test_fast_choice_wins(launch):
    """The op's default (an all_reduce and a sleep), a decomposition that
    reduces twice and one that reduces once, measured afresh each compile:
    the fast one wins every time, the same on both ranks."""
    _fast_wins(launch["cost"])


def test_rank_dependent_code_tuned_then_cached(launch):
    """A decomposition traced with this rank's slice offsets: one key on
    every rank (its code), so the round runs (TUNED) and a fresh compile is
    answered from the daemon's cache (CACHED); the result is right."""
    results = _checked(launch["rank_dependent"])
    statuses = [[d[3] for d in step["decisions"]] for step in results[0]]
    assert statuses == [["TUNED"], ["CACHED"]], results[0]
    timings = results[0][0]["decisions"][0][1]
    assert set(timings) == {"shard_fallback_default", "shard_reduce_then_slice",
                            "shard_scatter"}, timings
    assert all(0 < ms < 1000 for ms in timings.values()), timings
    assert not any("FALLBACK" in w for r in results for s in r for w in s["warnings"])


@long_only("//client/python:inductor_choices_long_test")
def test_expected_cache_hit_that_is_a_run_compiles_before_the_first_step(daemon):
    """An ask recorded as answered before, that the daemon measures after
    all (its cache is empty here): the choices are compiled when the run
    comes, before its first step, and none is ruled out for it."""
    results = _run(daemon, 2, {"case": "rank_dependent", "claim_answered": True})
    [(_name, timings, _winner, status, _)] = results[0][0]["decisions"]
    assert status == "TUNED", results[0][0]
    assert len(timings) == 3 and all(0 < ms < 1000 for ms in timings.values()), timings


def _chain(results):
    step = _checked(results)[0][0]
    assert [(d[0], d[3]) for d in step["decisions"]] == [
        ("chain_ar", "TUNED"), ("chain_ag", "TUNED"), ("chain_rs", "TUNED")], step


def test_chain_two_ranks(launch):
    """all_reduce -> all_gather -> reduce_scatter, each op with two choices
    of the caller's besides its default: three rounds, the right result."""
    _chain(launch["chain"])


def test_chain_four_ranks(wide_daemon):
    """The same chain on 4 ranks (a launch of its own)."""
    _chain(_run(wide_daemon, 4, {"case": "chain", "window_us": WIDE_WINDOW_US}))


def test_errors_inside_compilation_end_in_the_default(launch):
    """Ranks that ask for different candidates (a parameter of this rank's:
    the daemon's INVALID_ARGUMENT), a float64 input (no dtype of the
    daemon's) and the integration's own code raising on rank 1: each
    selection is the op's default on both ranks, with a warning naming the
    reason; the compile succeeds and computes the right result."""
    results = _checked(launch["errors"])
    for r in results:
        step = r[0]
        decisions = {d[0]: d for d in step["decisions"]}
        assert [d[3] for d in decisions.values()] == ["FALLBACK"] * 3, step
        assert all(d[2].endswith("fallback_default") for d in decisions.values()), step
        assert "different problem sets" in decisions["mismatch"][4], decisions["mismatch"]
        assert "float64" in decisions["wide"][4] or "dtype" in decisions["wide"][4], \
            decisions["wide"]
        for name in decisions:
            assert any(name in w and "FALLBACK" in w for w in step["warnings"]), (
                name, step["warnings"])
    # Rank 1 raised and never asked; rank 0 waited out the window.
    broken = [{d[0]: d for d in r[0]["decisions"]}["broken"] for r in results]
    assert "window" in broken[0][4], broken
    assert "display_name broke on rank 1" in broken[1][4], broken


def test_impls_with_parameters_the_ops_do_not_take_are_refused():
    # NCCL's algorithm and protocol are the daemon's tuner plugin's: a choice
    # named after them would run NCCL's own choice in this process.
    import autotuned.inductor as ai
    from autotuned import InvalidArgument

    before = ai._state
    for impls, why in (({"ns::op": "all_reduce/nccl:algo=2,proto=3"}, "NCCL's algorithm"),
                       ({"ns::op": ["all_reduce/one_shot", "all_reduce/one_shot:root=1"]},
                        "unknown parameters")):
        with pytest.raises(InvalidArgument, match=r"impls\['ns::op'\]: .*" + why):
            ai.enable(impls=impls)
    assert ai._state is before   # nothing enabled


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
