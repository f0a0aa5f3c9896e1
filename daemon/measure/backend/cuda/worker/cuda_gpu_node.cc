// CudaGpuNode: the GpuNode of cuda_gpu_node.h.
//
// After a run: rank threads still inside a call well after the deadline
// (kStuckGrace) get the NCCL communicators aborted under them; a failed NCCL
// run gets them aborted too (new ones on the next run); then every thread
// must have returned and every stream drained within kDrainTimeout, else the
// node leaks the run's state (freeing it would wait for the kernel or pull
// it from under a thread) and requires a restart.
//
// RunPartial (a group spread over several daemons) runs the same way on the
// local ranks only, with communicators made by ncclCommInitRank from the
// leader's unique id on a helper thread (the connection waits for every
// daemon's ranks and cannot be cancelled: a connection not made by the
// deadline leaves the thread behind and the node requires a restart). They
// are kept for that token, for the next candidates of the same round; a new
// token replaces them (the old ones are aborted: a finalize could wait for
// the other daemons), and after a failed run they are aborted and the token
// is spent.
//
// Run allocates every rank's buffers up front (the P2P kernels need all ranks'
// input pointers before any rank launches), builds the launcher, then runs
// RunRankSchedule on one std::thread per rank (thread r makes rank r's GPU
// current and uses only its own NCCL communicator, stream and events: one
// thread per GPU is NCCL's supported multi-threaded model). NCCL communicators
// and P2P groups are made on first use for a list of GPUs (rank r on the r-th;
// ScheduleOptions::devices) and kept; a P2P group grows when a run needs more
// scratch, and is reset (signal buffers zeroed) before its next use after a run
// in which a rank failed, since its ranks' sequence numbers may then disagree.
#include "daemon/measure/backend/cuda/worker/cuda_gpu_node.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/measure/backend/cuda/cuda_memory.h"
#include "daemon/measure/backend/cuda/worker/collective_launcher.h"
#include "daemon/measure/backend/cuda/worker/cuda_handles.h"
#include "daemon/measure/backend/cuda/worker/cuda_rank_run.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"
#include "daemon/measure/backend/cuda/worker/nccl_comms.h"
#include "daemon/measure/backend/cuda/worker/node_discovery.h"
#include "daemon/measure/backend/cuda/worker/p2p_group.h"
#include "daemon/measure/backend/cuda/worker/poll_wait.h"
#include "daemon/measure/backend/cuda/worker/run_barrier.h"
#include "daemon/measure/backend/schedule.h"
#include "common/status_macros.h"

namespace autotuned::cuda {
namespace {

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
  // `world` ranks in the group, `n` of them run here.
  RunState(int world, int n, absl::Time deadline)
      : barrier(world, deadline), outcomes(n), finished(n, false) {}
  RunBarrier barrier;
  RunShared shared;
  std::vector<RankBuffers> buffers;
  std::unique_ptr<CollectiveLauncher> launcher;
  absl::Mutex mu;
  std::vector<RankOutcome> outcomes ABSL_GUARDED_BY(mu);
  std::vector<bool> finished ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu) = 0;
};


class CudaGpuNode : public GpuNode {
 public:
  CudaGpuNode(GpuNodeOptions options, NodeDescription node,
              std::vector<GpuContext> gpus)
      : options_(options), node_(std::move(node)), gpus_(std::move(gpus)) {}

  const NodeDescription& node() const override { return node_; }

  std::vector<RankOutcome> Run(const ProblemSpec& problem, const CandidateSpec& candidate,
                               const ScheduleOptions& options,
                               absl::Time deadline) override;
  absl::StatusOr<std::string> NewUniqueId() override;
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options,
                                      const std::vector<int>& local_ranks,
                                      const std::string& token, absl::Time deadline) override;

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
  // Communicators / group for the ranks on `devices` (rank r on devices[r]),
  // and the launcher over `buffers` (which checks the P2P kernels' arguments).
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> Prepare(
      const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
      const std::vector<RankBuffers>& buffers, const std::vector<int>& devices,
      absl::Time deadline);
  absl::StatusOr<const NcclComms*> Comms(const std::vector<int>& devices, absl::Time deadline);
  // The group on `devices` with at least `bytes` of the scratch `algo` uses.
  absl::StatusOr<P2pGroup*> Group(const std::vector<int>& devices, int algo, int64_t bytes);
  // The ranks `ranks` (global numbers) on the GPUs `devices`, every rank of
  // the group in this process unless `cross` (RunPartial).
  std::vector<RankOutcome> Execute(const ProblemSpec& problem, const CandidateSpec& candidate,
                                   Method method, const ScheduleOptions& options,
                                   absl::Time deadline, const std::vector<int>& ranks,
                                   const std::vector<int>& devices, bool cross);
  // The cross-daemon communicators for `token` (made on first use).
  absl::StatusOr<const NcclComms*> CrossComms(const ProblemSpec& problem,
                                              const std::vector<int>& ranks,
                                              const std::vector<int>& devices,
                                              const std::string& token, absl::Time deadline);
  // Waits until the streams of `devices` are idle, at most until `deadline`:
  // false when one still runs something (or its context reports an error).
  bool DrainStreams(const std::vector<int>& devices, absl::Time deadline);
  // After a failed NCCL run: aborts the communicators of `devices`.
  void AbortComms(const std::vector<int>& devices);
  // Whether every rank thread of `st` finished by `until`.
  static bool WaitForRanks(RunState& st, absl::Time until);

  // Execute's phases, in order.
  // Every rank's buffers, the launcher over them and what the rank threads
  // share; the buffers' or the launcher's error otherwise.
  absl::StatusOr<std::unique_ptr<RunState>> PrepareRun(
      const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
      const ScheduleOptions& options, absl::Time deadline, const std::vector<int>& ranks,
      const std::vector<int>& devices, bool cross);
  // The launcher over `buffers` with RunPartial's communicators (cross_comms_).
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> CrossLauncher(
      const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
      const std::vector<RankBuffers>& buffers, absl::Time deadline);
  // One thread per rank (ranks[i] on devices[i]) running its schedule; a rank
  // that fails aborts the barrier for its peers.
  std::vector<std::thread> StartRanks(RunState* state, const std::vector<int>& ranks,
                                      const std::vector<int>& devices,
                                      const ScheduleOptions& options);
  // How the `n` rank threads of a run ended.
  struct RanksEnd {
    bool joined = false;   // every thread returned
    bool aborted = false;  // the run's communicators were aborted
    std::vector<bool> stuck_in_call;  // [i]: still inside a call after the deadline
  };
  // Waits for the rank threads until kStuckGrace after the deadline; an NCCL
  // run's threads still busy then get the communicators aborted under them
  // and kDrainTimeout more.
  RanksEnd AwaitRanks(RunState& state, Method method, absl::Time deadline, int n,
                      const std::vector<int>& devices, bool cross);
  // After a failed run: the P2P group is marked dirty, and a joined NCCL
  // run's communicators are aborted (end->aborted).
  void ResetAfterFailure(RunState& state, const std::vector<RankOutcome>& outcomes,
                         Method method, const std::vector<int>& devices, bool cross,
                         RanksEnd* end);
  // Aborts the run's communicators: those of `devices`, or with `cross`
  // RunPartial's (their token is then spent).
  void AbortRunComms(const std::vector<int>& devices, bool cross);

  const GpuNodeOptions options_;
  const NodeDescription node_;
  // [device]; during a run gpus_[r] is used by rank r's thread only.
  std::vector<GpuContext> gpus_;
  // By the ranks' GPUs (rank r on key[r]). Declared after gpus_, so
  // destroyed before the streams. At most options_.max_comm_sets
  // communicator sets (the least recently used is released first);
  // at most one P2P group per GPU (its scratch is the large part), so a
  // group made for GPUs replaces any other on those GPUs.
  struct CommsEntry {
    NcclComms comms;
    uint64_t last_use = 0;
  };
  std::map<std::vector<int>, CommsEntry> comms_;
  uint64_t comms_uses_ = 0;
  std::map<std::vector<int>, P2pGroup> groups_;
  // RunPartial's communicators, for cross_token_, cross_ranks_ and
  // cross_devices_; a token
  // whose communicators were aborted is spent_token_.
  std::string cross_token_;
  std::vector<int> cross_ranks_;
  std::vector<int> cross_devices_;
  std::unique_ptr<NcclComms> cross_comms_;
  std::string spent_token_;
  bool restart_required_ = false;
  int nccl_aborts_ = 0;
};

bool CudaGpuNode::WaitForRanks(RunState& st, absl::Time until) {
  absl::MutexLock lock(&st.mu);
  return st.mu.AwaitWithDeadline(
      absl::Condition(+[](int* running) { return *running == 0; }, &st.running), until);
}

absl::StatusOr<const NcclComms*> CudaGpuNode::Comms(const std::vector<int>& devices,
                                                    absl::Time deadline) {
  auto it = comms_.find(devices);
  if (it == comms_.end()) {
    if (comms_.size() >= static_cast<size_t>(std::max(options_.max_comm_sets, 1))) {
      auto oldest = comms_.begin();
      for (auto c = comms_.begin(); c != comms_.end(); ++c) {
        if (c->second.last_use < oldest->second.last_use) oldest = c;
      }
      comms_.erase(oldest);  // finalized and destroyed (bounded wait)
    }
    AT_ASSIGN_OR_RETURN(NcclComms comms,
                        NcclComms::Create(devices, deadline, options_.nccl_nonblocking));
    it = comms_.emplace(devices, CommsEntry{std::move(comms), 0}).first;
  }
  it->second.last_use = ++comms_uses_;
  return &it->second.comms;
}

absl::StatusOr<P2pGroup*> CudaGpuNode::Group(const std::vector<int>& devices, int algo,
                                             int64_t bytes) {
  const bool push = algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH;
  const int64_t scratch_bytes = push ? 0 : bytes;
  auto it = groups_.find(devices);
  if (it != groups_.end() && it->second.scratch_bytes() < scratch_bytes) {
    groups_.erase(it);  // frees the old buffers before the larger ones exist
    it = groups_.end();
  }
  if (it == groups_.end()) {
    for (auto g = groups_.begin(); g != groups_.end();) {
      const bool shares_a_gpu = std::any_of(g->first.begin(), g->first.end(), [&](int d) {
        return std::find(devices.begin(), devices.end(), d) != devices.end();
      });
      g = shares_a_gpu ? groups_.erase(g) : std::next(g);
    }
    AT_ASSIGN_OR_RETURN(P2pGroup group,
                        P2pGroup::Create(devices, ScratchCapacity(scratch_bytes)));
    it = groups_.emplace(devices, std::move(group)).first;
  }
  AT_RETURN_IF_ERROR(it->second.ResetIfDirty());
  if (push && it->second.push_bytes() < bytes) {
    AT_RETURN_IF_ERROR(it->second.SetPushBytes(ScratchCapacity(bytes)));
  }
  return &it->second;
}

// [rank] for every rank of the group; only `ranks` (on `devices`) get memory.
absl::StatusOr<std::vector<RankBuffers>> AllocateBuffers(const ProblemSpec& p,
                                                         const std::vector<int>& ranks,
                                                         const std::vector<int>& devices,
                                                         bool cross) {
  std::vector<RankBuffers> buffers(p.world_size);
  const int64_t esize = DTypeSize(p.dtype);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    const int d = devices[i];
    AT_ASSIGN_OR_RETURN(buffers[r].input, DeviceBuffer::Create(d, p.InputCount(r) * esize));
    AT_ASSIGN_OR_RETURN(buffers[r].output, DeviceBuffer::Create(d, p.OutputCount(r) * esize));
    AT_ASSIGN_OR_RETURN(buffers[r].check, DeviceBuffer::Create(d, 16));
    if (cross) {
      AT_ASSIGN_OR_RETURN(buffers[r].barrier, DeviceBuffer::Create(d, 16));
    }
  }
  return buffers;
}

// The outcome of each rank thread; DEADLINE_EXCEEDED for a thread stuck in a
// call (`stuck_in_call`) or not finished.
std::vector<RankOutcome> CollectOutcomes(RunState& state, const std::vector<int>& ranks,
                                         const std::vector<bool>& stuck_in_call) {
  const int n = static_cast<int>(ranks.size());
  std::vector<RankOutcome> outcomes;
  absl::MutexLock lock(&state.mu);
  outcomes = state.outcomes;
  for (int i = 0; i < n; ++i) {
    if (stuck_in_call[i] || !state.finished[i]) {
      outcomes[i] = RankOutcome{
          absl::DeadlineExceededError(absl::StrCat(
              "cut off at the timeout: rank ", ranks[i],
              "'s thread was still inside a CUDA or NCCL call at the deadline")),
          {}};
    }
  }
  return outcomes;
}

// Adds `note` to the message of every failed outcome.
void AppendToFailures(std::vector<RankOutcome>& outcomes, absl::string_view note) {
  for (RankOutcome& o : outcomes) {
    if (!o.status.ok()) {
      o.status = absl::Status(o.status.code(), absl::StrCat(o.status.message(), note));
    }
  }
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
    const std::vector<RankBuffers>& buffers, const std::vector<int>& devices,
    absl::Time deadline) {
  CollectiveLauncher::Resources res;
  res.deadline = deadline;
  for (const RankBuffers& b : buffers) {
    res.inputs.push_back(b.input.get());
    res.outputs.push_back(b.output.get());
  }
  res.spin_limit = options_.spin_limit;
  if (method.nccl()) {
    AT_ASSIGN_OR_RETURN(res.comms, Comms(devices, deadline));
  } else {
    AT_ASSIGN_OR_RETURN(res.group,
                        Group(devices, method.algo, P2pScratchBytes(problem, candidate, method)));
  }
  return CollectiveLauncher::Create(problem, candidate, method, std::move(res));
}

bool CudaGpuNode::DrainStreams(const std::vector<int>& devices, absl::Time deadline) {
  for (int d : devices) {
    ScopedDevice scoped(d);
    // The GPU's stream, and the legacy stream its graphs are replayed on
    // (cuda_rank_run.h).
    for (const cudaStream_t stream : {gpus_[d].stream.get(), cudaStreamLegacy}) {
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
  }
  return true;
}

int64_t CudaGpuNode::held_bytes() const {
  int64_t bytes = 0;
  for (const auto& [devices, group] : groups_) {
    bytes += static_cast<int64_t>(devices.size()) *
             (group.scratch_bytes() + group.push_bytes() + at_p2p_signal_bytes());
  }
  return bytes;
}

void CudaGpuNode::AbortComms(const std::vector<int>& devices) {
  auto it = comms_.find(devices);
  if (it == comms_.end()) return;
  it->second.comms.Abort();
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
  const absl::Status placed =
      CheckPlacement(options, problem.world_size, static_cast<int>(gpus_.size()));
  if (!placed.ok()) {
    return std::vector<RankOutcome>(problem.world_size, RankOutcome{placed, {}});
  }
  std::vector<int> ranks;
  std::vector<int> devices;
  for (int r = 0; r < problem.world_size; ++r) {
    ranks.push_back(r);
    devices.push_back(DeviceOf(options, r));
  }
  return Execute(problem, candidate, *method, options, deadline, ranks, devices, false);
}

absl::StatusOr<std::string> CudaGpuNode::NewUniqueId() {
  ncclUniqueId id;
  AT_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<const NcclComms*> CudaGpuNode::CrossComms(const ProblemSpec& problem,
                                                         const std::vector<int>& ranks,
                                                         const std::vector<int>& devices,
                                                         const std::string& token,
                                                         absl::Time deadline) {
  if (token == spent_token_) {
    return absl::UnavailableError(
        "the NCCL communicators across daemons for this round were aborted after a failed "
        "run; a new round makes new ones");
  }
  if (cross_comms_ != nullptr && token == cross_token_ && ranks == cross_ranks_ &&
      devices == cross_devices_ && cross_comms_->world() == problem.world_size) {
    return cross_comms_.get();
  }
  if (cross_comms_ != nullptr) {
    // Another round's: abort rather than finalize, which could wait for the
    // other daemons.
    cross_comms_->Abort();
    cross_comms_.reset();
  }
  if (token.size() != sizeof(ncclUniqueId::internal)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the backend token is not an NCCL unique id (", token.size(), " bytes, not ",
        sizeof(ncclUniqueId::internal), ")"));
  }
  ncclUniqueId id;
  memcpy(id.internal, token.data(), sizeof(id.internal));
  // ncclCommInitRank blocks until every daemon's ranks have connected and
  // cannot be cancelled: on a thread this run can leave behind.
  struct Init {
    absl::Notification done;
    absl::StatusOr<NcclComms> comms = absl::UnknownError("not run");
  };
  auto init = std::make_shared<Init>();
  std::thread([init, world = problem.world_size, id, ranks, devices] {
    init->comms = NcclComms::CreatePart(world, id, ranks, devices);
    init->done.Notify();
  }).detach();
  if (!init->done.WaitForNotificationWithDeadline(deadline)) {
    restart_required_ = true;
    spent_token_ = token;
    return absl::DeadlineExceededError(
        "cut off at the timeout: the NCCL communicators across daemons were not connected "
        "by the deadline (a daemon's ranks did not join); the connection cannot be "
        "cancelled, so the GPU worker must restart");
  }
  if (!init->comms.ok()) {
    spent_token_ = token;
    return init->comms.status();
  }
  cross_comms_ = std::make_unique<NcclComms>(std::move(*init->comms));
  cross_token_ = token;
  cross_ranks_ = ranks;
  cross_devices_ = devices;
  return cross_comms_.get();
}

std::vector<RankOutcome> CudaGpuNode::RunPartial(const ProblemSpec& problem,
                                                 const CandidateSpec& candidate,
                                                 const ScheduleOptions& options,
                                                 const std::vector<int>& local_ranks,
                                                 const std::string& token,
                                                 absl::Time deadline) {
  const int n = static_cast<int>(local_ranks.size());
  auto all = [n](absl::Status s) {
    return std::vector<RankOutcome>(std::max(n, 1), RankOutcome{std::move(s), {}});
  };
  absl::Status shape = CheckShape(problem, std::max(problem.world_size, 1));
  if (!shape.ok()) return all(shape);
  absl::StatusOr<Method> method =
      ResolveMethod(candidate.impl, problem.collective, options_.test_faults);
  if (!method.ok()) return all(method.status());
  if (method->kind != Method::kNccl) {
    return all(absl::FailedPreconditionError(absl::StrCat(
        candidate.impl,
        " needs all ranks on one daemon (its kernels read and write the peers' GPU memory "
        "directly); only NCCL candidates run across daemons")));
  }
  if (n == 0 || n > static_cast<int>(gpus_.size())) {
    return all(absl::InvalidArgumentError(absl::StrCat(
        "local_ranks: ", n, " ranks here, but this node has ", gpus_.size(), " GPUs")));
  }
  const absl::Status placed = CheckPlacement(options, n, static_cast<int>(gpus_.size()));
  if (!placed.ok()) return all(placed);
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) {
    const int r = local_ranks[i];
    if (r < 0 || r >= problem.world_size || (i > 0 && r <= local_ranks[i - 1])) {
      return all(absl::InvalidArgumentError(absl::StrCat(
          "local_ranks: rank ", r, " is outside [0, ", problem.world_size,
          ") or not ascending")));
    }
    devices.push_back(DeviceOf(options, i));
  }
  if (restart_required_) {
    return all(absl::UnavailableError(
        "the GPU worker must restart: a kernel or call of an earlier run is still running"));
  }
  absl::StatusOr<const NcclComms*> comms =
      CrossComms(problem, local_ranks, devices, token, deadline);
  if (!comms.ok()) return all(comms.status());
  return Execute(problem, candidate, *method, options, deadline, local_ranks, devices, true);
}

std::vector<RankOutcome> CudaGpuNode::Execute(const ProblemSpec& problem,
                                              const CandidateSpec& candidate, const Method method,
                                              const ScheduleOptions& options,
                                              absl::Time deadline,
                                              const std::vector<int>& ranks,
                                              const std::vector<int>& devices, bool cross) {
  const int n = static_cast<int>(ranks.size());
  if (restart_required_) {
    return std::vector<RankOutcome>(
        n, RankOutcome{absl::UnavailableError(
                           "the GPU worker must restart: a kernel or call of an "
                           "earlier run is still running"),
                       {}});
  }
  absl::StatusOr<std::unique_ptr<RunState>> prepared =
      PrepareRun(problem, candidate, method, options, deadline, ranks, devices, cross);
  if (!prepared.ok()) {
    return std::vector<RankOutcome>(n, RankOutcome{prepared.status(), {}});
  }
  std::unique_ptr<RunState> st = std::move(*prepared);
  std::vector<std::thread> threads = StartRanks(st.get(), ranks, devices, options);
  RanksEnd end = AwaitRanks(*st, method, deadline, n, devices, cross);
  std::vector<RankOutcome> outcomes = CollectOutcomes(*st, ranks, end.stuck_in_call);
  ResetAfterFailure(*st, outcomes, method, devices, cross, &end);
  // Before the buffers are freed (cudaFree would wait for a running kernel).
  if (!end.joined || !DrainStreams(devices, absl::Now() + kDrainTimeout)) {
    // Nothing of this run may be freed under a kernel or a thread that
    // still uses it; the worker exits after its reply.
    restart_required_ = true;
    for (std::thread& t : threads) t.detach();
    st.release();
    AppendToFailures(outcomes,
                     "; a kernel is still running and cannot be stopped: the GPU worker "
                     "must restart");
    return outcomes;
  }
  for (std::thread& t : threads) t.join();
  if (end.aborted) {
    AppendToFailures(outcomes, " (NCCL communicators aborted; new ones for the next run)");
  }
  return outcomes;
}

absl::StatusOr<std::unique_ptr<RunState>> CudaGpuNode::PrepareRun(
    const ProblemSpec& problem, const CandidateSpec& candidate, const Method method,
    const ScheduleOptions& options, absl::Time deadline, const std::vector<int>& ranks,
    const std::vector<int>& devices, bool cross) {
  const int n = static_cast<int>(ranks.size());
  auto st = std::make_unique<RunState>(problem.world_size, n, deadline);
  absl::StatusOr<std::vector<RankBuffers>> buffers =
      AllocateBuffers(problem, ranks, devices, cross);
  absl::StatusOr<std::unique_ptr<CollectiveLauncher>> launcher;
  if (!buffers.ok()) {
    launcher = buffers.status();
  } else if (cross) {
    launcher = CrossLauncher(problem, candidate, method, *buffers, deadline);
  } else {
    launcher = Prepare(problem, candidate, method, *buffers, devices, deadline);
  }
  if (!launcher.ok()) return launcher.status();
  st->buffers = std::move(*buffers);
  st->launcher = std::move(*launcher);
  st->shared.problem = problem;
  st->shared.launcher = st->launcher.get();
  st->shared.barrier = &st->barrier;
  st->shared.cuda_graph = options.cuda_graph;
  st->shared.deadline = deadline;
  st->shared.cross_daemon = cross;
  st->running = n;
  return st;
}

absl::StatusOr<std::unique_ptr<CollectiveLauncher>> CudaGpuNode::CrossLauncher(
    const ProblemSpec& problem, const CandidateSpec& candidate, const Method method,
    const std::vector<RankBuffers>& buffers, absl::Time deadline) {
  CollectiveLauncher::Resources res;
  res.deadline = deadline;
  for (const RankBuffers& b : buffers) {
    res.inputs.push_back(b.input.get());
    res.outputs.push_back(b.output.get());
  }
  res.comms = cross_comms_.get();
  return CollectiveLauncher::Create(problem, candidate, method, std::move(res));
}

std::vector<std::thread> CudaGpuNode::StartRanks(RunState* const state,
                                                 const std::vector<int>& ranks,
                                                 const std::vector<int>& devices,
                                                 const ScheduleOptions& options) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int r = ranks[i];
    const int d = devices[i];
    threads.emplace_back([this, state, i, r, d, options] {
      RankOutcome outcome;
      outcome.status = CudaToStatus(cudaSetDevice(d), "cudaSetDevice");
      if (outcome.status.ok()) {
        CudaRankRun run(state->shared, r, &gpus_[d], state->buffers[r]);
        outcome = RunRankSchedule(run, options);
      }
      if (!outcome.status.ok()) {
        // Peers waiting at a barrier stop now rather than at the deadline.
        state->barrier.Abort(absl::AbortedError(
            absl::StrCat("rank ", r, " failed: ", outcome.status.ToString())));
      }
      absl::MutexLock lock(&state->mu);
      state->outcomes[i] = std::move(outcome);
      state->finished[i] = true;
      --state->running;
    });
  }
  return threads;
}

CudaGpuNode::RanksEnd CudaGpuNode::AwaitRanks(RunState& state, const Method method,
                                              absl::Time deadline, int n,
                                              const std::vector<int>& devices, bool cross) {
  // Every wait of a rank thread ends at the deadline; a thread still busy
  // well after it is stuck inside an NCCL call (a blocking communicator
  // waiting for a peer that never calls): aborting the communicators from
  // here releases it.
  RanksEnd end;
  end.stuck_in_call.assign(n, false);
  end.joined = WaitForRanks(state, deadline + kStuckGrace);
  if (!end.joined && method.nccl()) {
    {
      absl::MutexLock lock(&state.mu);
      end.stuck_in_call = state.finished;
      end.stuck_in_call.flip();
    }
    AbortRunComms(devices, cross);
    end.aborted = true;
    end.joined = WaitForRanks(state, absl::Now() + kDrainTimeout);
  }
  return end;
}

void CudaGpuNode::ResetAfterFailure(RunState& state, const std::vector<RankOutcome>& outcomes,
                                    const Method method, const std::vector<int>& devices,
                                    bool cross, RanksEnd* end) {
  bool failed = false;
  for (const RankOutcome& o : outcomes) failed = failed || !o.status.ok();
  P2pGroup* group = state.launcher->p2p_group();
  if (failed && group != nullptr) group->MarkDirty();
  // A failed NCCL run may leave a rank's kernel waiting for peers that will
  // never launch theirs, and the ranks' sequences out of step: abort.
  if (end->joined && failed && method.nccl() &&
      (cross ? cross_comms_ != nullptr : comms_.count(devices) > 0)) {
    AbortRunComms(devices, cross);
    end->aborted = true;
  }
}

void CudaGpuNode::AbortRunComms(const std::vector<int>& devices, bool cross) {
  if (!cross) {
    AbortComms(devices);
    return;
  }
  if (cross_comms_ == nullptr) return;
  cross_comms_->Abort();
  cross_comms_.reset();
  spent_token_ = cross_token_;
  ++nccl_aborts_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuNode>> CreateCudaGpuNode(const GpuNodeOptions& options) {
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
