// CudaGpuNode: the GpuNode of gpu_node.h.
//
// After a run: rank threads still inside a call well after the deadline
// (kStuckGrace) get the NCCL communicators aborted under them; a failed NCCL
// run gets them aborted too (new ones on the next run); then every thread
// must have returned and every stream drained within kDrainTimeout, else the
// node leaks the run's state (freeing it would wait for the kernel or pull
// it from under a thread) and requires a restart.
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
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

// After the deadline, how long the rank threads may take to return before
// they count as stuck inside a call.
constexpr absl::Duration kStuckGrace = absl::Milliseconds(500);

// Everything the rank threads of one run touch. On the heap: when a thread
// stays stuck even after an abort, the node answers without it and leaks
// the state rather than free it under the thread (the worker then exits).
struct RunState {
  RunState(int world, absl::Time deadline)
      : barrier(world, deadline), outcomes(world), finished(world, false) {}
  RunBarrier barrier;
  RunShared shared;
  std::vector<RankBuffers> buffers;
  std::unique_ptr<CollectiveLauncher> launcher;
  absl::Mutex mu;
  std::vector<RankOutcome> outcomes ABSL_GUARDED_BY(mu);
  std::vector<bool> finished ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu) = 0;
};

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
  int64_t held_bytes() const override;
  void ReleaseIdle() override {
    if (!restart_required_) groups_.clear();
  }

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
  // Whether every rank thread of `st` finished by `until`.
  static bool WaitForRanks(RunState& st, absl::Time until);

  const GpuNodeOptions options_;
  const NodeDescription node_;
  // [device]; during a run gpus_[r] is used by rank r's thread only.
  std::vector<GpuContext> gpus_;
  // By world size. Declared after gpus_, so destroyed before the streams.
  std::map<int, NcclComms> comms_;
  std::map<int, P2pGroup> groups_;
  bool restart_required_ = false;
  int nccl_aborts_ = 0;
};

bool CudaGpuNode::WaitForRanks(RunState& st, absl::Time until) {
  absl::MutexLock lock(&st.mu);
  return st.mu.AwaitWithDeadline(
      absl::Condition(+[](int* running) { return *running == 0; }, &st.running), until);
}

absl::StatusOr<const NcclComms*> CudaGpuNode::Comms(int world, absl::Time deadline) {
  auto it = comms_.find(world);
  if (it == comms_.end()) {
    AT_ASSIGN_OR_RETURN(NcclComms comms,
                        NcclComms::Create(world, deadline, options_.nccl_nonblocking));
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

int64_t CudaGpuNode::held_bytes() const {
  int64_t bytes = 0;
  for (const auto& [world, group] : groups_) {
    bytes += world * (group.scratch_bytes() + at_p2p_signal_bytes());
  }
  return bytes;
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
                                "the GPU worker must restart: a kernel or call of an "
                                "earlier run is still running"),
                            {}});
  }
  const int world = problem.world_size;
  auto st = std::make_unique<RunState>(world, deadline);
  absl::StatusOr<std::vector<RankBuffers>> buffers = AllocateBuffers(problem);
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> launcher =
      buffers.ok() ? Prepare(problem, candidate, *method, *buffers, deadline)
                   : buffers.status();
  if (!launcher.ok()) {
    return std::vector<RankOutcome>(world, RankOutcome{launcher.status(), {}});
  }
  st->buffers = std::move(*buffers);
  st->launcher = std::move(*launcher);
  st->shared.problem = problem;
  st->shared.launcher = st->launcher.get();
  st->shared.barrier = &st->barrier;
  st->shared.cuda_graph = options.cuda_graph;
  st->shared.deadline = deadline;
  st->running = world;

  std::vector<std::thread> threads;
  threads.reserve(world);
  RunState* const state = st.get();
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([this, state, r, options] {
      RankOutcome outcome;
      outcome.status = CudaToStatus(cudaSetDevice(r), "cudaSetDevice");
      if (outcome.status.ok()) {
        CudaRankRun run(state->shared, r, &gpus_[r], state->buffers[r]);
        outcome = RunRankSchedule(run, options);
      }
      if (!outcome.status.ok()) {
        // Peers waiting at a barrier stop now rather than at the deadline.
        state->barrier.Abort(absl::AbortedError(
            absl::StrCat("rank ", r, " failed: ", outcome.status.ToString())));
      }
      absl::MutexLock lock(&state->mu);
      state->outcomes[r] = std::move(outcome);
      state->finished[r] = true;
      --state->running;
    });
  }
  // Every wait of a rank thread ends at the deadline; a thread still busy
  // well after it is stuck inside an NCCL call (a blocking communicator
  // waiting for a peer that never calls): aborting the communicators from
  // here releases it.
  bool aborted = false;
  std::vector<bool> stuck_in_call(world, false);
  bool joined = WaitForRanks(*state, deadline + kStuckGrace);
  if (!joined && method->nccl()) {
    {
      absl::MutexLock lock(&state->mu);
      stuck_in_call = state->finished;
      stuck_in_call.flip();
    }
    AbortComms(world);
    aborted = true;
    joined = WaitForRanks(*state, absl::Now() + kDrainTimeout);
  }
  std::vector<RankOutcome> outcomes;
  {
    absl::MutexLock lock(&state->mu);
    outcomes = state->outcomes;
    for (int r = 0; r < world; ++r) {
      if (stuck_in_call[r] || !state->finished[r]) {
        outcomes[r] = RankOutcome{
            absl::DeadlineExceededError(absl::StrCat(
                "cut off at the timeout: rank ", r,
                "'s thread was still inside a CUDA or NCCL call at the deadline")),
            {}};
      }
    }
  }
  bool failed = false;
  for (const RankOutcome& o : outcomes) failed = failed || !o.status.ok();
  P2pGroup* group = state->launcher->p2p_group();
  if (failed && group != nullptr) group->MarkDirty();
  // A failed NCCL run may leave a rank's kernel waiting for peers that will
  // never launch theirs, and the ranks' sequences out of step: abort.
  if (joined && failed && method->nccl() && comms_.count(world) > 0) {
    AbortComms(world);
    aborted = true;
  }
  // Before the buffers are freed (cudaFree would wait for a running kernel).
  if (!joined || !DrainStreams(world, absl::Now() + kDrainTimeout)) {
    // Nothing of this run may be freed under a kernel or a thread that
    // still uses it; the worker exits after its reply.
    restart_required_ = true;
    for (std::thread& t : threads) t.detach();
    st.release();
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
  for (std::thread& t : threads) t.join();
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
