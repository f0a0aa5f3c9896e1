// The device lease: exclusive, given back from any thread, bounded holds.
#include "daemon/measure/engine/lease.h"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace autotuned {
namespace {

TEST_CASE("one holder at a time; the next waits until it is given back") {
  DeviceLease lease;
  absl::StatusOr<DeviceLease::Token> first = lease.Acquire(absl::Now());
  REQUIRE(first.ok());
  CHECK(lease.busy());
  absl::StatusOr<DeviceLease::Token> refused =
      lease.Acquire(absl::Now() + absl::Milliseconds(20));
  CHECK(refused.status().code() == absl::StatusCode::kDeadlineExceeded);

  // Given back on another thread than the one that took it.
  std::thread releaser([token = *std::move(first)]() mutable {
    absl::SleepFor(absl::Milliseconds(30));
    token.Release();
  });
  absl::StatusOr<DeviceLease::Token> second = lease.Acquire(absl::Now() + absl::Seconds(10));
  releaser.join();
  REQUIRE(second.ok());
  CHECK(second->held());
  second->Release();
  CHECK_FALSE(lease.busy());
}

TEST_CASE("a bounded hold frees the lease at its end; its late release is harmless") {
  DeviceLease lease;
  absl::StatusOr<DeviceLease::Token> run =
      lease.Acquire(absl::Now(), absl::Now() + absl::Milliseconds(50));
  REQUIRE(run.ok());
  absl::StatusOr<DeviceLease::Token> next = lease.Acquire(absl::Now() + absl::Seconds(10));
  REQUIRE(next.ok());
  run->Release();  // the expired holder's release does not free the next's
  CHECK(lease.busy());
  DeviceLease::Token moved = *std::move(next);
  CHECK(lease.busy());
  moved = DeviceLease::Token();
  CHECK_FALSE(lease.busy());
}

TEST_CASE("a hold extended in time holds on; one extended after another took the lease "
          "holds nothing") {
  DeviceLease lease;
  absl::StatusOr<DeviceLease::Token> run =
      lease.Acquire(absl::Now(), absl::Now() + absl::Milliseconds(50));
  REQUIRE(run.ok());
  CHECK(run->HoldUntil(absl::Now() + absl::Seconds(30)));
  CHECK(lease.Acquire(absl::Now() + absl::Milliseconds(150)).status().code() ==
        absl::StatusCode::kDeadlineExceeded);

  CHECK(run->HoldUntil(absl::Now() + absl::Milliseconds(50)));
  absl::StatusOr<DeviceLease::Token> next =
      lease.Acquire(absl::Now() + absl::Seconds(10), absl::Now() + absl::Seconds(30));
  REQUIRE(next.ok());
  CHECK_FALSE(run->HoldUntil(absl::Now() + absl::Seconds(60)));
  CHECK(next->HoldUntil(absl::Now()));  // the next holder's hold is its own
  CHECK_FALSE(lease.busy());
  run->Release();
  CHECK_FALSE(run->HoldUntil(absl::Now() + absl::Seconds(60)));
}

TEST_CASE("first come, first served; a waiter that goes away leaves within the poll") {
  DeviceLease lease;
  absl::StatusOr<DeviceLease::Token> holder = lease.Acquire(absl::Now());
  REQUIRE(holder.ok());
  std::vector<int> order;
  absl::Mutex mu;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      absl::StatusOr<DeviceLease::Token> t = lease.Acquire(absl::Now() + absl::Seconds(20));
      CHECK(t.ok());
      absl::MutexLock lock(&mu);
      order.push_back(i);
    });
    // The next one begins waiting after this one.
    while (lease.waiting() != i + 1) absl::SleepFor(absl::Milliseconds(1));
  }
  std::atomic<bool> gone{false};
  absl::Time left_at;
  std::thread quitter([&] {
    absl::StatusOr<DeviceLease::Token> t = lease.Acquire(
        absl::Now() + absl::Seconds(20), absl::InfiniteFuture(), [&] { return gone.load(); });
    left_at = absl::Now();
    CHECK(t.status().code() == absl::StatusCode::kCancelled);
  });
  while (lease.waiting() != 5) absl::SleepFor(absl::Milliseconds(1));
  const absl::Time went = absl::Now();
  gone = true;
  quitter.join();
  CHECK(left_at - went < DeviceLease::kGonePoll + absl::Milliseconds(100));
  holder->Release();
  for (std::thread& t : waiters) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3});
}

}  // namespace
}  // namespace autotuned
