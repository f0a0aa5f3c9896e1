#include "daemon/measure/backend/cuda/worker/run_barrier.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autotuned::cuda {

RunBarrier::RunBarrier(int world, absl::Time deadline)
    : world_(world), deadline_(deadline), arrived_(world, false) {}

absl::Status RunBarrier::Wait(int rank) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return broken_;
  const uint64_t generation = generation_;
  if (!arrived_[rank]) {
    arrived_[rank] = true;
    ++count_;
  }
  if (count_ == world_) {
    arrived_.assign(world_, false);
    count_ = 0;
    ++generation_;
    return absl::OkStatus();
  }
  auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ != generation || !broken_.ok();
  };
  mu_.AwaitWithDeadline(absl::Condition(&released), deadline_);
  if (generation_ != generation) return absl::OkStatus();
  if (!broken_.ok()) return broken_;
  std::string missing;
  for (int r = 0; r < world_; ++r) {
    if (!arrived_[r]) absl::StrAppend(&missing, missing.empty() ? "" : ", ", r);
  }
  broken_ = absl::DeadlineExceededError("cut off at the timeout (barrier broken)");
  return absl::DeadlineExceededError(
      absl::StrCat("cut off at the timeout while waiting for rank(s) ", missing));
}

void RunBarrier::Abort(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  if (!broken_.ok()) return;
  broken_ = reason.ok() ? absl::AbortedError("aborted") : std::move(reason);
}

}  // namespace autotuned::cuda
