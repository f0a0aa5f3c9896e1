"""The failure matrix of a dead rank and a dead daemon, with real processes:
the sim daemon and ranks spawned as tests/ranks.py does (gloo, CPU). One
rank SIGKILLs itself at a chosen point; the others must each return within
the bound docs/protocol.md gives for the options passed, and all with the
same answer (statuses, winners, reasons, ranked candidates).

Per-rank Tune (whole_group false) of catalogue candidates: the victim dies
before it asks (the window closes without it), after it asked while the
window is still open, and as the last rank to ask, while its round measures.
Rank runs (tune_rank with candidates the ranks run): the victim dies before
its first RunStep, between steps, while waiting at a barrier, before its
Report, and during a continuation. A per-rank Sweep: the victim dies after
its second size. The daemon SIGKILLed and restarted while ranks wait in a
round. Two daemons, the follower SIGKILLed mid-measurement while both ranks'
processes live: the same code runs on both (the leader's FAILED, the
follower's rank's own fallback: each the first candidate). Not repeated
here: a rank that dies inside a candidate or exits after its Tune
(rankrun_test), the daemon restarted mid-run (rankrun_test), the answers of
the daemons' own ranks when a daemon is killed or cut off
(tests/multi_daemon_test.cc, tests/multi_daemon_random_test.cc). The long tier
(//client/python:fault_matrix_long_test) runs the per-rank Tune and rank-run
cases with 4 ranks too.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import Daemon, restart_when_marked, torchrun_env  # noqa: E402
from ranks import RankError, run_ranks  # noqa: E402
from tier import long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

LONG = long_only("//client/python:fault_matrix_long_test")
# candidate_timeout_ms of every case: a barrier's bound, a step's share of a
# run's bound.
TIMEOUT_MS = 1000
# The pre-sync window of the per-rank asks.
WINDOW_US = 1_500_000
# Slack over a documented bound for spawned Python ranks on 2 busy cores.
SLACK_S = 5.0
VICTIM = 1


@pytest.fixture(autouse=True)
def deadline():
    with guard(280):
        yield


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _die_in(seconds: float) -> None:
    t = threading.Timer(seconds, _die)
    t.daemon = True
    t.start()


def _summary(results) -> list:
    from autotuned import pb
    return [(r.winner, pb.DecisionStatus.Name(r.status), r.reason,
             [(c.index, c.ok, c.reason) for c in r.ranked]) for r in results]


def _round_bound_s(candidates: int) -> float:
    """A measured round's bound: 10 s + 2 x candidates x candidate timeout."""
    return 10.0 + 2 * candidates * TIMEOUT_MS / 1000.0


def _run_bound_s(steps: int) -> float:
    """A run's first schedule's bound: 5 s + steps x candidate timeout."""
    return 5.0 + steps * TIMEOUT_MS / 1000.0


def _survivors(results, world: int) -> list:
    """The survivors' results; the victim must have died (SIGKILL)."""
    victim = results[VICTIM]
    assert isinstance(victim, RankError) and "-9" in victim.message, victim
    out = [r for k, r in enumerate(results) if k != VICTIM]
    for r in out:
        assert not isinstance(r, RankError), r
    return out


def _check_same(out: list) -> None:
    answers = [r[0] for r in out]
    assert all(a == answers[0] for a in answers), answers


CATALOGUE = ["all_reduce/ring", "all_reduce/one_shot", "all_reduce/two_shot"]


def per_rank_tune(rank, world, target, when):
    """A per-rank Tune of catalogue candidates; the victim dies `when`."""
    from autotuned import pb, problem
    from autotuned.group import describe_from_env
    from autotuned.rankrun import tune_rank

    desc = describe_from_env(target)
    # The measuring case: enough timed work that the victim dies mid-measurement.
    count = (1 << 20) if when == "measuring" else 1024
    p = problem("all_reduce", "float32", count, CATALOGUE, label=when)
    options = pb.Options(warmup=1, iterations=200 if when == "measuring" else 2,
                         timeout_ms=TIMEOUT_MS, presync_window_us=WINDOW_US)
    if rank == VICTIM:
        if when == "before_ask":
            _die()
        if when == "window_open":
            # Asks first, dies while the window waits for the slow rank 0.
            _die_in(0.3)
        if when == "measuring":
            # The last to ask: its ask completes the round, which it measures.
            time.sleep(0.4)
            _die_in(0.2)
    elif rank == 0 and when == "window_open":
        time.sleep(0.6)
    t0 = time.monotonic()
    d = tune_rank(desc, [p], options=options)
    return (d.fallback, _summary(d.results)), time.monotonic() - t0


def _per_rank(daemon, world, when):
    results = run_ranks(per_rank_tune, world=world, args=(daemon.target, when),
                        env=torchrun_env(world), timeout=120)
    out = _survivors(results, world)
    _check_same(out)
    (fallback, answer), took = out[0][0], max(t for _, t in out)
    print(f"{when}, {world} ranks: {[s for _, s, _, _ in answer]} after {took:.2f} s: "
          f"{answer[0][2]!r}")
    window = WINDOW_US / 1e6
    assert not fallback, answer   # the daemon's answer, not a local one
    if when in ("before_ask", "window_open"):
        # The window closed without the victim: the fallback, at the window.
        assert answer[0][1] == "FALLBACK" and answer[0][0] == CATALOGUE[0], answer
        assert f"{world - 1} of {world}" in answer[0][2], answer
        assert took < window + SLACK_S, took
    else:
        # Every rank was there: measured, though the rank whose ask completed
        # the round is gone, within the round's bound.
        assert took < window + _round_bound_s(len(CATALOGUE)) + SLACK_S, took
        assert answer[0][1] == "TUNED", answer
        # Answered after the victim died (0.6 s after the others asked): the
        # case killed it mid-measurement.
        assert min(t for _, t in out) > 0.6, out


@pytest.mark.parametrize("when", ["before_ask", "window_open", "measuring"])
def test_per_rank_tune_a_dead_rank_one_answer_within_the_bound(daemon, when):
    _per_rank(daemon, 3, when)


@LONG
@pytest.mark.parametrize("when", ["before_ask", "window_open", "measuring"])
def test_per_rank_tune_four_ranks(daemon, when):
    _per_rank(daemon, 4, when)


# The timed iterations, so the fixed passes, of a run: 2, or 8 in the
# continuation case (alike candidates: 8 pairs that all lean one way are rare).
PASSES = {False: 2, True: 8}


def rank_run(rank, world, target, when, tag):
    """A run of two client candidates (spins, no collective) and a catalogue
    one; the victim dies `when`. Returns the answer, the time and whether
    this rank saw a continuation."""
    from autotuned import channels, pb, problem
    from autotuned.group import describe_from_env
    from autotuned.rankrun import RankCandidate, RankProblem, client_candidate, tune_rank
    desc = describe_from_env(target)
    cands = [client_candidate("a", f"{tag}.a"), client_candidate("b", f"{tag}.b")]
    p = problem("all_reduce", "float32", 1024, cands + ["all_reduce/ring"], label=tag)
    options = pb.Options(warmup=1, iterations=PASSES[when == "continuation"],
                         timeout_ms=TIMEOUT_MS, presync_window_us=WINDOW_US)
    client = channels.channel(target)
    real_step, real_report = client.run_step, client.report
    calls = {"steps": 0, "continued": False}
    victim = rank == VICTIM

    def run_step(request, **kwargs):
        calls["steps"] += 1
        n = calls["steps"]
        if victim and when == "before_first_step" and n == 1:
            _die()
        if victim and when == "between_steps" and n == 3:
            _die()
        if when == "at_barrier" and n == 3:
            if victim:
                _die_in(0.3)    # arrived, dies while the others are still coming
            else:
                time.sleep(0.8)
        if victim and when == "continuation" and calls["continued"]:
            _die()
        return real_step(request, **kwargs)

    def report(request, **kwargs):
        if victim and when == "before_report":
            _die()
        answer = real_report(request, **kwargs)
        if answer.HasField("run"):
            calls["continued"] = True
        return answer
    client.run_step, client.report = run_step, report

    # In the continuation case the client candidates are alike and faster
    # than the catalogue one: contenders within the noise, continued.
    us = 0 if when == "continuation" else 200

    def spin():
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
        return 1.0
    problems = [RankProblem(p, {0: RankCandidate(spin), 1: RankCandidate(spin)})]
    t0 = time.monotonic()
    d = tune_rank(desc, problems, options=options)
    return (d.fallback, _summary(d.results)), time.monotonic() - t0, calls["continued"]


def _rank_run(daemon, world, when):
    tag = f"{when}-{world}-{time.time_ns()}"
    results = run_ranks(rank_run, world=world, args=(daemon.target, when, tag),
                        env=torchrun_env(world), timeout=150)
    out = _survivors(results, world)
    _check_same(out)
    (fallback, answer), took = out[0][0], max(t for _, t, _ in out)
    print(f"{when}, {world} ranks: {answer} after {took:.2f} s")
    # A step per pass of each of the 2 client candidates.
    bound = WINDOW_US / 1e6 + _round_bound_s(1) + _run_bound_s(2 * PASSES[when == "continuation"])
    if when == "continuation":
        assert all(c for _, _, c in out), "no continuation: the case did not run"
        bound += _run_bound_s(2)    # one continuation: a pass of 2 candidates
    assert took < bound + SLACK_S, (took, bound)
    assert not fallback, answer
    winner, status, _, ranked = answer[0]
    # The catalogue candidate keeps its timing; the client ones are ruled out
    # naming the lost rank (or, lost in a continuation, keep the fixed passes').
    assert status == "TUNED", answer
    if when == "continuation":
        assert all(ok for _, ok, _ in ranked), ranked
    else:
        assert winner == "all_reduce/ring", answer
        assert all(not ok and f"rank {VICTIM}" in why for i, ok, why in ranked if i < 2), ranked


RUN_CASES = ["before_first_step", "between_steps", "at_barrier", "before_report",
             "continuation"]


@pytest.mark.parametrize("when", RUN_CASES)
def test_rank_run_a_dead_rank_one_answer_within_the_bound(daemon, when):
    _rank_run(daemon, 3, when)


@LONG
@pytest.mark.parametrize("when", RUN_CASES)
def test_rank_run_four_ranks(daemon, when):
    _rank_run(daemon, 4, when)


# Sizes that take a while each, so that the victim dies with sizes to come.
SWEEP_COUNTS = [1 << 16, 1 << 17, 1 << 18, 1 << 19]


def per_rank_sweep(rank, world, target):
    """A per-rank Sweep; the victim dies after its second size."""
    from autotuned import Client, pb, problem
    from autotuned.group import describe_from_env

    desc = describe_from_env(target)
    request = pb.SweepRequest(
        group=desc.proto(), problem=problem("all_reduce", "float32", 1, CATALOGUE[:2]),
        counts=SWEEP_COUNTS,
        options=pb.Options(warmup=1, iterations=40, timeout_ms=TIMEOUT_MS,
                           presync_window_us=WINDOW_US))
    sizes, table = [], None
    t0 = time.monotonic()
    with Client(target) as c:
        for update in c.sweep(request, timeout=120):
            if update.HasField("size_result"):
                sizes.append(update.size_result)
                if rank == VICTIM and len(sizes) == 2:
                    _die()
            else:
                table = update.table
    return (_summary(sizes), [(r.winner, r.min_count, r.max_count) for r in table.ranges]), \
        time.monotonic() - t0


def test_per_rank_sweep_a_rank_dead_midway(daemon):
    world = 3
    results = run_ranks(per_rank_sweep, world=world, args=(daemon.target,), env=torchrun_env(world),
                        timeout=150)
    out = _survivors(results, world)
    _check_same(out)
    (sizes, table), took = out[0][0], max(t for _, t in out)
    print(f"sweep: {[s for _, s, _, _ in sizes]}, table {table}, after {took:.2f} s")
    assert len(sizes) == len(SWEEP_COUNTS), sizes
    # The sizes before the victim's death are measured; the one under way
    # when it died is measured or falls back (its ask may be withdrawn);
    # the last falls back at its window.
    assert [s for _, s, _, _ in sizes[:2]] == ["TUNED", "TUNED"], sizes
    assert sizes[2][1] in ("TUNED", "FALLBACK") and sizes[3][1] == "FALLBACK", sizes
    window = WINDOW_US / 1e6
    bound = len(SWEEP_COUNTS) * (window + _round_bound_s(2))
    assert took < bound + SLACK_S, (took, bound)


def waits_for_restart(rank, world, target, marks):
    """Ranks 0 and 1 ask and wait for rank 2, which asks only after the
    daemon was SIGKILLed and started again."""
    from autotuned import pb, problem
    from autotuned.group import describe_from_env
    from autotuned.rankrun import tune_rank

    desc = describe_from_env(target)
    p = problem("all_reduce", "float32", 1024, CATALOGUE, label="restart")
    options = pb.Options(warmup=1, iterations=2, timeout_ms=TIMEOUT_MS,
                         presync_window_us=8_000_000)
    if rank == world - 1:
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(marks, "restarted")):
            assert time.monotonic() < deadline, "never restarted"
            time.sleep(0.02)
    else:
        open(os.path.join(marks, f"rank{rank}"), "w").close()
    t0 = time.monotonic()
    d = tune_rank(desc, [p], options=options)
    return (d.fallback, _summary(d.results)), time.monotonic() - t0


def test_daemon_restarted_while_ranks_wait_in_a_round():
    d = Daemon()
    try:
        marks = restart_when_marked(d, 2, delay_s=1.0)  # once two ranks ask
        results = run_ranks(waits_for_restart, world=3, args=(d.target, marks), env=torchrun_env(3),
                            timeout=120)
        for r in results:
            assert not isinstance(r, RankError), r
        print("restarted while waiting:", results)
        # The same status and winner on every rank; the waiting ranks lost the
        # same call alike and say the same.
        decided = [[(w, s) for w, s, _, _ in r[0][1]] for r in results]
        assert all(x == decided[0] for x in decided), results
        assert decided[0] == [(CATALOGUE[0], "FALLBACK")], results
        assert results[0][0] == results[1][0], results
        # Within a second or two of the kill; the late rank at its window.
        assert all(t < 8.0 + SLACK_S for _, t in results), results
    finally:
        d.stop()


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# all_reduce/slow: a ring that takes 150 ms more on rank 1 per iteration,
# so that the follower dies mid-measurement.
SLOW = ('sim { faults { name: "all_reduce/slow" base: "all_reduce/ring" '
        'kind: SLOW_RANK rank: 1 delay_us: 150000 } }')


def across_daemons(rank, world, targets, peers, tag, marks):
    """Rank r asks daemon r (rank 0's leads); both ranks' processes live."""
    from autotuned import pb, problem
    from autotuned.group import GroupDescription, RankInfo
    from autotuned.rankrun import tune_rank

    infos = tuple(RankInfo(rank=r, global_rank=r, hostname=f"h{r}", target=targets[r],
                           local_gpu=0, daemon=peers[r], reachable=True, error="")
                  for r in range(world))
    desc = GroupDescription(id=tag, rank=rank, world_size=world,
                            global_ranks=tuple(range(world)), ranks=infos)
    p = problem("all_reduce", "float32", 1024, ["all_reduce/slow", "all_reduce/one_shot"],
                label=tag)
    options = pb.Options(warmup=1, iterations=5, timeout_ms=TIMEOUT_MS,
                         presync_window_us=WINDOW_US)
    open(os.path.join(marks, f"rank{rank}"), "w").close()
    t0 = time.monotonic()
    d = tune_rank(desc, [p], options=options)
    return (d.fallback, _summary(d.results)), time.monotonic() - t0


def test_follower_daemon_killed_mid_round_both_ranks_alive():
    peers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    conf = ('peer_token: "fault-matrix-token"\n' + "".join(f'peers: "{p}"\n' for p in peers)
            + SLOW)
    hosts = [Daemon(extra_args=[f"--peer_listen={p}"], sim_gpus=2,
                    config_text=f'peer_advertise: "{p}"\n' + conf) for p in peers]
    marks = os.path.join(hosts[0].dir, "marks")
    os.mkdir(marks)
    try:
        def kill_follower():
            deadline = time.monotonic() + 60
            while len(os.listdir(marks)) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            # Both asked: the round went at once; the slow candidate's
            # measurement takes about 150 ms x its iterations.
            time.sleep(0.5)
            hosts[1].kill()
        threading.Thread(target=kill_follower, daemon=True).start()
        results = run_ranks(across_daemons, world=2,
                            args=([h.target for h in hosts], peers, f"x{time.time_ns()}",
                                  marks),
                            env=torchrun_env(2), timeout=120)
        for r in results:
            assert not isinstance(r, RankError), r
        print("follower killed:", results)
        bound = WINDOW_US / 1e6 + _round_bound_s(2) + 5.0
        assert all(t < bound + SLACK_S for _, t in results), (results, bound)
        # The leader's rank gets the leader's answer (FAILED, the candidates
        # ruled out naming the lost daemon, protocol.md "Lost daemons"); the
        # follower's rank lost its daemon and gets its client's fallback. Not
        # the same status, but the same choice: a caller runs the winner of
        # a TUNED or CACHED answer only, else the first candidate (the op's
        # default; autotuned.inductor's selections, autotuned.vllm's tables).
        statuses = [[s for _, s, _, _ in r[0][1]] for r in results]
        assert statuses == [["FAILED"], ["FALLBACK"]], results
        assert f"daemon {peers[1]}" in str(results[0][0][1]), results
        assert [_runs(r[0][1]) for r in results] == [[0], [0]], results
    finally:
        for h in hosts:
            h.stop()


def _runs(summary) -> list[int]:
    """What a caller runs per problem: the winner's index where the answer is
    TUNED or CACHED, else the first candidate."""
    return [ranked[0][0] if status in ("TUNED", "CACHED") else 0
            for _, status, _, ranked in summary]
