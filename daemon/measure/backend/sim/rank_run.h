// RankRun for the sim backend: one rank's handle on a candidate, driving an
// Algorithm's RankFn over the run's shared Group.
//
// RunAndVerify fills this rank's input with the pattern, poisons its output
// with NaN, runs the collective once and checks every output element
// (verify.h). Run times each call with std::chrono::steady_clock, from
// before the call's entry barrier to the moment this rank's output is
// complete. No barrier closes an iteration: every RankFn begins with an entry
// barrier, which is what makes back-to-back calls safe (algorithms.h).
//
// Thread-safety: used only from its rank's thread, like every RankRun. The
// Group is shared with the other ranks' RankRuns.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/backend/sim/algorithms.h"
#include "daemon/measure/backend/sim/group.h"

namespace autotuned::sim {

class SimRankRun : public RankRun {
 public:
  // `candidate` is canonical (every parameter present).
  SimRankRun(std::shared_ptr<Group> group, int rank, RankFn fn,
             CandidateSpec candidate);

  int rank() const override { return rank_; }
  absl::Status RunAndVerify() override;
  absl::Status Barrier() override;
  absl::Status Run(int iterations, std::vector<double>* iteration_us) override;

 private:
  const std::shared_ptr<Group> group_;
  const int rank_;
  const RankFn fn_;
  const CandidateSpec candidate_;
};

}  // namespace autotuned::sim
