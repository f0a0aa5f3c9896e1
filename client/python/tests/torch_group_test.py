"""The torch.distributed helpers against a live sim daemon: 2 ranks, gloo, CPU.

Every rank must end with the same decision (each rank asks its daemon
alone: autotuned.rankrun.tune_rank, here through rankrun.tune_group's checks); bad
input raises the same exception on every rank; an absent or dying daemon
gives every rank the same fallback. Each case spawns its ranks (seconds each): the long tier
(//client/python:torch_group_long_test, AUTOTUNED_LONG=1) adds the second
kind of mismatch, every rank's daemon absent and the daemon killed mid-call.
"""
from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import HANG_CONF, Daemon  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from tier import long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

LONG = long_only("//client/python:torch_group_long_test")
CANDIDATES = ["all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/ring:chunk_kib=64"]


@pytest.fixture(autouse=True)
def deadline():
    with guard(240):
        yield


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(config_text=HANG_CONF)
    yield d
    d.stop()


def _options():
    from autotuned import pb
    return pb.Options(warmup=1, iterations=3)


def describe_and_tune(rank, world, target):
    from autotuned import problem
    from autotuned.group import describe_group
    from autotuned.rankrun import tune_group

    desc = describe_group(target=target)
    p = problem("all_reduce", "float32", 16384, CANDIDATES)
    first = tune_group(desc, [p], options=_options())
    second = tune_group(desc, [p], options=_options())
    return {"members": [(m.rank, m.local_gpu, m.daemon) for m in desc.proto().members],
            "id": desc.id, "reachable": desc.reachable,
            "first": (first.fallback, first.winners, [r.status for r in first.results]),
            "second": (second.fallback, second.winners, [r.status for r in second.results])}


def test_describe_and_tune_agree(daemon):
    from autotuned import pb
    a, b = run_ranks(describe_and_tune, args=(daemon.target,))
    assert not isinstance(a, RankError), a
    assert not isinstance(b, RankError), b
    assert a["members"] == b["members"] == [(0, 0, ""), (1, 1, "")]
    assert a["id"] == b["id"] and a["reachable"]
    assert a["first"] == b["first"]
    assert a["first"][0] is False and a["first"][2] == [pb.TUNED]
    assert a["second"][1] == a["first"][1] and a["second"][2] == [pb.CACHED]


def dispatch(rank, world, target):
    import torch

    from autotuned.group import describe_group
    from autotuned.vllm import tune_dispatch

    desc = describe_group(target=target)
    # "all_reduce/ring" without its parameter: measured at each of its
    # shapes (chunk_kib), each named in full, and the table must show their
    # times; "all_reduce/gather_reduce"'s `root` is no shape: its default.
    table = tune_dispatch(candidates=[CANDIDATES[0], "all_reduce/ring",
                                      "all_reduce/gather_reduce"], dtype=torch.float32,
                          desc=desc,
                          sizes_bytes=[4096, 65536, 1 << 20], options=_options())
    picks = [table.pick(torch.empty(n)) for n in (1, 1024, 16384, 20000, 1 << 20)]
    jsonl = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), f"table-rank{rank}.jsonl")
    table.write_jsonl(jsonl)
    # The same with a shape given: measured as given, not twice; and with
    # shapes=False, each implementation at its defaults only.
    given = tune_dispatch(candidates=["all_reduce/ring", "all_reduce/ring:chunk_kib=64"],
                          dtype=torch.float32, desc=desc, sizes_bytes=[4096],
                          options=_options())
    plain = tune_dispatch(candidates=[CANDIDATES[0], "all_reduce/ring"], dtype=torch.float32,
                          desc=desc, sizes_bytes=[4096], options=_options(), shapes=False)
    # The runner runs the winning shape: the spec parses into the ops'
    # arguments, and `others` by implementation name stand for the sim's
    # (by full spec for gather_reduce: `root` is none of the ops' arguments).
    seen = []

    def by_impl(name):
        def run(x):
            seen.append(name)
            return x
        return run
    run = table.runner(others={c: by_impl(c.split(":")[0]) for c in
                               ("all_reduce/one_shot", "all_reduce/ring",
                                "all_reduce/gather_reduce:root=0")})
    run(torch.ones(256))
    from autotuned import candidate_spec
    return {"jsonl": jsonl, "ranges": [(r.min_bytes, r.max_bytes, r.winner) for r in table.ranges],
            "sizes": [(s.count, s.winner) for s in table.sizes], "picks": picks,
            "fallback": table.fallback, "text": table.format(),
            "times": [s.median_us for s in table.sizes], "candidates": table.candidates,
            "shapes_of": table.shapes_of(), "max_sizes": table.max_sizes(),
            "daemon_names": [sorted((c.index, candidate_spec(c.candidate)) for c in r.ranked)
                             for r in table.results],
            "given": (given.fallback, given.reason, given.candidates),
            "plain": (plain.fallback, plain.reason, plain.candidates),
            "ran": seen, "pick_256": run.pick(torch.ones(256))}


def test_vllm_dispatch_table_same_on_every_rank(daemon):
    a, b = run_ranks(dispatch, args=(daemon.target,))
    assert not isinstance(a, RankError), a
    assert a["ranges"] == b["ranges"] and a["picks"] == b["picks"]
    assert not a["fallback"]
    assert [c for c, _ in a["sizes"]] == [1024, 16384, 262144]
    assert a["picks"][0] == a["sizes"][0][1] and a["picks"][-1] == a["sizes"][-1][1]
    assert all(all(0 < v < math.inf for v in t.values()) for t in a["times"]), a["times"]
    print(a["text"])
    # The sim's ring has one parameter, chunk_kib (default 256): measured
    # at 256, 64 and 1024, each named in full, as the daemon names them.
    rings = ["all_reduce/ring:chunk_kib=256", "all_reduce/ring:chunk_kib=64",
             "all_reduce/ring:chunk_kib=1024"]
    assert a["candidates"] == ["all_reduce/one_shot"] + rings + \
        ["all_reduce/gather_reduce:root=0"], a["candidates"]
    assert a["shapes_of"]["all_reduce/ring"] == rings
    for names in a["daemon_names"]:
        assert names == list(enumerate(a["candidates"])), names
    assert all(w in a["candidates"] for _, _, w in a["ranges"])
    # Every shape was timed at every size.
    assert all(set(t) == set(a["candidates"]) for t in a["times"])
    # max_sizes: the winning shapes by their full spec, the rest as given.
    for name in a["max_sizes"]:
        assert name in a["candidates"] or name in a["shapes_of"], name
    for _, _, w in a["ranges"]:
        assert a["max_sizes"][w][2] > 0, (w, a["max_sizes"])
    # What ran is the pick's implementation.
    assert a["ran"] == [a["pick_256"].split(":")[0]]
    assert a["given"] == (False, "", ["all_reduce/ring:chunk_kib=256",
                                      "all_reduce/ring:chunk_kib=1024",
                                      "all_reduce/ring:chunk_kib=64"]), a["given"]
    assert a["plain"] == (False, "", ["all_reduce/one_shot", "all_reduce/ring"]), a["plain"]
    # The table as sweep lines: what it holds, and autotuned.plot draws it.
    from google.protobuf import json_format

    from autotuned import pb
    lines = open(a["jsonl"]).read().splitlines()
    updates = [json_format.Parse(line, pb.SweepUpdate()) for line in lines]
    # The daemon's answers per size as received, then the table's ranges.
    assert [u.size_result.problem.count for u in updates[:-1]] == [c for c, _ in a["sizes"]]
    assert [(r.min_bytes, r.max_bytes, r.winner) for r in updates[-1].table.ranges] == \
        [tuple(r) for r in a["ranges"]]
    assert open(a["jsonl"]).read() == open(b["jsonl"]).read()
    png = a["jsonl"] + ".png"
    done = subprocess.run([sys.executable, "-m", "autotuned.plot", a["jsonl"], "-o", png],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert f"{len(a['times'][0])} candidates, 3 sizes" in done.stdout


def agree_under_dispatcher(rank, world):
    from torch._dispatch.python import enable_python_dispatcher

    from autotuned.group import agree

    # As inside torch.compile, where Inductor asks the daemon: PyTorch's
    # Python dispatcher on. A gloo collective made through it deadlocks
    # within a few hundred calls (GIL vs ProcessGroupGloo's queue lock).
    with enable_python_dispatcher():
        last = None
        for i in range(300):
            last = agree(None, (rank, i))
    return last


def test_agreement_inside_compile_does_not_deadlock():
    a, b = run_ranks(agree_under_dispatcher, timeout=120)
    assert a == b == [(0, 299), (1, 299)], (a, b)


def mismatched(rank, world, target, how):
    import torch.distributed as dist

    from autotuned import problem
    from autotuned.group import describe_group
    from autotuned.rankrun import tune_group

    desc = describe_group(target=target)
    pg = None
    if how == "wrong_rank":
        desc = dataclasses.replace(desc, rank=1 - desc.rank)
    elif how == "subgroup":
        singles = [dist.new_group([r]) for r in range(world)]
        pg = singles[rank]
    tune_group(desc, [problem("all_reduce", "float32", 1024, CANDIDATES)], process_group=pg,
               options=_options())
    return "no error"


@pytest.mark.parametrize("how", ["wrong_rank", pytest.param("subgroup", marks=LONG)])
def test_group_mismatch_raises_on_every_rank(daemon, how):
    results = run_ranks(mismatched, args=(daemon.target, how))
    for r in results:
        assert isinstance(r, RankError) and r.kind == "GroupMismatch", r
    assert "world_size 2" in results[0].message or "rank" in results[0].message


def unknown_candidate(rank, world, target):
    from autotuned import problem
    from autotuned.errors import InvalidArgument
    from autotuned.group import describe_group
    from autotuned.rankrun import tune_group

    desc = describe_group(target=target)
    try:
        tune_group(desc, [problem("all_reduce", "float32", 1024,
                                  ["all_reduce/one_shot", "all_reduce/nope"])])
    except InvalidArgument as e:
        return ("InvalidArgument", e.field, str(e))
    return "no error"


def test_unknown_candidate_raises_on_every_rank(daemon):
    results = run_ranks(unknown_candidate, args=(daemon.target,))
    for r in results:
        assert r[0] == "InvalidArgument" and r[1] == "problems[0].candidates[1].impl", r
        assert "all_reduce/nope" in r[2]


def absent(rank, world, target, only_rank_1):
    from autotuned import problem
    from autotuned.group import describe_group
    from autotuned.rankrun import tune_group

    bad = "/tmp/atpy-no-such-dir/none.sock"
    desc = describe_group(target=bad if (rank == 1 or not only_rank_1) else target,
                          connect_timeout=1.0)
    d = tune_group(desc, [problem("all_reduce", "float32", 4096, CANDIDATES)],
                   options=_options())
    return (d.winners, [r.status for r in d.results], d.fallback, d.results[0].reason)


@pytest.mark.parametrize("only_rank_1", [pytest.param(False, marks=LONG), True])
def test_absent_daemon_same_fallback_everywhere(daemon, only_rank_1):
    from autotuned import pb
    a, b = run_ranks(absent, args=(daemon.target, only_rank_1))
    assert not isinstance(a, RankError), a
    assert not isinstance(b, RankError), b
    assert a[:2] == b[:2] == (["all_reduce/one_shot"], [pb.FALLBACK])
    # Rank 1 finds its daemon absent; rank 0's daemon (when it has one)
    # answers the fallback of a round that rank 1 never joined.
    assert b[2] is True and "none.sock" in b[3], b
    if only_rank_1:
        assert a[2] is False and "pre-sync window" in a[3], a
    else:
        assert a == b


def dies(rank, world, target, marker):
    from autotuned import pb, problem
    from autotuned.group import describe_group
    from autotuned.rankrun import tune_group

    desc = describe_group(target=target)
    if rank == 0:
        open(marker, "w").close()
    d = tune_group(desc, [problem("all_reduce", "float32", 1024,
                                  ["all_reduce/one_shot", "all_reduce/hangs"])],
                   options=pb.Options(warmup=1, iterations=2, timeout_ms=60000), timeout=60)
    return (d.fallback, d.winners, d.reason)


@LONG
def test_daemon_dies_mid_call_same_fallback_everywhere():
    d = Daemon(config_text=HANG_CONF)
    marker = os.path.join(d.dir, "asking")

    def kill_once_asking():
        # The ranks ask right after rank 0 writes the marker; the hanging
        # candidate keeps the round open for 60 s, so 2 s later it is mid-call.
        deadline = time.monotonic() + 100
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.0)
        d.kill()

    try:
        threading.Thread(target=kill_once_asking, daemon=True).start()
        a, b = run_ranks(dies, args=(d.target, marker), timeout=120)
        assert not isinstance(a, RankError), a
        assert a == b
        assert a[0] is True and a[1] == ["all_reduce/one_shot"]
        assert "UNAVAILABLE" in a[2]
    finally:
        d.stop()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
