// RankRun for the cuda backend: one rank (GPU r) of a GpuNode run, driven by
// RunRankSchedule (daemon/measure/backend/schedule.h) on its own thread.
//
// RunAndVerify fills the rank's input with the pattern (LaunchFillPattern),
// sets every output byte to 0xff (NaN in fp32, bf16 and fp16), launches the
// collective once and checks every output element (an in-place candidate's:
// its input, left with the pattern; the timed launches then keep reducing
// into it, values that grow without changing the time): on the device
// (LaunchCheckPattern) for the regular collectives, on the host for
// all_to_all (the split matrix decides where each segment comes from).
// Barrier waits for the rank's stream, then for the other ranks (RunBarrier:
// the run's deadline bounds it; across daemons, a 1-element NCCL all-reduce
// over the whole group, whose completion is waited for as any kernel's).
// Every wait on the stream polls it (poll_wait.h) until the run's deadline,
// never blocking in cudaStreamSynchronize: a kernel that overruns makes the
// rank fail with DEADLINE_EXCEEDED on time, and the GPU node then decides
// whether the worker can recover (cuda_gpu_node.h). For NCCL the wait also
// watches the communicator's asynchronous error.
// Run, eager: each timed iteration is GraphCalls(problem) launches (schedule.h)
// back to back between two CUDA events on the rank's stream, reported as
// its time divided by the calls, all behind a spin kernel so that the first
// event does not wait for the other ranks' threads. Run, CUDA graph
// (timed calls only; warmup stays eager): GraphCalls(problem) launches
// (schedule.h, the same on every rank) are captured as a graph on the
// rank's stream, all ranks instantiate it, replay it once untimed and meet
// at the barrier; then, behind a spin kernel, each timed iteration is one
// replay between two events, reported as the replay's time divided by the
// calls in the graph: as the clients' rank runs time the caller's
// candidates (docs/gpu.md#timing). The timed replays, the spin and the
// events go to the GPU's legacy default stream (cudaStreamLegacy), where a
// PyTorch rank's graph.replay() goes unless the caller set another stream:
// NCCL's graph-mixing support costs a graph replayed there more than one
// replayed on a non-blocking stream (docs/gpu.md#timing).
// For P2P kernels, each synchronization is followed by a look at the rank's
// signal error word: a kernel that gave up at its spin limit is reported as
// ABORTED naming the peer it waited for, even in untimed steps.
//
// Thread-safety: used only from its rank's thread, with that GPU current.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/backend/cuda/worker/collective_launcher.h"
#include "daemon/measure/backend/cuda/worker/cuda_handles.h"
#include "daemon/measure/backend/cuda/worker/run_barrier.h"

namespace autotuned::cuda {

// What a GPU keeps between runs: its stream and timing events.
struct GpuContext {
  int device = 0;
  CudaStream stream;
  std::vector<CudaEvent> events;  // grown on demand by the rank's thread
};

// One rank's buffers for one run.
struct RankBuffers {
  DeviceBuffer input;   // problem.InputCount(rank) elements
  DeviceBuffer output;  // problem.OutputCount(rank) elements
  DeviceBuffer check;   // LaunchCheckPattern's mismatch count and first index
  DeviceBuffer barrier;  // cross-daemon runs: the barrier's 1-element all-reduce
};

// Everything the ranks of one run share (read-only but for the barrier).
struct RunShared {
  ProblemSpec problem;
  const CollectiveLauncher* launcher = nullptr;
  RunBarrier* barrier = nullptr;
  bool cuda_graph = false;
  absl::Time deadline = absl::InfiniteFuture();  // bounds every wait
  // The group's other ranks run in other processes (GpuNode::RunPartial):
  // the barrier between ranks is a 1-element ncclAllReduce over the whole
  // group on the device, waited for like any collective, instead of
  // `barrier` (which then only carries the abort of a local rank).
  bool cross_daemon = false;
};

class CudaRankRun : public RankRun {
 public:
  CudaRankRun(const RunShared& shared, int rank, GpuContext* gpu,
              const RankBuffers& buffers);

  int rank() const override { return rank_; }
  absl::Status RunAndVerify() override;
  absl::Status Barrier() override;
  absl::Status Run(int iterations, std::vector<double>* iteration_us) override;

 private:
  absl::Status Check();
  absl::Status CheckOnDevice();
  absl::Status CheckOnHost();
  // Waits for the stream (bounded), then reads the P2P error word (if P2P).
  absl::Status Sync();
  // Waits until `stream` (by default the rank's) is idle or the run's
  // deadline passes; NCCL: fails early on the communicator's asynchronous
  // error.
  absl::Status WaitStream(cudaStream_t stream);
  absl::Status WaitStream() { return WaitStream(stream_); }
  absl::Status EnsureEvents(size_t n);
  // Every rank of the run reaches this point (RunBarrier, or across daemons
  // the device-side barrier).
  absl::Status WaitForAll();
  absl::Status RunEager(int iterations, std::vector<double>* iteration_us);
  absl::Status RunGraph(int iterations, std::vector<double>* iteration_us);
  // The elapsed time between events i and i + 1 over `calls`, i < iterations.
  absl::Status ElapsedPerCall(int iterations, int calls, std::vector<double>* iteration_us);

  const RunShared& shared_;
  const int rank_;
  GpuContext* const gpu_;
  const RankBuffers& buffers_;
  const cudaStream_t stream_;
};

}  // namespace autotuned::cuda
