// One run of candidates the ranks run: the barriers of its steps and the
// ranks' reports, decided once into the round's answer. The protocol (the
// schedule, its continuations, the barriers' answers, the faults and their
// texts) is docs/protocol.md, "Candidates the ranks run"; the registry that
// opens and forgets runs is client_runs.h.
//
// A run is a list of schedules, each reported by every rank on its own: the
// one the Tune handed out (the fixed passes), then, while every rank's report
// says it `continues`, no rank is lost, the joined ranking (catalogue and
// client candidates, Rank with the request's rule) still has Contenders
// among the client candidates and the adaptive budget allows (as the engine
// counts it: max_passes, max_iterations per candidate, the pass budget, per
// problem), a continuation: one more pass of the client contenders, handed
// to every rank as its Report's answer. The decision joins every schedule
// that every rank completed (pairs by pass id, ClientStep.pass).
//
// Bounds: a barrier waits at most the candidate timeout after its first
// rank arrived; a rank that misses it is lost for the run and every later
// barrier answers at once. Each schedule has its own bound (handed out +
// report_within); the run is decided when every rank reported the last one
// or is lost, or at that bound, by whichever call sees it first. A
// continuation's data is used only when every rank reported it and none
// was lost during it. Every wait also ends at its caller's deadline
// (DEADLINE_EXCEEDED, the barrier or report stays counted). The devices'
// lease is held to the run's first call bound (FirstCallWithin after its
// opening) until a rank calls it (RunStep or Report: Called), then from
// each call to HoldBound (the current schedule's bound, or sooner when no
// rank calls again within two candidate timeouts and the report grace),
// and given back at the decision; a run that no rank called by then is
// idle (Idle) and its registry forgets it.
//
// Ownership: `solver` and `metrics` are not owned and outlive the run.
//
// Thread-safety: every method may be called concurrently (one call per
// rank at a time).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/measure/engine/lease.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "proto/autotuned.pb.h"

namespace autotuned::clientrun {

// What the round's runner hands to a run.
struct RunPlan {
  // The runner rank's request: the canonical problems the run decides.
  std::shared_ptr<const ValidRequest> request;
  // Every problem's answer so far (CACHED, or TUNED for problems without
  // client candidates); those the run decides are placeholders.
  v1::TuneResponse answer;
  // The problems the run decides (cache misses with client candidates),
  // ascending, and for each the outcomes of its catalogue candidates, as
  // measured before the run opened.
  std::vector<int> problems;
  std::vector<std::vector<CandidateOutcome>> catalogue;
};

class Run {
 public:
  // `schedule` as ClientRuns::Open builds it from `plan`; the run holds
  // `lease` until `first_call_by` (it bounds the hold so), and from a rank's
  // first call before then until its decision. A continuation's bound is
  // `report_grace` + its steps x the candidate timeout.
  Run(v1::ClientRun schedule, RunPlan plan, DeviceLease::Token lease, absl::Time opened,
      absl::Time first_call_by, absl::Duration report_grace, Solver* solver,
      metrics::DaemonMetrics* metrics);

  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // The schedule the Tune handed out.
  const v1::ClientRun& schedule() const { return schedule_; }
  // The bound of the run's current schedule.
  absl::Time bound() const ABSL_LOCKS_EXCLUDED(mu_);
  // When the run is idle if no rank has called it.
  absl::Time first_call_by() const { return first_call_by_; }

  // A rank's RunStep or Report reached the run at `now` (before Step or
  // Report): each such call, the first one before first_call_by, holds the
  // lease to HoldBound(now). False when the first call comes with the run
  // idle at `now`, or its lease's hold had passed and another took the
  // lease: the run is to be forgotten undecided, and the call refused.
  bool Called(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether no rank called the run by first_call_by, as of `now`.
  bool Idle(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);

  // Rank `rank`'s own request (its labels and names go on its answers).
  void Attach(int rank, std::shared_ptr<const ValidRequest> request) ABSL_LOCKS_EXCLUDED(mu_);

  // A rank at a barrier (validated by ValidateStep). INVALID_ARGUMENT for a
  // group, rank or step not of the run; DEADLINE_EXCEEDED at `deadline`.
  // Once the run is decided, every barrier answers proceed = false at once
  // ("the run was already decided"), and a rank still waiting at one gets
  // that answer at the decision.
  absl::StatusOr<v1::StepReply> Step(const v1::StepRequest& request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The most that Step(request) adds to bytes(): a barrier, the rank's
  // reason and the barrier's answer.
  int64_t MostStepBytes(const v1::StepRequest& request) const;

  // A rank's report of one schedule (validated by ValidateReport): the
  // run's answer with the rank's labels, or the continuation (`run` set,
  // no results), the same for every rank. INVALID_ARGUMENT for a group or
  // rank not of the run or a report that does not match a schedule of the
  // run (first_step, step count, iteration count, a time or host time
  // longer than the schedule's report_within_ms); FAILED_PRECONDITION for
  // a second report of a schedule of an undecided run; DEADLINE_EXCEEDED at
  // `deadline`.
  absl::StatusOr<v1::TuneResponse> Report(const v1::RunReport& report, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // When the run was decided; nullopt while it is not.
  std::optional<absl::Time> decided_at() const ABSL_LOCKS_EXCLUDED(mu_);

  // What the run holds in memory, in bytes (about): its plan and schedules,
  // the barriers (with the ranks' reasons and notes) and the ranks' requests
  // and reports until the decision (they are let go then), and the
  // decision. Read without the run's lock.
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct Arrived {
    bool ok = false;
    std::string reason;
  };
  struct Barrier {
    std::vector<std::optional<Arrived>> ranks;
    absl::Time first = absl::InfiniteFuture();
    bool decided = false;
    v1::StepReply reply;
  };
  // One schedule handed to the ranks: steps [first, end) of the run.
  struct Segment {
    int first = 0;
    int end = 0;
    // Timed iterations of each of its steps.
    int iterations = 0;
    int64_t report_within_ms = 0;
    // Its reports are due by then.
    absl::Time bound;
    // Per rank, its report.
    std::vector<std::optional<v1::RunReport>> reports;
    int reported = 0;
  };

  absl::Status CheckMember(const std::string& group_id, int rank) const;
  // The schedule `report` reports (its index in segments_), or
  // INVALID_ARGUMENT when it matches none.
  absl::StatusOr<int> CheckReport(const v1::RunReport& report) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The index in segments_ of the schedule holding `step`.
  int SegmentOf(int step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rank `rank`'s times of `step` (its schedule reported).
  const v1::StepTimes& TimesOf(int rank, int step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What one barrier holds in memory beside the reasons in it (about).
  int64_t BarrierOverhead() const;
  // Counts `n` more bytes kept by the barriers (barrier_bytes_, and bytes_).
  void KeepBarrierBytes(int64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The barrier of (step, phase), created on first use (counted in bytes_).
  // Shared: a rank waiting at it keeps it while the decision lets the
  // barriers go.
  std::shared_ptr<Barrier> BarrierOf(int step, int phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideBarrier(Barrier& barrier, bool proceed, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank arrived: proceed (with the lowest rank's note, if any sent one
  // with ok), or the lowest failing rank's reason.
  void DecideArrived(Barrier& barrier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The barrier's bound passed: the missing ranks are lost.
  void DecideMissing(Barrier& barrier, int step, int phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank has reported schedule `segment` or missed a barrier (lost:
  // it is not waited for).
  bool AllIn(int segment) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether steps `a` and `b` run the same candidate of the same problem.
  bool SameCandidate(int a, int b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a step before `step` ruled out its candidate ("ruled out in pass P:
  // <that barrier's reason>"); "" when none did.
  std::string RuledOutBefore(int step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The step's failure from its barriers and the reports; nullopt when it
  // worked, every rank's times then appended to (*ranks)[rank].
  std::optional<CandidateOutcome> StepFailure(int step, std::vector<RankOutcome>* ranks) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How the candidate of `first_step` was timed over the steps before
  // `end` (every rank reported, every step worked): EVENT_LOOP when the
  // run's mode is, or when any rank timed any step by events (it could not
  // capture a graph); the host's time per eager call, the largest over
  // ranks of each rank's median over steps.
  void TimingOf(int first_step, int end, CandidateOutcome* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of the candidate of `first_step` (its first step) from the
  // steps before `end`: their times by pass id, or the first failed step's
  // failure.
  CandidateOutcome CandidateOutcomeOf(int first_step, int end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The joined ranking of plan_.problems[i] from the steps before `end`:
  // its catalogue candidates and its client ones, Rank with the request's
  // rule.
  std::vector<CandidateOutcome> Ranked(size_t i, int end) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The continuation after the last schedule, when the run continues (see
  // the top of this file); nullopt to decide.
  std::optional<v1::ClientRun> Continuation() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last schedule is in: hands out its continuation, or decides.
  void Settle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the run once from every schedule that every rank completed:
  // ranks, stores (every rank reported every schedule and none was
  // dropped), gives the lease back.
  void Decide() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The decision with `rank`'s labels and names.
  v1::TuneResponse Answer(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const v1::ClientRun schedule_;
  const RunPlan plan_;
  const int world_size_;
  const absl::Duration candidate_timeout_;
  const absl::Duration report_grace_;
  // How long a call holds the lease (HoldBound): no live rank is silent
  // longer than two candidate timeouts and the report grace.
  const absl::Duration kept_silent_;
  const absl::Time first_call_by_;
  Solver* const solver_;
  metrics::DaemonMetrics* const metrics_;

  // How long a call holds the lease: to the current schedule's bound, or
  // two candidate timeouts and the report grace after `now` if sooner (no
  // live rank is silent longer: a step runs at most a candidate timeout,
  // and a barrier waits at most another).
  absl::Time HoldBound(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  DeviceLease::Token lease_ ABSL_GUARDED_BY(mu_);
  bool called_ ABSL_GUARDED_BY(mu_) = false;  // some rank called in time
  // Every step of the run: the first schedule's, then each continuation's.
  std::vector<v1::ClientStep> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<Segment> segments_ ABSL_GUARDED_BY(mu_);
  // The continuations handed out (the answer to the reports of the schedule
  // before each), by index in segments_ (0 unused).
  std::vector<v1::TuneResponse> continuations_ ABSL_GUARDED_BY(mu_);
  absl::Time bound_ ABSL_GUARDED_BY(mu_);  // the last schedule's
  absl::Time continued_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Until the decision; what they hold is barrier_bytes_ (of bytes_).
  std::map<std::pair<int, int>, std::shared_ptr<Barrier>> barriers_ ABSL_GUARDED_BY(mu_);
  int64_t barrier_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string lost_ ABSL_GUARDED_BY(mu_);          // why a rank is lost; "" = none
  int lost_in_ ABSL_GUARDED_BY(mu_) = -1;          // the schedule it was lost in
  std::vector<bool> missed_ ABSL_GUARDED_BY(mu_);  // per rank: missed a barrier
  std::vector<std::shared_ptr<const ValidRequest>> rank_requests_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const v1::TuneResponse> decision_ ABSL_GUARDED_BY(mu_);
  absl::Time decided_at_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_{0};
};

// What `request` holds in memory, in bytes (about).
int64_t RequestBytes(const ValidRequest& request);

// "verified", "warmed up".
const char* PhaseName(int phase);

}  // namespace autotuned::clientrun
