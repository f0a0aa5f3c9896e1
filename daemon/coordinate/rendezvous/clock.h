// The clock the rendezvous waits on: "now", and a condition-variable wait
// that ends at a deadline on the same clock. The real clock is absl's; the
// fake (fake_clock.h) moves only when a test advances it, so that window and
// deadline logic is tested without sleeping.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned {
namespace rendezvous {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() = 0;

  // Blocks on `cv` (with `mu` held, released while blocked, held again on
  // return) until `cv` is signalled or `deadline` on this clock passes. May
  // return early (callers re-check their condition in a loop). Returns true
  // when `deadline` has passed.
  virtual bool WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // The process-wide real clock (absl::Now); never destroyed.
  static Clock* Real();
};

}  // namespace rendezvous
}  // namespace autotuned
