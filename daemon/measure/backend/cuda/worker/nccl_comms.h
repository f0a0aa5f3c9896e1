// The NCCL communicators of one process driving a list of GPUs: rank r on
// the r-th, made with ncclCommInitRankConfig for every rank inside one
// ncclGroupStart/End. Non-blocking (ncclConfig_t.blocking = 0) or blocking:
// non-blocking, no NCCL call blocks, any of them may answer ncclInProgress,
// and the caller polls the communicator's state (WaitReady) with a deadline;
// but NCCL then enqueues each collective from a new thread, a host cost
// that distorts the timing of small collectives (cuda_gpu_node.h). Blocking, a
// call may block (e.g. while connecting to a peer that never calls) until
// Abort, called from another thread, releases it.
//
// The watchdog: a run whose NCCL kernel overran its deadline (or whose ranks
// failed, leaving the communicators with unmatched collectives) calls Abort,
// which makes NCCL's kernels on every rank give up and frees the
// communicators; the GPU node then makes new ones for the next run, and the
// worker process keeps serving (cuda_gpu_node.h).
//
// Thread-safety: one thread per rank may use comm(rank), WaitReady(rank) and
// AsyncError(rank) at a time (NCCL's model for communicators on different
// devices); Create and the destructor run with no other call in progress on
// these communicators. Abort may run while a rank thread is blocked inside
// an NCCL call on them (that is what it is for); the caller then makes no
// further call on them.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autotuned::cuda {

class NcclComms {
 public:
  // Waits at most until `deadline` for the initialization of all of them
  // (non-blocking; blocking ones are ready when this returns):
  // DEADLINE_EXCEEDED then, or NCCL's error, after aborting what was made.
  // Rank r on devices[r].
  static absl::StatusOr<NcclComms> Create(const std::vector<int>& devices, absl::Time deadline,
                                          bool nonblocking);
  // A share of a group spread over several processes (daemons): blocking
  // communicators for the global ranks `ranks` of `world`, rank ranks[i] on
  // device devices[i], made from `id` with ncclCommInitRank (inside one
  // ncclGroupStart/End). comm(r) is nullptr for the other processes' ranks.
  // Returns once every rank of the group, in every process, has connected:
  // it blocks for as long as one is missing, so the caller runs it where it
  // can walk away from it (gpu_node.cc).
  static absl::StatusOr<NcclComms> CreatePart(int world, const ncclUniqueId& id,
                                              const std::vector<int>& ranks,
                                              const std::vector<int>& devices);
  NcclComms() = default;
  NcclComms(NcclComms&& other) noexcept;
  NcclComms& operator=(NcclComms&& other) noexcept;
  // Finalizes and destroys them, waiting a bounded time for the finalize
  // (kFinalizeTimeout); aborts them when that runs out or fails.
  ~NcclComms() { Release(); }

  int world() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int rank) const { return comms_[rank]; }

  // After an NCCL call on comm(rank) answered ncclInProgress: waits until
  // the communicator is ready for the next call. NCCL's asynchronous error as
  // a status (UNAVAILABLE for a remote error, INTERNAL otherwise), or
  // DEADLINE_EXCEEDED.
  absl::Status WaitReady(int rank, absl::Time deadline) const;
  // The communicator's asynchronous error; OK while none (or in progress).
  absl::Status AsyncError(int rank) const;

  // ncclCommAbort on every communicator: their kernels still running on any
  // stream stop (without completing), and the object holds nothing after.
  void Abort();

 private:
  void Release();
  std::vector<ncclComm_t> comms_;
};

}  // namespace autotuned::cuda
