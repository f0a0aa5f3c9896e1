"""The torch helpers misused as a user might, on CPU (gloo): each bad
argument is InvalidArgument naming it, raised before anything is asked (so
the same with the daemon down), and a table's runner runs what its pick
says where a size has no winner.

In-process cases use a world of one rank (a FileStore gloo group); the
subgroup cases spawn 2 ranks (tests/ranks.py) against a sim daemon.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import torchrun_env  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from timeout_guard import guard  # noqa: E402

NO_DAEMON = "unix:/tmp/atpy-no-such-dir/none.sock"


@pytest.fixture(autouse=True)
def deadline():
    with guard(120):
        yield


@pytest.fixture(scope="module")
def world_of_one():
    """torch.distributed initialized in this process, one gloo rank."""
    import datetime

    import torch.distributed as dist

    fd, store = tempfile.mkstemp(prefix="atpy-store")
    os.close(fd)
    os.unlink(store)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    yield
    dist.destroy_process_group()
    if os.path.exists(store):
        os.unlink(store)


def _absent_group():
    """This rank alone, on a daemon that does not exist."""
    from autotuned.group import GroupDescription, RankInfo
    return GroupDescription(id=f"misuse-{time.time_ns()}", rank=0, world_size=1,
                            global_ranks=(0,),
                            ranks=(RankInfo(0, 0, "h", NO_DAEMON, 0, "", True, ""),))


def _own():
    def a(x):
        return x
    return {"a": a}


@pytest.mark.parametrize("sizes, field", [
    ([], "sizes_bytes"),
    ([1024, -4096], "sizes_bytes[1]"),
    ([0], "sizes_bytes[0]"),
    ([1024, 2], "sizes_bytes[1]"),          # less than one float32 element
    ([1024.0], "sizes_bytes[0]"),
    ([True], "sizes_bytes[0]"),
])
def test_bad_sizes_are_refused_by_name_even_with_the_daemon_down(world_of_one, sizes, field):
    from autotuned.errors import InvalidArgument
    from autotuned.vllm import tune_dispatch

    with pytest.raises(InvalidArgument) as e:
        tune_dispatch(candidates=_own(), dtype="float32", sizes_bytes=sizes,
                      desc=_absent_group())
    assert e.value.field == field, e.value


def test_what_the_daemon_refuses_is_named_as_the_caller_gave_it(world_of_one, daemon):
    from autotuned.errors import InvalidArgument
    from autotuned.group import describe_group
    from autotuned.vllm import tune_dispatch

    desc = describe_group(target=daemon.target)
    with pytest.raises(InvalidArgument) as e:
        tune_dispatch(candidates=_own(), dtype="float32", sizes_bytes=[1 << 50, 1024],
                      desc=desc)
    assert e.value.field == "sizes_bytes[0]", e.value
    assert str(1 << 50) in str(e.value) and "memory cap" in str(e.value), e.value
    # The ring is measured at 3 shapes: the unknown name is the 5th
    # candidate of the problem, the 3rd entry as given.
    with pytest.raises(InvalidArgument) as e:
        tune_dispatch(candidates=[*_own().items(), "all_reduce/ring", "all_reduce/nope"],
                      dtype="float32", sizes_bytes=[1024], desc=desc)
    assert e.value.field == "candidates[2].impl", e.value
    assert "problems[0].candidates[4].impl" in str(e.value), e.value


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf])
def test_bad_timeouts_are_refused_by_name(world_of_one, timeout):
    import autotuned.inductor
    from autotuned import Client, problem
    from autotuned.errors import InvalidArgument
    from autotuned.rankrun import tune_rank
    from autotuned.vllm import tune_dispatch

    p = problem("all_reduce", "float32", 256, ["all_reduce/ring"])
    calls = {
        "timeout": [
            lambda: tune_rank(_absent_group(), [p], timeout=timeout),
            lambda: tune_dispatch(candidates=_own(), dtype="float32", sizes_bytes=[1024],
                                  desc=_absent_group(), timeout=timeout),
            lambda: autotuned.inductor.enable(group=_absent_group(), timeout=timeout),
            lambda: Client(NO_DAEMON, connect_timeout=None).tune([p], timeout=timeout),
            lambda: Client(NO_DAEMON, connect_timeout=None).node_info(timeout=timeout),
        ],
        "measure_timeout": [lambda: Client(NO_DAEMON, measure_timeout=timeout)],
        "query_timeout": [lambda: Client(NO_DAEMON, query_timeout=timeout)],
        "connect_timeout": [lambda: Client(NO_DAEMON, connect_timeout=timeout)],
    }
    for field, fns in calls.items():
        for fn in fns:
            with pytest.raises(InvalidArgument) as e:
                fn()
            assert e.value.field == field, e.value
    assert autotuned.inductor.decisions() == []   # enable() left nothing on


def test_options_of_another_type_are_refused_by_name(world_of_one):
    import autotuned.inductor
    from autotuned import problem
    from autotuned.errors import InvalidArgument
    from autotuned.rankrun import tune_rank

    p = problem("all_reduce", "float32", 256, ["all_reduce/ring"])
    for fn in (lambda: tune_rank(_absent_group(), [p], options={"iterations": 5}),
               lambda: autotuned.inductor.enable(group=_absent_group(), options=5)):
        with pytest.raises(InvalidArgument) as e:
            fn()
        assert e.value.field == "options", e.value


def test_the_runner_runs_the_tables_pick_where_a_size_has_no_winner(world_of_one):
    import torch

    from autotuned import pb
    from autotuned.vllm import _table

    def ranked(i, us):
        return pb.CandidateResult(index=i, ok=True, median_us=us)
    results = [
        pb.ProblemResult(problem=pb.Problem(count=256), status=pb.TUNED, winner="b",
                         winner_index=1, ranked=[ranked(1, 10.0), ranked(0, 20.0)]),
        pb.ProblemResult(problem=pb.Problem(count=1024), status=pb.FAILED,
                         reason="every candidate was ruled out"),
    ]
    table = _table("all_reduce", "float32", 1, ["a", "b", "c"], results)
    ran = []
    others = {n: (lambda x, n=n: ran.append(n) or x) for n in ("a", "b", "c")}
    run = table.runner(others=others)
    for n in (256, 1024, 4096):
        x = torch.ones(n)
        run(x)
        assert run.pick(x) == table.pick(x) == ran[-1], (n, run.pick(x), table.pick(x), ran)
    assert ran == ["b", "a", "a"], ran


def test_a_fallback_table_says_why_at_every_size(world_of_one, tmp_path):
    from autotuned import pb
    from autotuned.plot import read
    from autotuned.vllm import tune_dispatch

    table = tune_dispatch(candidates=_own(), dtype="float32", sizes_bytes=[1024, 4096],
                          desc=_absent_group())
    assert table.fallback and "UNAVAILABLE" in table.reason, table
    for r in table.results:
        assert r.status == pb.FALLBACK and r.reason == table.reason, r
        assert (r.problem.collective, r.problem.dtype) == (pb.ALL_REDUCE, pb.FLOAT32), r
    path = str(tmp_path / "fallback.jsonl")
    table.write_jsonl(path)
    sweep = read(path)
    assert (sweep.collective, sweep.dtype) == ("all_reduce", "float32"), sweep


def outside_the_subgroup(rank, world, target):
    """Rank 0 alone in a subgroup: describing it, enabling on it, a table
    for it with the world's description."""
    import torch.distributed as dist

    import autotuned.inductor
    from autotuned.errors import InvalidArgument
    from autotuned.group import describe_from_env, describe_group
    from autotuned.vllm import tune_dispatch

    sub = dist.new_group([0])
    out = []
    for name, fn in [
        ("describe", lambda: describe_group(sub, target=target).world_size),
        ("enable", lambda: autotuned.inductor.enable(process_group=sub, target=target)),
        ("dispatch", lambda: tune_dispatch(sub, candidates=_own(), dtype="float32",
                                           sizes_bytes=[1024],
                                           desc=describe_from_env(target)).fallback),
    ]:
        try:
            out.append((name, "ok", fn()))
        except InvalidArgument as e:
            out.append((name, type(e).__name__, e.field, str(e)))
    autotuned.inductor.disable()
    return out


def test_a_rank_outside_the_process_group_is_told_so(daemon):
    env = torchrun_env(2)
    a, b = run_ranks(outside_the_subgroup, world=2, args=(daemon.target,), env=env,
                     timeout=90)
    assert not isinstance(a, RankError), a
    assert not isinstance(b, RankError), b
    # Rank 0 is the subgroup: described as one rank, enabled on it; the
    # world's description does not fit it.
    assert a[0] == ("describe", "ok", 1) and a[1] == ("enable", "ok", None), a
    assert a[2][:2] == ("dispatch", "GroupMismatch") and "world_size 2" in a[2][3], a
    # Rank 1 is not in it: named, not an IndexError.
    for name, kind, field, why in b:
        assert field == "process_group" and "not a member" in why, (name, kind, field, why)
