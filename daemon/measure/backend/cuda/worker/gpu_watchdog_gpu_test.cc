// GPU test of the GpuNode's deadline handling (cuda_gpu_node.h, "Overruns"), with
// the test faults, for blocking and non-blocking NCCL communicators: an NCCL
// all-reduce launched on rank 0 alone overruns its deadline, first on new
// communicators (stuck connecting to its peer, on the host), then on
// connected ones (a kernel waiting for its peer); each time the node aborts
// its communicators, reports DEADLINE_EXCEEDED on time and runs NCCL (eager
// and graph) and a P2P kernel again on new communicators. A P2P kernel that
// never finishes makes the node say restart_required. Where there is no GPU
// (or only one) it prints "SKIPPED: ..." and passes.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "daemon/measure/backend/cuda/cuda_catalogue.h"
#include "daemon/measure/backend/cuda/worker/cuda_gpu_node.h"

namespace autotuned::cuda {
namespace {

std::unique_ptr<GpuNode> MakeNode(bool nccl_nonblocking = false) {
  GpuNodeOptions options;
  options.test_faults = true;
  options.nccl_nonblocking = nccl_nonblocking;
  options.spin_limit = int64_t{1} << 24;
  absl::StatusOr<std::unique_ptr<GpuNode>> node = CreateCudaGpuNode(options);
  if (!node.ok() && node.status().code() == absl::StatusCode::kNotFound) {
    std::fprintf(stderr, "SKIPPED: no GPU (%s)\n", node.status().ToString().c_str());
    return nullptr;
  }
  INFO(node.status().ToString());
  REQUIRE(node.ok());
  if ((*node)->node().gpus.size() < 2) {
    std::fprintf(stderr, "SKIPPED: needs 2 GPUs\n");
    return nullptr;
  }
  return std::move(*node);
}

ProblemSpec AllReduce(int64_t count) {
  ProblemSpec p;
  p.collective = Collective::kAllReduce;
  p.dtype = DType::kFloat32;
  p.count = count;
  p.world_size = 2;
  return p;
}

ScheduleOptions Schedule(bool graph = false) {
  ScheduleOptions o;
  o.warmup = 2;
  o.iterations = 5;
  o.cuda_graph = graph;
  return o;
}

CandidateSpec Canonical(const ProblemSpec& p, const std::string& impl) {
  absl::StatusOr<CandidateSpec> c = CudaCatalogue(true).Canonicalize(p, {impl, {}}, "test");
  INFO(impl << ": " << c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

// Runs `impl`, requires success on both ranks, returns rank 0's median.
double ExpectOk(GpuNode& node, const ProblemSpec& p, const std::string& impl, bool graph) {
  INFO(impl << (graph ? " graph" : " eager"));
  const std::vector<RankOutcome> out =
      node.Run(p, Canonical(p, impl), Schedule(graph), absl::Now() + absl::Seconds(60));
  REQUIRE(out.size() == 2);
  for (const RankOutcome& o : out) {
    INFO(o.status.ToString());
    CHECK(o.status.ok());
    CHECK(o.iteration_us.size() == 5);
  }
  std::vector<double> us = out[0].iteration_us;
  if (us.empty()) return 0;
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

TEST_CASE("an NCCL overrun: abort, DEADLINE_EXCEEDED on time, new communicators", "[gpu]") {
  const bool nonblocking = GENERATE(false, true);
  const char* mode = nonblocking ? "non-blocking" : "blocking";
  INFO(mode << " communicators");
  std::unique_ptr<GpuNode> node = MakeNode(nonblocking);
  if (!node) return;
  const ProblemSpec p = AllReduce(1 << 18);  // 1 MiB of fp32
  // Round 0 on new communicators (rank 0 stuck connecting), round 1 on
  // connected ones (rank 0's kernel waits for its peer).
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    const absl::Time start = absl::Now();
    const std::vector<RankOutcome> hung = node->Run(
        p, Canonical(p, "all_reduce/nccl_hang_test"), Schedule(), start + absl::Seconds(2));
    const absl::Duration took = absl::Now() - start;
    std::fprintf(stderr, "%s: nccl_hang_test round %d answered in %.0f ms: %s\n", mode, round,
                 absl::ToDoubleMilliseconds(took), hung[0].status.ToString().c_str());
    CHECK(took < absl::Seconds(4));  // deadline + abort + drain
    REQUIRE(hung.size() == 2);
    CHECK(hung[0].status.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(absl::StrContains(hung[0].status.message(), "NCCL communicators aborted"));
    CHECK_FALSE(hung[1].status.ok());
    CHECK_FALSE(node->restart_required());
    CHECK(node->nccl_aborts() == round + 1);
    const double eager = ExpectOk(*node, p, "all_reduce/nccl", false);
    const double graph = ExpectOk(*node, p, "all_reduce/nccl", true);
    const double p2p = ExpectOk(*node, p, "all_reduce/one_shot", false);
    std::fprintf(stderr,
                 "%s: after abort %d, 1 MiB fp32 all_reduce median: nccl eager %.1f us, "
                 "nccl graph %.1f us, one_shot %.1f us\n",
                 mode, round + 1, eager, graph, p2p);
  }
}

// Last: it leaves a kernel running, so the node is leaked, never destroyed.
TEST_CASE("a P2P kernel that never finishes: restart_required", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const ProblemSpec p = AllReduce(1000);
  const absl::Time start = absl::Now();
  const std::vector<RankOutcome> hung = node->Run(
      p, Canonical(p, "all_reduce/hang_test"), Schedule(), start + absl::Seconds(2));
  const absl::Duration took = absl::Now() - start;
  std::fprintf(stderr, "hang_test answered in %.0f ms: %s\n", absl::ToDoubleMilliseconds(took),
               hung[0].status.ToString().c_str());
  CHECK(took < absl::Seconds(4));
  REQUIRE(hung.size() == 2);
  CHECK(hung[0].status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StrContains(hung[0].status.message(), "must restart"));
  CHECK(node->restart_required());
  const std::vector<RankOutcome> next = node->Run(
      p, Canonical(p, "all_reduce/nccl"), Schedule(), absl::Now() + absl::Seconds(10));
  CHECK(next[0].status.code() == absl::StatusCode::kUnavailable);
  node.release();  // destroying it would wait for the kernel
  std::fflush(stderr);
}

}  // namespace
}  // namespace autotuned::cuda
