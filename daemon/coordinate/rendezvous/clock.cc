#include "daemon/coordinate/rendezvous/clock.h"

namespace autotuned {
namespace rendezvous {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  bool WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return cv->WaitWithDeadline(mu, deadline);
  }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const clock = new RealClock;
  return clock;
}

}  // namespace rendezvous
}  // namespace autotuned
