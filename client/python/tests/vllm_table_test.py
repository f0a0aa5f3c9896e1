"""autotuned.vllm's table without a daemon: which candidate each size uses
(autotuned.merge.table_picks) over synthetic answers, the parameter shapes
an implementation is measured at (autotuned.shapes), and what the table
reports of them; the plain NCCL as a candidate the ranks run, and NCCL's
parameters beside it refused. The daemon's side is tests/torch_group_test.py and
tests/rankrun_test.py.
"""
from __future__ import annotations

import json
import math
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from timeout_guard import guard  # noqa: E402

from autotuned import pb  # noqa: E402
from autotuned.merge import slower_picks, standings, table_picks  # noqa: E402
from autotuned.shapes import expand, shapes, spec_of  # noqa: E402


@pytest.fixture(autouse=True)
def deadline():
    with guard(60):
        yield


def size(count, winner, cands, status=pb.TUNED):
    """A ProblemResult at `count`: `cands` is {index: (median, low, high)}
    for own intervals, or {index: (median, low, high, vs_low, vs, vs_high)}
    for pairs against the winner; the winner's own pair fields stay 0."""
    ranked = []
    for i, t in sorted(cands.items(), key=lambda kv: (kv[0] != winner, kv[1][0])):
        c = pb.CandidateResult(index=i, ok=True, median_us=t[0], median_low_us=t[1],
                               median_high_us=t[2])
        if len(t) == 6 and i != winner:
            c.vs_winner_low, c.vs_winner, c.vs_winner_high, c.paired = t[3], t[4], t[5], 16
        ranked.append(c)
    return pb.ProblemResult(problem=pb.Problem(count=count), status=status,
                            winner=f"c{winner}", winner_index=winner, ranked=ranked)


def ranges(picks):
    out = []
    for p in picks:
        if not out or out[-1] != p:
            out.append(p)
    return out


def test_alternating_ties_are_one_range():
    # A and B within noise of each other at every size, the daemon's winner
    # alternating: one range, on the one with the better estimates (B).
    results = []
    for k in range(8):
        a, b = (10.0, 9.8) if k % 2 else (9.9, 10.0)
        w = k % 2
        results.append(size(1 << k, w, {0: (a, 9.0, 11.0), 1: (b, 9.0, 11.0)}))
    assert ranges([r.winner_index for r in results]) == [0, 1, 0, 1, 0, 1, 0, 1]
    picks = table_picks(results)
    assert len(ranges(picks)) == 1, picks
    assert slower_picks(results, picks) == []


def test_paired_ties_follow_the_neighbours():
    # A at every size but one, where B won within noise (paired interval
    # straddling 1): A there too.
    results = []
    for k in range(5):
        if k == 2:
            results.append(size(1 << k, 1, {0: (10.1, 9, 11, 0.97, 1.01, 1.04),
                                            1: (10.0, 9, 11)}))
        else:
            results.append(size(1 << k, 0, {0: (10.0, 9, 11), 1: (10.5, 9, 11, 0.98, 1.05, 1.1)}))
    assert table_picks(results) == [0, 0, 0, 0, 0]


def test_real_crossover_is_kept():
    # A measurably faster below 8, B measurably faster from 8 on.
    results = []
    for k in range(6):
        if k < 3:
            results.append(size(1 << k, 0, {0: (5.0, 4.9, 5.1), 1: (8.0, 7.9, 8.1)}))
        else:
            results.append(size(1 << k, 1, {0: (20.0, 19.9, 20.1), 1: (12.0, 11.9, 12.1)}))
    assert table_picks(results) == [0, 0, 0, 1, 1, 1]


def test_crossover_moves_to_the_estimates_inside_a_tie():
    # Sizes 2 and 3 are ties: the switch goes where the estimates cross.
    spec = [(5.0, 8.0, True), (5.0, 8.0, True), (6.0, 6.5, False), (7.0, 6.0, False),
            (20.0, 12.0, True), (20.0, 12.0, True)]
    results = []
    for k, (a, b, narrow) in enumerate(spec):
        w = 0 if a < b else 1
        band = 0.1 if narrow else 3.0
        results.append(size(1 << k, w, {0: (a, a - band, a + band), 1: (b, b - band, b + band)}))
    assert table_picks(results) == [0, 0, 0, 1, 1, 1]


def test_measurably_slower_winner_is_replaced():
    # The daemon kept A (first, by the margin) although B is faster beyond
    # the noise: the table uses B there, and B's neighbours stay B.
    results = [size(1, 1, {0: (10.0, 9.9, 10.1), 1: (9.0, 8.9, 9.1)}),
               size(2, 0, {0: (10.0, 9.99, 10.01), 1: (9.95, 9.9, 9.96, 0.994, 0.995, 0.996)}),
               size(4, 1, {0: (10.0, 9.9, 10.1), 1: (9.0, 8.9, 9.1)})]
    assert [r.winner_index for r in results] == [1, 0, 1]
    assert table_picks(results) == [1, 1, 1]


def test_a_third_candidate_never_takes_a_range_it_is_slower_in():
    # C ties with A and B everywhere (wide interval) but wins nowhere: it
    # never replaces a real crossover between A and B.
    results = []
    for k in range(6):
        a, b = (5.0, 8.0) if k < 3 else (9.0, 6.0)
        w = 0 if a < b else 1
        results.append(size(1 << k, w, {0: (a, a - 0.1, a + 0.1), 1: (b, b - 0.1, b + 0.1),
                                        2: (7.0, 1.0, 50.0)}))
    assert table_picks(results) == [0, 0, 0, 1, 1, 1]


def test_failed_and_fallback_sizes():
    a_wins = {0: (5.0, 4.0, 6.0), 1: (5.5, 4.0, 7.0)}
    results = [size(1, 0, a_wins),
               pb.ProblemResult(problem=pb.Problem(count=2), status=pb.FAILED, winner_index=-1),
               size(4, 1, {0: (5.5, 4.0, 7.0), 1: (5.0, 4.0, 6.0)}),
               pb.ProblemResult(problem=pb.Problem(count=8), status=pb.FALLBACK, winner="c0",
                                winner_index=0),
               size(16, 1, {0: (5.5, 4.0, 7.0), 1: (5.0, 4.0, 6.0)})]
    # FAILED splits the table; FALLBACK keeps its winner, which the tied
    # sizes beside it follow.
    assert table_picks(results) == [0, -1, 0, 0, 0]


def test_random_answers_never_pick_a_measurably_slower_candidate():
    rng = random.Random(27)
    for _ in range(300):
        n = rng.randint(2, 5)
        results = []
        for k in range(rng.randint(1, 12)):
            cands = {}
            for i in range(n):
                m = rng.uniform(5, 15)
                half = rng.choice([0.01, 0.5, 3.0])
                cands[i] = (m, m - half, m + half)
            w = rng.choice([min(cands, key=lambda i: cands[i][0]), 0])
            results.append(size(1 << k, w, cands))
        picks = table_picks(results)
        assert slower_picks(results, picks) == [], (results, picks)
        assert all(p >= 0 for p in picks)


def test_standings_prefer_pairs_then_own_intervals():
    r = size(1, 0, {0: (10.0, 9.0, 11.0), 1: (12.0, 11.0, 13.0, 1.1, 1.2, 1.3),
                    2: (12.0, 11.0, 13.0)})
    s = standings(r)
    assert (s[0].low, s[0].high) == (1.0, 1.0)
    assert (s[1].low, s[1].point, s[1].high) == (1.1, 1.2, 1.3)
    assert s[2].low == pytest.approx(11.0 / 11.0) and s[2].high == pytest.approx(13.0 / 9.0)
    assert standings(pb.ProblemResult(status=pb.FALLBACK, winner_index=0)) == {}


def _listing():
    def p2p(name, blocks, threads, extra=()):
        params = [pb.ParamSpec(name="blocks", default_value=blocks, min_value=1, max_value=132),
                  pb.ParamSpec(name="threads", default_value=threads, min_value=32,
                               max_value=1024)] + list(extra)
        return pb.Implementation(name=name, collective=pb.ALL_REDUCE, params=params,
                                 dtypes=[pb.BFLOAT16, pb.FLOAT16, pb.FLOAT32],
                                 min_world_size=2, max_world_size=8)
    chunk = pb.ParamSpec(name="chunk_kib", default_value=8192, min_value=64, max_value=1 << 20)
    return pb.ListImplementationsResponse(implementations=[
        pb.Implementation(name="all_reduce/nccl", collective=pb.ALL_REDUCE, min_world_size=1),
        p2p("all_reduce/one_shot", 32, 512),
        p2p("all_reduce/copy_engine", 64, 1024, [chunk]),
        p2p("all_reduce/p2p_ring", 132, 1024,
            [pb.ParamSpec(name="chunk_kib", default_value=0, min_value=0, max_value=1 << 20)]),
        pb.Implementation(name="all_reduce/fp32_only", collective=pb.ALL_REDUCE,
                          dtypes=[pb.FLOAT32], params=[chunk]),
        pb.Implementation(name="all_reduce/gather_reduce", collective=pb.ALL_REDUCE,
                          params=[pb.ParamSpec(name="root", default_value=0, min_value=0,
                                               max_value=1023)])])


def test_shapes_grid():
    impls = {i.name: i for i in _listing().implementations}
    assert shapes(impls["all_reduce/nccl"]) == [{}]
    one = [spec_of("x", s) for s in shapes(impls["all_reduce/one_shot"])]
    assert one == ["x:blocks=32,threads=512", "x:blocks=16,threads=512",
                   "x:blocks=64,threads=1024", "x:blocks=128,threads=1024"]
    ce = shapes(impls["all_reduce/copy_engine"])
    assert ce[0] == {"blocks": 64, "threads": 1024, "chunk_kib": 8192}
    assert {s["chunk_kib"] for s in ce} == {2048, 8192, 32768}
    assert len(ce) == 6 and len(shapes(impls["all_reduce/copy_engine"], 3)) == 3
    # Not a tiling: kept at its default.
    assert shapes(impls["all_reduce/gather_reduce"]) == [{"root": 0}]
    # chunk_kib 0 means no chunks (the ring's whole shards): no chunk grid,
    # where 0 / 4 would have made parts of 1 KiB.
    ring = shapes(impls["all_reduce/p2p_ring"])
    assert ring[0] == {"blocks": 132, "threads": 1024, "chunk_kib": 0}
    assert {s["chunk_kib"] for s in ring} == {0} and len(ring) == 5


def test_expand_keeps_given_parameters_and_bounds_the_count():
    from autotuned import candidate
    given = [None, candidate("all_reduce/nccl"), candidate("all_reduce/one_shot"),
             candidate("all_reduce/one_shot:blocks=16"), candidate("all_reduce/fp32_only"),
             candidate("all_reduce/unknown")]
    got = expand(given, _listing(), collective=pb.ALL_REDUCE, dtype=pb.BFLOAT16, op=pb.SUM,
                 world=2)
    specs = [[spec_of(c.impl, c.params) if c is not None else None for c in cs] for cs in got]
    assert specs[0] == [None] and specs[1] == ["all_reduce/nccl"]
    # blocks=16 (threads 512 by default) is given: not measured twice.
    assert specs[2] == ["all_reduce/one_shot:blocks=32,threads=512",
                        "all_reduce/one_shot:blocks=64,threads=1024",
                        "all_reduce/one_shot:blocks=128,threads=1024"]
    assert specs[3] == ["all_reduce/one_shot:blocks=16"]
    # It cannot run bf16: left to the daemon to rule out, once.
    assert specs[4] == ["all_reduce/fp32_only"] and specs[5] == ["all_reduce/unknown"]
    # One rank: the P2P ones do not run, so they stay as given.
    one = expand(given, _listing(), collective=pb.ALL_REDUCE, dtype=pb.BFLOAT16, op=pb.SUM,
                 world=1)
    assert [len(cs) for cs in one] == [1] * len(given)
    bounded = expand([candidate("all_reduce/one_shot"), candidate("all_reduce/copy_engine"),
                      None], _listing(), collective=pb.ALL_REDUCE, dtype=pb.BFLOAT16,
                     op=pb.SUM, world=4, max_candidates=6)
    assert [len(cs) for cs in bounded] == [3, 2, 1]
    assert spec_of(bounded[1][0].impl, bounded[1][0].params) == \
        "all_reduce/copy_engine:blocks=64,chunk_kib=8192,threads=1024"


def test_table_reports_the_winning_shape(tmp_path):
    from google.protobuf import json_format

    from autotuned.vllm import _table
    specs = ["nccl", "all_reduce/one_shot:blocks=32,threads=512",
             "all_reduce/one_shot:blocks=128,threads=1024",
             "all_reduce/two_shot:blocks=32,threads=512"]
    fast = {0: (30.0, 29.0, 31.0), 1: (20.0, 19.5, 20.5), 2: (12.0, 11.8, 12.2),
            3: (25.0, 24.0, 26.0)}
    small = {0: (9.0, 8.9, 9.1), 1: (5.0, 4.9, 5.1), 2: (5.05, 4.9, 5.2), 3: (7.0, 6.9, 7.1)}
    results = [size(1024, 1, small), size(2048, 2, small), size(4096, 1, small),
               size(1 << 20, 2, fast)]
    for r in results:
        r.problem.dtype = pb.BFLOAT16
    table = _table("all_reduce", "bfloat16", 2, specs, results,
                   given=["nccl", "all_reduce/one_shot", "all_reduce/two_shot"],
                   origin=[0, 1, 1, 2])
    assert [(r.winner, r.min_count, r.max_count) for r in table.ranges] == \
        [("all_reduce/one_shot:blocks=128,threads=1024", 1024, 1 << 20)]
    text = table.format()
    assert "-> all_reduce/one_shot:blocks=128,threads=1024" in text
    assert "measured winner all_reduce/one_shot:blocks=32,threads=512" in text
    sizes = table.max_sizes()
    assert sizes == {"nccl": {2: 0}, "all_reduce/two_shot": {2: 0},
                     "all_reduce/one_shot:blocks=128,threads=1024": {2: 2 << 20}}
    assert table.pick(1 << 20) == table.pick(1024) == specs[2]
    path = tmp_path / "t.jsonl"
    table.write_jsonl(str(path))
    lines = [json_format.Parse(line, pb.SweepUpdate()) for line in path.read_text().splitlines()]
    assert [u.size_result.winner_index for u in lines[:-1]] == [1, 2, 1, 2]
    assert [(r.winner, r.winner_index) for r in lines[-1].table.ranges] == [(specs[2], 2)]
    assert json.loads(path.read_text().splitlines()[-1])["done"] == 4
    assert not any(math.isinf(t) for t in table.sizes[0].median_us.values())


def test_plain_nccl_is_timed_in_the_ranks_and_nccl_parameters_beside_it_refused():
    from autotuned import InvalidArgument
    from autotuned.vllm import _entries, _nccl_in_ranks, _Own, _RanksNccl, _table

    def mine(x):
        return x

    ranks = _RanksNccl("all_reduce", None, None)
    got = _nccl_in_ranks(_entries([("mine", mine), "all_reduce/nccl", "all_reduce/one_shot",
                                   "all_reduce/nccl:algo=0,channels=0,proto=0"]),
                         "all_reduce", ranks, "k1")
    # The plain NCCL becomes a candidate the ranks run, under its own name,
    # made by the Dispatcher holder; NCCL's own choice stated as parameters
    # and the P2P kernel stay the daemon's.
    own = got[1]
    assert isinstance(own, _Own) and own.implementation
    assert (own.name, own.key, own.fn) == ("all_reduce/nccl", "k1", None)
    assert own.make == ranks.make and own.prepare == ranks.prepare
    assert isinstance(got[0], _Own) and not got[0].implementation
    assert [(c.impl, dict(c.params)) for c in got[2:]] == [
        ("all_reduce/one_shot", {}), ("all_reduce/nccl", {"algo": 0, "channels": 0, "proto": 0})]
    # A daemon-only table: the same.
    only = _nccl_in_ranks(_entries(["all_reduce/nccl", "all_reduce/one_shot"]), "all_reduce",
                          ranks, "k1")
    assert isinstance(only[0], _Own) and only[0].implementation
    # NCCL's parameters beside candidates the ranks time: refused, naming
    # the entry (the caller's process cannot run them as measured).
    for given in ([("mine", mine), "all_reduce/nccl:algo=2,proto=3"],
                  ["all_reduce/nccl", "all_reduce/nccl:channels=4"]):
        with pytest.raises(InvalidArgument, match=r"candidates\[1\]: 'all_reduce/nccl:"):
            _nccl_in_ranks(_entries(given), "all_reduce", ranks, "k1")
    # Without any: a table of the daemon's NCCL algorithms, as before.
    algos = _entries(["all_reduce/nccl:algo=1,proto=1", "all_reduce/nccl:algo=2,proto=1"])
    assert _nccl_in_ranks(algos, "all_reduce", ranks, "k1") == algos
    # A collective whose NCCL no runner() runs (no holder): unchanged.
    a2a = _entries(["all_to_all/nccl", ("mine", mine)])
    assert _nccl_in_ranks(a2a, "all_to_all", None, "k1") == a2a

    specs = ["mine", "all_reduce/nccl"]
    table = _table("all_reduce", "float32", 2, specs,
                   [size(1024, 1, {0: (9.0, 8.9, 9.1), 1: (5.0, 4.9, 5.1)})])
    assert "timed in the ranks" not in table.format()
    table.timed_in_ranks = ["all_reduce/nccl"]
    assert table.format().splitlines()[1] == \
        "  timed in the ranks as runner() runs it: all_reduce/nccl"
    assert table.pick(1024) == "all_reduce/nccl"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
