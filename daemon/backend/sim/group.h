// The shared state of one sim run: what the ranks of a group see of each
// other. Every rank's input, output and scratch buffers live here in host
// memory, visible to every rank thread (as P2P-mapped peer buffers are on
// GPUs), together with the group's barrier and its abort flag.
//
// Contract:
//  - Buffers are sized at construction and never resized, so the pointers
//    stay valid for the life of the Group. Access to them is not locked:
//    algorithms order their reads and writes with Barrier(), whose mutex
//    gives the happens-before edges between ranks.
//  - Every wait (Barrier, Sleep) returns early with the abort reason once
//    Abort() has been called, and with DEADLINE_EXCEEDED ("cut off at the
//    timeout") once the run's deadline has passed. A wait that times out
//    aborts the group with that status, so a broken barrier never strands a
//    peer: after any abort every later wait fails at once.
//
// Thread-safety: all methods may be called from any rank thread at once.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"

namespace autotuned::sim {

class Group {
 public:
  // Buffers of problem.InputCount(r) / OutputCount(r) / scratch_count
  // floats for every rank r (zero-filled). problem.world_size must be >= 1.
  Group(const ProblemSpec& problem, absl::Time deadline, int64_t scratch_count);

  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const ProblemSpec& problem() const { return problem_; }
  int world_size() const { return problem_.world_size; }
  absl::Time deadline() const { return deadline_; }

  float* input(int rank) { return inputs_[rank].data(); }
  float* output(int rank) { return outputs_[rank].data(); }
  float* scratch(int rank) { return scratch_[rank].data(); }

  // Returns once every rank has called Barrier for this generation (the
  // barrier is reusable, one generation after another). The abort reason
  // when aborted; past the deadline (or aborted by it) ABORTED, "barrier:
  // cut off at the timeout while waiting for other ranks": the rank stuck
  // elsewhere reports DEADLINE_EXCEEDED and takes the blame.
  absl::Status Barrier();

  // Waits `d` (infinite: until the abort or the deadline). OK when the time
  // elapsed; the abort reason or DEADLINE_EXCEEDED otherwise.
  absl::Status Sleep(absl::Duration d);

  // Aborts the run: every current and later wait returns `reason` (an OK
  // reason becomes ABORTED). The first reason wins; later calls are no-ops.
  void Abort(absl::Status reason);

  // OK while the run is not aborted, else the abort reason.
  absl::Status abort_status() const;

 private:
  // After a wait that neither completed nor saw an abort: the deadline has
  // passed, which breaks the group for everyone.
  absl::Status CutOffLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProblemSpec problem_;
  const absl::Time deadline_;
  std::vector<std::vector<float>> inputs_;
  std::vector<std::vector<float>> outputs_;
  std::vector<std::vector<float>> scratch_;

  mutable absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status abort_ ABSL_GUARDED_BY(mu_);  // OK until aborted
};

// The status every wait reports once the run's deadline has passed.
absl::Status CutOffStatus();

}  // namespace autotuned::sim
