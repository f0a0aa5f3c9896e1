// PollUntil (poll_wait.h) on a fake clock that moves only when slept on.
#include "daemon/measure/backend/cuda/worker/poll_wait.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace autotuned::cuda {
namespace {

class FakePollClock final : public PollClock {
 public:
  absl::Time Now() override { return now_; }
  void SleepFor(absl::Duration d) override {
    slept_ += d;
    now_ += d;
    ++sleeps_;
  }
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  absl::Duration slept_;
  int sleeps_ = 0;
};

TEST_CASE("done at once: one poll, no sleep") {
  FakePollClock clock;
  int polls = 0;
  absl::Status s = PollUntil([&]() -> absl::StatusOr<bool> { return ++polls > 0; },
                             clock.now_ + absl::Seconds(1), "stream", &clock);
  CHECK(s.ok());
  CHECK(polls == 1);
  CHECK(clock.sleeps_ == 0);
}

TEST_CASE("done after some polls, before the deadline") {
  FakePollClock clock;
  int polls = 0;
  absl::Status s = PollUntil([&]() -> absl::StatusOr<bool> { return ++polls == 5; },
                             clock.now_ + absl::Seconds(1), "stream", &clock,
                             absl::Milliseconds(10));
  CHECK(s.ok());
  CHECK(polls == 5);
  CHECK(clock.slept_ == absl::Milliseconds(40));
}

TEST_CASE("never done: DEADLINE_EXCEEDED at the deadline, not before, not much after") {
  FakePollClock clock;
  const absl::Time deadline = clock.now_ + absl::Milliseconds(95);
  int polls = 0;
  absl::Status s = PollUntil([&]() -> absl::StatusOr<bool> { ++polls; return false; },
                             deadline, "rank 1's stream", &clock, absl::Milliseconds(10));
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(s.message(), "cut off at the timeout: rank 1's stream"));
  CHECK(clock.now_ == deadline);  // the last sleep is cut to the deadline
  CHECK(polls == 11);             // t = 0, 10, ..., 90, 95
}

TEST_CASE("done on the poll at the deadline counts as done") {
  FakePollClock clock;
  const absl::Time deadline = clock.now_ + absl::Milliseconds(30);
  absl::Status s = PollUntil(
      [&]() -> absl::StatusOr<bool> { return clock.now_ >= deadline; }, deadline, "x",
      &clock, absl::Milliseconds(10));
  CHECK(s.ok());
}

TEST_CASE("a poll error ends the wait with that error") {
  FakePollClock clock;
  int polls = 0;
  absl::Status s = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        if (++polls == 3) return absl::UnavailableError("ncclRemoteError");
        return false;
      },
      clock.now_ + absl::Seconds(1), "x", &clock, absl::Milliseconds(1));
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(polls == 3);
}

TEST_CASE("a deadline already past: one poll, then DEADLINE_EXCEEDED") {
  FakePollClock clock;
  int polls = 0;
  absl::Status s = PollUntil([&]() -> absl::StatusOr<bool> { ++polls; return false; },
                             clock.now_ - absl::Seconds(1), "x", &clock);
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(polls == 1);
  CHECK(clock.sleeps_ == 0);
}

}  // namespace
}  // namespace autotuned::cuda
