// The daemon's heap footprint under glibc malloc (docs/operations.md,
// "Memory").
//
// glibc gives threads arenas of their own, up to 8 per core, and keeps what
// is freed in them for reuse instead of returning it to the system. The
// daemon serves calls on gRPC's thread pool, which grows under a burst of
// calls and shrinks after it, so a burst leaves freed memory spread over
// arenas that later calls may never touch, and further bursts add more
// (docs/operations.md has the figures). Two bounds:
//
//   BoundMallocArenas  at start, before any thread: at most kMallocArenas
//                      arenas (unless MALLOC_ARENA_MAX is set in the
//                      environment), so the free memory kept is bounded by
//                      what a few arenas hold, not by the number of cores.
//   IdleHeapTrimmer    a thread that returns the freed memory of every arena
//                      to the system (malloc_trim) once the daemon has been
//                      idle for a period after its resident memory grew.
//
// Elsewhere than glibc both are no-ops (the trimmer never trims).
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned {

// The arenas glibc may make. Few threads of the daemon allocate on a hot
// path (the sim's virtual GPUs allocate their buffers before they time), so
// contention is low; each arena more keeps its own free memory.
inline constexpr int kMallocArenas = 4;

// Sets glibc's M_ARENA_MAX to `arenas` unless MALLOC_ARENA_MAX is set in the
// environment (the operator's choice, which glibc already applied). Call
// before starting any thread: arenas are made as threads first allocate.
// Returns the bound in force, 0 when it is glibc's default (the variable set
// to something that is not a positive number) or not glibc.
int BoundMallocArenas(int arenas = kMallocArenas);

// The process's resident memory (VmRSS), in bytes; -1 if unreadable.
int64_t ResidentBytes();

// Returns the freed memory of the heap to the system with malloc_trim(0)
// whenever, at a check every `period`, `idle` was true at this check and the
// one before and the resident memory grew by at least `min_growth` since the
// lowest it was seen at after the last trim (or at start). A trim thus
// follows a burst of work once it is over, at most once per such growth.
// It holds each arena's lock while it walks it (about a millisecond for
// tens of MiB): `idle` keeps it away from calls in progress, whose threads
// allocate; the sim's timed loops do not allocate.
//
// Thread-safety: trims() may be called from any thread; construct and
// destroy it from one thread. `idle` is called on the trimmer's thread and
// must outlive the trimmer.
class IdleHeapTrimmer {
 public:
  struct Options {
    absl::Duration period = absl::Milliseconds(250);
    int64_t min_growth = int64_t{1} << 20;
  };

  IdleHeapTrimmer(std::function<bool()> idle, Options options);
  explicit IdleHeapTrimmer(std::function<bool()> idle)
      : IdleHeapTrimmer(std::move(idle), Options{}) {}
  // Stops the thread (within a period's wait, or the trim under way).
  ~IdleHeapTrimmer();
  IdleHeapTrimmer(const IdleHeapTrimmer&) = delete;
  IdleHeapTrimmer& operator=(const IdleHeapTrimmer&) = delete;

  // The trims done so far.
  int64_t trims() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  // Constant after construction.
  const std::function<bool()> idle_;
  const Options options_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t trims_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;
};

}  // namespace autotuned
