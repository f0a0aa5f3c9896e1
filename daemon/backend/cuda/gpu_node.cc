// CudaGpuNode: the GpuNode of gpu_node.h.
//
// After a run: a failed NCCL run gets its communicators aborted (and new ones
// on the next run); then every stream must drain within kDrainTimeout, else
// the node keeps the run's buffers (freeing them would wait for the kernel)
// and requires a restart.
//
// Run allocates every rank's buffers up front (the P2P kernels need all
// ranks' input pointers before any rank launches), builds the launcher, then
// runs RunRankSchedule on one std::thread per rank (thread r makes GPU r
// current and uses only its own NCCL communicator, stream and events: one
// thread per GPU is NCCL's supported multi-threaded model). NCCL
// communicators (ncclCommInitAll) and P2P groups are made on first use for a
// world size and kept; a P2P group grows when a run needs more scratch, and
// is reset (signal buffers zeroed) before its next use after a run in which a
// rank failed, since its ranks' sequence numbers may then disagree.
#include "daemon/backend/cuda/gpu_node.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/backend/cuda/collective_launcher.h"
#include "daemon/backend/cuda/cuda_handles.h"
#include "daemon/backend/cuda/cuda_rank_run.h"
#include "daemon/backend/cuda/cuda_status.h"
#include "daemon/backend/cuda/nccl_comms.h"
#include "daemon/backend/cuda/node_discovery.h"
#include "daemon/backend/cuda/p2p_group.h"
#include "daemon/backend/cuda/poll_wait.h"
#include "daemon/backend/cuda/run_barrier.h"
#include "daemon/common/status_macros.h"
#include "daemon/engine/schedule.h"

namespace autotuned::cuda {
namespace {

// A P2P group's scratch grows to the next power of two of what a run needs
// (at least this), so a sweep of sizes recreates it only a few times.
constexpr int64_t kMinScratchBytes = int64_t{4} << 20;

// After a run, how long its streams may take to drain: an aborted NCCL
// kernel stops within milliseconds; a P2P kernel at its spin limit too.
// Short, so that the worker reports well within the supervisor's grace.
constexpr absl::Duration kDrainTimeout = absl::Seconds(1);

int64_t ScratchCapacity(int64_t needed) {
  int64_t c = kMinScratchBytes;
  while (c < needed) c *= 2;
  return c;
}


class CudaGpuNode : public GpuNode {
 public:
  CudaGpuNode(GpuNodeOptions options, NodeDescription node,
              std::vector<GpuContext> gpus)
      : options_(options), node_(std::move(node)), gpus_(std::move(gpus)) {}

  const NodeDescription& node() const override { return node_; }

  std::vector<RankOutcome> Run(const ProblemSpec& problem, const CandidateSpec& candidate,
                               const ScheduleOptions& options,
                               absl::Time deadline) override;

  bool restart_required() const override { return restart_required_; }
  int nccl_aborts() const override { return nccl_aborts_; }

 private:
  // INVALID_ARGUMENT for what this node cannot run, before anything is
  // allocated; otherwise how the candidate runs.
  absl::StatusOr<Method> Validate(const ProblemSpec& problem,
                                  const CandidateSpec& candidate) const;
  // Communicators / group for `problem.world_size`, and the launcher over
  // `buffers` (which checks the P2P kernels' arguments).
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> Prepare(
      const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
      const std::vector<RankBuffers>& buffers, absl::Time deadline);
  absl::StatusOr<const NcclComms*> Comms(int world, absl::Time deadline);
  absl::StatusOr<P2pGroup*> Group(int world, int64_t scratch_bytes);
  absl::StatusOr<std::vector<RankBuffers>> AllocateBuffers(const ProblemSpec& problem);
  // Waits until every GPU's stream is idle, at most until `deadline`: false
  // when one still runs something (or its context reports an error).
  bool DrainStreams(int world, absl::Time deadline);
  // After a failed NCCL run: aborts the communicators of `world`.
  void AbortComms(int world);

  const GpuNodeOptions options_;
  const NodeDescription node_;
  // [device]; during a run gpus_[r] is used by rank r's thread only.
  std::vector<GpuContext> gpus_;
  // By world size. Declared after gpus_, so destroyed before the streams.
  std::map<int, NcclComms> comms_;
  std::map<int, P2pGroup> groups_;
  bool restart_required_ = false;
  int nccl_aborts_ = 0;
  // Buffers of runs whose kernels never finished: never freed.
  std::vector<std::vector<RankBuffers>> stuck_buffers_;
};

absl::StatusOr<const NcclComms*> CudaGpuNode::Comms(int world, absl::Time deadline) {
  auto it = comms_.find(world);
  if (it == comms_.end()) {
    AT_ASSIGN_OR_RETURN(NcclComms comms, NcclComms::Create(world, deadline));
    it = comms_.emplace(world, std::move(comms)).first;
  }
  return &it->second;
}

absl::StatusOr<P2pGroup*> CudaGpuNode::Group(int world, int64_t scratch_bytes) {
  auto it = groups_.find(world);
  if (it != groups_.end() && it->second.scratch_bytes() < scratch_bytes) {
    groups_.erase(it);  // frees the old buffers before the larger ones exist
    it = groups_.end();
  }
  if (it == groups_.end()) {
    AT_ASSIGN_OR_RETURN(P2pGroup group,
                        P2pGroup::Create(world, ScratchCapacity(scratch_bytes)));
    it = groups_.emplace(world, std::move(group)).first;
  }
  AT_RETURN_IF_ERROR(it->second.ResetIfDirty());
  return &it->second;
}

absl::StatusOr<std::vector<RankBuffers>> CudaGpuNode::AllocateBuffers(
    const ProblemSpec& p) {
  std::vector<RankBuffers> buffers(p.world_size);
  const int64_t esize = DTypeSize(p.dtype);
  for (int r = 0; r < p.world_size; ++r) {
    AT_ASSIGN_OR_RETURN(buffers[r].input, DeviceBuffer::Create(r, p.InputCount(r) * esize));
    AT_ASSIGN_OR_RETURN(buffers[r].output, DeviceBuffer::Create(r, p.OutputCount(r) * esize));
    AT_ASSIGN_OR_RETURN(buffers[r].check, DeviceBuffer::Create(r, 16));
  }
  return buffers;
}

absl::StatusOr<Method> CudaGpuNode::Validate(const ProblemSpec& problem,
                                             const CandidateSpec& candidate) const {
  AT_RETURN_IF_ERROR(CheckShape(problem, static_cast<int>(gpus_.size())));
  AT_ASSIGN_OR_RETURN(Method method, ResolveMethod(candidate.impl, problem.collective,
                                                   options_.test_faults));
  if (!method.nccl() &&
      (problem.world_size < AT_P2P_MIN_WORLD || problem.world_size > AT_P2P_MAX_WORLD)) {
    return absl::InvalidArgumentError(
        absl::StrCat(candidate.impl, " runs on ", AT_P2P_MIN_WORLD, " to ",
                     AT_P2P_MAX_WORLD, " ranks, not ", problem.world_size));
  }
  return method;
}

absl::StatusOr<std::unique_ptr<CollectiveLauncher>> CudaGpuNode::Prepare(
    const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
    const std::vector<RankBuffers>& buffers, absl::Time deadline) {
  CollectiveLauncher::Resources res;
  res.deadline = deadline;
  for (const RankBuffers& b : buffers) {
    res.inputs.push_back(b.input.get());
    res.outputs.push_back(b.output.get());
  }
  res.spin_limit = options_.spin_limit;
  if (method.nccl()) {
    AT_ASSIGN_OR_RETURN(res.comms, Comms(problem.world_size, deadline));
  } else {
    AT_ASSIGN_OR_RETURN(res.group, Group(problem.world_size,
                                         P2pScratchBytes(problem, candidate, method)));
  }
  return CollectiveLauncher::Create(problem, candidate, method, std::move(res));
}

bool CudaGpuNode::DrainStreams(int world, absl::Time deadline) {
  for (int r = 0; r < world; ++r) {
    ScopedDevice scoped(r);
    const cudaStream_t stream = gpus_[r].stream.get();
    const absl::Status s = PollUntil(
        [&]() -> absl::StatusOr<bool> {
          const cudaError_t q = cudaStreamQuery(stream);
          if (q == cudaErrorNotReady) return false;
          if (q != cudaSuccess) return CudaToStatus(q, "cudaStreamQuery");
          return true;
        },
        deadline, "stream");
    if (!s.ok()) return false;
  }
  return true;
}

void CudaGpuNode::AbortComms(int world) {
  auto it = comms_.find(world);
  if (it == comms_.end()) return;
  it->second.Abort();
  comms_.erase(it);
  ++nccl_aborts_;
}

std::vector<RankOutcome> CudaGpuNode::Run(const ProblemSpec& problem,
                                          const CandidateSpec& candidate,
                                          const ScheduleOptions& options,
                                          absl::Time deadline) {
  const absl::StatusOr<Method> method = Validate(problem, candidate);
  if (!method.ok()) {
    return std::vector<RankOutcome>(std::max(problem.world_size, 1),
                                    RankOutcome{method.status(), {}});
  }
  if (restart_required_) {
    return std::vector<RankOutcome>(
        problem.world_size, RankOutcome{absl::UnavailableError(
                                "the GPU worker must restart: a kernel of an earlier run "
                                "is still running"),
                            {}});
  }
  const int world = problem.world_size;
  std::vector<RankOutcome> outcomes(world);
  absl::StatusOr<std::vector<RankBuffers>> buffers = AllocateBuffers(problem);
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> launcher =
      buffers.ok() ? Prepare(problem, candidate, *method, *buffers, deadline)
                   : buffers.status();
  if (!launcher.ok()) {
    for (RankOutcome& o : outcomes) o.status = launcher.status();
    return outcomes;
  }
  RunBarrier barrier(world, deadline);
  RunShared shared;
  shared.problem = problem;
  shared.launcher = launcher->get();
  shared.barrier = &barrier;
  shared.cuda_graph = options.cuda_graph;
  shared.deadline = deadline;

  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankOutcome& outcome = outcomes[r];
      outcome.status = CudaToStatus(cudaSetDevice(r), "cudaSetDevice");
      if (outcome.status.ok()) {
        CudaRankRun run(shared, r, &gpus_[r], (*buffers)[r]);
        outcome = RunRankSchedule(run, options);
      }
      if (!outcome.status.ok()) {
        // Peers waiting at a barrier stop now rather than at the deadline.
        barrier.Abort(absl::AbortedError(
            absl::StrCat("rank ", r, " failed: ", outcome.status.ToString())));
      }
    });
  }
  for (std::thread& t : threads) t.join();

  P2pGroup* group = (*launcher)->p2p_group();
  bool failed = false;
  for (const RankOutcome& o : outcomes) failed = failed || !o.status.ok();
  if (failed && group != nullptr) group->MarkDirty();
  // A failed NCCL run may leave a rank's kernel waiting for peers that will
  // never launch theirs, and the ranks' sequences out of step: abort.
  const bool aborted = failed && method->nccl() && comms_.count(world) > 0;
  if (aborted) AbortComms(world);
  // Before the buffers are freed (cudaFree would wait for a running kernel).
  if (!DrainStreams(world, absl::Now() + kDrainTimeout)) {
    restart_required_ = true;
    stuck_buffers_.push_back(std::move(*buffers));
    for (RankOutcome& o : outcomes) {
      if (!o.status.ok()) {
        o.status = absl::Status(o.status.code(),
                                absl::StrCat(o.status.message(),
                                             "; a kernel is still running and cannot be "
                                             "stopped: the GPU worker must restart"));
      }
    }
    return outcomes;
  }
  if (aborted) {
    for (RankOutcome& o : outcomes) {
      if (!o.status.ok()) {
        o.status = absl::Status(o.status.code(),
                                absl::StrCat(o.status.message(),
                                             " (NCCL communicators aborted; new ones for the "
                                             "next run)"));
      }
    }
  }
  return outcomes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuNode>> GpuNode::Create(const GpuNodeOptions& options) {
  AT_ASSIGN_OR_RETURN(NodeDescription node, DescribeNode());
  const int gpus = static_cast<int>(node.gpus.size());
  AT_RETURN_IF_ERROR(EnablePeerAccess(gpus));
  std::vector<GpuContext> contexts(gpus);
  for (int d = 0; d < gpus; ++d) {
    contexts[d].device = d;
    AT_ASSIGN_OR_RETURN(contexts[d].stream, CudaStream::Create(d));
  }
  return std::unique_ptr<GpuNode>(
      new CudaGpuNode(options, std::move(node), std::move(contexts)));
}

}  // namespace autotuned::cuda
