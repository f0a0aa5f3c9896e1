// The heap's bounds against this process's own glibc heap: a fragmented heap
// (what a burst of calls leaves) stays resident while the daemon is busy and
// is returned to the system once it is idle.
#include "daemon/ops/lifecycle/heap.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

namespace autotuned {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr size_t kBlock = 4096;

// Allocates `bytes` in blocks on a thread of its own (so in an arena other
// than the main one where glibc makes one), touches them, and frees all but
// every 16th: free memory between live blocks, which free() cannot return.
std::vector<void*> Fragment(int64_t bytes) {
  std::vector<void*> kept;
  std::thread([&] {
    std::vector<void*> blocks;
    for (int64_t n = 0; n < bytes; n += kBlock) {
      blocks.push_back(std::malloc(kBlock));
      std::memset(blocks.back(), 1, kBlock);
    }
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (i % 16 == 0) {
        kept.push_back(blocks[i]);
      } else {
        std::free(blocks[i]);
      }
    }
  }).join();
  return kept;
}

bool Eventually(const std::function<bool()>& done, absl::Duration within) {
  const absl::Time until = absl::Now() + within;
  while (absl::Now() < until) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

TEST_CASE("the resident memory is read") {
  const int64_t before = ResidentBytes();
  REQUIRE(before > 0);
  std::vector<char> touched(32 * kMiB, 1);
  CHECK(ResidentBytes() - before >= 30 * kMiB);
}

TEST_CASE("a fragmented heap is returned to the system once idle, not while busy") {
  std::atomic<bool> idle{false};
  IdleHeapTrimmer trimmer([&] { return idle.load(); },
                          {absl::Milliseconds(20), 4 * kMiB});
  const int64_t start = ResidentBytes();
  std::vector<void*> kept = Fragment(64 * kMiB);
  const int64_t fragmented = ResidentBytes();
  INFO("resident at start " << start / 1024 << " KiB, fragmented " << fragmented / 1024
                            << " KiB");
  REQUIRE(fragmented - start >= 48 * kMiB);

  absl::SleepFor(absl::Milliseconds(200));  // ten checks, busy
  CHECK(trimmer.trims() == 0);
  CHECK(ResidentBytes() - start >= 48 * kMiB);

  idle = true;
  CHECK(Eventually([&] { return trimmer.trims() == 1; }, absl::Seconds(5)));
  const int64_t trimmed = ResidentBytes();
  INFO("after the trim " << trimmed / 1024 << " KiB");
  // 60 of the 64 MiB are free: most of it goes back.
  CHECK(fragmented - trimmed >= 40 * kMiB);

  // Nothing grew since: no second trim.
  absl::SleepFor(absl::Milliseconds(200));
  CHECK(trimmer.trims() == 1);
  for (void* p : kept) std::free(p);
}

TEST_CASE("the arenas are bounded unless MALLOC_ARENA_MAX is set") {
  unsetenv("MALLOC_ARENA_MAX");
  CHECK(BoundMallocArenas(3) == 3);
  setenv("MALLOC_ARENA_MAX", "6", 1);
  CHECK(BoundMallocArenas(3) == 6);
  setenv("MALLOC_ARENA_MAX", "lots", 1);
  CHECK(BoundMallocArenas(3) == 0);
  unsetenv("MALLOC_ARENA_MAX");
}

}  // namespace
}  // namespace autotuned
