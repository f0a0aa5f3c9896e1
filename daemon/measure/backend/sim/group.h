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
// Across daemons (the constructor with `local_ranks` and a transport): the
// group still holds every rank's buffers, but only the local ranks run here;
// the other ranks' buffers are mirrors of theirs on other daemons. Barrier
// keeps them current: when the last local rank arrives, it sends, through the
// transport (backend.h), what the local ranks wrote since the previous barrier
// (the blocks of their input, output and scratch buffers whose bytes differ
// from what was last sent: EncodeChanges), and writes what the other daemons
// sent into the mirrors, before any local rank passes. Since algorithms write
// only their own buffers and read peers' only after a barrier (algorithms.h),
// every algorithm runs unchanged and reads the remote ranks' real data. An
// abort here (Abort) is sent to the other daemons; an abort or a lost daemon
// there reaches this group as the failure of its next exchange.
//
// Thread-safety: all methods may be called from any rank thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned::sim {

class Group {
 public:
  // Buffers of problem.InputCount(r) / OutputCount(r) / scratch_count
  // floats for every rank r (zero-filled). problem.world_size must be >= 1.
  Group(const ProblemSpec& problem, absl::Time deadline, int64_t scratch_count);
  // A group spread over daemons: `local_ranks` (distinct, in [0,
  // world_size)) run here, the others' buffers are mirrors kept by Barrier
  // through `transport` (null: the mirrors are left alone, for tests).
  Group(const ProblemSpec& problem, absl::Time deadline, int64_t scratch_count,
        std::vector<int> local_ranks, std::shared_ptr<RunTransport> transport);

  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const ProblemSpec& problem() const { return problem_; }
  int world_size() const { return problem_.world_size; }
  absl::Time deadline() const { return deadline_; }

  float* input(int rank) { return inputs_[rank].data(); }
  float* output(int rank) { return outputs_[rank].data(); }
  float* scratch(int rank) { return scratch_[rank].data(); }
  int64_t scratch_count() const { return scratch_count_; }
  bool is_local(int rank) const { return is_local_[rank] != 0; }

  // Returns once every (local) rank has called Barrier for this generation,
  // and, across daemons, the exchange of this generation is done (the
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
  // Across daemons: sends the local ranks' buffers of barrier `generation`,
  // writes the others' into the mirrors. Called with no rank running here.
  absl::Status ExchangeMirrors(uint64_t generation);

  const ProblemSpec problem_;
  const absl::Time deadline_;
  const int64_t scratch_count_;
  std::vector<std::vector<float>> inputs_;
  std::vector<std::vector<float>> outputs_;
  std::vector<std::vector<float>> scratch_;
  std::vector<int> local_ranks_;     // every rank when not across daemons
  std::vector<char> is_local_;       // per rank
  const std::shared_ptr<RunTransport> transport_;  // null: every rank is here
  // What the mirrors elsewhere hold of the local ranks' buffers (3 per
  // local rank: input, output, scratch); touched only by ExchangeMirrors.
  std::vector<std::vector<float>> sent_;

  mutable absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status abort_ ABSL_GUARDED_BY(mu_);  // OK until aborted
};

// The status every wait reports once the run's deadline has passed.
absl::Status CutOffStatus();

// The wire form of buffers in an exchange: records of (rank, kind (0 input,
// 1 output, 2 scratch), first float, float count, floats), in memory byte
// order (the daemons of a run are alike). Decode writes each record into
// that rank's buffer of `group`; a local rank, an unknown kind or a range
// outside the buffer is DATA_LOSS naming it.
// EncodeBuffers: the whole buffers of `ranks` (inputs too when `inputs`).
std::string EncodeBuffers(Group& group, const std::vector<int>& ranks, bool inputs);
// EncodeChanges: only the 1024-float blocks of `ranks`' buffers whose bytes
// differ from `sent` (one copy per rank and kind, made here on first use,
// zero-filled like the buffers), and updates `sent`.
std::string EncodeChanges(Group& group, const std::vector<int>& ranks,
                          std::vector<std::vector<float>>* sent);
absl::Status DecodeBuffers(const std::string& data, Group& group);

}  // namespace autotuned::sim
