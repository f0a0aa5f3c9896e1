// Admission of rounds: how many Tune and Sweep calls are served at once
// (limits.max_concurrent_rounds), and the drain at shutdown (no new rounds,
// wait for those in progress).
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/metrics/registry.h"

namespace autotuned {

class Admission {
 public:
  // Holds one admitted round; destroying it (or moving from it) ends it.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class Admission;
    explicit Ticket(Admission* owner) : owner_(owner) {}
    Admission* owner_;
  };

  // `in_flight_gauge` (optional, not owned) mirrors in_flight().
  Admission(int64_t max_in_flight, metrics::Gauge* in_flight_gauge)
      : gauge_(in_flight_gauge), limit_(max_in_flight) {}

  // A ticket, or UNAVAILABLE "draining: ..." once BeginDrain was called, or
  // RESOURCE_EXHAUSTED naming limits.max_concurrent_rounds when that many
  // rounds are in progress.
  absl::StatusOr<Ticket> Admit() ABSL_LOCKS_EXCLUDED(mu_);

  // The error Admit returns while draining.
  static absl::Status DrainingError();

  // Changes the limit for later Admit calls (rounds in progress stay).
  void SetLimit(int64_t max_in_flight) ABSL_LOCKS_EXCLUDED(mu_);
  // From now on Admit refuses with UNAVAILABLE. Idempotent.
  void BeginDrain() ABSL_LOCKS_EXCLUDED(mu_);
  // True once nothing is in flight; false when `deadline` passes first.
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  bool draining() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t in_flight() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  metrics::Gauge* const gauge_;
  mutable absl::Mutex mu_;
  int64_t limit_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autotuned
