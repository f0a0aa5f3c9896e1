#include "daemon/backend/sim/group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autotuned::sim {

absl::Status CutOffStatus() {
  return absl::DeadlineExceededError("cut off at the timeout");
}

Group::Group(const ProblemSpec& problem, absl::Time deadline,
             int64_t scratch_count)
    : problem_(problem), deadline_(deadline) {
  const int n = problem_.world_size;
  inputs_.reserve(n);
  outputs_.reserve(n);
  scratch_.reserve(n);
  for (int r = 0; r < n; ++r) {
    inputs_.emplace_back(static_cast<size_t>(problem_.InputCount(r)));
    outputs_.emplace_back(static_cast<size_t>(problem_.OutputCount(r)));
    scratch_.emplace_back(static_cast<size_t>(scratch_count));
  }
}

namespace {

// A rank stopped at a barrier by the timeout is a victim of the ranks that
// did not arrive, not the cause: it reports ABORTED, so that the rank that
// was stuck in its own work (DEADLINE_EXCEEDED) is the one blamed.
absl::Status AtBarrier(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
  return absl::AbortedError(
      absl::StrCat("barrier: ", s.message(), " while waiting for other ranks"));
}

}  // namespace

absl::Status Group::CutOffLocked() {
  // This rank leaves its wait for good, so a barrier can no longer complete:
  // make that visible to every peer at once rather than at its own deadline.
  if (abort_.ok()) abort_ = CutOffStatus();
  return abort_;
}

absl::Status Group::Barrier() {
  absl::MutexLock lock(&mu_);
  if (!abort_.ok()) return AtBarrier(abort_);
  if (absl::Now() >= deadline_) return AtBarrier(CutOffLocked());
  const uint64_t generation = generation_;
  if (++arrived_ == problem_.world_size) {
    arrived_ = 0;
    ++generation_;  // waiters' conditions are re-evaluated on unlock
    return absl::OkStatus();
  }
  auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ != generation || !abort_.ok();
  };
  mu_.AwaitWithDeadline(absl::Condition(&wake), deadline_);
  if (generation_ != generation) return absl::OkStatus();
  if (!abort_.ok()) return AtBarrier(abort_);
  return AtBarrier(CutOffLocked());
}

absl::Status Group::Sleep(absl::Duration d) {
  const absl::Time wake_at = absl::Now() + d;  // saturates at InfiniteFuture
  absl::MutexLock lock(&mu_);
  auto aborted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !abort_.ok();
  };
  mu_.AwaitWithDeadline(absl::Condition(&aborted), std::min(wake_at, deadline_));
  if (!abort_.ok()) return abort_;
  if (wake_at < deadline_) return absl::OkStatus();
  return CutOffLocked();
}

void Group::Abort(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  if (!abort_.ok()) return;
  abort_ = reason.ok() ? absl::AbortedError("aborted") : std::move(reason);
}

absl::Status Group::abort_status() const {
  absl::MutexLock lock(&mu_);
  return abort_;
}

}  // namespace autotuned::sim
