#include "daemon/measure/backend/cuda/worker/cuda_rank_run.h"

#include <algorithm>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"
#include "daemon/measure/backend/cuda/worker/host_check.h"
#include "daemon/measure/backend/cuda/worker/poll_wait.h"
#include "daemon/measure/backend/schedule.h"
#include "common/status_macros.h"
#include "kernels/pattern_kernels.h"

namespace autotuned::cuda {
namespace {

// What LaunchCheckPattern leaves in RankBuffers::check.
struct CheckCounters {
  unsigned long long mismatches;
  long long first_bad;
};
static_assert(sizeof(CheckCounters) == 16, "two 8-byte counters");

// The spin ahead of the timed launches or replays: about 100 us at 2 GHz,
// as the clients' rank runs spin (autotuned/rankrun.py).
constexpr int64_t kSpinCycles = 200000;

}  // namespace

CudaRankRun::CudaRankRun(const RunShared& shared, int rank, GpuContext* gpu,
                         const RankBuffers& buffers)
    : shared_(shared),
      rank_(rank),
      gpu_(gpu),
      buffers_(buffers),
      stream_(gpu->stream.get()) {}

absl::Status CudaRankRun::RunAndVerify() {
  if (!shared_.launcher->Participates(rank_)) return absl::OkStatus();
  const ProblemSpec& p = shared_.problem;
  kernels::FillPatternArgs fill;
  fill.data = buffers_.input.get();
  fill.dtype = p.dtype;
  fill.count = p.InputCount(rank_);
  fill.rank = rank_;
  AT_CUDA_RETURN_IF_ERROR(kernels::LaunchFillPattern(fill, stream_));
  // In place the input is the output: the pattern stays there for the
  // kernel to replace (the check fails wherever the result differs from this
  // rank's input and the kernel left it).
  if (!shared_.launcher->InPlace()) {
    AT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
        buffers_.output.get(), 0xff, static_cast<size_t>(buffers_.output.bytes()), stream_));
  }
  AT_RETURN_IF_ERROR(shared_.launcher->Launch(rank_, stream_));
  return Check();
}

absl::Status CudaRankRun::Check() {
  if (shared_.problem.collective == Collective::kAllToAll) return CheckOnHost();
  return CheckOnDevice();
}

absl::Status CudaRankRun::CheckOnDevice() {
  const ProblemSpec& p = shared_.problem;
  char* counters = static_cast<char*>(buffers_.check.get());
  // mismatches = 0, first_bad = 0x7f7f... (above any index: atomicMin works)
  AT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counters, 0, 8, stream_));
  AT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counters + 8, 0x7f, 8, stream_));
  kernels::CheckPatternArgs check;
  void* const out = shared_.launcher->Output(rank_);
  check.data = out;
  check.dtype = p.dtype;
  check.count = p.OutputCount(rank_);
  check.expect.collective = p.collective;
  check.expect.op = p.op;
  check.expect.world = p.world_size;
  check.expect.rank = rank_;
  check.expect.root = p.root;
  check.expect.count = p.count;
  check.mismatches = reinterpret_cast<unsigned long long*>(counters);
  check.first_bad = reinterpret_cast<long long*>(counters + 8);
  AT_CUDA_RETURN_IF_ERROR(kernels::LaunchCheckPattern(check, stream_));
  // A copy into pageable memory blocks the host until it is done, behind
  // whatever the stream holds: wait for the stream (bounded) first.
  AT_RETURN_IF_ERROR(Sync());
  CheckCounters host = {};
  AT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&host, counters, sizeof(host), cudaMemcpyDeviceToHost, stream_));
  AT_RETURN_IF_ERROR(WaitStream());
  if (host.mismatches == 0) return absl::OkStatus();
  const int64_t first = host.first_bad;
  const int64_t esize = DTypeSize(p.dtype);
  unsigned char element[4] = {};
  AT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(element, static_cast<const char*>(out) + first * esize,
                      static_cast<size_t>(esize), cudaMemcpyDeviceToHost, stream_));
  AT_RETURN_IF_ERROR(WaitStream());
  return MismatchError(first, DecodeElement(p.dtype, element, 0),
                       ExpectedOutput(p, rank_, first),
                       static_cast<int64_t>(host.mismatches), check.count);
}

absl::Status CudaRankRun::CheckOnHost() {
  const int64_t bytes = buffers_.output.bytes();
  std::vector<unsigned char> host(static_cast<size_t>(bytes));
  AT_RETURN_IF_ERROR(Sync());  // before a copy into pageable memory (blocking)
  if (bytes > 0) {
    AT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), buffers_.output.get(),
                                            static_cast<size_t>(bytes),
                                            cudaMemcpyDeviceToHost, stream_));
  }
  AT_RETURN_IF_ERROR(WaitStream());
  return CheckHostOutput(shared_.problem, rank_, host.data());
}

absl::Status CudaRankRun::WaitStream(cudaStream_t stream) {
  const NcclComms* comms = shared_.launcher->nccl_comms();
  return PollUntil(
      [&]() -> absl::StatusOr<bool> {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return true;
        if (q != cudaErrorNotReady) return CudaToStatus(q, "cudaStreamQuery");
        if (comms != nullptr) AT_RETURN_IF_ERROR(comms->AsyncError(rank_));
        return false;
      },
      shared_.deadline, absl::StrCat("rank ", rank_, "'s stream (a kernel)"));
}

absl::Status CudaRankRun::Sync() {
  AT_RETURN_IF_ERROR(WaitStream());
  P2pGroup* group = shared_.launcher->p2p_group();
  if (group == nullptr) return absl::OkStatus();
  return group->CheckError(rank_, shared_.launcher->spin_limit());
}

absl::Status CudaRankRun::Barrier() {
  AT_RETURN_IF_ERROR(WaitStream());
  return WaitForAll();
}

absl::Status CudaRankRun::WaitForAll() {
  if (!shared_.cross_daemon) return shared_.barrier->Wait(rank_);
  const NcclComms* comms = shared_.launcher->nccl_comms();
  if (comms == nullptr || comms->comm(rank_) == nullptr) {
    return absl::InternalError("cross-daemon barrier without an NCCL communicator");
  }
  void* word = buffers_.barrier.get();
  const ncclResult_t r =
      ncclAllReduce(word, word, 1, ncclFloat32, ncclSum, comms->comm(rank_), stream_);
  if (r == ncclInProgress) {
    AT_RETURN_IF_ERROR(comms->WaitReady(rank_, shared_.deadline));
  } else if (r != ncclSuccess) {
    return NcclToStatus(r, "ncclAllReduce (barrier across daemons)", comms->comm(rank_));
  }
  return WaitStream();
}

absl::Status CudaRankRun::EnsureEvents(size_t n) {
  while (gpu_->events.size() < n) {
    AT_ASSIGN_OR_RETURN(CudaEvent event, CudaEvent::Create(gpu_->device));
    gpu_->events.push_back(std::move(event));
  }
  return absl::OkStatus();
}

absl::Status CudaRankRun::Run(int iterations, std::vector<double>* iteration_us) {
  if (!shared_.launcher->Participates(rank_) || iterations <= 0) {
    return absl::OkStatus();
  }
  if (shared_.cuda_graph && iteration_us != nullptr) {
    return RunGraph(iterations, iteration_us);
  }
  return RunEager(iterations, iteration_us);
}

absl::Status CudaRankRun::RunEager(int iterations, std::vector<double>* iteration_us) {
  if (iteration_us == nullptr) {  // warmup
    for (int i = 0; i < iterations; ++i) {
      AT_RETURN_IF_ERROR(shared_.launcher->Launch(rank_, stream_));
    }
    return Sync();
  }
  // Each timed iteration is GraphCalls(problem) launches back to back
  // between two events, the calls a graph replay holds in RunGraph, so that
  // an eager figure and a graph figure are means over as many calls; all of
  // it behind the spin, so that the first event does not wait for the other
  // ranks' threads to reach their loops.
  const int calls = GraphCalls(shared_.problem);
  AT_RETURN_IF_ERROR(EnsureEvents(static_cast<size_t>(iterations) + 1));
  std::vector<CudaEvent>& ev = gpu_->events;
  AT_CUDA_RETURN_IF_ERROR(kernels::LaunchSpin(kSpinCycles, stream_));
  AT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[0].get(), stream_));
  for (int i = 0; i < iterations; ++i) {
    for (int c = 0; c < calls; ++c) {
      AT_RETURN_IF_ERROR(shared_.launcher->Launch(rank_, stream_));
    }
    AT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[i + 1].get(), stream_));
  }
  AT_RETURN_IF_ERROR(Sync());
  return ElapsedPerCall(iterations, calls, iteration_us);
}

absl::Status CudaRankRun::ElapsedPerCall(int iterations, int calls,
                                         std::vector<double>* iteration_us) {
  const std::vector<CudaEvent>& ev = gpu_->events;
  for (int i = 0; i < iterations; ++i) {
    float ms = 0;
    AT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()));
    iteration_us->push_back(1000.0 * ms / calls);
  }
  return absl::OkStatus();
}

absl::Status CudaRankRun::RunGraph(int iterations, std::vector<double>* iteration_us) {
  AT_RETURN_IF_ERROR(EnsureEvents(static_cast<size_t>(iterations) + 1));
  const int calls = GraphCalls(shared_.problem);
  // Thread-local capture: the other ranks' threads keep making CUDA calls.
  AT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  absl::Status launched = absl::OkStatus();
  for (int i = 0; i < calls && launched.ok(); ++i) {
    launched = shared_.launcher->Launch(rank_, stream_);
  }
  // The capture always ends (the stream leaves capture mode) before the
  // graph is instantiated.
  cudaGraph_t graph = nullptr;
  const absl::Status ended =
      CudaToStatus(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  if (!launched.ok() || !ended.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return launched.ok() ? ended : launched;
  }
  AT_ASSIGN_OR_RETURN(GraphExec exec, GraphExec::Instantiate(gpu_->device, graph));
  // Replayed where a PyTorch rank replays (cuda_rank_run.h). The rank's
  // stream is non-blocking, so nothing orders it with the legacy stream:
  // each switch between the two waits for the one left on the host.
  const cudaStream_t replay = cudaStreamLegacy;
  AT_RETURN_IF_ERROR(WaitStream());
  // Every rank holds its graph before any replays (a collective needs all).
  AT_RETURN_IF_ERROR(WaitForAll());
  AT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec.get(), replay));  // untimed: uploads it
  AT_RETURN_IF_ERROR(WaitStream(replay));
  AT_RETURN_IF_ERROR(Sync());
  AT_RETURN_IF_ERROR(WaitForAll());
  // The replays queue behind the spin, so that no event waits on the host's
  // launch of the replay after it.
  AT_CUDA_RETURN_IF_ERROR(kernels::LaunchSpin(kSpinCycles, replay));
  std::vector<CudaEvent>& ev = gpu_->events;
  AT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[0].get(), replay));
  for (int i = 0; i < iterations; ++i) {
    AT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec.get(), replay));
    AT_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev[i + 1].get(), replay));
  }
  AT_RETURN_IF_ERROR(WaitStream(replay));
  AT_RETURN_IF_ERROR(Sync());
  return ElapsedPerCall(iterations, calls, iteration_us);
}

}  // namespace autotuned::cuda
