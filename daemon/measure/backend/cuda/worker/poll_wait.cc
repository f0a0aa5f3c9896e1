#include "daemon/measure/backend/cuda/worker/poll_wait.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace autotuned::cuda {
namespace {

class RealClock final : public PollClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

}  // namespace

PollClock* PollClock::Real() {
  static RealClock* const clock = new RealClock;
  return clock;
}

absl::Status PollUntil(const std::function<absl::StatusOr<bool>()>& poll,
                       absl::Time deadline, absl::string_view what, PollClock* clock,
                       absl::Duration interval) {
  while (true) {
    const bool late = clock->Now() >= deadline;  // read before the last poll
    absl::StatusOr<bool> done = poll();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    if (late) {
      return absl::DeadlineExceededError(
          absl::StrCat("cut off at the timeout: ", what, " did not finish by the deadline"));
    }
    clock->SleepFor(std::min(interval, std::max(deadline - clock->Now(), absl::ZeroDuration())));
  }
}

}  // namespace autotuned::cuda
