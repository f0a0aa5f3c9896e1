// The host barrier among the rank threads of one GpuNode run.
//
// Wait returns once every rank of the run has called it for the current
// generation (reusable, one generation after another). It never waits past
// the run's deadline: the first rank to time out reports DEADLINE_EXCEEDED
// naming the ranks that had not arrived, and breaks the barrier, so every
// current and later Wait fails at once with DEADLINE_EXCEEDED too. Abort
// (a rank failed) releases every current and later Wait with the reason.
//
// Thread-safety: all methods may be called from any thread at once.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned::cuda {

class RunBarrier {
 public:
  RunBarrier(int world, absl::Time deadline);
  RunBarrier(const RunBarrier&) = delete;
  RunBarrier& operator=(const RunBarrier&) = delete;

  absl::Status Wait(int rank) ABSL_LOCKS_EXCLUDED(mu_);
  // The first reason wins; an OK reason becomes ABORTED.
  void Abort(absl::Status reason) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int world_;
  const absl::Time deadline_;

  absl::Mutex mu_;
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);  // this generation
  int count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // OK until aborted or cut off
};

}  // namespace autotuned::cuda
