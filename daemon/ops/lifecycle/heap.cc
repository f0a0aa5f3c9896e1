#include "daemon/ops/lifecycle/heap.h"

#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"

namespace autotuned {

int BoundMallocArenas(int arenas) {
#if defined(__GLIBC__)
  const char* env = std::getenv("MALLOC_ARENA_MAX");
  if (env != nullptr) {
    int set = 0;
    return absl::SimpleAtoi(env, &set) && set > 0 ? set : 0;
  }
  return mallopt(M_ARENA_MAX, arenas) == 1 ? arenas : 0;
#else
  (void)arenas;
  return 0;
#endif
}

int64_t ResidentBytes() {
  // statm's second field: resident pages.
  std::ifstream in("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = -1;
  if (!(in >> size >> resident)) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

IdleHeapTrimmer::IdleHeapTrimmer(std::function<bool()> idle, Options options)
    : idle_(std::move(idle)), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

IdleHeapTrimmer::~IdleHeapTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

int64_t IdleHeapTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

void IdleHeapTrimmer::Loop() {
  int64_t low = ResidentBytes();  // the lowest since the last trim
  bool was_idle = false;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.period)) return;
    }
    const bool idle = idle_();
    const int64_t resident = ResidentBytes();
    if (resident < 0) continue;
    low = low < 0 ? resident : std::min(low, resident);
    const bool trim = idle && was_idle && resident - low >= options_.min_growth;
    was_idle = idle;
    if (!trim) continue;
#if defined(__GLIBC__)
    const absl::Time start = absl::Now();
    malloc_trim(0);
    const absl::Duration took = absl::Now() - start;
    const int64_t after = ResidentBytes();
    spdlog::debug("heap: idle after a burst, returned {} KiB of freed memory to the system "
                  "in {} (resident {} KiB, then {} KiB)",
                  (resident - after) / 1024, absl::FormatDuration(took), resident / 1024,
                  after / 1024);
    low = after;
    absl::MutexLock lock(&mu_);
    ++trims_;
#endif
  }
}

}  // namespace autotuned
