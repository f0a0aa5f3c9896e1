// The runs of candidates the ranks run (docs/protocol.md, "Candidates the
// ranks run") on this daemon: the round's runner opens one (Start), each
// rank's RunStep and Report reach it by its id, and it is forgotten a while
// after its decision. A run is one Run (run.h).
//
// Start, for the rank that completes a GO round whose cache misses include
// client candidates: takes the devices' lease (waiting at most until the
// round's bound), measures the catalogue candidates of every missed problem
// through the engine, opens the run holding the lease, and returns the
// round's answer: `run` set, no results. Every rank's Report then returns
// the run's decision, or a continuation of the run (run.h).
//
// Idle runs: until some rank calls a run (RunStep or Report), its lease is
// held only to its first step's bound (FirstCallWithin after its opening:
// the round may have been abandoned as the run opened, and then no rank
// ever calls); a run that no rank called by then is forgotten undecided
// (seen at the next RunStep, Report or opening of any run), and its ranks'
// calls are FAILED_PRECONDITION as for any run forgotten.
//
// Retention: a decided run is kept for `decision_ttl` after its decision
// (an undecided one for `decision_ttl` after its bound), at most
// `max_runs_kept` runs (the oldest dropped first) and `max_kept_bytes` of
// them (Run::bytes; the oldest decided run dropped first, then the oldest
// undecided one, checked as each run opens and before each barrier call
// and report is kept); then RunStep and Report for it are
// FAILED_PRECONDITION ("unknown to this daemon"). A run dropped undecided
// gives the devices' lease back once its last call returns.
//
// Ownership: `solver`, `engine` and `metrics` are not owned and outlive the
// runs.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/clientrun/run.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "proto/autotuned.pb.h"

namespace autotuned::clientrun {

struct ClientRunsOptions {
  // report_within = report_grace + steps x the candidate timeout, for the
  // schedule a run opens with and for each continuation; a rank's first
  // call is due within that of one step (FirstCallWithin).
  absl::Duration report_grace = absl::Seconds(5);
  absl::Duration decision_ttl = absl::Minutes(10);  // rendezvous.decision_ttl_ms
  int max_runs_kept = 4096;                         // rendezvous.max_rounds_kept
  int64_t max_kept_bytes = int64_t{256} << 20;      // rendezvous.max_kept_bytes
};

class ClientRuns {
 public:
  ClientRuns(Solver* solver, Engine* engine, metrics::DaemonMetrics* metrics,
             const ClientRunsOptions& options = {});

  ClientRuns(const ClientRuns&) = delete;
  ClientRuns& operator=(const ClientRuns&) = delete;

  // The answer of a GO round of `request` (per rank, every rank on this
  // daemon) that the runner publishes: a run opened and its schedule in
  // `run`, or, when the lease could not be had by `round_deadline`, every
  // problem FALLBACK with the reason. nullopt when no cache miss has client
  // candidates (the round is measured as usual). `abandoned` (null: never):
  // whether no one waits for the round any more (EngineOptions::abandoned);
  // once true, the lease is no longer waited for, the catalogue candidates
  // not run yet are not, and no run is opened (the answer is FALLBACK, for
  // no one).
  std::optional<v1::TuneResponse> Start(const ValidRequest& request,
                                        const std::string& round_id,
                                        absl::Time round_deadline, absl::Duration rendezvous,
                                        const std::function<bool()>& abandoned = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Rank `rank` got run `run_id` from its Tune: its labels and names go on
  // its Report's answer. No effect for an unknown run.
  void Attach(const std::string& run_id, int rank, std::shared_ptr<const ValidRequest> request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // RunStep and Report (validated by ValidateStep, ValidateReport): as
  // Run::Step and Run::Report, or FAILED_PRECONDITION for a run this
  // daemon does not know (forgotten: retention, or idle).
  absl::StatusOr<v1::StepReply> Step(const v1::StepRequest& request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::TuneResponse> Report(const v1::RunReport& report, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs kept now.
  int size() const ABSL_LOCKS_EXCLUDED(mu_);
  // What they hold, in bytes (about; Run::bytes).
  int64_t kept_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The run's schedule from `plan`: a new id, its steps and options.
  v1::ClientRun Schedule(const RunPlan& plan) const;
  // Registers a run; forgets what retention no longer covers.
  void Keep(std::shared_ptr<Run> run) ABSL_LOCKS_EXCLUDED(mu_);
  // The run `run_id`, or FAILED_PRECONDITION when unknown; for a rank's
  // call (`rank_call`: RunStep, Report), also when the run is idle
  // (Run::Called), which is forgotten then.
  absl::StatusOr<std::shared_ptr<Run>> Find(const std::string& run_id, bool rank_call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the runs past their retention and the idle ones.
  void Expire(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the idle run `it`, saying so.
  void ForgetIdle(absl::flat_hash_map<std::string, std::shared_ptr<Run>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops runs until they hold at most max_kept_bytes - `room` bytes (the
  // oldest decided first, then the oldest undecided).
  void Trim(int64_t room) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Solver* const solver_;
  Engine* const engine_;
  metrics::DaemonMetrics* const metrics_;
  const ClientRunsOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // ids, oldest first
  // The runs not known to have been called, by Run::first_call_by.
  std::multimap<absl::Time, std::string> uncalled_ ABSL_GUARDED_BY(mu_);
};

// The run's bound after its opening: report_grace + steps x timeout.
absl::Duration ReportWithin(int steps, absl::Duration candidate_timeout,
                            absl::Duration report_grace);
// A rank's first call of a run is due within the bound of one step:
// ReportWithin(1, ...).
absl::Duration FirstCallWithin(absl::Duration candidate_timeout, absl::Duration report_grace);

}  // namespace autotuned::clientrun
