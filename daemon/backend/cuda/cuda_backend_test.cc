// The supervisor of the GPU worker, against a fake worker process that
// speaks the real protocol (fake_gpu_worker_main.cc): hangs are killed at the
// deadline, crashes are survived, and the next run gets a fresh worker.
#include "daemon/backend/cuda/cuda_backend.h"

#include <cstdlib>

#include <catch2/catch.hpp>

namespace autotuned::cuda {
namespace {

std::string FakeWorker() {
  const char* base = std::getenv("TEST_SRCDIR");
  return std::string(base ? base : ".") +
         "/autotuned/daemon/backend/cuda/fake_gpu_worker";
}

CudaBackendOptions Options(std::vector<std::string> extra = {}) {
  CudaBackendOptions o;
  o.worker_argv = {FakeWorker()};
  o.worker_argv.insert(o.worker_argv.end(), extra.begin(), extra.end());
  o.test_faults = true;
  o.start_timeout = absl::Seconds(20);
  o.grace = absl::Milliseconds(200);
  return o;
}

ProblemSpec AllReduce() {
  ProblemSpec p;
  p.count = 1024;
  p.world_size = 2;
  return p;
}

ScheduleOptions Quick() {
  ScheduleOptions s;
  s.warmup = 1;
  s.iterations = 4;
  return s;
}

TEST_CASE("the backend describes the worker's GPUs and catalogue") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  CHECK((*b)->max_world_size() == 2);
  CHECK((*b)->node().gpus[1].name == "fake-gpu");
  CHECK((*b)->catalogue().Find("all_reduce/nccl") != nullptr);
  CHECK((*b)->catalogue().Find("all_reduce/hang_test") != nullptr);
  auto out = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                absl::Now() + absl::Seconds(10));
  REQUIRE(out.size() == 2);
  CHECK(out[1].status.ok());
  CHECK(out[1].iteration_us.size() == 4);
}

TEST_CASE("a worker stuck in a kernel is killed at the deadline and replaced") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  const absl::Time start = absl::Now();
  auto hung = (*b)->RunCandidate(AllReduce(), {"all_reduce/hang_test", {}}, Quick(),
                                 start + absl::Milliseconds(300));
  CHECK(absl::Now() - start < absl::Seconds(5));
  REQUIRE(hung.size() == 2);
  for (const RankOutcome& o : hung) {
    CHECK(o.status.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_THAT(std::string(o.status.message()), Catch::Contains("worker was killed"));
  }
  auto next = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                 absl::Now() + absl::Seconds(10));
  CHECK(next[0].status.ok());
  CHECK((*b)->workers_started() == 2);
}

TEST_CASE("a worker that dies mid-run is reported and replaced") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto died = (*b)->RunCandidate(AllReduce(), {"all_reduce/one_shot", {{"blocks", 13}}},
                                 Quick(), absl::Now() + absl::Seconds(10));
  CHECK(died[0].status.code() == absl::StatusCode::kUnavailable);
  auto next = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                 absl::Now() + absl::Seconds(10));
  CHECK(next[0].status.ok());
}

TEST_CASE("an NCCL overrun is aborted inside the worker, which keeps serving") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  for (int i = 0; i < 2; ++i) {
    auto hung = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl_hang_test", {}}, Quick(),
                                   absl::Now() + absl::Seconds(10));
    REQUIRE(hung.size() == 2);
    CHECK(hung[0].status.code() == absl::StatusCode::kDeadlineExceeded);
    CHECK_THAT(std::string(hung[0].status.message()),
               !Catch::Contains("worker was killed"));
    auto next = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                   absl::Now() + absl::Seconds(10));
    CHECK(next[0].status.ok());
  }
  CHECK((*b)->workers_started() == 1);  // never killed
}

TEST_CASE("a worker that reports a kernel it cannot stop is replaced at once") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  const absl::Time start = absl::Now();
  auto stuck = (*b)->RunCandidate(AllReduce(), {"all_reduce/one_shot", {{"blocks", 17}}},
                                  Quick(), start + absl::Seconds(30));
  CHECK(absl::Now() - start < absl::Seconds(10));  // the reply, not the deadline
  REQUIRE(stuck.size() == 2);
  CHECK(stuck[0].status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(stuck[0].status.message()), Catch::Contains("worker was killed"));
  CHECK(stuck[1].status.code() == absl::StatusCode::kAborted);
  auto next = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                 absl::Now() + absl::Seconds(10));
  CHECK(next[0].status.ok());
  CHECK((*b)->workers_started() == 2);
}

TEST_CASE("the GPU memory the worker holds is reported, and 0 once it is replaced") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  CHECK((*b)->gpu_memory_held_bytes() == 0);
  auto ok = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                               absl::Now() + absl::Seconds(10));
  CHECK(ok[0].status.ok());
  CHECK((*b)->gpu_memory_held_bytes() == (3 << 20));
  (*b)->RunCandidate(AllReduce(), {"all_reduce/one_shot", {{"blocks", 17}}}, Quick(),
                     absl::Now() + absl::Seconds(10));
  CHECK((*b)->gpu_memory_held_bytes() == 0);
}

TEST_CASE("no GPU and no worker are errors, not hangs") {
  auto none = CudaBackend::Create(Options({"--no_gpu"}));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == absl::StatusCode::kNotFound);
  CudaBackendOptions missing = Options();
  missing.worker_argv = {"/nonexistent/autotuned"};
  auto absent = CudaBackend::Create(missing);
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.status().code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace autotuned::cuda
