"""Candidates the ranks run: the daemon coordinates, times and judges code that
lives in this process (docs/protocol.md, "Candidates the ranks run").

    from autotuned.rankrun import RankCandidate, RankProblem, client_candidate, content_key
    from autotuned.rankrun import tune_rank

    x = torch.ones(4096)
    def nccl():                       # runs the candidate once on its inputs
        y = x.clone(); dist.all_reduce(y); return y
    p = problem("all_reduce", "float32", 4096,
                [client_candidate("nccl", content_key("nccl", 1)),
                 client_candidate("mine", content_key(my_source))])
    decision = tune_rank(desc, [RankProblem(p, {0: RankCandidate(nccl),
                                                1: RankCandidate(mine)})])
    decision.winners                  # ["mine"]: the same on every rank

tune_rank sends ONE per-rank Tune to this rank's daemon (through
autotuned.channels) and runs no torch.distributed call of its own: the
candidates' collectives run on the caller's process group, and the daemon
alone keeps the ranks together. When the answer is a run, every rank runs
its schedule here, step by step:

  1. the candidate once, its output compared with the step's reference
     (same_output, autotuned.check: exact for integer-valued data, else
     within the error bound of a sum in another order, from the dtype, the
     terms per element (the world size for all_reduce and reduce_scatter, 1
     for copies) and the outputs' magnitude); an exception is caught and
     reported. A candidate that passed in an earlier pass of the run is not
     run or compared again;
  2. RunStep(VERIFIED): a step some rank failed is skipped by every rank
     (not asked for a candidate verified in an earlier pass);
  3. `warmup` runs (once its graph is captured: one replay, enqueued and
     not waited for, and an eager call while the host's time has fewer
     than HOST_SAMPLES samples), then RunStep(WARMED_UP);
  4. `iterations` runs, timed as the daemon times its own candidates (see
     _Timer): time.perf_counter_ns around each run off the GPU; on a "cuda"
     device, in CUDA_GRAPH mode, replays of a CUDA graph of the candidate's
     calls captured once per run (a candidate that cannot be captured is
     timed by events and says so in StepTimes.timed_by), in EVENT_LOOP mode
     CUDA events around each graph_calls back-to-back eager launches. The
     warmup's calls give the host's time per eager call (StepTimes.host_us).
     A step past candidate_timeout_ms stops and is reported timed_out.

then Report, whose answer is the round's decision, or a continuation of the
run (one more pass of the candidates the measurement cannot yet tell
apart), run as above and reported again. A candidate has a step per
interleaved pass; one that a barrier refused is not run again (every rank
got the same refusal, and the daemon refuses its later steps too).
The daemon joins a candidate's steps and computes the statistics (max over
ranks per iteration, median, ...) from these times, as for its own
candidates.

What each failure gives (a GroupDecision, the same on every rank):
  * INVALID_ARGUMENT / UNIMPLEMENTED: InvalidArgument raised (the request is
    the same on every rank, so is the error);
  * the daemon down or unreachable (it is marked down, and later asks fail
    fast), or any other failure of the Tune: the fallback, the first
    candidate of each problem, with the reason;
  * a lost run (the daemon restarted, or forgot it): Tune asked once more,
    once the daemon answers again (at most REASK_CONNECT_S later); a result
    stored before the loss comes back CACHED, a fresh round is run as any,
    else every rank ends with the fallback.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import math
import re
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from autotuned import channels
from autotuned._proto import autotuned_pb2 as pb
from autotuned.check import same_output, terms_of
from autotuned.client import Client, candidate_spec, check_timeout, dtype_bytes
from autotuned.errors import MAX_REASON as MAX_REASON  # re-exported: the reason bound
from autotuned.errors import AutotunedError, InvalidArgument, Unavailable, Unimplemented
from autotuned.errors import bounded_reason as _bounded
from autotuned.group import GroupDecision, GroupDescription, fallback_results, with_presync

# How long a rank that lost its run waits for its daemon before asking again.
REASK_CONNECT_S = 5.0
# The most continuations of one run a rank runs (the daemon's own cap,
# defaults.max_passes, is at most 1000 passes in all).
MAX_CONTINUATIONS = 1000
_KEY = re.compile(r"^[A-Za-z0-9._:/+=-]{1,128}$")


def content_key(*parts: object) -> str:
    """A stable content key: the first 40 hex digits of sha256(str(parts))."""
    return hashlib.sha256(str(parts).encode()).hexdigest()[:40]


def client_candidate(name: str, key: str) -> pb.Candidate:
    """A candidate the ranks run: Candidate(client=ClientCandidate(key, name)),
    checked as the daemon checks it (InvalidArgument naming the field)."""
    if not _KEY.match(key):
        raise InvalidArgument(f"client.key: must be 1..128 characters of [A-Za-z0-9._:/+=-], "
                              f"got {key[:140]!r}")
    if not 1 <= len(name) <= 128 or any(not " " <= ch <= "~" for ch in name):
        raise InvalidArgument(f"client.name: must be 1..128 printable ASCII characters, "
                              f"got {name[:140]!r}")
    return pb.Candidate(client=pb.ClientCandidate(key=key, name=name))


@dataclasses.dataclass
class RankCandidate:
    """The code of one client candidate, on its prepared inputs."""

    # Runs the candidate once; returns its output (a tensor, a tuple/list of
    # them), or None when it writes into `output()`.
    run: Callable[[], Any]
    # The output to compare when run() returns None.
    output: Optional[Callable[[], Any]] = None
    # Makes run() ready (compiles the candidate, makes its inputs): called
    # once by tune_rank before it sends the Tune, so that it is not inside
    # the round's bounds; never runs a collective. What it raises is the
    # candidate's failure on this rank (its verify run raises it instead).
    prepare: Optional[Callable[[], None]] = None


def _prepared(problems: Sequence[RankProblem]) -> list[RankProblem]:
    """`problems` with every client candidate's prepare() called; one whose
    prepare raised runs as that exception."""
    out = []
    for rp in problems:
        runners = dict(rp.runners)
        for j, rc in rp.runners.items():
            if rc.prepare is None:
                continue
            try:
                rc.prepare()
            except Exception as e:  # noqa: BLE001 - the candidate's failure, reported
                runners[j] = RankCandidate(run=functools.partial(_reraise, e))
        out.append(dataclasses.replace(rp, runners=runners))
    return out


def _reraise(e: Exception) -> Any:
    raise e


@dataclasses.dataclass
class RankProblem:
    """A problem and the code of its client candidates on this rank."""

    problem: pb.Problem                 # catalogue and client candidates
    runners: dict[int, RankCandidate]   # index in problem.candidates -> its code
    device: Any = None                  # "cuda": CUDA events / graphs; else perf_counter_ns


ProblemLike = Union[RankProblem, pb.Problem]


def tune_rank(group: GroupDescription, problems: Sequence[ProblemLike], *,
              options: Optional[pb.Options] = None, timeout: float = 600.0,
              prepare_first: bool = True) -> GroupDecision:
    """One per-rank Tune of `problems` for this rank of `group`; runs the
    schedule when the answer is a run. See the module docstring.
    `prepare_first` False: the client candidates' prepare() is called only
    when the answer is a run, before its first step (then inside the run's
    bounds), for an ask the caller expects the daemon's cache to answer.
    InvalidArgument naming `timeout` unless it is a finite number of
    seconds above 0, naming `options` unless it is a pb.Options."""
    check_timeout("timeout", timeout)
    rank_problems = [p if isinstance(p, RankProblem) else RankProblem(p, {}) for p in problems]
    _check_runners(rank_problems)
    protos = [rp.problem for rp in rank_problems]
    request = pb.TuneRequest(group=group.proto(), problems=protos,
                             options=with_presync(options))
    target = group.target
    down = channels.down_reason(target)
    if down is not None:
        return _fallback(protos, f"daemon down: {down}")
    ready = prepare_first
    if ready:
        rank_problems = _prepared(rank_problems)
    client = channels.channel(target)
    lost = ""
    for attempt in range(2):
        try:
            answer = client.tune(request, timeout=timeout)
            if answer.HasField("run"):
                if not ready:
                    rank_problems, ready = _prepared(rank_problems), True
                answer = _Schedule(client, group, answer.run, rank_problems).run()
            return GroupDecision(list(answer.results), False, "")
        except _LostRun as e:
            if attempt == 0:
                lost = f"run lost: {e.cause}"
                # A daemon that restarts answers again within a few seconds.
                client.ready(REASK_CONNECT_S)
                continue
            return _fallback(protos, f"{lost}; asked again, run lost: {e.cause}")
        except (InvalidArgument, Unimplemented) as e:
            if attempt == 0:
                raise InvalidArgument(e.details, target=e.target) from None
            return _fallback(protos, f"{lost}; asked again: {e}")
        except AutotunedError as e:
            if isinstance(e, Unavailable) and not e.details.startswith("leader "):
                channels.mark_down(target, str(e))
            return _fallback(protos, f"{lost}; asked again: {e}" if lost else str(e))
    raise AssertionError("unreachable")


def tune_group(desc: GroupDescription, problems: Sequence[ProblemLike], *,
               process_group: Any = None, options: Optional[pb.Options] = None,
               timeout: float = 600.0, on_unavailable: str = "fallback") -> GroupDecision:
    """Kept for callers of the former autotuned.group.tune_group: tune_rank
    after a local check that `desc` fits `process_group` (GroupMismatch; no
    collective). With on_unavailable="raise", a fallback raises Unavailable."""
    if on_unavailable not in ("fallback", "raise"):
        raise ValueError("on_unavailable must be 'fallback' or 'raise'")
    desc.check(process_group)
    decision = tune_rank(desc, problems, options=options, timeout=timeout)
    if decision.fallback and on_unavailable == "raise":
        raise Unavailable(decision.reason, target=desc.target)
    return decision


class _LostRun(Exception):
    """A RunStep or Report of the run failed: the run is lost to this rank."""

    def __init__(self, cause: AutotunedError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _fallback(problems: Sequence[pb.Problem], reason: str) -> GroupDecision:
    return GroupDecision(fallback_results(problems, reason), True, reason)


def _check_runners(problems: Sequence[RankProblem]) -> None:
    for i, rp in enumerate(problems):
        for j, c in enumerate(rp.problem.candidates):
            if c.HasField("client") and j not in rp.runners:
                raise InvalidArgument(f"problems[{i}].candidates[{j}].client: no code for "
                                      f"{candidate_spec(c)!r} in runners")
        extra = [j for j in rp.runners if not 0 <= j < len(rp.problem.candidates)
                 or not rp.problem.candidates[j].HasField("client")]
        if extra:
            raise InvalidArgument(f"problems[{i}]: runners {sorted(extra)} are not "
                                  "client candidates of the problem")


def _raised(e: BaseException) -> str:
    return _bounded(f"raised {type(e).__name__}: {e}")


class _Schedule:
    """One rank's part of a run: every step in order, then the Report."""

    def __init__(self, client: Client, group: GroupDescription, run: pb.ClientRun,
                 problems: Sequence[RankProblem]) -> None:
        self.client, self.group, self.spec, self.problems = client, group, run, problems
        self.started = time.monotonic()
        self.step_timeout = run.candidate_timeout_ms / 1000.0
        # (problem, candidate) of the current problem's steps that passed
        # their verify on every rank, in order, with their verify output (the
        # references; an earlier problem's go when the steps move on).
        self.passed: dict[tuple[int, int], Any] = {}
        # (problem, candidate) refused at a barrier: the same on every rank.
        self.refused: set[tuple[int, int]] = set()
        # (problem, candidate) that passed its verify on every rank (kept for
        # the whole run, continuations included: not verified again).
        self.verified: set[tuple[int, int]] = set()
        # (problem, candidate) -> its _Timer, kept for the whole run (a graph
        # captured in the first pass is replayed in the later ones and in
        # continuations).
        self.timers: dict[tuple[int, int], _Timer] = {}

    def run(self) -> pb.TuneResponse:
        """Every step, then the Report; while its answer is a continuation
        of the run (RunReport.continues), its steps and another Report, with
        the same timers (a captured graph is replayed), `verified` and
        `refused`. Past MAX_CONTINUATIONS this rank reports a continuation's
        steps without running them: the daemon loses it at the next barrier
        and answers every rank the decision of the schedules all completed."""
        for rounds in range(MAX_CONTINUATIONS + 2):
            spec = self.spec
            times = []
            for i, s in enumerate(spec.steps):
                index = spec.first_step + i
                if rounds > MAX_CONTINUATIONS:
                    times.append(pb.StepTimes(step=index, ok=False, reason=(
                        f"this rank runs at most {MAX_CONTINUATIONS} continuations of a run")))
                    continue
                times.append(self._step(index, s))
            report = pb.RunReport(run_id=spec.run_id, group_id=self.group.id,
                                  rank=self.group.rank, steps=times,
                                  first_step=spec.first_step, continues=True)
            left = spec.report_within_ms / 1000.0 - (time.monotonic() - self.started)
            try:
                answer = self.client.report(report, timeout=max(left, 0.0) + 10.0)
            except AutotunedError as e:
                raise _LostRun(e) from None
            if not answer.HasField("run"):
                return answer
            self.spec, self.started = answer.run, time.monotonic()
            self.step_timeout = answer.run.candidate_timeout_ms / 1000.0
        raise _LostRun(AutotunedError(
            f"the daemon continued run {self.spec.run_id!r} past "
            f"{MAX_CONTINUATIONS} continuations"))

    def _barrier(self, step: int, phase: pb.StepPhase.ValueType, ok: bool,
                 reason: str) -> pb.StepReply:
        request = pb.StepRequest(run_id=self.spec.run_id, group_id=self.group.id,
                                 rank=self.group.rank, step=step, phase=phase, ok=ok,
                                 reason=_bounded(reason))
        try:
            # The daemon answers at most candidate_timeout_ms after the first
            # rank reached the barrier.
            return self.client.run_step(request, timeout=self.step_timeout + 10.0)
        except AutotunedError as e:
            raise _LostRun(e) from None

    def _reference(self, step: pb.ClientStep) -> Optional[tuple[int, int]]:
        """The step whose output this one's must match; None: its own."""
        if step.reference == step.candidate:
            return None
        if (step.problem, step.reference) in self.passed:
            return (step.problem, step.reference)
        # The reference was skipped: the problem's first step that passed.
        return next((k for k in self.passed if k[0] == step.problem), None)

    def _step(self, index: int, step: pb.ClientStep) -> pb.StepTimes:
        # Steps come in problem order: earlier problems' references are done.
        for done in [k for k in self.passed if k[0] != step.problem]:
            del self.passed[done]
        key = (step.problem, step.candidate)
        if key in self.refused:
            # Not run again (the same on every rank): the daemon says why.
            reply = self._barrier(index, pb.VERIFIED, False, "refused in an earlier pass")
            return pb.StepTimes(step=index, ok=False, reason=_bounded(reply.reason))
        rp = self.problems[step.problem]
        runner = rp.runners[step.candidate]
        timer = self.timers.get(key)
        if timer is None:
            timer = self.timers[key] = _Timer(rp.device, self.spec.timing_mode, runner,
                                              _message_bytes(rp.problem))
        deadline = time.monotonic() + self.step_timeout
        ok, reason, out = True, "", None
        # A candidate verified in an earlier pass of this run (on every rank:
        # `verified` follows the barriers) is not run and compared again: the
        # same code on the same inputs, and every rank skips alike.
        verified = key in self.verified
        try:
            out = None if verified else timer.verify_run()
            ref = None if verified else self._reference(step)
            if ref is not None:
                # The candidates' collective sums world_size terms per
                # element in an order of its own (1 for copies).
                terms = terms_of(rp.problem.collective, self.group.world_size, rp.problem.op)
                why = same_output(out, self.passed[ref], terms=terms)
                if why:
                    ok, reason = False, _bounded(
                        f"output differs from the reference "
                        f"\"{candidate_spec(rp.problem.candidates[ref[1]])}\": {why}")
        except Exception as e:  # noqa: BLE001 - the candidate's own failure, reported
            ok, reason = False, _raised(e)
        if not verified:
            # A candidate verified in an earlier pass has no VERIFIED barrier
            # (the same on every rank): its step's one barrier is WARMED_UP.
            reply = self._barrier(index, pb.VERIFIED, ok, reason)
            if not reply.proceed:
                self.refused.add(key)
                return pb.StepTimes(step=index, ok=False, reason=_bounded(reply.reason))
            self.passed[key] = out
            self.verified.add(key)
        ok, reason, timed_out = True, "", False
        try:
            timed_out = not timer.warm_up(self.spec.warmup, deadline)
            if timed_out:
                ok, reason = False, (f"ran past the candidate timeout of "
                                     f"{self.spec.candidate_timeout_ms} ms in the warmup")
            else:
                # A note for the other ranks (ok): this rank times by events.
                reason = timer.capture()
        except Exception as e:  # noqa: BLE001
            ok, reason = False, _raised(e)
        reply = self._barrier(index, pb.WARMED_UP, ok, reason)
        if not reply.proceed:
            self.refused.add(key)
            return pb.StepTimes(step=index, ok=False, reason=_bounded(reply.reason or reason),
                                timed_out=timed_out)
        if reply.reason:
            # Some rank could not capture it: every rank times it by events,
            # so that every rank launches the same collectives.
            timer.use_events(reply.reason)
        try:
            times = timer.timed(self.spec.iterations, deadline)
        except Exception as e:  # noqa: BLE001
            return pb.StepTimes(step=index, ok=False, reason=_raised(e))
        if len(times) < self.spec.iterations:
            return pb.StepTimes(step=index, ok=False, timed_out=True, reason=(
                f"ran past the candidate timeout of {self.spec.candidate_timeout_ms} ms "
                f"after {len(times)} of {self.spec.iterations} timed iterations"))
        return pb.StepTimes(step=index, ok=True, times_us=times, timed_by=timer.timed_by,
                            host_us=timer.host_median_us())


def _message_bytes(p: pb.Problem) -> int:
    """The problem's per-rank elements in bytes (all_to_all: its splits)."""
    count = p.count if p.count else sum(p.split_counts)
    return count * dtype_bytes(p.dtype)


def _is_cuda(device: Any) -> bool:
    return device is not None and str(getattr(device, "type", device)).startswith("cuda")


# As the daemon's worker times (docs/gpu.md#timing): one timed iteration (a
# replay of the captured graph, or as many eager calls) lasts about this
# long, so that a launch is a small part of what an event pair measures,
# and a mean over as many calls in either mode. The calls per
# graph come from the problem's size alone (graph_calls), never from a
# rank's own measurement: every rank must capture, and so launch, the same
# number of collectives, or a replay waits for a peer forever.
GRAPH_REPLAY_TARGET_US = 200.0
MAX_CALLS_PER_GRAPH = 64
# A collective's time guessed from its bytes (latency + bytes / bandwidth),
# for graph_calls only.
_GUESS_LATENCY_US = 8.0
_GUESS_BYTES_PER_US = 200e3


def graph_calls(message_bytes: int) -> int:
    """Calls per captured graph for a problem of `message_bytes` per rank:
    about GRAPH_REPLAY_TARGET_US of guessed GPU time, 1..MAX_CALLS_PER_GRAPH;
    the same on every rank."""
    guess = _GUESS_LATENCY_US + max(0, message_bytes) / _GUESS_BYTES_PER_US
    return max(1, min(MAX_CALLS_PER_GRAPH, math.ceil(GRAPH_REPLAY_TARGET_US / guess)))


# Cycles of the spin kernel queued before the first timed event, so that the
# GPU reaches that event only once the calls or replays behind it are queued.
_SPIN_CYCLES = 200_000
# Eager calls timed on the host per candidate (host_us): the first pass's
# warmup, then one per later pass until there are this many.
HOST_SAMPLES = 8


class _Timer:
    """Runs one candidate on this rank: its verify run, its warmup, its timed
    iterations. One _Timer per candidate for the whole run, so that a graph
    captured in the first pass is replayed in the later ones.

    On a "cuda" device, CUDA_GRAPH (the default of the integrations) times
    the candidate as the daemon times its own: the calls are captured once
    as a CUDA graph (on a side stream, after the warmup; graph_calls of the
    problem's bytes calls per graph, the same on every rank, so that a
    replay lasts about GRAPH_REPLAY_TARGET_US), and each timed iteration is one replay between
    two events, divided by `calls`: what the calls cost on the GPU, without
    the Python that launches them. The capture comes before the WARMED_UP
    barrier and records only; the first replay comes after it. A candidate
    that some rank cannot capture is timed as EVENT_LOOP on every rank (the
    rank says so at the barrier, whose reply tells every rank) and says so
    (`timed_by`). EVENT_LOOP, as the daemon's GPU worker times its own
    candidates eagerly: each timed iteration is `calls` back-to-back
    launches between two events, divided by `calls`, the first event behind
    the same spin as the replays. Off the GPU each
    iteration is timed alone by perf_counter_ns. In every mode the warmup's
    calls measure the host's time per eager call (`host_us`: from the call
    to its return, before the device sync)."""

    def __init__(self, device: Any, mode: int, runner: RankCandidate,
                 message_bytes: int = 0) -> None:
        self.cuda = _is_cuda(device)
        self.graph_mode = self.cuda and mode == pb.CUDA_GRAPH
        self.runner = runner
        self.graph: Any = None
        self.calls = graph_calls(message_bytes)
        self.capture_error = ""
        self.replayed = False
        self.host_us: collections.deque[float] = collections.deque(maxlen=64)

    @property
    def timed_by(self) -> pb.TimingMode.ValueType:
        if self.graph_mode and not self.capture_error:
            return pb.CUDA_GRAPH
        return pb.EVENT_LOOP

    def host_median_us(self) -> float:
        return sorted(self.host_us)[len(self.host_us) // 2] if self.host_us else 0.0

    def _sync(self) -> None:
        if self.cuda:
            import torch
            torch.cuda.synchronize()

    def verify_run(self) -> Any:
        out = self.runner.run()
        if out is None and self.runner.output is not None:
            out = self.runner.output()
        self._sync()
        return _detached(out)

    def warm_up(self, count: int, deadline: float) -> bool:
        """Runs `count` times; False when the deadline passed first. Once a
        graph is captured (a later pass), one replay warms it (what is timed
        is the replay), behind one eager call while host_us has fewer than
        HOST_SAMPLES samples. That replay is not waited for here: it runs
        while the rank waits at the WARMED_UP barrier (its collectives need
        every rank's, all enqueued before the barrier), and timed() waits
        for it before the spin."""
        if self.graph is not None and count > 0:
            if len(self.host_us) < HOST_SAMPLES:
                t0 = time.perf_counter_ns()
                self.runner.run()
                self.host_us.append((time.perf_counter_ns() - t0) / 1000.0)
            self.graph.replay()
            return time.monotonic() <= deadline
        for _ in range(count):
            if time.monotonic() > deadline:
                return False
            t0 = time.perf_counter_ns()
            self.runner.run()
            self.host_us.append((time.perf_counter_ns() - t0) / 1000.0)
            self._sync()
        return time.monotonic() <= deadline

    def timed(self, count: int, deadline: float) -> list[float]:
        """Up to `count` iteration times in microseconds; fewer when the
        deadline passed."""
        if not self.cuda:
            out: list[float] = []
            for _ in range(count):
                if time.monotonic() > deadline:
                    break
                t0 = time.perf_counter_ns()
                self.runner.run()
                out.append((time.perf_counter_ns() - t0) / 1000.0)
            return out
        if self.graph is not None:
            return self._timed_graph(count)
        return self._timed_eager(count, deadline)

    def _timed_eager(self, count: int, deadline: float) -> list[float]:
        def calls() -> None:
            for _ in range(self.calls):
                self.runner.run()
        return self._per_call_between_events(count, calls, deadline)

    def _per_call_between_events(self, count: int, step: Callable[[], Any],
                                 deadline: Optional[float] = None) -> list[float]:
        """Up to `count` runs of step(), each between two CUDA events, all
        queued behind a short spin so that no event waits on the host's
        launch of the step after it: each step's time divided by `calls`.
        Fewer when `deadline` passed."""
        import torch
        events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
        torch.cuda.synchronize()
        torch.cuda._sleep(_SPIN_CYCLES)
        events[0].record()
        done = 0
        for i in range(count):
            step()
            events[i + 1].record()
            done = i + 1
            if deadline is not None and time.monotonic() > deadline:
                break
        torch.cuda.synchronize()
        return [events[i].elapsed_time(events[i + 1]) * 1000.0 / self.calls
                for i in range(done)]

    def capture(self) -> str:
        """In CUDA_GRAPH mode, once: captures the calls as one graph (no
        collective runs: a capture only records). "" when it is captured,
        or was before, or is not to be; else why not, as a note for the
        other ranks (the candidate is then timed by events)."""
        if not self.graph_mode or self.graph is not None or self.capture_error:
            return ""
        # No replay here: a replay runs collectives, only once every rank
        # has its graph (after the barrier). capture_begin / capture_end as
        # torch.cuda.graph calls them, without the context manager's
        # torch.cuda.empty_cache() (and host cache), which would hand the
        # caching allocator's blocks back to CUDA at every candidate's
        # capture, for the next allocations to get from cudaMalloc again.
        import torch
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        side.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(side):
                graph.capture_begin()
                try:
                    for _ in range(self.calls):
                        self.runner.run()
                finally:
                    graph.capture_end()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - not capturable: timed by events
            self.capture_error = _raised(e)
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            return _bounded(f"timed by events: not captured as a CUDA graph: "
                            f"{self.capture_error}")
        self.graph = graph
        return ""

    def use_events(self, why: str) -> None:
        """Times by events from now on (a rank could not capture it)."""
        self.graph = None
        self.capture_error = self.capture_error or why

    def _timed_graph(self, count: int) -> list[float]:
        # Every rank replays `count` times whatever its clock says: a rank
        # that stopped early would leave its peers' collectives waiting.
        if not self.replayed:
            self.graph.replay()  # untimed: the first replay uploads the graph
            self.replayed = True
        return self._per_call_between_events(count, self.graph.replay)


def _detached(out: Any) -> Any:
    """A copy of an output that later runs cannot change."""
    if isinstance(out, (list, tuple)):
        return type(out)(_detached(o) for o in out)
    clone = getattr(out, "clone", None)
    if callable(clone) and hasattr(out, "detach"):
        return out.detach().clone()
    return out
