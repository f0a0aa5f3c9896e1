// The GpuNode (../gpu_node.h) of the GPU worker process, on CUDA and NCCL.
//
// Run verifies with the predictable pattern (kernels/pattern.h) on the
// device and times with CUDA events around back-to-back launches
// (cuda_rank_run.h). ScheduleOptions::cuda_graph: a graph of GraphCalls
// (schedule.h) launches is captured per GPU, and each timed iteration is one
// replay, its time divided by the calls (docs/gpu.md#timing). NCCL
// candidates run with the algorithm, protocol and channels their parameters
// force (nccl_tuner_link.h). The deadline bounds every
// wait (streams, NCCL calls and initialization, barriers between rank
// threads).
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
//     supervisor (../cuda_backend.h) starts a fresh one. The supervisor's
//     kill at deadline + grace remains the last resort for anything else.
//
// Per GPU: a worker thread, a stream, timing events; per list of local GPUs
// a group ran on: NCCL communicators (nccl_comms.h; at most max_comm_sets
// lists, the least recently used released first) and a P2P group
// (at_p2p_group_create; at most one per GPU: a group for some GPUs replaces
// the others on any of them) whose scratch grows on demand. Buffers for a
// run are allocated for that run and freed after it, so nothing is held
// between rounds beyond the P2P signal/scratch buffers (held_bytes; freed by
// ReleaseIdle) and the communicators.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/measure/backend/cuda/gpu_node.h"

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

// Discovers the GPUs (names, memory, PCI ids, the P2P/NVLink matrix),
// driver, CUDA and NCCL versions, enables peer access between them and
// makes a stream per GPU. NOT_FOUND when there is no GPU.
absl::StatusOr<std::unique_ptr<GpuNode>> CreateCudaGpuNode(const GpuNodeOptions& options);

}  // namespace autotuned::cuda
