#include "daemon/measure/engine/lease.h"

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

bool DeviceLease::Token::HoldUntil(absl::Time hold_until) {
  return lease_ != nullptr && lease_->HoldUntil(generation_, hold_until);
}

absl::StatusOr<DeviceLease::Token> DeviceLease::Acquire(absl::Time deadline,
                                                        absl::Time hold_until,
                                                        const std::function<bool()>& gone) {
  absl::MutexLock lock(&mu_);
  const uint64_t me = next_arrival_++;
  queue_.insert(me);
  absl::Status refused;
  for (;;) {
    const absl::Time now = absl::Now();
    if (*queue_.begin() == me && FreeAt(now)) break;
    if (gone && gone()) {
      refused = absl::CancelledError("the caller went away while waiting for the devices");
      break;
    }
    if (now >= deadline) {
      refused = absl::DeadlineExceededError(
          "the devices stayed busy (another measurement or run held them)");
      break;
    }
    // Woken when the holder gives the lease back or the first waiter
    // changes; else at the holder's hold's end, or to ask `gone` again.
    const uint64_t holder = holder_;
    const uint64_t first = *queue_.begin();
    auto changed = [this, holder, first]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return holder_ != holder || *queue_.begin() != first;
    };
    absl::Time until = std::min(deadline, hold_until_);
    if (gone) until = std::min(until, now + kGonePoll);
    mu_.AwaitWithDeadline(absl::Condition(&changed), until);
  }
  queue_.erase(me);
  if (!refused.ok()) return refused;
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

bool DeviceLease::HoldUntil(uint64_t generation, absl::Time hold_until) {
  absl::MutexLock lock(&mu_);
  if (holder_ != generation) return false;
  hold_until_ = hold_until;
  return true;
}

int DeviceLease::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

bool DeviceLease::busy() const {
  absl::MutexLock lock(&mu_);
  return !FreeAt(absl::Now());
}

}  // namespace autotuned
