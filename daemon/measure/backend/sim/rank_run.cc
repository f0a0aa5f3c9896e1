#include "daemon/measure/backend/sim/rank_run.h"

#include <chrono>
#include <utility>

#include "daemon/measure/backend/sim/verify.h"
#include "common/status_macros.h"

namespace autotuned::sim {

SimRankRun::SimRankRun(std::shared_ptr<Group> group, int rank, RankFn fn,
                       CandidateSpec candidate)
    : group_(std::move(group)),
      rank_(rank),
      fn_(std::move(fn)),
      candidate_(std::move(candidate)) {}

absl::Status SimRankRun::RunAndVerify() {
  const ProblemSpec& problem = group_->problem();
  // Peers touch these buffers only after the call's entry barrier.
  FillInput(problem, rank_, group_->input(rank_));
  PoisonOutput(problem, rank_, group_->output(rank_));
  AT_RETURN_IF_ERROR(fn_(*group_, rank_, candidate_));
  return CheckOutput(problem, rank_, group_->output(rank_));
}

absl::Status SimRankRun::Barrier() { return group_->Barrier(); }

absl::Status SimRankRun::Run(int iterations, std::vector<double>* iteration_us) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < iterations; ++i) {
    const Clock::time_point start = Clock::now();
    AT_RETURN_IF_ERROR(fn_(*group_, rank_, candidate_));
    const Clock::time_point end = Clock::now();
    if (iteration_us != nullptr) {
      iteration_us->push_back(
          std::chrono::duration<double, std::micro>(end - start).count());
    }
  }
  return absl::OkStatus();
}

}  // namespace autotuned::sim
