// A stand-in for the GPU worker process in tests of the supervisor
// (cuda_backend.h) on machines without GPUs: it speaks the real protocol
// (gpu_worker.h) over a fake node of two "GPUs". Behaviour by implementation:
//   all_reduce/hang_test        never answers (a kernel that never finishes)
//   all_reduce/nccl_hang_test   rank 0 DEADLINE_EXCEEDED, its NCCL
//                               communicators aborted; the worker serves on
//   any candidate with blocks=13 the process dies mid-run (exit 3)
//   any candidate with blocks=17 rank 0 DEADLINE_EXCEEDED with a kernel that
//                               cannot be stopped: restart_required, then exit
//   anything else               every rank OK, each iteration 10 us; the
//                               node then holds 3 MiB (held_bytes)
// Cross-daemon runs: a unique id is "fake-nccl-id-N" padded with zeros to 128
// bytes (N counts the requests); a partial run refuses a candidate that is
// not "<collective>/nccl" with FAILED_PRECONDITION (needs all ranks on one
// daemon), a token that is not 128 bytes with INVALID_ARGUMENT, and runs
// anything else as above, each local rank's first iteration_us being its
// global rank number (so that tests see which ranks ran).
// With --no_gpu it reports NOT_FOUND in its Hello. With --eight_80gb the
// node is eight GPUs of 80 GB (as an 8 x H100 host), each with 79 GB free
// at start; otherwise two of 1 GiB, the free memory not reported.
#include <unistd.h>

#include <cstring>
#include <string>

#include "daemon/measure/backend/cuda/gpu_worker.h"

namespace autotuned::cuda {
namespace {

class FakeGpuNode : public GpuNode {
 public:
  explicit FakeGpuNode(bool eight_80gb) {
    node_.backend = "cuda";
    const int gpus = eight_80gb ? 8 : 2;
    for (int i = 0; i < gpus; ++i) {
      if (eight_80gb) {
        node_.gpus.push_back({i, "fake-gpu-80gb", int64_t{80} * 1000 * 1000 * 1000, "",
                              int64_t{79} * 1000 * 1000 * 1000});
      } else {
        node_.gpus.push_back({i, "fake-gpu", 1 << 30, ""});
      }
    }
    for (int i = 0; i < gpus; ++i) {
      for (int j = 0; j < gpus; ++j) node_.topology.push_back(i == j ? "X" : "P2P");
    }
    node_.driver_version = "fake";
  }
  const NodeDescription& node() const override { return node_; }
  bool restart_required() const override { return restart_required_; }
  int nccl_aborts() const override { return nccl_aborts_; }
  int64_t held_bytes() const override { return held_; }
  void ReleaseIdle() override { held_ = 0; }
  absl::StatusOr<std::string> NewUniqueId() override {
    std::string id = "fake-nccl-id-" + std::to_string(++ids_);
    id.resize(128, '\0');
    return id;
  }
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options,
                                      const std::vector<int>& local_ranks,
                                      const std::string& token, absl::Time deadline) override {
    const size_t n = local_ranks.size();
    const std::string suffix = "/nccl";
    const bool nccl = candidate.impl.size() > suffix.size() &&
                      candidate.impl.compare(candidate.impl.size() - suffix.size(),
                                             suffix.size(), suffix) == 0;
    if (!nccl) {
      return std::vector<RankOutcome>(
          n, RankOutcome{absl::FailedPreconditionError(
                             candidate.impl + " needs all ranks on one daemon"),
                         {}});
    }
    if (token.size() != 128) {
      return std::vector<RankOutcome>(
          n, RankOutcome{absl::InvalidArgumentError("not an NCCL unique id"), {}});
    }
    ProblemSpec local = problem;
    local.world_size = static_cast<int>(n);
    std::vector<RankOutcome> out = Run(local, candidate, options, deadline);
    for (size_t i = 0; i < n && i < out.size(); ++i) {
      if (!out[i].iteration_us.empty()) out[i].iteration_us[0] = local_ranks[i];
    }
    return out;
  }
  std::vector<RankOutcome> Run(const ProblemSpec& problem,
                               const CandidateSpec& candidate,
                               const ScheduleOptions& options, absl::Time) override {
    if (candidate.impl == "all_reduce/hang_test") {
      while (true) pause();
    }
    if (candidate.Param("blocks", 0) == 13) _exit(3);
    std::vector<RankOutcome> out(problem.world_size);
    if (candidate.impl == "all_reduce/nccl_hang_test" || candidate.Param("blocks", 0) == 17) {
      out[0].status = absl::DeadlineExceededError(
          "cut off at the timeout: rank 0's stream (a kernel) did not finish by the deadline");
      for (size_t r = 1; r < out.size(); ++r) out[r].status = absl::AbortedError("rank 0 failed");
      if (candidate.impl == "all_reduce/nccl_hang_test") {
        ++nccl_aborts_;
      } else {
        restart_required_ = true;
      }
      return out;
    }
    for (RankOutcome& o : out) o.iteration_us.assign(options.iterations, 10.0);
    held_ = 3 << 20;
    return out;
  }

 private:
  NodeDescription node_;
  bool restart_required_ = false;
  int nccl_aborts_ = 0;
  int64_t held_ = 0;
  int ids_ = 0;
};

}  // namespace
}  // namespace autotuned::cuda

int main(int argc, char** argv) {
  const bool no_gpu = argc > 1 && strcmp(argv[1], "--no_gpu") == 0;
  const bool eight_80gb = argc > 1 && strcmp(argv[1], "--eight_80gb") == 0;
  return autotuned::cuda::ServeGpuWorker(
      [&]() -> absl::StatusOr<std::unique_ptr<autotuned::cuda::GpuNode>> {
        if (no_gpu) return absl::NotFoundError("no CUDA device (fake)");
        return std::make_unique<autotuned::cuda::FakeGpuNode>(eight_80gb);
      });
}
