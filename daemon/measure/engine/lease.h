// The lease on a daemon's devices: who may time anything on them now. The
// engine takes it for each measurement (Engine::Measure, MeasurePart) and a
// run of candidates the ranks run (daemon/coordinate/clientrun) holds it from its
// opening to its decision (until its first step's bound only, while no rank
// has called it), so no two timings on this daemon overlap (see
// docs/protocol.md, "Measuring and ranking" and "Candidates the ranks run").
//
// Unlike a mutex, a lease may be given back from another thread than the
// one that took it (a run is decided by whichever rank's call comes last),
// and a holder may bound its hold: once `hold_until` passes, the lease is
// free for the next taker even if the holder never gave it back (a run whose
// ranks all went away).
//
// Thread-safety: every method may be called concurrently; a Token is
// move-only and may be released or destroyed on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned {

class DeviceLease {
 public:
  // Holding the lease; gives it back when destroyed or Released (once).
  class Token {
   public:
    Token() = default;
    Token(Token&& other) noexcept { *this = std::move(other); }
    Token& operator=(Token&& other) noexcept;
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token() { Release(); }

    // Gives the lease back (no effect when not held, or when its hold
    // already passed and another took it).
    void Release();
    bool held() const { return lease_ != nullptr; }
    // Bounds the hold anew: the lease is free for others from `hold_until`.
    // Whether the token still held the lease: false when released, or when
    // its hold had passed and another took the lease (nothing changes then).
    bool HoldUntil(absl::Time hold_until);

   private:
    friend class DeviceLease;
    Token(DeviceLease* lease, uint64_t generation) : lease_(lease), generation_(generation) {}
    DeviceLease* lease_ = nullptr;
    uint64_t generation_ = 0;
  };

  DeviceLease() = default;
  DeviceLease(const DeviceLease&) = delete;
  DeviceLease& operator=(const DeviceLease&) = delete;

  // How often a waiter's `gone` is asked.
  static constexpr absl::Duration kGonePoll = absl::Milliseconds(100);

  // Waits until the lease is free (given back, or its holder's hold_until
  // passed) and every caller that began waiting before this one has taken
  // it or given up (first come, first served), then holds it until the
  // token is released or `hold_until`. DEADLINE_EXCEEDED when `deadline`
  // passes first; CANCELLED once `gone` (asked every kGonePoll while
  // waiting, with the lease's lock held: cheap, and nothing of the lease's;
  // null: never) says that the caller went away.
  absl::StatusOr<Token> Acquire(absl::Time deadline,
                                absl::Time hold_until = absl::InfiniteFuture(),
                                const std::function<bool()>& gone = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Whether some holder has it now.
  bool busy() const ABSL_LOCKS_EXCLUDED(mu_);
  // Callers waiting in Acquire now.
  int waiting() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  bool HoldUntil(uint64_t generation, absl::Time hold_until) ABSL_LOCKS_EXCLUDED(mu_);
  bool FreeAt(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return holder_ == 0 || now >= hold_until_;
  }

  mutable absl::Mutex mu_;
  uint64_t holder_ ABSL_GUARDED_BY(mu_) = 0;  // the holder's generation; 0: free
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Time hold_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The callers waiting in Acquire, by arrival number (the first is served
  // first).
  std::set<uint64_t> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace autotuned
