// GpuNode: the node's GPUs as one process sees them, and the execution of
// one candidate on ranks 0..world-1 (GPU r is rank r). It runs inside the
// GPU worker process (gpu_worker.h), never in the daemon itself, because a
// hung kernel cannot be cancelled inside a CUDA context: the daemon kills the
// worker instead.
//
// Per GPU: a worker thread, a stream, timing events; per group of local GPUs:
// NCCL communicators (ncclCommInitAll) and a P2P group (at_p2p_group_create)
// whose scratch grows on demand. Buffers for a run are allocated for that run
// and freed after it, so nothing is held between rounds beyond the P2P
// signal/scratch buffers and the communicators.
//
// Thread-safety: Run is called from one thread at a time.
#pragma once

#include <memory>
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
};

class GpuNode {
 public:
  // Discovers the GPUs (names, memory, PCI ids, the P2P/NVLink matrix),
  // driver, CUDA and NCCL versions. NOT_FOUND when there is no GPU.
  static absl::StatusOr<std::unique_ptr<GpuNode>> Create(const GpuNodeOptions& options);
  virtual ~GpuNode() = default;

  virtual const NodeDescription& node() const = 0;

  // Runs RunRankSchedule (daemon/engine/schedule.h) for `candidate` (canonical,
  // from CudaCatalogue) on GPUs 0..problem.world_size-1 in parallel and
  // returns one outcome per rank. Verification uses the predictable pattern
  // (kernels/pattern.h) on the device. Timing: CUDA events around batches of
  // back-to-back launches (cuda_rank_run.h). options.cuda_graph: the timed loop is
  // captured once per GPU as a CUDA graph and replayed; each iteration's time
  // is then the replay's time divided by the iterations. `deadline` bounds
  // host-side waits where the node can observe it (barriers between rank
  // threads); a kernel that hangs is not bounded here: that is what the
  // worker process and its supervisor are for.
  virtual std::vector<RankOutcome> Run(const ProblemSpec& problem,
                                       const CandidateSpec& candidate,
                                       const ScheduleOptions& options,
                                       absl::Time deadline) = 0;
};

}  // namespace autotuned::cuda
