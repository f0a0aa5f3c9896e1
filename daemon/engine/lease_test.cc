// The device lease: exclusive, given back from any thread, bounded holds.
#include "daemon/engine/lease.h"

#include <thread>

#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace autotuned
