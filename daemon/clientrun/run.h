// One run of candidates the ranks run: the barriers of its steps and the
// ranks' reports, decided once into the round's answer. The protocol (the
// schedule, the barriers' answers, the faults and their texts) is
// docs/protocol.md, "Candidates the ranks run"; the registry that opens and
// forgets runs is client_runs.h.
//
// Bounds: a barrier waits at most the candidate timeout after its first
// rank arrived; a rank that misses it is lost for the run and every later
// barrier answers at once. The run is decided when every rank reported or
// is lost, or at its bound (opened + report_within), by whichever call sees
// it first;
// every wait also ends at its caller's deadline (DEADLINE_EXCEEDED, the
// barrier or report stays counted). The devices' lease is given back at the
// decision (and ends by itself at the bound).
//
// Ownership: `solver` and `metrics` are not owned and outlive the run.
//
// Thread-safety: every method may be called concurrently (one call per
// rank at a time).
#pragma once

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
#include "daemon/engine/engine.h"
#include "daemon/engine/lease.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/request/validate.h"
#include "daemon/solver/solver.h"
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
  // `lease` until its decision.
  Run(v1::ClientRun schedule, RunPlan plan, DeviceLease::Token lease, absl::Time opened,
      Solver* solver, metrics::DaemonMetrics* metrics);

  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const v1::ClientRun& schedule() const { return schedule_; }
  absl::Time bound() const { return bound_; }

  // Rank `rank`'s own request (its labels and names go on its answers).
  void Attach(int rank, std::shared_ptr<const ValidRequest> request) ABSL_LOCKS_EXCLUDED(mu_);

  // A rank at a barrier (validated by ValidateStep). INVALID_ARGUMENT for a
  // group, rank or step not of the run; DEADLINE_EXCEEDED at `deadline`.
  absl::StatusOr<v1::StepReply> Step(const v1::StepRequest& request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A rank's report (validated by ValidateReport): the run's answer with
  // the rank's labels. INVALID_ARGUMENT for a group or rank not of the run
  // or a report that does not match the schedule; FAILED_PRECONDITION for a
  // second report of an undecided run; DEADLINE_EXCEEDED at `deadline`.
  absl::StatusOr<v1::TuneResponse> Report(const v1::RunReport& report, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // When the run was decided; nullopt while it is not.
  std::optional<absl::Time> decided_at() const ABSL_LOCKS_EXCLUDED(mu_);

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

  absl::Status CheckMember(const std::string& group_id, int rank) const;
  absl::Status CheckReport(const v1::RunReport& report) const;
  // The barrier of (step, phase), created on first use.
  Barrier& BarrierOf(int step, int phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideBarrier(Barrier& barrier, bool proceed, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank arrived: proceed, or the lowest failing rank's reason.
  void DecideArrived(Barrier& barrier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The barrier's bound passed: the missing ranks are lost.
  void DecideMissing(Barrier& barrier, int step, int phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank has reported or missed a barrier (lost: it is not waited for).
  bool AllIn() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether steps `a` and `b` run the same candidate of the same problem.
  bool SameCandidate(int a, int b) const;
  // Why a step before `step` ruled out its candidate ("ruled out in pass P:
  // <that barrier's reason>"); "" when none did.
  std::string RuledOutBefore(int step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The step's failure from its barriers and the reports; nullopt when it
  // worked, every rank's times then appended to (*ranks)[rank].
  std::optional<CandidateOutcome> StepFailure(int step, std::vector<RankOutcome>* ranks) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How the candidate of `first_step` was timed (every rank reported, every
  // step worked): EVENT_LOOP when the run's mode is, or when any rank timed
  // any step by events (it could not capture a graph); the host's time per
  // eager call, the largest over ranks of each rank's median over steps.
  void TimingOf(int first_step, CandidateOutcome* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of the candidate of `first_step` (its first step): its
  // steps' times in pass order, or the first failed step's failure.
  CandidateOutcome CandidateOutcomeOf(int first_step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the run once: ranks, stores (every rank reported), gives the
  // lease back.
  void Decide() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The decision with `rank`'s labels and names.
  v1::TuneResponse Answer(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const v1::ClientRun schedule_;
  const RunPlan plan_;
  const int world_size_;
  const absl::Duration candidate_timeout_;
  const absl::Time bound_;
  Solver* const solver_;
  metrics::DaemonMetrics* const metrics_;

  mutable absl::Mutex mu_;
  DeviceLease::Token lease_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, Barrier> barriers_ ABSL_GUARDED_BY(mu_);
  std::string lost_ ABSL_GUARDED_BY(mu_);  // why a rank is lost; "" = none
  std::vector<std::optional<v1::RunReport>> reports_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> missed_ ABSL_GUARDED_BY(mu_);  // per rank: missed a barrier
  int reported_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const ValidRequest>> rank_requests_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const v1::TuneResponse> decision_ ABSL_GUARDED_BY(mu_);
  absl::Time decided_at_ ABSL_GUARDED_BY(mu_);
};

// "verified", "warmed up".
const char* PhaseName(int phase);

}  // namespace autotuned::clientrun
