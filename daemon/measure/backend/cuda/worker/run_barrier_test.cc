// RunBarrier (run_barrier.h) with ranks as threads: runs anywhere, no GPU.
#include "daemon/measure/backend/cuda/worker/run_barrier.h"

#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace autotuned::cuda {
namespace {

TEST_CASE("every rank passes the barrier, generation after generation") {
  constexpr int kWorld = 4;
  RunBarrier barrier(kWorld, absl::Now() + absl::Seconds(30));
  std::vector<absl::Status> last(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < 100 && last[r].ok(); ++i) last[r] = barrier.Wait(r);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : last) CHECK(s.ok());
}

TEST_CASE("a rank that never arrives: the deadline names it and breaks the barrier") {
  RunBarrier barrier(3, absl::Now() + absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  const absl::Status first = barrier.Wait(0);
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK(first.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(first.message(), "rank(s) 1, 2"));
  CHECK(barrier.Wait(1).code() == absl::StatusCode::kDeadlineExceeded);  // at once
}

TEST_CASE("an abort releases the waiting ranks with its reason") {
  RunBarrier barrier(2, absl::Now() + absl::Seconds(30));
  absl::Status waited;
  std::thread waiter([&] { waited = barrier.Wait(0); });
  absl::SleepFor(absl::Milliseconds(50));
  barrier.Abort(absl::AbortedError("rank 1 failed: boom"));
  waiter.join();
  CHECK(waited.code() == absl::StatusCode::kAborted);
  CHECK(absl::StrContains(waited.message(), "boom"));
  CHECK(barrier.Wait(1).code() == absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace autotuned::cuda
