"""autotuned.inductor's functional collectives against real PyTorch: gloo,
CPU, a sim daemon.

A model written with plain functional collectives
(torch.distributed._functional_collectives all_reduce, all_gather_tensor,
reduce_scatter_tensor), no custom op registered, compiled with
torch.compile after autotuned.inductor.enable():

  * each collective is a selection the daemon answers (TUNED, two
    candidates timed: Inductor's own lowering and the decomposition that
    computes the same thing), the same on every rank, and the output equals
    the eager model's;
  * the decompositions, made to win, run in the compiled code (CACHED: the
    daemon's cache answers) and give the same output;
  * a graph compiled inside functional_off() asks nothing and keeps
    Inductor's lowering;
  * an all_reduce with a matmul between it and its wait keeps Inductor's
    asynchronous lowering without an ask, beside one waited at once that
    is TUNED;
  * a dead daemon: every collective falls back to Inductor's own lowering,
    the same on every rank, no crash, the right output;
  * an all_reduce whose input is marked dynamic on its first dimension,
    compiled once (the probe ladder shrunk to one split point, SPLIT rows),
    its choices replaced by ones that leave a marker and cost, by
    construction, least below the split (`low`) and above it (`high`): a
    selection per range in one Tune, one graph for every size, one
    comparison of the size at SPLIT in it, each call at sizes on both sides
    of the split running its range's winner, the right output, every rank
    the same decisions;
  * 4 ranks: the three collectives over the world and an all_reduce over
    each rank's pair (a TP group inside the job), each TUNED.

Each compile lowers its graph afresh, the kernels shared (relowering.py).
The 2-rank cases of the default tier (the three collectives, the overlap,
the dynamic all_reduce of known costs) run in one launch, one after another
in the same processes (`launch`): a launch and its first compile cost more
than a case's own compiles; each test checks its case's part.
The long twin (//client/python:inductor_functional_long_test) adds the
dead daemon's case (the default tier has it through DTensor,
inductor_dtensor_test, the same path of autotuned.inductor._functional),
and the dynamic all_reduce with the module's own choices (whichever wins
each range).
"""

import logging
import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import WIDE_WINDOW_US, Daemon  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from recording import graph_runs, tune_labels  # noqa: E402
from relowering import relowering, shared  # noqa: E402
from tier import LONG, long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

WINDOW_US = 10_000_000  # ranks compiling side by side on a busy machine drift apart
NAMES = ["functional_all_reduce", "functional_all_gather_into_tensor",
         "functional_reduce_scatter_tensor"]


@pytest.fixture(autouse=True)
def deadline():
    with guard(1200 if LONG else 600):
        yield


def _model(world, pair):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def model(x):
        # No compute after the collectives: 2.11's reorder_for_locality sinks
        # the waits of an inference graph's outputs to the end, and compute
        # moved there too (reduced + 1, the pair's x - 1) would lie between
        # the earlier collectives and their waits, which then keep
        # Inductor's lowering (_functional's overlap rule).
        reduced = funcol.all_reduce(x * 2 + 1, "sum", group)
        gathered = funcol.all_gather_tensor(x, 0, group)
        scattered = funcol.reduce_scatter_tensor(x, "sum", 0, group)
        out = [reduced, gathered, scattered]
        if pair is not None:
            out.append(funcol.all_reduce(x, "sum", pair))
        return out
    return model


def _overlap_model():
    """An all_reduce issued early and waited late, a matmul that does not
    read it in between (the overlap Inductor keeps), next to one waited at
    once. funcol's functions wait where they are traced, so the early one
    is written with the ops they trace to. w needs a gradient: the graph is
    a training forward, which 2.11's reorder_for_locality (inference only)
    leaves in program order."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    c10d = torch.ops._c10d_functional
    w = (torch.arange(16, dtype=torch.float32).reshape(4, 4) % 5).requires_grad_()

    def model(x):
        early = c10d.all_reduce(x * 2, "sum", group.group_name)
        product = x @ w
        early = c10d.wait_tensor(early)
        at_once = funcol.all_reduce(x + 1, "sum", group)
        # A product, not a sum: mm + add would become one addmm after the wait.
        return [early * product, at_once * 3]
    return model


def _steps(rank, world, target, plan):
    """Enables the integration and compiles the model once per step, each
    lowered afresh (relowering); what each step saw. What it patches is
    restored at the end, for the next case of the launch."""
    import torch
    import torch.distributed as dist

    import autotuned.inductor as ai
    from autotuned import pb
    from autotuned.inductor import _select

    pair = None
    if plan.get("pairs"):
        groups = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]
        pair = groups[rank // 2]
    model = _overlap_model() if plan.get("overlap") else _model(world, pair)
    codes = []
    undo_runs = graph_runs(codes)
    original_ask = _select.ask
    force = {"on": ()}
    asked = []

    def ask(state, selections, *args, **kwargs):
        asked.extend(s.name for s in selections)
        answers = original_ask(state, selections, *args, **kwargs)
        if not force["on"]:
            return answers
        # The decision stays the daemon's; the code compiled is the other choice.
        return [(s.choices[1], t) if s.name in force["on"] else (w, t)
                for s, (w, t) in zip(selections, answers)]
    _select.ask = ask
    from autotuned.inductor import _functional
    original_decompositions = _functional._decompositions
    if plan.get("untraceable"):
        # A choice Inductor cannot trace (an op with no fake implementation)
        # is left out; the selection goes on with the others.

        @torch.library.custom_op("attest::no_fake", mutates_args=())
        def no_fake(t: torch.Tensor) -> torch.Tensor:
            return t.clone()

        def untraceable(t):
            return torch.ops.attest.no_fake(t)
        _functional._decompositions = lambda op: original_decompositions(op) + [untraceable]

    kept = []

    class Kept(logging.Handler):
        def emit(self, record):
            if "asynchronous lowering" in record.getMessage():
                kept.append(record.getMessage())
    logger = logging.getLogger("autotuned.inductor")
    handler = Kept(logging.INFO)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    ai.enable(target=target, timeout=300,
              options=pb.Options(warmup=1, iterations=5,
                                 presync_window_us=plan.get("window_us", WINDOW_US)))
    # Integer values: every sum is exact in float32. `rows`: a size of the
    # case's own (the daemon's cache keys its problems by size).
    rows = plan.get("rows", 2 * world)
    x = torch.arange(4 * rows, dtype=torch.float32).reshape(rows, 4) + 100 * rank
    expected = [t.wait() if hasattr(t, "wait") else t for t in model(x)]
    out = []
    for step in plan["steps"]:
        if step.get("kill_daemon_pid") and rank == 0:
            os.kill(step["kill_daemon_pid"], signal.SIGKILL)
        force["on"] = step.get("force_other", ())
        dist.barrier()
        torch._dynamo.reset()
        before, first_code, first_ask, first_kept = (len(ai.decisions()), len(codes),
                                                     len(asked), len(kept))
        start = time.monotonic()
        with relowering():
            if step.get("off"):
                with ai.functional_off():
                    result = torch.compile(model)(x)
            else:
                result = torch.compile(model)(x)
        out.append({"decisions": ai.decisions()[before:], "codes": codes[first_code:],
                    "asked": asked[first_ask:], "kept": kept[first_kept:],
                    "wall_s": time.monotonic() - start,
                    "correct": [bool(torch.equal(r, e)) for r, e in zip(result, expected)]})
    ai.disable()
    _select.ask = original_ask
    _functional._decompositions = original_decompositions
    logger.removeHandler(handler)
    undo_runs()
    return out


def _env():
    # One compile thread: no worker pool to start on a small, busy machine.
    return {"TORCHINDUCTOR_CACHE_DIR": shared(), "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _run(daemon, world, plan):
    results = run_ranks(_steps, world=world, args=(daemon.target, plan), env=_env(),
                        timeout=900 if LONG else 400)
    for r in results:
        assert not isinstance(r, RankError), r
    return _checked(results)


def _checked(results):
    """One case's steps (per rank, per step), checked: each decision the same
    on every rank of its group, the eager output."""
    for i in range(len(results[0])):
        for rank, r in enumerate(results):
            # (selection, {candidate: ms}, winner, status): the same on every
            # rank of its group (a pair's all_reduce: the pair's first rank).
            for d in r[i]["decisions"]:
                first = 0 if d[0] in NAMES else rank - rank % 2
                same = {e[0]: e[:4] for e in results[first][i]["decisions"]}
                assert d[:4] == same[d[0]], (results[first][i], r[i])
            assert all(r[i]["correct"]), r[i]
    return results


def _tuned(step, names):
    assert [(d[0], d[3]) for d in step["decisions"]] == [(n, "TUNED") for n in names], step
    for name, timings, winner, _status, _why in step["decisions"]:
        # Inductor's own lowering and the decomposition, each timed as itself.
        assert len(timings) == 2 and f"{name}_default" in timings, timings
        assert winner in timings, timings
        assert all(0 < ms < 1000 for ms in timings.values()), timings


def test_two_ranks_each_collective_tuned_then_its_other_choice_runs(launch):
    """TUNED per collective and the eager output (a third choice that
    Inductor cannot trace left out, the two others timed); then the other
    choices compiled in (CACHED), visible in the generated code, the same
    output; then functional_off(): no ask, Inductor's lowering."""
    tuned, forced, off = _checked(launch["collectives"])[0]
    _tuned(tuned, NAMES)
    assert [(d[0], d[3]) for d in forced["decisions"]] == [(n, "CACHED") for n in NAMES]
    code = "\n".join(forced["codes"])
    # all_gather as an all_to_all of the repeated input, reduce_scatter as
    # an all_reduce and this rank's slice, all_reduce split in two.
    assert "all_to_all_single" in code and "reduce_scatter_tensor" in code, code
    assert off["decisions"] == []
    assert "all_to_all_single" not in "\n".join(off["codes"])


def test_overlapped_all_reduce_keeps_inductors_lowering(launch):
    """An all_reduce with a matmul between it and its wait keeps Inductor's
    asynchronous lowering: no ask, no decision, one INFO line naming the
    matmul, the matmul between the collective and its wait in the code;
    the all_reduce waited at once beside it is TUNED. The eager output."""
    for r in _checked(launch["overlap"]):
        step = r[0]
        assert step["asked"] == ["functional_all_reduce_1"], step
        _tuned(step, ["functional_all_reduce_1"])
        assert len(step["kept"]) == 1 and "functional_all_reduce " in step["kept"][0] \
            and "mm" in step["kept"][0], step["kept"]
        code = "\n".join(step["codes"])
        issued = code.index("_c10d_functional.all_reduce_.default(")
        waited = code.index("_c10d_functional.wait_tensor.default(", issued)
        assert "mm(" in code[issued:waited], code


SPLIT = 1024  # rows of the dynamic input: the probe ladder's one split point
UPPER = 16384  # rows: the last range's size
WIDTH = 4
# The ladder in bytes of the float32 (rows, WIDTH) input: ranges [1, SPLIT]
# and [SPLIT + 1, inf), tuned at SPLIT and UPPER rows.
PROBE = (SPLIT * WIDTH * 4, UPPER * WIDTH * 4)
# Rows the compiled function is called at: both sides of the split.
CALLS = (512, SPLIT, SPLIT + 1, 4096, 64)
# Costs far apart at both sizes: on a loaded 2-core machine the gloo
# all_reduce around a choice's cost takes 10 to 30 ms and varies as much
# (4 test processes beside it), so a gap of 25 ms could read as a tie.
CHEAP_US, FIXED_US = 1000, 100000


def _dynamic_rank(rank, world, target, markers):
    """Compiles funcol.all_reduce of an input marked dynamic on dim 0 once
    and calls it at each of CALLS; `markers`: its choices replaced by
    dear_default, low and high (module docstring), each leaving its name
    in `ran` when it runs. What it patches is restored at the end."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    import autotuned.inductor as ai
    from autotuned import pb
    from autotuned.inductor import _functional, _ranges

    probe, decompositions = _ranges.PROBE_BYTES, _functional._decompositions
    _ranges.PROBE_BYTES = PROBE
    group = dist.group.WORLD
    ran, tunes, graphs, codes = [], [], [], []
    if markers:
        c10d = torch.ops._c10d_functional

        def costly(name, cost_us):
            @torch.library.custom_op(f"attest_functional::{name}", mutates_args=())
            def op(x: torch.Tensor) -> torch.Tensor:
                ran.append(name)
                time.sleep(cost_us(x.shape[0]) / 1e6)
                return x.clone()
            op.register_fake(lambda x: torch.empty_like(x))
            return op

        dear = costly("dear", lambda n: FIXED_US + 20000)
        low_cost = costly("low", lambda n: CHEAP_US if n <= SPLIT else FIXED_US)
        high_cost = costly("high", lambda n: FIXED_US if n <= SPLIT else CHEAP_US)

        def dear_default(x):
            return c10d.wait_tensor(c10d.all_reduce(dear(x), "sum", group.group_name))

        def low(x):
            return c10d.wait_tensor(c10d.all_reduce(low_cost(x), "sum", group.group_name))

        def high(x):
            return c10d.wait_tensor(c10d.all_reduce(high_cost(x), "sum", group.group_name))
        _functional._decompositions = lambda op: [dear_default, low, high]

    tune_labels(tunes)
    undo_runs = graph_runs(codes, graphs)

    def data(n):
        # Integer values: every sum is exact in float32.
        x = torch.arange(n * WIDTH, dtype=torch.float32).reshape(n, WIDTH) + 1000 * rank
        torch._dynamo.mark_dynamic(x, 0)
        return x

    ai.enable(target=target, timeout=300,
              options=pb.Options(warmup=1, iterations=5, presync_window_us=WINDOW_US))
    dist.barrier()
    compiled = torch.compile(lambda x: funcol.all_reduce(x, "sum", group))
    calls, correct = [], []
    with relowering():
        compiled(data(CALLS[0]))  # compiled and tuned: every choice runs
        for n in CALLS:
            del ran[:]
            got = compiled(data(n))
            calls.append(sorted(set(ran)))
            want = torch.arange(n * WIDTH, dtype=torch.float32).reshape(n, WIDTH) * world + \
                1000 * sum(range(world))
            correct.append(bool(torch.equal(got, want)))
    out = {"decisions": ai.decisions(), "dispatches": ai.dispatches(), "tunes": tunes,
           "graphs": len({id(g) for g in graphs}), "codes": codes, "calls": calls,
           "correct": correct}
    ai.disable()
    _ranges.PROBE_BYTES, _functional._decompositions = probe, decompositions
    undo_runs()
    return out


def _launch_rank(rank, world, target, plans):
    """In one rank's process: _steps of each plan but the last, then
    _dynamic_rank with markers (the last, a plan with no steps)."""
    *steps, _ = plans
    return [_steps(rank, world, target, p) for p in steps] + [
        _dynamic_rank(rank, world, target, True)]


# The default tier's 2-rank cases, in the order `launch` runs them: the
# three collectives (a third choice that Inductor cannot trace), the
# overlap (an input of its own size: its all_reduce is TUNED, not answered
# from the first case's), the dynamic all_reduce with choices of known cost.
CASES = {"collectives": {"steps": [{}, {"force_other": NAMES}, {"off": True}],
                         "untraceable": True},
         "overlap": {"steps": [{}], "overlap": True, "rows": 8},
         "dynamic": {}}


@pytest.fixture(scope="module")
def launch():
    """The default tier's 2-rank cases (CASES) in one launch against one
    daemon: each case's results per rank, checked when its test reads them."""
    d = Daemon()
    try:
        with guard(600):
            results = run_ranks(_launch_rank, world=2, args=(d.target, list(CASES.values())),
                                env=_env(), timeout=500)
    finally:
        d.stop()
    for r in results:
        assert not isinstance(r, RankError), r
    return {name: [r[i] for r in results] for i, name in enumerate(CASES)}


def _dynamic(daemon, markers):
    results = run_ranks(_dynamic_rank, world=2, args=(daemon.target, markers), env=_env(),
                        timeout=400)
    for r in results:
        assert not isinstance(r, RankError), r
    return _dynamic_checked(results)


def _dynamic_checked(results):
    """The dynamic all_reduce's results per rank, checked: one Tune of both
    ranges, the same decisions and table on every rank, one graph, the right
    output; (the ranges' selection names, results)."""
    names = [f"functional_all_reduce_range_1_{SPLIT}",
             f"functional_all_reduce_range_{SPLIT + 1}_inf"]
    for r in results:
        # One Tune of both ranges, the same decisions and table on every
        # rank, one graph for every size, the right output at each.
        assert r["tunes"] == [names], r["tunes"]
        assert [d[:4] for d in r["decisions"]] == [d[:4] for d in results[0]["decisions"]]
        assert [(d[0], d[3]) for d in r["decisions"]] == [(n, "TUNED") for n in names], r
        assert r["dispatches"] == results[0]["dispatches"], r["dispatches"]
        assert r["graphs"] == 1 and all(r["correct"]), r
    return names, results


@long_only("//client/python:inductor_functional_long_test")
def test_dynamic_all_reduce_tuned_per_range_in_one_graph(daemon):
    """funcol.all_reduce of an input marked dynamic on dim 0: both ranges of
    the ladder TUNED in one Tune, one graph, the right output at every
    size, on both ranks (the module's choices: whichever wins)."""
    names, results = _dynamic(daemon, markers=False)
    for _name, timings, winner, _status, _why in results[0]["decisions"]:
        # The default and the reduce_scatter + all_gather of a flat copy.
        assert len(timings) == 2 and winner in timings, timings


def test_dynamic_all_reduce_runs_each_ranges_winner(launch):
    """With choices of known cost, low wins [1, SPLIT] and high the rest:
    the table of both, one `if` on the size at SPLIT in the one graph, and
    each call runs its range's winner and nothing else."""
    names, results = _dynamic_checked(launch["dynamic"])
    for r in results:
        assert [d[2] for d in r["decisions"]] == [f"{names[0]}_low", f"{names[1]}_high"], r
        assert r["dispatches"] == [("functional_all_reduce", [
            (1, SPLIT, f"{names[0]}_low"), (SPLIT + 1, None, f"{names[1]}_high")])], r
        branches = [line.strip() for line in r["codes"][0].splitlines()
                    if line.strip().startswith("if ") and "<=" in line]
        assert branches and all(line.endswith(f"<= {SPLIT}:") or
                                line.endswith(f"<= {SPLIT}):") for line in branches), branches
        for n, ran in zip(CALLS, r["calls"]):
            assert ran == (["low"] if n <= SPLIT else ["high"]), (n, ran)


@long_only("//client/python:inductor_functional_long_test")
def test_dead_daemon_falls_back_to_inductors_lowering(daemon):
    """The daemon SIGKILLed after enable(): every collective falls back at
    once to Inductor's own lowering, the same on both ranks, and the
    compiled model computes the eager model's output."""
    results = _run(daemon, 2, {"steps": [{"kill_daemon_pid": daemon.proc.pid}]})
    for r in results:
        step = r[0]
        assert [(d[0], d[2], d[3]) for d in step["decisions"]] == [
            (n, f"{n}_default", "FALLBACK") for n in NAMES], step
        assert all("daemon" in d[4].lower() or "unavailable" in d[4].lower()
                   for d in step["decisions"]), step["decisions"]
        assert "all_to_all_single" not in "\n".join(step["codes"])


def test_four_ranks_with_a_group_of_two(wide_daemon):
    """4 ranks: the three collectives over the world and an all_reduce over
    each rank's pair (groups [0, 1] and [2, 3]): every one TUNED, the same
    within each group, the eager output."""
    results = _run(wide_daemon, 4, {"steps": [{}], "pairs": True,
                                    "window_us": WIDE_WINDOW_US})
    _tuned(results[0][0], NAMES + ["functional_all_reduce_1"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
