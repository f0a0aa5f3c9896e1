// A scripted backend for tests of the layers above the hardware boundary
// (engine, service). Each implementation name maps to a Script: the time every
// iteration takes on each rank, and an optional failure on one rank at one
// step. Runs RunRankSchedule on one thread per rank against fake RankRuns that
// record the order of the steps, so that tests can check the schedule itself.
// Nothing here measures anything: iteration times are the script's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned {

class FakeBackend : public Backend {
 public:
  struct Script {
    // Per-rank iteration time; ranks beyond the vector use its last entry.
    std::vector<double> iteration_us = {10.0};
    // When >= 0, that rank fails with `failure` at step `fail_step`
    // ("verify", "warmup" or "timed").
    int fail_rank = -1;
    std::string fail_step = "verify";
    absl::Status failure = absl::InternalError("scripted failure");
    // When true, `fail_rank` blocks until the run's deadline instead.
    bool hang = false;
    // The catalogue entry's smallest world size.
    int min_world_size = 1;
    // Added to every rank's iteration time in the n-th RunCandidate of this
    // implementation (0-based; none beyond the vector): a burst of load.
    std::vector<double> run_extra_us;
  };

  // A fake node with `gpus` devices, linked in pairs (GPUs 2k and 2k+1 by
  // "NV4", the others by "SYS"); every scripted implementation is added to
  // the catalogue as an all_reduce float32 implementation.
  FakeBackend(int gpus, std::map<std::string, Script> scripts);

  const NodeDescription& node() const override { return node_; }
  const Catalogue& catalogue() const override { return catalogue_; }
  int max_world_size() const override { return gpus_; }
  std::vector<RankOutcome> RunCandidate(const ProblemSpec& problem,
                                        const CandidateSpec& candidate,
                                        const ScheduleOptions& options,
                                        absl::Time deadline) override;

  // The local ranks' share of the script, as RunCandidate runs it (the
  // transport is not used: scripted ranks exchange nothing). Counts as a run.
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options, const PartialRun& part,
                                      absl::Time deadline) override;

  // The steps rank 0 took in the last run, e.g. {"verify", "barrier", ...}.
  std::vector<std::string> last_steps() const;
  // The placement of the last run (ScheduleOptions::devices, as given).
  std::vector<int> last_devices() const;
  int runs() const;
  // The implementation of every run so far (RunCandidate and RunPartial),
  // in order.
  std::vector<std::string> run_order() const;

 private:
  const int gpus_;
  const std::map<std::string, Script> scripts_;
  NodeDescription node_;
  Catalogue catalogue_;
  mutable absl::Mutex mu_;
  std::vector<std::string> last_steps_ ABSL_GUARDED_BY(mu_);
  std::vector<int> last_devices_ ABSL_GUARDED_BY(mu_);
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> run_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> impl_runs_ ABSL_GUARDED_BY(mu_);  // RunCandidate's
};

}  // namespace autotuned
