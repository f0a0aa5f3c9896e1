// Admission of Tune and Sweep calls: how many are served at once, in two
// pools with bounds of their own (docs/protocol.md, "Requests and errors"),
// and the drain at shutdown (no new calls, wait for those in progress).
//
//  - Slot::kDevices (limits.max_concurrent_rounds): whole-group calls that
//    measure, which queue for the daemon's devices.
//  - Slot::kWaiting (limits.max_waiting_ranks): ranks that ask one by one,
//    which mostly wait in the rendezvous (a rank that completes a round
//    measures it under the device lease, each round within its bound).
//
// A whole-group call answered wholly from the cache takes no slot (it
// neither waits nor measures), so neither pool full ever blocks cache hits,
// and ranks waiting in long pre-sync windows never block measurements.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/ops/metrics/registry.h"

namespace autotuned {

class Admission {
 public:
  enum class Slot { kDevices, kWaiting };

  // Holds one admitted call; destroying it (or moving from it) ends it.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(other.owner_), slot_(other.slot_) {
      other.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class Admission;
    Ticket(Admission* owner, Slot slot) : owner_(owner), slot_(slot) {}
    Admission* owner_;
    Slot slot_;
  };

  // `in_flight_gauge` (optional, not owned) mirrors the calls in progress in
  // both pools.
  Admission(int64_t max_in_flight, metrics::Gauge* in_flight_gauge,
            int64_t max_waiting = 1024)
      : gauge_(in_flight_gauge), limit_{max_in_flight, max_waiting} {}

  // A ticket of `slot`'s pool, or UNAVAILABLE "draining: ..." once
  // BeginDrain was called, or RESOURCE_EXHAUSTED naming the pool's limit
  // (limits.max_concurrent_rounds or limits.max_waiting_ranks) when that
  // many calls of the pool are in progress.
  absl::StatusOr<Ticket> Admit(Slot slot = Slot::kDevices) ABSL_LOCKS_EXCLUDED(mu_);

  // The error Admit returns while draining.
  static absl::Status DrainingError();

  // Changes the limits for later Admit calls (calls in progress stay).
  void SetLimits(int64_t max_in_flight, int64_t max_waiting) ABSL_LOCKS_EXCLUDED(mu_);
  // From now on Admit refuses with UNAVAILABLE. Idempotent.
  void BeginDrain() ABSL_LOCKS_EXCLUDED(mu_);
  // True once nothing is in flight in either pool; false when `deadline`
  // passes first.
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  bool draining() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t in_flight(Slot slot = Slot::kDevices) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(Slot slot) ABSL_LOCKS_EXCLUDED(mu_);

  metrics::Gauge* const gauge_;
  mutable absl::Mutex mu_;
  int64_t limit_[2] ABSL_GUARDED_BY(mu_);      // by Slot
  int64_t in_flight_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autotuned
