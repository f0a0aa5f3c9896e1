// The cuda backend as the daemon sees it: a supervisor of the GPU worker
// process (gpu_worker.h). The daemon itself never touches CUDA; every run is
// a request to the worker with a deadline. The worker bounds its own waits by
// that deadline (gpu_node.h): an NCCL candidate that overruns is cut off,
// its communicators aborted and rebuilt, and the worker keeps serving; a P2P
// kernel that never finishes makes the worker answer restart_required and
// exit, and the supervisor starts a fresh one for the next run. As the last
// resort, a worker that does not answer by the deadline plus `grace` is
// killed with SIGKILL, every rank of that run reports DEADLINE_EXCEEDED, and
// a fresh worker is started for the next run. A worker that dies on its own
// is restarted the same way.
//
// Thread-safety: as Backend; RunCandidate calls are serialized internally.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned::cuda {

class Hello;       // worker.proto
class RunRequest;  // worker.proto

struct CudaBackendOptions {
  // The worker's command line, e.g. {"/proc/self/exe", "--gpu_worker"}.
  std::vector<std::string> worker_argv;
  bool test_faults = false;  // adds all_reduce/hang_test to the catalogue
  // How long a starting worker may take to report its GPUs.
  absl::Duration start_timeout = absl::Seconds(60);
  // After a run's deadline, how long the worker may take to report: enough
  // for it to abort NCCL communicators and drain its streams (about 1 s).
  absl::Duration grace = absl::Seconds(5);
};

class CudaBackend : public Backend {
 public:
  // Starts the worker and waits for its Hello. NOT_FOUND when it finds no
  // GPU; UNAVAILABLE when it cannot be started or does not answer. Sets
  // SIGPIPE to be ignored in this process (a dead worker's pipe gives EPIPE).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(CudaBackendOptions options);
  ~CudaBackend() override;

  const NodeDescription& node() const override { return node_; }
  const Catalogue& catalogue() const override { return catalogue_; }
  int max_world_size() const override { return static_cast<int>(node_.gpus.size()); }
  // CudaMemoryNeed (cuda_memory.h): the most one rank allocates on its GPU.
  // The free memory is what the worker's Hello reported per GPU
  // (cudaMemGetInfo when it started; the smallest GPU's counts).
  int64_t MemoryNeed(const ProblemSpec& problem, const CandidateSpec& candidate) const override;
  std::vector<RankOutcome> RunCandidate(const ProblemSpec& problem,
                                        const CandidateSpec& candidate,
                                        const ScheduleOptions& options,
                                        absl::Time deadline) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // A fresh ncclGetUniqueId from the worker (which stays alive as NCCL's
  // bootstrap root); empty when the worker cannot give one (logged).
  std::string CrossRunToken() override ABSL_LOCKS_EXCLUDED(mu_);
  // The local ranks of a group spread over daemons, on the local GPUs of
  // options.devices (by default 0, 1, ... in local rank order), connected to
  // the other daemons' ranks by NCCL communicators made from part.backend_token
  // (GpuNode::RunPartial). NCCL candidates only: the P2P kernels answer
  // FAILED_PRECONDITION ("... needs all ranks on one daemon"). Any failed local
  // rank aborts part.transport with its status. A failure of another daemon is
  // seen here when NCCL reports the lost peer, at the latest at the deadline
  // (the watchdog).
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options, const PartialRun& part,
                                      absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);

  // How many workers were started (1 + restarts), for tests and metrics.
  int workers_started() const ABSL_LOCKS_EXCLUDED(mu_);

  // What the worker reported holding after its last run; 0 once it has been
  // idle for kIdleRelease (it frees that memory then) or was replaced.
  // Does not wait for a run in progress (it answers the last report).
  int64_t gpu_memory_held_bytes() const override ABSL_LOCKS_EXCLUDED(held_mu_);
  // Counted where a worker is replaced (KillWorker of a started one) and
  // where a reply reports new NCCL aborts; neither waits for a run.
  int64_t worker_restarts() const override { return restarts_.load(); }
  int64_t nccl_aborts() const override { return nccl_aborts_total_.load(); }

 private:
  explicit CudaBackend(CudaBackendOptions options);
  // Starts a worker and reads its Hello into `hello`.
  absl::Status StartWorker(Hello* hello) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // KillWorker of a worker that was serving, counted as a restart (the next
  // run starts a fresh one).
  void ReplaceWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a worker when none runs.
  absl::Status EnsureWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` (a run of `impl` on n ranks) and reads its reply by
  // deadline + grace; kills and replaces a worker that does not answer.
  std::vector<RankOutcome> Ask(const RunRequest& request, int n, const std::string& impl,
                               absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CudaBackendOptions options_;
  NodeDescription node_;  // constant after Create
  Catalogue catalogue_;   // constant after Create

  mutable absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;
  int request_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int reply_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int nccl_aborts_seen_ ABSL_GUARDED_BY(mu_) = 0;  // the current worker's count
  std::atomic<int64_t> restarts_{0};            // workers killed while running
  std::atomic<int64_t> nccl_aborts_total_{0};   // over every worker

  // Apart from mu_, which a run holds for its whole length.
  mutable absl::Mutex held_mu_;
  int64_t held_bytes_ ABSL_GUARDED_BY(held_mu_) = 0;
  absl::Time held_since_ ABSL_GUARDED_BY(held_mu_);  // the last reply
};

}  // namespace autotuned::cuda
