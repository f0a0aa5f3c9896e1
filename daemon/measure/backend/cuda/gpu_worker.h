// The GPU worker process and its protocol (worker.proto): the daemon never
// creates a CUDA context itself. It starts a worker (its own binary with
// --gpu_worker: worker/gpu_worker_main.h), which owns the GPUs through a
// GpuNode (gpu_node.h), and talks to it over two pipes. A candidate whose
// kernel hangs cannot be cancelled inside a CUDA context; the supervisor
// (cuda_backend.h) kills the worker once the deadline plus a grace period
// has passed and starts a fresh one.
//
// This file holds both ends of the protocol and the worker's serving loop,
// none of which touches CUDA, so that a fake worker can use them.
//
// File descriptors: the worker reads requests from kRequestFd and writes
// replies to kReplyFd; its stdout is redirected to stderr, so that nothing a
// library prints (NCCL_DEBUG writes to stdout) can corrupt the protocol.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/measure/backend/cuda/gpu_node.h"
#include "daemon/measure/backend/cuda/worker.pb.h"

namespace autotuned::cuda {

inline constexpr int kRequestFd = 3;
inline constexpr int kReplyFd = 4;

// A worker with no request for this long frees the GPU memory it holds
// between runs (GpuNode::ReleaseIdle); the supervisor then counts it as 0.
inline constexpr absl::Duration kIdleRelease = absl::Seconds(60);

// Framing: writes / reads one length-prefixed message. Read waits at most
// until `deadline`: DEADLINE_EXCEEDED then; UNAVAILABLE when the peer closed
// the pipe; DATA_LOSS on a malformed frame.
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message);
absl::Status ReadFrame(int fd, absl::Time deadline,
                       google::protobuf::MessageLite* message);

// Conversions between the wire form and the daemon's types.
RunRequest ToRunRequest(const ProblemSpec& problem, const CandidateSpec& candidate,
                        const ScheduleOptions& options, absl::Time deadline);
Hello ToHello(const NodeDescription& node);
NodeDescription FromHello(const Hello& hello);

// The worker's main loop: makes the node (its failure is reported in the
// Hello, then the worker exits 0), then serves RunRequests until the request
// pipe closes. Returns the process exit code. After a reply that says
// restart_required (GpuNode::restart_required) it exits at once (_exit(0)),
// running no destructor, since freeing GPU memory would wait for the stuck
// kernel.
int ServeGpuWorker(const std::function<absl::StatusOr<std::unique_ptr<GpuNode>>()>& make_node,
                   int request_fd = kRequestFd, int reply_fd = kReplyFd,
                   absl::Duration idle_release = kIdleRelease);

}  // namespace autotuned::cuda
