"""autotuned.inductor with dynamic shapes against real PyTorch 2.11: 2 ranks,
gloo, CPU, a sim daemon.

All_reduce custom ops registered with 2.11's range-based autotuning
(dispatch_on x's dimension 0, split_points: ranges [1, SPLIT], ...,
[last + 1, inf], each tuned at its upper bound, the last at UPPER, the
range_upper_bound) in a model compiled with dynamic=True. Their
decompositions call opaque ops of known cost, which leave a marker each
time they run:

  * `three`, split_points=[SPLIT, TIE]: `low` costs CHEAP_US up to SPLIT
    elements, `mid` from SPLIT + 1 to TIE, `high` above TIE, each
    FIXED_US elsewhere; the op's default DEFAULT_US. So each range has its
    own winner by construction: three groups, two nested torch.cond.
  * `cross`, split_points=[SPLIT, TIE]: `linear` costs LINEAR_US per
    element, `fixed` FIXED_US: linear is cheaper at SPLIT and dearer at
    UPPER by construction; they cost the same at TIE = FIXED_US /
    LINEAR_US elements, where the middle range is tuned; the op's default
    sleeps DEFAULT_US, dearer than both. So linear wins the first range,
    fixed the third, and either the middle one within the noise of the
    other: the middle range joins the first (_ranges.merge: linear is not
    measurably slower there), whichever won it, leaving one boundary, at
    TIE: a dispatch on the size. (By winners alone it would join the third
    whenever fixed won it.)
  * `flat`, split_points=[SPLIT]: `fixed` against `double` (2 x
    FIXED_US): fixed wins both ranges, which merge into one: no dispatch.
  * `auto`, no split_points: `low` against `high`; its ranges come from
    the probe ladder (_ranges.PROBE_BYTES, here PROBE: SPLIT and UPPER
    elements, so [1, SPLIT] tuned at SPLIT and [SPLIT + 1, inf) at UPPER):
    low wins the first, high the second, by construction.

The default tier compiles `three`: one Tune for its three ranges, the
same decisions on every rank; each call runs its range's winner (the
markers), at sizes on both sides of each split point and at their edges,
with no recompile; the generated code holds one comparison of the size
per boundary (the wrapper's only `if`s) and the second process is
answered CACHED with the same code. It compiles `auto` too, twice in the
same processes (each lowered afresh): one graph each, a
Tune of its two ranges, TUNED then CACHED, each call running its range's
winner. Both in one launch of the ranks, `three` first (`launches`: a launch
and its first compile cost more than these compiles), `three` again in a
second. The merging rule, the probe ladder in units of the dimension and
the choice of the dimension are checked without a daemon (test_merge_*,
test_probe_ladder_*, test_dispatch_dimension_rule).

The long tier (//client/python:inductor_ranges_long_test) adds `cross`
and `flat` (the tied range merged end to end, one range without a
dispatch); deferred mode, x marked dynamic: a static selection (`plain`)
lowered before a dynamic one (`mixed`, split_points=[SPLIT / 2, SPLIT],
whose default costs as linear does and wins the first two ranges, merged:
the op itself runs there) in the same Tune; and per-rank Inductor caches,
one warm (the graph with its dispatch from the FX graph cache, no ask) and
one cold (CACHED), running the same code.
"""

import contextlib
import math
import os
import re
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import Daemon  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from recording import graph_runs, tune_labels  # noqa: E402
from relowering import isa_probes_shared, relowering, shared  # noqa: E402
from tier import long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

WINDOW_US = 10_000_000  # ranks compiling side by side on a busy machine drift apart
SPLIT = 1024
UPPER = 16384
# Costs far apart at both sizes, beyond the noise of the gloo all_reduce
# around them on a loaded 2-core machine (inductor_functional_test.py).
LINEAR_US = 16   # per element: 16 ms at SPLIT, 262 ms at UPPER
FIXED_US = 100000
DEFAULT_US = 150000
CHEAP_US = 1000  # three's choices in their own range
TIE = FIXED_US // LINEAR_US  # linear and fixed cost the same
POINTS = (SPLIT, TIE)  # three's and cross's split points
# Sizes the compiled model is called at: both sides of each split point.
CALLS = (512, SPLIT, SPLIT + 1, 4096, TIE, TIE + 1, 64)
# auto's probe ladder (in bytes of its float32 input, its one dimension the
# dynamic one): ranges [1, SPLIT] and [SPLIT + 1, inf), tuned at UPPER.
PROBE = (SPLIT * 4, UPPER * 4)


@pytest.fixture(autouse=True)
def deadline():
    with guard(600):
        yield


def _costly(name, ran, cost_us):
    """An opaque op that returns a copy of x after `cost_us(numel)` us,
    leaving (name, numel) in `ran`."""
    import torch

    @torch.library.custom_op(f"autotuned_ranges::{name}", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        ran.append((name, x.numel()))
        time.sleep(cost_us(x.numel()) / 1e6)
        return x.clone()

    op.register_fake(lambda x: torch.empty_like(x))
    return op


def _ops(ran):
    import torch
    import torch.distributed as dist
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    c10d = torch.ops._c10d_functional
    group = dist.group.WORLD.group_name
    linear_cost = _costly("linear_cost", ran, lambda n: n * LINEAR_US)
    fixed_cost = _costly("fixed_cost", ran, lambda n: FIXED_US)
    double_cost = _costly("double_cost", ran, lambda n: 2 * FIXED_US)

    def linear(x):
        return c10d.wait_tensor(c10d.all_reduce(linear_cost(x), "sum", group))

    def fixed(x):
        return c10d.wait_tensor(c10d.all_reduce(fixed_cost(x), "sum", group))

    def double(x):
        return c10d.wait_tensor(c10d.all_reduce(double_cost(x), "sum", group))

    def define(name, configs, ranges=(SPLIT,), default_us=lambda n: DEFAULT_US):
        def body(x: torch.Tensor) -> torch.Tensor:
            ran.append((f"{name}_default", x.numel()))
            time.sleep(default_us(x.numel()) / 1e6)
            y = x.clone()
            dist.all_reduce(y)
            return y

        op = torch.library.custom_op(f"autotuned_ranges::{name}", mutates_args=())(body)
        op.register_fake(lambda x: torch.empty_like(x))
        by_size = {"dispatch_on": {"tensor_name": "x", "dim": 0, "range_upper_bound": UPPER},
                   "split_points": list(ranges)} if ranges else {}
        register_custom_op_autotuning(op, name=name, configs=configs, **by_size)
        return op

    low_cost = _costly("low_cost", ran, lambda n: CHEAP_US if n <= SPLIT else FIXED_US)
    mid_cost = _costly("mid_cost", ran, lambda n: CHEAP_US if SPLIT < n <= TIE else FIXED_US)
    high_cost = _costly("high_cost", ran, lambda n: CHEAP_US if n > TIE else FIXED_US)

    def low(x):
        return c10d.wait_tensor(c10d.all_reduce(low_cost(x), "sum", group))

    def mid(x):
        return c10d.wait_tensor(c10d.all_reduce(mid_cost(x), "sum", group))

    def high(x):
        return c10d.wait_tensor(c10d.all_reduce(high_cost(x), "sum", group))

    three = define("three", [CustomOpConfig(low), CustomOpConfig(mid), CustomOpConfig(high)],
                   ranges=POINTS)
    cross = define("cross", [CustomOpConfig(linear), CustomOpConfig(fixed)], ranges=POINTS)
    flat = define("flat", [CustomOpConfig(fixed), CustomOpConfig(double)])
    plain = define("plain", [CustomOpConfig(fixed), CustomOpConfig(double)], ranges=())
    # Its default costs as linear does: it wins the first two ranges.
    mixed = define("mixed", [CustomOpConfig(fixed), CustomOpConfig(double)],
                   ranges=(SPLIT // 2, SPLIT), default_us=lambda n: n * LINEAR_US)
    # No split_points: its ranges come from the probe ladder.
    auto = define("auto", [CustomOpConfig(low), CustomOpConfig(high)], ranges=())
    return three, cross, flat, plain, mixed, auto


_PROCESS_OPS: list = []


def _process_ops():
    """(ran, _ops(ran)): the ops are defined once per process, for every
    model a launch compiles; `ran` is emptied before each call."""
    if not _PROCESS_OPS:
        ran: list = []
        _PROCESS_OPS.append((ran, _ops(ran)))
    return _PROCESS_OPS[0]


def _rank(rank, world, target, model_name, fresh):
    """Compiles the model at the first size (with `fresh`, lowered afresh
    with the kernels shared: relowering.py), then
    calls it at every size of CALLS. "three": three, dynamic=True; "cross":
    cross and flat, dynamic=True; "deferred" (deferred mode): plain on a
    static input, then mixed on x marked dynamic; "auto": auto,
    dynamic=True, with the probe ladder PROBE, compiled and called twice,
    each time lowered afresh (`graphs`: how many compiled graphs each
    compile's calls ran). What it patches is restored at the end, for the
    next model of the launch."""
    import torch
    import torch.distributed as dist

    import autotuned.inductor as ai
    from autotuned import pb
    from autotuned.inductor import _ranges

    isa_probes_shared()  # the compiles without relowering() too
    ran, (three, cross, flat, plain, mixed, auto) = _process_ops()
    del ran[:]
    probe = _ranges.PROBE_BYTES
    if model_name == "auto":
        _ranges.PROBE_BYTES = PROBE
    deferred = model_name == "deferred"
    tunes, codes, ran_graphs = [], [], []
    undo = [tune_labels(tunes), graph_runs(codes, ran_graphs)]
    torch._dynamo.reset()

    def static_then_dynamic(x, y):
        # Lowered in the order of the outputs (post-grad passes reorder).
        return plain(y), mixed(x)

    def data(n):
        # Integer values: every sum is exact in float32.
        return torch.arange(n, dtype=torch.float32) + 1000 * rank

    def inputs(n):
        x = data(n)
        if not deferred:
            return (x,)
        torch._dynamo.mark_dynamic(x, 0)
        return x, data(64)

    ai.enable(target=target, timeout=120, deferred=deferred,
              options=pb.Options(warmup=1, iterations=5, timeout_ms=300000,
                                 presync_window_us=WINDOW_US))
    dist.barrier()
    model = {"three": lambda x: (three(x),), "cross": lambda x: (cross(x), flat(x)),
             "auto": lambda x: (auto(x),)}.get(model_name)
    calls, correct, graphs = [], True, []
    hits = torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"]
    for _ in range(2 if model_name == "auto" else 1):
        if graphs:  # a second compile of the same function, from scratch
            torch._dynamo.reset()
        del ran_graphs[:]
        compiled = torch.compile(static_then_dynamic) if deferred else \
            torch.compile(model, dynamic=True)
        with relowering() if fresh else contextlib.nullcontext():
            compiled(*inputs(CALLS[0]))
            for n in CALLS:
                del ran[:]
                got = compiled(*inputs(n))
                if deferred:
                    got = got[::-1]
                calls.append(sorted({name for name, _ in ran}))
                total = torch.arange(n, dtype=torch.float32) * world + 1000 * sum(range(world))
                want = {"three": [total], "cross": [total, total], "auto": [total],
                        "deferred": [total, total[:64]]}[model_name]
                correct = correct and len(got) == len(want) and \
                    all(torch.equal(g, w) for g, w in zip(got, want))
        graphs.append(len({id(g) for g in ran_graphs}))
    decisions = ai.decisions()
    dispatches = ai.dispatches()
    ai.disable()
    _ranges.PROBE_BYTES = probe
    for restore in undo:
        restore()
    return {"decisions": decisions, "dispatches": dispatches, "tunes": tunes,
            "codes": codes, "calls": calls, "correct": correct, "graphs": graphs,
            "fx_hits": torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] - hits}


def _models(rank, world, target, model_names, fresh):
    """_rank of each model in turn, in this rank's process."""
    return [_rank(rank, world, target, m, fresh) for m in model_names]


def _launch(daemon, model_name, cache_dirs=None):
    """Both ranks' results (_rank's `model_name`); `cache_dirs`: each
    rank's own Inductor cache directory, kept (else each compile lowered
    afresh, the kernels from the test process's shared directory)."""
    return _launch_models(daemon, (model_name,), cache_dirs)[0]


def _launch_models(daemon, model_names, cache_dirs=None):
    """_launch of each model in turn, in one launch: per model, both ranks'
    results."""
    results = run_ranks(_models, world=2,
                        args=(daemon.target, tuple(model_names), cache_dirs is None),
                        timeout=500 * len(model_names),
                        env={"TORCHINDUCTOR_CACHE_DIR": shared(),
                             "TORCHINDUCTOR_COMPILE_THREADS": "1"},
                        rank_env={r: {"TORCHINDUCTOR_CACHE_DIR": d}
                                  for r, d in enumerate(cache_dirs or [])})
    for r in results:
        assert not isinstance(r, RankError), r
    return [_checked([r[i] for r in results]) for i in range(len(model_names))]


def _checked(results):
    """One model's results per rank, checked: the right output, the same
    decisions on every rank."""
    for r in results:
        assert r["correct"], r
    first = next(([d[:4] for d in r["decisions"]] for r in results if r["decisions"]), [])
    for r in results:
        # The whole decision, every range's winner, the same on every rank
        # (a rank served from Inductor's cache decides nothing).
        assert [d[:4] for d in r["decisions"]] in (first, []), (results[0], r)
    return results


RANGES = ("range_1_1024", "range_1025_inf")
CROSS = ("range_1_1024", "range_1025_6250", "range_6251_inf")
MIXED = ("range_1_512", "range_513_1024", "range_1025_inf")


def _python(code):
    """The Python of a compiled graph's module: without its kernels' source
    (strings) and its benchmark harness (`if __name__ == ...`)."""
    code = code.split("\nif __name__ ==")[0]
    return re.sub(r"('''|\"\"\").*?\1", "", code, flags=re.S)


def _boundaries(code):
    """The comparisons of the size in a compiled graph's wrapper (its only
    `if`s, each `if s <= bound:`): their bounds, in order."""
    branches = [line.strip() for line in _python(code).splitlines()
                if re.match(r"\s*(el)?if\b", line)]
    matches = [re.fullmatch(r"if \(?\w+ <= (\d+)\)?:", b) for b in branches]
    assert branches and all(matches), branches
    return sorted(int(m.group(1)) for m in matches)


def _boundary(code):
    """The one comparison of the size in a compiled graph's wrapper: the
    bound."""
    bounds = _boundaries(code)
    assert len(bounds) == 1, bounds
    return bounds[0]


def _cross_ran(calls, bound):
    """Each call ran linear (cross) up to `bound`, fixed above it, and fixed
    (flat), and nothing else: no default, no second choice."""
    for n, ran in zip(CALLS, calls):
        want = ["fixed_cost"] if n > bound else ["fixed_cost", "linear_cost"]
        assert ran == want, (n, bound, ran)


NOISE = 0.02  # each median's interval: +-2 % (unit tests of the rule)


def _answer(costs, winner, paired=False, ruled_out=()):
    """A daemon's answer (pb.ProblemResult) for candidates "a", "b", ... of
    known costs (us): `winner` won; each interval +-NOISE, paired (the ratio
    to the winner's) or not."""
    from autotuned import pb

    w = costs[winner]
    ranked = []
    for i, cost in sorted(enumerate(costs), key=lambda x: (x[0] != winner, x[1])):
        c = pb.CandidateResult(index=i, ok=i not in ruled_out, median_us=cost,
                               median_low_us=cost * (1 - NOISE),
                               median_high_us=cost * (1 + NOISE))
        if paired and i != winner:
            c.vs_winner, c.paired = cost / w, 16
            c.vs_winner_low, c.vs_winner_high = cost / w - NOISE, cost / w + NOISE
        ranked.append(c)
    return pb.ProblemResult(status=pb.TUNED, winner_index=winner, ranked=ranked)


def _table(rows, paired=False):
    """merge() of ranges [1, 10], [11, 20], ..., the last unbounded, whose
    answers are `rows` of (costs, winner): (start, end, winner) each."""
    from autotuned.inductor._ranges import merge, ties

    keys = [chr(ord("a") + i) for i in range(len(rows[0][0]))]
    bounds = [(10 * i + 1, 10.0 * (i + 1)) for i in range(len(rows))]
    bounds[-1] = (bounds[-1][0], math.inf)
    winners = [keys[w] for _, w in rows]
    tie_sets = [ties(_answer(c, w, paired), keys, keys[w]) for c, w in rows]
    return merge(bounds, winners, tie_sets), merge(bounds, winners)


def test_merge_a_tied_range_with_its_neighbour():
    """A range whose two choices cost the same (b won it within the noise)
    joins its neighbour won by a, which is not slower there; decisive
    winners keep their ranges apart. By winners alone it would join the
    range after it instead."""
    for paired in (False, True):
        rows = [((100, 400), 0), ((300, 300), 1), ((400, 100), 1)]
        merged, by_winner = _table(rows, paired)
        assert merged == [(1, 20.0, "a"), (21, math.inf, "b")], merged
        assert by_winner == [(1, 10.0, "a"), (11, math.inf, "b")], by_winner
        # Measurably apart (b 5 % faster, beyond a +-2 % noise): three.
        rows = [((100, 400), 0), ((315, 300), 1), ((100, 400), 0)]
        merged, _ = _table(rows, paired)
        assert merged == [(1, 10.0, "a"), (11, 20.0, "b"), (21, math.inf, "a")], merged


def test_merge_never_flips_within_the_noise():
    """Winners that alternate within the noise make one range; the group
    keeps a choice every range ties with, though it won none of them."""
    flips = [((100, 101, 300), 0), ((101, 100, 300), 1)] * 2 + [((100, 101, 300), 0)]
    merged, by_winner = _table(flips)
    assert merged == [(1, math.inf, "a")], merged
    assert len(by_winner) == 5, by_winner
    # c ties a at first and b later; a and b are apart: c for all.
    rows = [((100, 300, 101), 0), ((300, 100, 101), 1)]
    assert _table(rows)[0] == [(1, math.inf, "c")]


def test_ties_by_the_daemons_test():
    """The tie set is what the answer does not find slower than the winner
    beyond the noise: paired, by the ratio's interval; unpaired, by the
    medians' intervals; never a ruled-out candidate; the winner alone
    without a measured answer."""
    from autotuned import pb
    from autotuned.inductor._ranges import ties

    keys = ["a", "b", "c"]
    for paired in (False, True):
        assert ties(_answer((100, 101, 110), 0, paired), keys, "a") == {"a", "b"}
        assert ties(_answer((100, 101, 110), 0, paired, ruled_out=(1,)), keys, "a") == {"a"}
        # The default kept by the margin: a faster challenger ties with it.
        assert ties(_answer((100, 90, 300), 0, paired), keys, "a") == {"a", "b"}
    fallback = _answer((100, 100, 100), 0)
    fallback.status = pb.FALLBACK
    assert ties(fallback, keys, "a") == {"a"}
    assert ties(None, keys, "b") == {"b"}
    old = _answer((100, 100, 100), 0)
    for c in old.ranked:
        c.median_low_us = c.median_high_us = 0.0
    assert ties(old, keys, "a") == {"a"}


@pytest.fixture(scope="module")
def launches():
    """The default tier's compiles in two launches against one daemon: three
    then auto (twice) in the first, three again in the second; per model,
    each launch's results per rank ({"three": [first, second], "auto":
    first})."""
    d = Daemon()
    try:
        with guard(600):
            three, auto = _launch_models(d, ("three", "auto"))
            again = _launch(d, "three")
    finally:
        d.stop()
    return {"three": [three, again], "auto": auto}


def test_three_winners_dispatched_then_cached(launches):
    """Each of three's ranges has its own winner: low up to SPLIT, mid up
    to TIE, high above it, on both ranks, each call running its range's
    winner; one comparison per boundary in the code; the second process
    CACHED with the same code."""
    names = [f"three_{x}" for x in CROSS]
    for launch, status in enumerate(("TUNED", "CACHED")):
        results = launches["three"][launch]
        for r in results:
            # One Tune, all three ranges in it.
            assert r["tunes"] == [names], r["tunes"]
            summary = [(name, winner, st) for name, _, winner, st, _ in r["decisions"]]
            assert summary == [(n, f"{n}_{w}", status) for n, w in
                               zip(names, ("low", "mid", "high"))], r["decisions"]
            # The table the graph dispatches among: the three ranges apart.
            assert r["dispatches"] == [("three", [
                (1, SPLIT, f"{names[0]}_low"), (SPLIT + 1, TIE, f"{names[1]}_mid"),
                (TIE + 1, None, f"{names[2]}_high")])], r["dispatches"]
            if status == "TUNED":
                # Each choice timed at each range's size: the cheap one
                # ahead of the others by construction, which cost at least
                # FIXED_US (a loaded machine stretches the cheap one's sleep,
                # never shortens the others').
                for n, w in zip(names, ("low", "mid", "high")):
                    timings = dict(r["decisions"][names.index(n)][1])
                    cheap = timings.pop(f"{n}_{w}")
                    assert cheap < min(timings.values()), (n, cheap, timings)
                    assert FIXED_US / 1000 <= min(timings.values()), (n, cheap, timings)
            # One graph for every size (no recompile), in it one `if s <= b:`
            # per boundary (nested torch.cond), and each call ran its range's
            # winner and nothing else.
            assert len(set(r["codes"])) == 1, len(set(r["codes"]))
            assert _boundaries(r["codes"][0]) == list(POINTS), r["codes"][0]
            for n, ran in zip(CALLS, r["calls"]):
                want = ("low", "mid", "high")[sum(n > p for p in POINTS)]
                assert ran == [f"{want}_cost"], (n, ran)
        if launch == 0:
            code = results[0]["codes"][0]
        else:
            assert results[0]["codes"][0] == code


def test_probe_ladder_in_units_of_the_dimension():
    """probe_ranges(): the ladder's steps in units of the dimension, rounded
    down (a range's message is never above its step), those below one unit
    or outside the dimension's values left out, the last step the upper
    bound (at most the dimension's largest value)."""
    from autotuned.inductor._ranges import PROBE_BYTES, probe_ranges

    ladder = list(PROBE_BYTES)
    assert ladder == sorted(set(ladder)) and len(ladder) >= 2, ladder
    assert probe_ranges(1) == (ladder[:-1], ladder[-1])
    unit = ladder[0] + 1  # the first step is below one unit
    points, upper = probe_ranges(unit)
    assert points == [b // unit for b in ladder[1:-1]], points
    assert all(b - unit < p * unit <= b for p, b in zip(points, ladder[1:])), points
    assert upper == ladder[-1] // unit
    # The dimension's values: [2, points[1] + 1] keeps only points[1] (1 is
    # below 2; points[2] + 1 is above), and bounds the last range there.
    low_unit = ladder[1]
    points, _ = probe_ranges(low_unit)
    assert points[0] == 1, points
    assert probe_ranges(low_unit, 2, points[1] + 1) == ([points[1]], points[1] + 1)
    # A unit above the whole ladder: one range, tuned at one unit.
    assert probe_ranges(ladder[-1] + 1) == ([], 1)


def test_dispatch_dimension_rule():
    """The dimension dispatched on without split_points: the only symbolic
    dimension of the op's first tensor input, the other inputs static; none
    for a static selection, nor where the inputs hold more symbolic
    dimensions (PyTorch's own specialization then)."""
    import sympy

    from autotuned.inductor._ranges import _probe_dimension

    s0, s1 = sympy.Symbol("s0"), sympy.Symbol("s1")

    def nodes(*sizes):
        return [type("Node", (), {"get_size": lambda self, size=size: list(size)})()
                for size in sizes]

    assert _probe_dimension("op", nodes([s0, 8])) == 0
    assert _probe_dimension("op", nodes([8, 2 * s0], [8])) == 1
    assert _probe_dimension("op", nodes([8, 8])) is None
    assert _probe_dimension("op", nodes([s0, s1])) is None
    assert _probe_dimension("op", nodes([s0, 8], [s0, 8])) is None
    assert _probe_dimension("op", nodes([8, 8], [s0])) is None


def test_ranges_from_the_ladder_without_split_points(launches):
    """auto, registered without split_points, compiled with dynamic=True:
    one selection per range of its probe ladder (PROBE), all in one Tune:
    low wins up to SPLIT and high above it, by construction, on both ranks;
    one graph for every size, with one comparison of the size, at SPLIT,
    each call running its range's winner; compiled again from scratch in
    the same processes (lowered afresh): CACHED, the same code (the launch
    compiles three before it)."""
    names = [f"auto_{x}" for x in RANGES]
    table = ("auto", [(1, SPLIT, f"{names[0]}_low"), (SPLIT + 1, None, f"{names[1]}_high")])
    for r in launches["auto"]:
        assert r["tunes"] == [names, names], r["tunes"]
        summary = [(name, winner, st) for name, _, winner, st, _ in r["decisions"]]
        assert summary == [(n, f"{n}_{w}", status) for status in ("TUNED", "CACHED")
                           for n, w in zip(names, ("low", "high"))], r["decisions"]
        assert r["dispatches"] == [table, table], r["dispatches"]
        for (n, timings, winner, *_) in r["decisions"][:2]:
            others = dict(timings)
            cheap = others.pop(winner)
            assert cheap < min(others.values()), (n, cheap, others)
            assert FIXED_US / 1000 <= min(others.values()), (n, cheap, others)
        # One graph per compile, not one per size, the same code both times
        # (but for its AOT ID, a count of the process's compiles).
        assert r["graphs"] == [1, 1] and r["fx_hits"] == 0, r
        assert len({re.sub(r"# AOT ID: .*", "", c) for c in r["codes"]}) == 1, r["codes"]
        assert _boundary(r["codes"][0]) == SPLIT, r["codes"][0]
        for n, ran in zip(CALLS * 2, r["calls"]):
            assert ran == (["low_cost"] if n <= SPLIT else ["high_cost"]), (n, ran)


@long_only("//client/python:inductor_ranges_long_test")
def test_tied_range_merged_and_one_range_without_dispatch(daemon):
    """The crossing op runs linear up to TIE and fixed above it, the tied
    range merged with the one below it; the flat one runs fixed everywhere,
    without a dispatch; on both ranks."""
    assert (f"range_1_{SPLIT}", f"range_{SPLIT + 1}_{TIE}") == CROSS[:2] and \
        RANGES == (CROSS[0], "range_1025_inf")
    for r in _launch(daemon, "cross"):
        # One Tune per op, all of its ranges in it.
        assert r["tunes"] == [[f"cross_{x}" for x in CROSS],
                              [f"flat_{x}" for x in RANGES]], r["tunes"]
        summary = [(name, winner, st) for name, _, winner, st, _ in r["decisions"]]
        # linear and fixed cost the same there: either, by the noise.
        tied_winner = summary[1][1] if summary[1][1] in (
            "cross_range_1025_6250_linear", "cross_range_1025_6250_fixed") else "either"
        assert summary == [
            ("cross_range_1_1024", "cross_range_1_1024_linear", "TUNED"),
            ("cross_range_1025_6250", tied_winner, "TUNED"),
            ("cross_range_6251_inf", "cross_range_6251_inf_fixed", "TUNED"),
            ("flat_range_1_1024", "flat_range_1_1024_fixed", "TUNED"),
            ("flat_range_1025_inf", "flat_range_1025_inf_fixed", "TUNED")], r["decisions"]
        timings = {name: t for name, t, *_ in r["decisions"]}
        low, tied, high = (timings[f"cross_{x}"] for x in CROSS)
        # The costs as constructed, each choice timed at each size.
        assert low["cross_range_1_1024_linear"] < low["cross_range_1_1024_fixed"], low
        assert high["cross_range_6251_inf_fixed"] < high["cross_range_6251_inf_linear"], high
        assert high["cross_range_6251_inf_linear"] >= UPPER * LINEAR_US / 1000, high
        assert min(tied.values()) >= FIXED_US / 1000, tied
        assert tied["cross_range_1025_6250_fallback_default"] >= DEFAULT_US / 1000
        # One graph for every size, and in it the only `if` of the wrapper:
        # the size against TIE. Three ranges and one boundary: the tied
        # range joined the first, whose winner is not measurably slower
        # there, whichever of the two won it; flat's two ranges are one.
        assert len(set(r["codes"])) == 1, len(set(r["codes"]))
        bound = _boundary(r["codes"][0])
        assert bound == TIE, (bound, summary)
        _cross_ran(r["calls"], bound)
        assert r["dispatches"] == [
            ("cross", [(1, TIE, "cross_range_1_1024_linear"),
                       (TIE + 1, None, "cross_range_6251_inf_fixed")]),
            ("flat", [(1, None, "flat_range_1_1024_fixed")])], r["dispatches"]


@long_only("//client/python:inductor_ranges_long_test")
def test_deferred_ranges_in_the_graphs_batch(daemon):
    """Deferred, x marked dynamic: the static selection lowered before the
    dynamic one goes in the same Tune as its three ranges; each call runs
    its range's winner, the op itself where its default won: in the first
    two ranges, merged into one (the default is one candidate in every
    range, though its name is the range's)."""
    [r0, r1] = _launch(daemon, "deferred")
    for r in (r0, r1):
        assert r["tunes"] == [["plain"] + [f"mixed_{x}" for x in MIXED]], r["tunes"]
        summary = [(name, winner, st) for name, _, winner, st, _ in r["decisions"]]
        assert summary == [("plain", "plain_fixed", "TUNED")] + [
            (f"mixed_{x}", f"mixed_{x}_{w}", "TUNED")
            for x, w in zip(MIXED, ("fallback_default", "fallback_default", "fixed"))
        ], r["decisions"]
        assert r["dispatches"] == [("mixed", [
            (1, SPLIT, "mixed_range_1_512_fallback_default"),
            (SPLIT + 1, None, "mixed_range_1025_inf_fixed")])], r["dispatches"]
        assert len(set(r["codes"])) == 1 and _boundary(r["codes"][0]) == SPLIT
        for n, ran in zip(CALLS, r["calls"]):
            want = ["fixed_cost"] if n > SPLIT else ["fixed_cost", "mixed_default"]
            assert ran == want, (n, ran)


@long_only("//client/python:inductor_ranges_long_test")
def test_warm_and_cold_inductor_caches_run_the_same_dispatch(daemon):
    """Per-rank Inductor caches kept; in the second launch rank 0's is warm
    (its graph, dispatch included, from the FX graph cache: no ask) and rank
    1's cold (it asks: CACHED): both run each range's winner, the same
    code."""
    dirs = [tempfile.mkdtemp(prefix="atpy-inductor") for _ in range(3)]
    first = _launch(daemon, "cross", cache_dirs=dirs[:2])
    assert [d[3] for d in first[0]["decisions"]] == ["TUNED"] * 5, first[0]["decisions"]
    warm, cold = _launch(daemon, "cross", cache_dirs=[dirs[0], dirs[2]])
    assert warm["fx_hits"] >= 1 and warm["tunes"] == [] and warm["decisions"] == [], warm
    assert [d[3] for d in cold["decisions"]] == ["CACHED"] * 5, cold["decisions"]
    assert warm["codes"][0] == cold["codes"][0] == first[0]["codes"][0]
    bound = _boundary(first[0]["codes"][0])
    for r in (warm, cold):
        _cross_ran(r["calls"], bound)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
