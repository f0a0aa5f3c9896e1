// GpuNode: what the GPU worker process (gpu_worker.h) serves: the node's
// GPUs as that process sees them, and the execution of one candidate on
// ranks 0..world-1, each on its GPU (ScheduleOptions::devices; by default
// GPU r is rank r). The daemon itself never holds one. The real node, on
// CUDA and NCCL, is CreateCudaGpuNode (worker/cuda_gpu_node.h); tests of the
// supervisor serve a fake one (fake_gpu_worker_main.cc).
//
// Overruns: every wait of a run is bounded by its deadline, so Run returns
// on time even when a kernel never finishes, with that rank
// DEADLINE_EXCEEDED. A node that could not reclaim its GPUs (a kernel still
// running that nothing can stop) says restart_required(): the worker reports
// it and exits, and the supervisor (cuda_backend.h) starts a fresh one.
//
// Thread-safety: Run is called from one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned::cuda {

class GpuNode {
 public:
  virtual ~GpuNode() = default;

  virtual const NodeDescription& node() const = 0;

  // Runs RunRankSchedule (daemon/measure/backend/schedule.h) for `candidate`
  // (canonical, from CudaCatalogue) on ranks 0..problem.world_size-1 in
  // parallel, rank r on GPU DeviceOf(options, r) (INVALID_ARGUMENT for a
  // placement that CheckPlacement rejects), and returns one outcome per rank.
  // Returns by `deadline` (plus a short, fixed time), with the ranks that
  // had not finished DEADLINE_EXCEEDED; see restart_required().
  virtual std::vector<RankOutcome> Run(const ProblemSpec& problem, const CandidateSpec& candidate,
                                       const ScheduleOptions& options, absl::Time deadline) = 0;

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
