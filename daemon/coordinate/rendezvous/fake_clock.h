// A clock for tests: time stands still until Advance. A caller blocked in
// WaitUntil wakes when its condition variable is signalled or, at the
// latest, after `poll` of real time, and then sees the fake time; so an
// Advance is noticed within `poll`, and no wait on the fake clock blocks for
// long in real time (a test that forgets to advance the clock spins in its
// caller's loop instead of hanging).
//
// Thread-safety: every method may be called concurrently. Lock order: a
// waiter holds its own mutex, then takes the clock's.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/rendezvous/clock.h"

namespace autotuned {
namespace rendezvous {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1),
                     absl::Duration poll = absl::Milliseconds(1))
      : poll_(poll), now_(start) {}

  absl::Time Now() override ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves time forward; waiters notice within `poll`.
  void Advance(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  // How many callers are blocked in WaitUntil now.
  int waiters() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks (real time, at most `timeout`) until exactly `n` callers are
  // blocked in WaitUntil; false on timeout.
  bool AwaitWaiters(int n, absl::Duration timeout = absl::Seconds(10)) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const absl::Duration poll_;
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rendezvous
}  // namespace autotuned
