#include "daemon/coordinate/rounds/background.h"

#include <atomic>

#include <catch2/catch.hpp>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace autotuned::rounds {
namespace {

ValidRequest TwoProblems(const std::string& group) {
  ValidRequest r;
  r.group_id = group;
  r.problems.resize(2);
  return r;
}

TEST_CASE("queued rounds are solved problem by problem on one worker") {
  std::atomic<int> solved{0};
  BackgroundMeasurer m([&](const ValidProblem&, const ValidRequest&) {
    ++solved;
    v1::ProblemResult r;
    r.set_status(v1::TUNED);
    return r;
  });
  CHECK(m.Add(TwoProblems("a")));
  CHECK(m.Add(TwoProblems("b")));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (solved < 4 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  CHECK(solved == 4);
  CHECK(m.queued() == 0);
}

TEST_CASE("at most kMaxQueued rounds wait; Stop drops them and takes no more") {
  absl::Notification release;
  std::atomic<int> solved{0};
  std::atomic<bool> busy{false};
  BackgroundMeasurer m([&](const ValidProblem&, const ValidRequest&) {
    busy = true;
    release.WaitForNotification();
    ++solved;
    return v1::ProblemResult();
  });
  REQUIRE(m.Add(TwoProblems("first")));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!busy && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  REQUIRE(busy);  // the worker holds "first"; the queue is empty
  for (size_t i = 0; i < BackgroundMeasurer::kMaxQueued; ++i) {
    CHECK(m.Add(TwoProblems("more")));
  }
  CHECK_FALSE(m.Add(TwoProblems("one too many")));
  CHECK(m.queued() == BackgroundMeasurer::kMaxQueued);
  m.Stop();
  CHECK(m.queued() == 0);
  CHECK_FALSE(m.Add(TwoProblems("after the stop")));
  release.Notify();
  // The destructor waits for the problem being measured; nothing else runs.
}

}  // namespace
}  // namespace autotuned::rounds
