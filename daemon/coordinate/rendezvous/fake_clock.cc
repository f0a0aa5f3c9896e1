#include "daemon/coordinate/rendezvous/fake_clock.h"

namespace autotuned {
namespace rendezvous {

absl::Time FakeClock::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return true;
    ++waiting_;
  }
  cv->WaitWithTimeout(mu, poll_);
  absl::MutexLock lock(&mu_);
  --waiting_;
  return now_ >= deadline;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

bool FakeClock::AwaitWaiters(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_ == n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace rendezvous
}  // namespace autotuned
