// GpuNode: the node's GPUs as one process sees them, and the execution of
// one candidate on ranks 0..world-1, each on its GPU (ScheduleOptions::devices;
// by default GPU r is rank r). It runs inside the
// GPU worker process (gpu_worker.h), never in the daemon itself.
//
// Overruns. Every wait of a run is bounded by its deadline (poll_wait.h), so
// Run returns on time even when a kernel never finishes, with that rank
// DEADLINE_EXCEEDED; a rank thread stuck inside an NCCL call (a blocking
// communicator waiting for a peer, e.g. to connect) past the deadline is
// released by aborting the communicators from Run's own thread. Then:
//   - NCCL: after any failed NCCL run (an overrun, an asynchronous error, a
//     rank that stopped early and left its peers waiting) the communicators
//     are aborted (ncclCommAbort: their kernels stop) and new ones are made
//     on the next run; the worker keeps serving.
//   - P2P: a kernel spinning on a peer that never arrives cannot be stopped
//     inside a CUDA context (nor can anything that synchronizes with it, a
//     cudaFree included). The node then holds on to that run's buffers and
//     says restart_required(): the worker reports it and exits, and the
//     supervisor (cuda_backend.h) starts a fresh one. The supervisor's kill at
//     deadline + grace remains the last resort for anything else.
//
// Per GPU: a worker thread, a stream, timing events; per list of local GPUs
// a group ran on: NCCL communicators (nccl_comms.h; at most max_comm_sets
// lists, the least recently used released first) and a P2P group
// (at_p2p_group_create; at most one per GPU: a group for some GPUs replaces
// the others on any of them) whose scratch grows on demand. Buffers for a run are
// allocated for that run and freed after it, so nothing is held between
// rounds beyond the P2P signal/scratch buffers (held_bytes; freed by
// ReleaseIdle) and the communicators.
//
// Thread-safety: Run is called from one thread at a time.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"

namespace autotuned::cuda {

struct GpuNodeOptions {
  bool test_faults = false;  // adds all_reduce/hang_test (cuda_catalogue.h)
  // Spin limit passed to the P2P kernels (polls; 0 = unbounded). A peer that
  // never arrives then ends in an error instead of a hang.
  int64_t spin_limit = 0;
  // Non-blocking NCCL communicators (ncclConfig_t.blocking = 0). Off by
  // default: NCCL 2.28 then hands every collective to a new host thread and
  // answers ncclInProgress, which made an eager loop of 1 MiB all-reduces
  // host-bound (115-150 us each instead of 15 us on 2 x H200), i.e. wrong
  // timings. Blocking communicators are aborted the same way; a rank thread
  // stuck inside a blocking NCCL call is released by the abort.
  bool nccl_nonblocking = false;
  // NCCL communicator sets kept between runs, one per list of GPUs a group
  // ran on; past this many, the least recently used is finalized.
  int max_comm_sets = 8;
};

class GpuNode {
 public:
  // Discovers the GPUs (names, memory, PCI ids, the P2P/NVLink matrix),
  // driver, CUDA and NCCL versions. NOT_FOUND when there is no GPU.
  static absl::StatusOr<std::unique_ptr<GpuNode>> Create(const GpuNodeOptions& options);
  virtual ~GpuNode() = default;

  virtual const NodeDescription& node() const = 0;

  // Runs RunRankSchedule (daemon/engine/schedule.h) for `candidate` (canonical,
  // from CudaCatalogue) on ranks 0..problem.world_size-1 in parallel, rank r
  // on GPU DeviceOf(options, r) (INVALID_ARGUMENT for a placement that
  // CheckPlacement rejects), and
  // returns one outcome per rank. Verification uses the predictable pattern
  // (kernels/pattern.h) on the device. Timing: CUDA events around batches of
  // back-to-back launches (cuda_rank_run.h). options.cuda_graph: the timed loop is
  // captured once per GPU as a CUDA graph and replayed; each iteration's time
  // is then the replay's time divided by the iterations. `deadline` bounds
  // every wait (streams, NCCL calls and initialization, barriers between
  // rank threads); see "Overruns" above.
  virtual std::vector<RankOutcome> Run(const ProblemSpec& problem,
                                       const CandidateSpec& candidate,
                                       const ScheduleOptions& options,
                                       absl::Time deadline) = 0;

  // A fresh NCCL unique id (ncclGetUniqueId: 128 bytes). This process is then
  // the bootstrap root of the communicators made from it, so it must stay
  // alive while the other daemons' workers connect (the worker does).
  virtual absl::StatusOr<std::string> NewUniqueId() {
    return absl::UnimplementedError("no NCCL on this node");
  }

  // This node's share of a group spread over several daemons: the ranks
  // `local_ranks` (global rank numbers, ascending; the i-th on GPU
  // DeviceOf(options, i))
  // of problem.world_size ranks, each running RunRankSchedule as in Run, one
  // outcome per local rank. Their NCCL communicators are made from `token`
  // (NewUniqueId on the leader's node) with ncclCommInitRank and kept until
  // a run names another token; the barriers between ranks are device-side
  // (a 1-element all-reduce over every rank of the group). Only NCCL
  // candidates: a P2P kernel reads its peers' memory, so it is refused with
  // FAILED_PRECONDITION ("... needs all ranks on one daemon"). Every wait is
  // bounded by `deadline`: an NCCL call overrunning it gets the
  // communicators aborted (the token is then spent: later runs with it fail
  // at once); a connection that never completes (a daemon did not join)
  // cannot be cancelled, so the node then says restart_required().
  virtual std::vector<RankOutcome> RunPartial(const ProblemSpec& /*problem*/,
                                              const CandidateSpec& /*candidate*/,
                                              const ScheduleOptions& /*options*/,
                                              const std::vector<int>& local_ranks,
                                              const std::string& /*token*/,
                                              absl::Time /*deadline*/) {
    return std::vector<RankOutcome>(
        std::max<size_t>(local_ranks.size(), 1),
        RankOutcome{absl::FailedPreconditionError("no cross-daemon runs on this node"), {}});
  }

  // True once a run left a kernel running that cannot be stopped: the node
  // must not be used (nor destroyed: that would wait for the kernel) again,
  // and the process should exit.
  virtual bool restart_required() const { return false; }

  // How many times NCCL communicators were aborted after a failed run.
  virtual int nccl_aborts() const { return 0; }

  // GPU memory the node holds between runs (the P2P groups' scratch and
  // signal buffers, every GPU together; NCCL's own buffers not counted).
  virtual int64_t held_bytes() const { return 0; }
  // Frees what held_bytes counts; the next run that needs it makes it again
  // (a few milliseconds). Called by the worker when it has been idle for a
  // while (gpu_worker.h), never during a run.
  virtual void ReleaseIdle() {}
};

}  // namespace autotuned::cuda
