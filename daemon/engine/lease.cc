#include "daemon/engine/lease.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"

namespace autotuned {

DeviceLease::Token& DeviceLease::Token::operator=(Token&& other) noexcept {
  if (this != &other) {
    Release();
    lease_ = std::exchange(other.lease_, nullptr);
    generation_ = other.generation_;
  }
  return *this;
}

void DeviceLease::Token::Release() {
  if (lease_ == nullptr) return;
  std::exchange(lease_, nullptr)->Release(generation_);
}

void DeviceLease::Token::HoldUntil(absl::Time hold_until) {
  if (lease_ != nullptr) lease_->HoldUntil(generation_, hold_until);
}

absl::StatusOr<DeviceLease::Token> DeviceLease::Acquire(absl::Time deadline,
                                                        absl::Time hold_until) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time now = absl::Now();
    if (FreeAt(now)) break;
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          "the devices stayed busy (another measurement or run held them)");
    }
    // Woken when the holder gives the lease back; else at its hold's end.
    const uint64_t holder = holder_;
    auto changed = [this, holder]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return holder_ != holder;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), std::min(deadline, hold_until_));
  }
  holder_ = next_generation_++;
  hold_until_ = hold_until;
  return Token(this, holder_);
}

void DeviceLease::Release(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (holder_ != generation) return;
  holder_ = 0;
  hold_until_ = absl::InfiniteFuture();
}

void DeviceLease::HoldUntil(uint64_t generation, absl::Time hold_until) {
  absl::MutexLock lock(&mu_);
  if (holder_ == generation) hold_until_ = hold_until;
}

bool DeviceLease::busy() const {
  absl::MutexLock lock(&mu_);
  return !FreeAt(absl::Now());
}

}  // namespace autotuned
