"""autotuned.rankrun's rank side against a scripted in-process daemon (one
rank, no torch.distributed): what the schedule sends and in which order,
how outputs are compared, what a failing candidate reports, the lost run
asked again, and an absent daemon found once. The real daemon's side is
tests/rankrun_test.py.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from concurrent import futures

import grpc
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from timeout_guard import guard  # noqa: E402

from autotuned import channels, pb, problem  # noqa: E402
from autotuned._proto import autotuned_pb2_grpc as pb_grpc  # noqa: E402
from autotuned.errors import InvalidArgument  # noqa: E402
from autotuned.group import GroupDescription, RankInfo  # noqa: E402
from autotuned.rankrun import (  # noqa: E402
    RankCandidate,
    RankProblem,
    client_candidate,
    content_key,
    graph_calls,
    same_output,
    tune_rank,
)


@pytest.fixture(autouse=True)
def deadline():
    with guard(60):
        yield


class Scripted(pb_grpc.AutotuneServicer):
    """Answers Tune with a run of every client candidate in `passes` rotated
    passes, every barrier with proceed = ok, and Report with TUNED results;
    records what the rank sent."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, int, bool, str]] = []
        self.reports: list[pb.RunReport] = []
        self.tunes = 0
        self.lose_run = False
        self.refuse: set[tuple[int, int]] = set()   # (step, phase) answered proceed=False
        self.timeout_ms = 5000
        self.mode = pb.EVENT_LOOP
        self.iterations = 4
        self.passes = 1
        # Report's answers before the results: continuations of the run, each
        # its steps as (problem, candidate, pass), with 1 warmup and 2 timed
        # iterations a step.
        self.continuations: list[list[tuple[int, int, int]]] = []
        self.run_steps = 0

    def Tune(self, request, context):
        self.tunes += 1
        self.request = request
        steps = []
        for pi, p in enumerate(request.problems):
            client = [ci for ci, c in enumerate(p.candidates) if c.HasField("client")]
            for n in range(self.passes):
                for ci in client[n % len(client):] + client[:n % len(client)]:
                    steps.append(pb.ClientStep(problem=pi, candidate=ci,
                                               reference=client[0], **{"pass": n}))
        self.run_steps = len(steps)
        return pb.TuneResponse(run=pb.ClientRun(
            run_id=f"run{self.tunes}", steps=steps, warmup=2, iterations=self.iterations,
            timing_mode=self.mode, candidate_timeout_ms=self.timeout_ms,
            report_within_ms=30000))

    def RunStep(self, request, context):
        self.steps.append((request.step, request.phase, request.ok, request.reason))
        if self.lose_run:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f'run "{request.run_id}" is '
                          "unknown to this daemon")
        if (request.step, request.phase) in self.refuse:
            return pb.StepReply(proceed=False, reason="rank 1: raised RuntimeError: x")
        return pb.StepReply(proceed=request.ok, reason="" if request.ok else
                            f"rank {request.rank}: {request.reason}")

    def Report(self, request, context):
        self.reports.append(request)
        if self.continuations:
            steps = [pb.ClientStep(problem=p, candidate=c, reference=0, **{"pass": n})
                     for p, c, n in self.continuations.pop(0)]
            first, self.run_steps = self.run_steps, self.run_steps + len(steps)
            return pb.TuneResponse(run=pb.ClientRun(
                run_id=request.run_id, steps=steps, warmup=1, iterations=2,
                timing_mode=self.mode, candidate_timeout_ms=self.timeout_ms,
                report_within_ms=30000, first_step=first))
        return pb.TuneResponse(results=[
            pb.ProblemResult(problem=p, status=pb.TUNED, winner="w")
            for p in self.request.problems])


@pytest.fixture
def daemon():
    d = tempfile.mkdtemp(prefix="atru", dir="/tmp")
    target = f"unix:{d}/s.sock"
    server = grpc.server(futures.ThreadPoolExecutor(4))
    servicer = Scripted()
    pb_grpc.add_AutotuneServicer_to_server(servicer, server)
    server.add_insecure_port(target)
    server.start()
    servicer.target = target
    yield servicer
    server.stop(0)
    channels.mark_up(target)


def _desc(target: str) -> GroupDescription:
    info = RankInfo(rank=0, global_rank=0, hostname="h", target=target, local_gpu=0,
                    daemon="", reachable=True, error="")
    return GroupDescription(id="g", rank=0, world_size=1, global_ranks=(0,), ranks=(info,))


def _problem(n: int, catalogue=()):
    return problem("all_gather", "float32", 4,
                   [client_candidate(f"c{i}", content_key(i)) for i in range(n)]
                   + list(catalogue))


def test_schedule_in_order_and_failures_reported(daemon):
    calls = []

    def good():
        calls.append("good")
        return (torch.ones(4), [torch.arange(3)])

    def raises():
        raise ValueError("no" * 1000)

    buf = torch.zeros(4)

    def writes():              # returns None: the output is buf
        buf.fill_(1.0)
        calls.append("writes")

    def differs():
        return (torch.ones(4) * 1.5, [torch.arange(3)])

    p = _problem(4, catalogue=["all_gather/ring"])
    runners = {0: RankCandidate(good), 1: RankCandidate(raises),
               2: RankCandidate(writes, output=lambda: (buf, [torch.arange(3)])),
               3: RankCandidate(differs)}
    d = tune_rank(_desc(daemon.target), [RankProblem(p, runners)])
    assert not d.fallback and d.winners == ["w"]
    # Verify once, barrier, warmup (2), barrier, 4 timed: 7 calls a step.
    assert calls == ["good"] * 7 + ["writes"] * 7
    phases = [(s, ph, ok) for s, ph, ok, _ in daemon.steps]
    assert phases == [(0, pb.VERIFIED, True), (0, pb.WARMED_UP, True),
                      (1, pb.VERIFIED, False),
                      (2, pb.VERIFIED, True), (2, pb.WARMED_UP, True),
                      (3, pb.VERIFIED, False)]
    raised = daemon.steps[2][3]
    assert raised.startswith("raised ValueError: nono") and len(raised.encode()) <= 1024
    assert daemon.steps[5][3].startswith('output differs from the reference "c0": [0]: ')
    (report,) = daemon.reports
    assert [(s.step, s.ok, len(s.times_us)) for s in report.steps] == \
        [(0, True, 4), (1, False, 0), (2, True, 4), (3, False, 0)]
    assert all(t >= 0 for t in report.steps[0].times_us)
    assert report.steps[1].reason.startswith("rank 0: raised ValueError")
    assert all(len(s.reason.encode()) <= 1024 for s in report.steps)


def test_skipped_reference_is_replaced_by_the_first_step_that_passed(daemon):
    daemon.refuse = {(0, pb.VERIFIED)}    # another rank failed the reference
    p = _problem(3)
    runners = {0: RankCandidate(lambda: torch.zeros(2)),
               1: RankCandidate(lambda: torch.ones(2)),
               2: RankCandidate(lambda: torch.ones(2) * 2)}
    tune_rank(_desc(daemon.target), [RankProblem(p, runners)])
    verified = [(s, ok, why) for s, ph, ok, why in daemon.steps if ph == pb.VERIFIED]
    # Step 0 (its own reference) passed here but was skipped; step 1 is then
    # its own reference, and step 2 is compared with step 1.
    assert [v[:2] for v in verified] == [(0, True), (1, True), (2, False)]
    assert 'reference "c1"' in verified[2][2]
    assert daemon.reports[0].steps[0].reason == "rank 1: raised RuntimeError: x"


def test_in_passes_a_refused_candidate_is_not_run_again(daemon):
    daemon.passes = 2
    calls: list[int] = []

    def runner(i: int, out: torch.Tensor) -> RankCandidate:
        return RankCandidate(lambda: calls.append(i) or out)

    def raises():
        calls.append(1)
        raise RuntimeError("x")

    p = _problem(3)
    runners = {0: runner(0, torch.ones(2)), 1: RankCandidate(raises),
               2: runner(2, torch.ones(2))}
    tune_rank(_desc(daemon.target), [RankProblem(p, runners)])
    # Steps: c0 c1 c2, then c1 c2 c0. c1 raised in pass 0: its step 3 is
    # refused without running it. c0 and c2, verified in pass 0, have no
    # VERIFIED barrier in pass 1: their steps' one barrier is WARMED_UP.
    verified = [(s, ok, why) for s, ph, ok, why in daemon.steps if ph == pb.VERIFIED]
    assert [v[:2] for v in verified] == [(0, True), (1, False), (2, True), (3, False)]
    assert verified[3][2] == "refused in an earlier pass"
    assert [s for s, ph, _, _ in daemon.steps if ph == pb.WARMED_UP] == [0, 2, 4, 5]
    assert calls.count(1) == 1
    # Per pass the warmup (2) and 4 timed runs, and the verify run in the
    # first pass only (a candidate verified in pass 0 is not verified again).
    assert calls.count(0) == calls.count(2) == 7 + 6
    (report,) = daemon.reports
    assert [(s.step, s.ok) for s in report.steps] == [
        (0, True), (1, False), (2, True), (3, False), (4, True), (5, True)]


def test_continuations_run_and_reported_until_the_decision(daemon, monkeypatch):
    from autotuned import rankrun

    made: list[tuple[int, int]] = []

    class Counted(rankrun._Timer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(id(self))
    monkeypatch.setattr(rankrun, "_Timer", Counted)
    calls: list[tuple[int, int]] = []

    def runner(p: int, c: int) -> RankCandidate:
        return RankCandidate(lambda: calls.append((p, c)) or torch.ones(2))

    # Two problems of two candidates; the continuations come back to problem
    # 0 after problem 1's steps, then to both.
    daemon.continuations = [[(0, 0, 1), (0, 1, 1)], [(0, 1, 2), (1, 0, 1), (1, 1, 1)]]
    problems = [RankProblem(_problem(2), {0: runner(p, 0), 1: runner(p, 1)}) for p in (0, 1)]
    d = tune_rank(_desc(daemon.target), problems)
    assert not d.fallback and d.winners == ["w", "w"]
    assert [(r.first_step, [s.step for s in r.steps]) for r in daemon.reports] == \
        [(0, [0, 1, 2, 3]), (4, [4, 5]), (6, [6, 7, 8])]
    assert all(r.continues for r in daemon.reports)
    assert all(s.ok and len(s.times_us) == (4 if r.first_step == 0 else 2)
               for r in daemon.reports for s in r.steps)
    # Every barrier by the step's index in the run; a candidate verified in
    # the first schedule has no VERIFIED barrier in the continuations.
    assert [s for s, ph, _, _ in daemon.steps if ph == pb.VERIFIED] == [0, 1, 2, 3]
    assert [s for s, ph, _, _ in daemon.steps if ph == pb.WARMED_UP] == list(range(9))
    # Verified once, warmed up (2) and timed (4) in the first schedule; in a
    # continuation 1 warmup and 2 timed runs a step, with the same timer.
    assert len(made) == 4
    assert calls.count((0, 0)) == 7 + 3
    assert calls.count((0, 1)) == 7 + 3 + 3
    assert calls.count((1, 0)) == calls.count((1, 1)) == 7 + 3


def test_continuations_past_the_cap_are_reported_without_running(daemon, monkeypatch):
    from autotuned import rankrun
    monkeypatch.setattr(rankrun, "MAX_CONTINUATIONS", 1)
    calls: list[int] = []
    daemon.continuations = [[(0, 0, 1), (0, 1, 1)], [(0, 0, 2), (0, 1, 2)]]
    runners = {c: RankCandidate(lambda c=c: calls.append(c) or torch.ones(2)) for c in (0, 1)}
    d = tune_rank(_desc(daemon.target), [RankProblem(_problem(2), runners)])
    assert not d.fallback and d.winners == ["w"]
    assert len(daemon.reports) == 3
    last = daemon.reports[2]
    assert [(s.step, s.ok) for s in last.steps] == [(4, False), (5, False)]
    assert last.steps[0].reason == "this rank runs at most 1 continuations of a run"
    # The second continuation's barriers were never called.
    assert max(s for s, _, _, _ in daemon.steps) == 3
    assert calls.count(0) == calls.count(1) == 7 + 3


def test_a_daemon_that_continues_past_the_cap_loses_the_run(daemon, monkeypatch):
    from autotuned import rankrun
    monkeypatch.setattr(rankrun, "MAX_CONTINUATIONS", 1)
    daemon.continuations = [[(0, 0, n), (0, 1, n)] for n in range(1, 20)]
    runners = {c: RankCandidate(lambda: torch.ones(2)) for c in (0, 1)}
    d = tune_rank(_desc(daemon.target), [RankProblem(_problem(2), runners)])
    assert d.fallback and daemon.tunes == 2
    assert "past 1 continuations" in d.reason


def test_step_past_its_timeout_is_reported_timed_out(daemon):
    daemon.timeout_ms = 50
    p = _problem(1)
    tune_rank(_desc(daemon.target), [RankProblem(p, {0: RankCandidate(
        lambda: time.sleep(0.02) or 1.0)})])
    (step,) = daemon.reports[0].steps
    assert not step.ok and step.timed_out and "candidate timeout of 50 ms" in step.reason


def test_lost_run_is_asked_again_once_then_falls_back(daemon):
    daemon.lose_run = True
    p = _problem(2)
    d = tune_rank(_desc(daemon.target), [RankProblem(p, {0: RankCandidate(lambda: 1.0),
                                                         1: RankCandidate(lambda: 1.0)})])
    assert daemon.tunes == 2
    assert d.fallback and d.winners == ["c0"]
    assert "run lost" in d.reason and "unknown to this daemon" in d.reason


def test_missing_runner_is_invalid_before_asking(daemon):
    with pytest.raises(InvalidArgument) as e:
        tune_rank(_desc(daemon.target), [RankProblem(_problem(2), {0: RankCandidate(list)})])
    assert e.value.field == "problems[0].candidates[1].client"
    assert daemon.tunes == 0


def test_absent_daemon_found_once_then_every_ask_falls_back_at_once():
    target = "unix:/tmp/atru-no-such-dir/none.sock"
    channels.mark_up(target)
    p = _problem(2)
    start = time.monotonic()
    rp = RankProblem(p, {0: RankCandidate(list), 1: RankCandidate(list)})
    first = tune_rank(_desc(target), [rp])
    assert channels.down_reason(target) is not None
    again = [tune_rank(_desc(target), [rp]) for _ in range(20)]
    assert time.monotonic() - start < 2.0
    assert first.fallback and first.winners == ["c0"] and "none.sock" in first.reason
    assert all(d.fallback and d.reason.startswith("daemon down: ") for d in again)
    assert channels.channel(target) is channels.channel(target)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["EVENT_LOOP", "CUDA_GRAPH"])
@pytest.mark.parametrize("nbytes", [8 << 10, 1 << 20, 64 << 20])
def test_cuda_candidates_timed_by_events_or_graph_replays(daemon, mode, nbytes):
    """A kernel of a known length (torch.cuda._sleep) is timed as that length,
    within 5 %, by CUDA events around the calls a problem of `nbytes` per
    rank asks for (25, 16 and 1 at 8 KiB, 1 MiB and 64 MiB), launched
    eagerly or replayed from a graph of them."""
    daemon.mode, daemon.iterations = getattr(pb, mode), 20
    x = torch.ones(1 << 20, device="cuda")
    cycles = 2_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)   # the first call loads the kernel
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    expected_us = start.elapsed_time(end) * 1000.0
    launches = []

    def sleep_then_add():
        launches.append(1)
        torch.cuda._sleep(cycles)
        return x + 1

    p = problem("all_reduce", "float32", nbytes // 4,
                [client_candidate(f"c{i}", content_key(i)) for i in range(2)])
    runners = {0: RankCandidate(sleep_then_add), 1: RankCandidate(lambda: x * 1 + 1)}
    tune_rank(_desc(daemon.target), [RankProblem(p, runners, device=torch.device("cuda"))])
    slow, fast = daemon.reports[0].steps
    assert slow.ok and fast.ok, (slow.reason, fast.reason)
    median = sorted(slow.times_us)[10]
    print(f"{mode}, {nbytes} B: kernel of {expected_us:.1f} us timed {median:.1f} us "
          f"(median of 20); an add of 4 MiB {sorted(fast.times_us)[10]:.1f} us")
    assert 0.95 * expected_us < median < 1.05 * expected_us, (median, expected_us)
    assert max(fast.times_us) < expected_us
    # The verify run and 2 warmup runs; then graph_calls(nbytes) calls for
    # each of the 20 timed iterations, or one capture of them, which the
    # replays run without Python.
    graph = mode == "CUDA_GRAPH"
    assert slow.timed_by == (pb.CUDA_GRAPH if graph else pb.EVENT_LOOP)
    assert len(launches) == 1 + 2 + graph_calls(nbytes) * (1 if graph else 20)


def test_outputs_compared_exactly_or_within_the_bound_of_a_sum():
    # autotuned.rankrun.same_output is autotuned.check's (tests/check_test.py).
    assert same_output(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])) == ""
    assert "exact" in same_output(torch.tensor([1.0, 2.0 + 2 ** -20]), torch.tensor([1.0, 2.0]))
    x = torch.rand(100)
    assert same_output(x * (1 + 1e-6), x, terms=16) == ""     # 16 * 2 * 2^-24 > 1e-6
    assert "max abs difference" in same_output(x * (1 + 1e-6), x, terms=2)
    assert "max abs difference" in same_output(x + 1e-2, x, terms=8)
    third = torch.full((3,), 0.3, dtype=torch.bfloat16)
    assert same_output(third * 1.004, third) == ""   # 1 ulp of bfloat16
    assert "shape" in same_output(torch.ones(3), torch.ones(4))
    assert "int32" in same_output(torch.ones(3, dtype=torch.int32), torch.ones(3))
    assert "sequence of 2" in same_output([torch.ones(1)], [torch.ones(1), torch.ones(1)])
    assert same_output(3, 3) == "" and same_output(1.0, 1.0 + 1e-9) == ""


def test_outputs_compared_within_the_bound_of_a_sum_over_the_world(daemon):
    """The schedule compares with as many terms as the collective sums per
    element: 6 u apart passes for a sum over 4 ranks (bound 8 u), not for 1
    rank, nor for a copy or a max over 4."""
    ref = torch.tensor([1.0, 0.5], dtype=torch.bfloat16)
    off = torch.tensor([1.0, 0.5 + 6 * 2.0 ** -8], dtype=torch.bfloat16)

    def verified(collective: str, world: int, op=None) -> list[tuple[bool, str]]:
        daemon.steps.clear()
        p = problem(collective, "bfloat16", 2,
                    [client_candidate(f"c{i}", content_key(i)) for i in range(2)], op=op)
        runners = {0: RankCandidate(lambda: ref), 1: RankCandidate(lambda: off)}
        desc = dataclasses.replace(_desc(daemon.target), world_size=world)
        tune_rank(desc, [RankProblem(p, runners)])
        return [(ok, why) for _, ph, ok, why in daemon.steps if ph == pb.VERIFIED]

    assert verified("all_reduce", 4) == [(True, ""), (True, "")]
    assert verified("reduce_scatter", 4) == [(True, ""), (True, "")]
    for differs in [verified("all_reduce", 1), verified("all_gather", 4),
                    verified("all_reduce", 4, op="max")]:
        assert differs[0] == (True, "")
        assert not differs[1][0] and "max abs difference" in differs[1][1], differs


def test_group_from_the_launchers_environment(monkeypatch):
    """torchrun's variables describe the group without a collective; an
    elastic restart is a new group (its rounds start afresh); ranks on
    several hosts, or a missing variable, need describe_group."""
    from autotuned.group import describe_from_env

    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
           "TORCHELASTIC_RUN_ID": "job7", "TORCHELASTIC_RESTART_COUNT": "0"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    first = describe_from_env("/tmp/x.sock")
    assert first is not None and first.rank == 1 and first.world_size == 2
    assert [r.local_gpu for r in first.ranks] == [0, 1]
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    restarted = describe_from_env("/tmp/x.sock")
    assert restarted is not None and restarted.id != first.id
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert describe_from_env("/tmp/x.sock") is None
    monkeypatch.delenv("RANK")
    assert describe_from_env("/tmp/x.sock") is None


def test_max_sizes_in_vllms_form():
    from autotuned.vllm import DispatchTable, SizeRange, max_sizes_dict

    def table(world, wins):
        ranges = [SizeRange(0, 0, lo, hi, w, 0, ()) for lo, hi, w in wins]
        return DispatchTable("all_reduce", "bfloat16", world, ["a", "b", "c"], [], ranges)
    staircase = table(2, [(1024, 2048, "a"), (4096, 4096, "b"), (8192, 1 << 20, "c")])
    assert staircase.max_sizes() == {"a": {2: 2048}, "b": {2: 4096}, "c": {2: 1 << 20}}
    assert staircase.max_sizes_exceptions() == []
    # The winner at the largest size takes the rest, even where it also
    # wins below another's largest size.
    nccl_twice = table(4, [(1024, 1024, "c"), (4096, 4096, "a"), (16384, 65536, "c")])
    assert nccl_twice.max_sizes() == {"a": {4: 4096}, "c": {4: 65536}, "b": {4: 0}}
    assert nccl_twice.max_sizes_exceptions() == [
        "1KiB..1KiB: c wins below another candidate's largest size"]
    again = table(8, [(1024, 1024, "a"), (4096, 4096, "b"), (8192, 8192, "a"),
                      (16384, 16384, "c")])
    assert again.max_sizes()["a"] == {8: 1024}
    assert again.max_sizes_exceptions() == [
        "8KiB..8KiB: a wins again above another candidate's range"]
    assert max_sizes_dict([staircase, nccl_twice], capability="9.0")["a"] == \
        {"9.0": {2: 2048, 4: 4096}}


def test_client_candidate_checked_as_the_daemon_does():
    c = client_candidate("my all_reduce", content_key("src", 3))
    assert c.client.name == "my all_reduce" and len(c.client.key) == 40
    assert content_key("src", 3) == content_key("src", 3) != content_key("src", 4)
    for name, key, field in [("n", "", "client.key"), ("n", "a b", "client.key"),
                             ("n", "k" * 129, "client.key"), ("", "k", "client.name"),
                             ("t\tab", "k", "client.name"), ("x" * 129, "k", "client.name")]:
        with pytest.raises(InvalidArgument) as e:
            client_candidate(name, key)
        assert e.value.field == field


def test_calls_per_graph_as_the_daemon_captures():
    # The same figures as GraphCalls in daemon/measure/backend/schedule_test.cc.
    sizes = [-1, 0, 8 << 10, 1 << 20, 16 << 20, 64 << 20, 1 << 40]
    assert [graph_calls(b) for b in sizes] == [25, 25, 25, 16, 3, 1, 1]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
