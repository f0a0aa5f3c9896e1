#include "daemon/backend/sim/group.h"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned::sim {
namespace {

ProblemSpec Problem(int world) {
  ProblemSpec p;
  p.collective = Collective::kAllGather;
  p.count = 3;
  p.world_size = world;
  return p;
}

// Runs fn(rank) on `world` threads and returns their statuses.
template <typename Fn>
std::vector<absl::Status> OnThreads(int world, Fn fn) {
  std::vector<absl::Status> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { out[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST_CASE("buffers are sized from the problem") {
  Group g(Problem(3), absl::Now() + absl::Seconds(10), 5);
  g.input(2)[2] = 1;      // count
  g.output(2)[8] = 1;     // count * world
  g.scratch(2)[4] = 1;
  CHECK(g.world_size() == 3);
}

TEST_CASE("the barrier is reusable and orders the ranks") {
  const int world = 5;
  Group g(Problem(world), absl::Now() + absl::Seconds(20), 0);
  std::atomic<int> arrived{0};
  auto statuses = OnThreads(world, [&](int) {
    for (int round = 0; round < 50; ++round) {
      arrived.fetch_add(1);
      absl::Status s = g.Barrier();
      if (!s.ok()) return s;
      // Nobody leaves a generation before everyone has entered it.
      if (arrived.load() < (round + 1) * world) {
        return absl::InternalError("left the barrier early");
      }
      s = g.Barrier();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) CHECK(s.ok());
}

TEST_CASE("abort releases every waiter with the reason, now and later") {
  Group g(Problem(3), absl::Now() + absl::Seconds(20), 0);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    g.Abort(absl::AbortedError("peer died"));
  });
  // Only two of the three ranks arrive: the barrier cannot complete.
  auto statuses = OnThreads(2, [&](int) { return g.Barrier(); });
  aborter.join();
  for (const absl::Status& s : statuses) {
    CHECK(s.code() == absl::StatusCode::kAborted);
    CHECK(s.message() == "peer died");
  }
  CHECK(g.Barrier().code() == absl::StatusCode::kAborted);
  CHECK(g.Sleep(absl::InfiniteDuration()).message() == "peer died");
  g.Abort(absl::InternalError("second"));  // the first reason wins
  CHECK(g.abort_status().message() == "peer died");
}

TEST_CASE("waits end at the deadline and break the group") {
  Group g(Problem(2), absl::Now() + absl::Milliseconds(100), 0);
  absl::Status s = g.Barrier();  // the peer never comes
  CHECK(s.code() == absl::StatusCode::kAborted);
  CHECK(s.message() ==
        "barrier: cut off at the timeout while waiting for other ranks");
  CHECK(g.abort_status().code() == absl::StatusCode::kDeadlineExceeded);

  Group h(Problem(1), absl::Now() + absl::Milliseconds(100), 0);
  CHECK(h.Sleep(absl::InfiniteDuration()).code() ==
        absl::StatusCode::kDeadlineExceeded);
  CHECK(h.Barrier().code() == absl::StatusCode::kAborted);
}

TEST_CASE("a sleep before the deadline ends normally") {
  Group g(Problem(1), absl::Now() + absl::Seconds(20), 0);
  const absl::Time start = absl::Now();
  CHECK(g.Sleep(absl::Milliseconds(20)).ok());
  CHECK(absl::Now() - start >= absl::Milliseconds(20));
  CHECK(g.Barrier().ok());  // a one-rank barrier never waits
}

}  // namespace
}  // namespace autotuned::sim
