// The supervisor of the GPU worker, against a fake worker process that
// speaks the real protocol (fake_gpu_worker_main.cc): hangs are killed at the
// deadline, crashes are survived, and the next run gets a fresh worker.
#include "daemon/measure/backend/cuda/cuda_backend.h"

#include <memory>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/measure/backend/cuda/cuda_catalogue.h"

#include <catch2/catch.hpp>

namespace autotuned::cuda {
namespace {

std::string FakeWorker() {
  const char* base = std::getenv("TEST_SRCDIR");
  return std::string(base ? base : ".") +
         "/autotuned/daemon/measure/backend/cuda/fake_gpu_worker";
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

// One NCCL all-reduce with a 10 s deadline: OK when the worker, old or new,
// serves again.
absl::Status RunNccl(CudaBackend& b) {
  return b.RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                        absl::Now() + absl::Seconds(10))[0].status;
}

TEST_CASE("the worker's free memory per GPU reaches the memory cap") {
  auto b = CudaBackend::Create(Options({"--eight_80gb"}));
  REQUIRE(b.ok());
  REQUIRE((*b)->max_world_size() == 8);
  const int64_t free = int64_t{79} * 1000 * 1000 * 1000;
  CHECK((*b)->node().gpus[7].free_bytes == free);
  CHECK((*b)->memory_free_bytes() == free);
  CHECK(MemoryCap(**b, int64_t{1} << 40, 0.5) == free / 2);
  // Without a report of free memory, the configured ceiling alone.
  auto two = CudaBackend::Create(Options());
  REQUIRE(two.ok());
  CHECK((*two)->memory_free_bytes() == 0);
  CHECK(MemoryCap(**two, int64_t{1} << 30, 0.5) == int64_t{1} << 30);
  // What the cap is checked against: a rank's buffers on its GPU.
  ProblemSpec p = AllReduce();
  CHECK((*b)->MemoryNeed(p, {"all_reduce/nccl", {}}) == 2 * 1024 * 4 + 32);
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

TEST_CASE("the push one-shot is ruled out for float32, the copy engine takes a chunk") {
  const Catalogue c = CudaCatalogue(false);
  ProblemSpec p = AllReduce();
  p.dtype = DType::kFloat32;
  const absl::Status fp32 = c.Supports(p, "all_reduce/one_shot_push", "problems[0].candidates[1]");
  CHECK(fp32.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fp32.message()),
             Catch::Contains("problems[0].candidates[1].impl: \"all_reduce/one_shot_push\" "
                             "does not support dtype float32"));
  for (DType d : {DType::kBFloat16, DType::kFloat16}) {
    p.dtype = d;
    CHECK(c.Supports(p, "all_reduce/one_shot_push", "f").ok());
  }
  p.dtype = DType::kFloat32;
  absl::StatusOr<CandidateSpec> ce = c.Canonicalize(p, {"all_reduce/copy_engine", {}}, "f");
  REQUIRE(ce.ok());
  CHECK(ce->Param("chunk_kib", 0) == 8192);
  CHECK(ce->Param("blocks", 0) == 64);
  CHECK_FALSE(c.Canonicalize(p, {"all_reduce/copy_engine", {{"chunk_kib", 1}}}, "f").ok());
}

TEST_CASE("the ring's chunk_kib 0 is whole shards; the copy engine beside it leaves a block row") {
  const Catalogue c = CudaCatalogue(false);
  const ProblemSpec p = AllReduce();
  absl::StatusOr<CandidateSpec> ring = c.Canonicalize(p, {"all_reduce/p2p_ring", {}}, "f");
  REQUIRE(ring.ok());
  CHECK(ring->Param("chunk_kib", -1) == 0);
  CHECK(ring->Param("blocks", 0) == 132);
  CHECK(c.Canonicalize(p, {"all_reduce/p2p_ring", {{"chunk_kib", 256}}}, "f").ok());
  absl::StatusOr<CandidateSpec> ce_ring = c.Canonicalize(p, {"all_reduce/ce_ring", {}}, "f");
  REQUIRE(ce_ring.ok());
  CHECK(ce_ring->Param("blocks", 0) == 100);
  CHECK(ce_ring->Param("chunk_kib", 0) == 32768);
  CHECK(c.Canonicalize(p, {"all_reduce/ce_ring", {{"blocks", 131}}}, "f").ok());
  const absl::StatusOr<CandidateSpec> too_many =
      c.Canonicalize(p, {"all_reduce/ce_ring", {{"blocks", 132}}}, "problems[0].candidates[2]");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(too_many.status().message()),
             Catch::Contains("problems[0].candidates[2]") && Catch::Contains("blocks"));
}

TEST_CASE("an uneven all_to_all lists, validates and runs the P2P candidate") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  const Catalogue& c = (*b)->catalogue();
  ProblemSpec p;
  p.collective = Collective::kAllToAll;
  p.dtype = DType::kBFloat16;
  p.world_size = 2;
  p.split_counts = {0, 300, 7, 50};  // rank 0 sends nothing to itself, 300 to rank 1
  const Collective a2a = Collective::kAllToAll;
  std::vector<std::string> names;
  for (const ImplInfo* info : c.List(&a2a)) names.push_back(info->name);
  CHECK(names == std::vector<std::string>{"all_to_all/nccl", "all_to_all/p2p"});
  const ImplInfo* p2p = c.Find("all_to_all/p2p");
  REQUIRE(p2p != nullptr);
  CHECK_THAT(p2p->description, Catch::Contains("uneven"));
  CHECK(c.Supports(p, "all_to_all/p2p", "problems[0].candidates[1]").ok());
  absl::StatusOr<CandidateSpec> cand = c.Canonicalize(p, {"all_to_all/p2p", {}}, "f");
  REQUIRE(cand.ok());
  CHECK(cand->Param("blocks", 0) == 32);
  // The worker gets the matrix and answers every rank.
  auto out = (*b)->RunCandidate(p, *cand, Quick(), absl::Now() + absl::Seconds(10));
  REQUIRE(out.size() == 2);
  for (const RankOutcome& o : out) {
    CHECK(o.status.ok());
    CHECK(o.iteration_us.size() == 4);
  }
  // Rank 1's buffers: 57 elements in, 350 out.
  CHECK((*b)->MemoryNeed(p, {"all_to_all/nccl", {}}) == (57 + 350) * 2 + 32);
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
  CHECK((*b)->worker_restarts() == 1);
  CHECK(RunNccl(**b).ok());
  CHECK((*b)->workers_started() == 2);
}

TEST_CASE("a worker that dies mid-run is reported and replaced") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto died = (*b)->RunCandidate(AllReduce(), {"all_reduce/one_shot", {{"blocks", 13}}},
                                 Quick(), absl::Now() + absl::Seconds(10));
  CHECK(died[0].status.code() == absl::StatusCode::kUnavailable);
  CHECK(RunNccl(**b).ok());
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
    CHECK(RunNccl(**b).ok());
    CHECK((*b)->nccl_aborts() == i + 1);
  }
  CHECK((*b)->workers_started() == 1);  // never killed
  CHECK((*b)->worker_restarts() == 0);
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
  CHECK(RunNccl(**b).ok());
  CHECK((*b)->workers_started() == 2);
  CHECK((*b)->worker_restarts() == 1);
  CHECK((*b)->nccl_aborts() == 0);
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

// Records the aborts of a cross-daemon run; Exchange is never expected.
class RecordingTransport : public RunTransport {
 public:
  absl::StatusOr<std::vector<std::string>> Exchange(int64_t, std::string,
                                                    absl::Time) override {
    return absl::InternalError("unexpected Exchange");
  }
  void Abort(const absl::Status& reason) override {
    absl::MutexLock lock(&mu_);
    aborts_.push_back(reason);
  }
  std::vector<absl::Status> aborts() {
    absl::MutexLock lock(&mu_);
    return aborts_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> aborts_;
};

TEST_CASE("the worker gives a fresh NCCL unique id for each cross-daemon run") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  const std::string first = (*b)->CrossRunToken();
  const std::string second = (*b)->CrossRunToken();
  CHECK(first.size() == 128);
  CHECK(second.size() == 128);
  CHECK(first != second);
  CHECK(first.rfind("fake-nccl-id-", 0) == 0);
  // The worker still serves runs after the id requests.
  auto out = (*b)->RunCandidate(AllReduce(), {"all_reduce/nccl", {}}, Quick(),
                                absl::Now() + absl::Seconds(10));
  CHECK(out[0].status.ok());
  CHECK((*b)->workers_started() == 1);
}

TEST_CASE("a partial run sends the local ranks and the token to the worker") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto transport = std::make_shared<RecordingTransport>();
  PartialRun part;
  part.local_ranks = {1, 3};
  part.transport = transport;
  part.backend_token = (*b)->CrossRunToken();
  ProblemSpec p = AllReduce();
  p.world_size = 4;  // more ranks than this node's 2 GPUs: the others are elsewhere
  auto out = (*b)->RunPartial(p, {"all_reduce/nccl", {}}, Quick(), part,
                              absl::Now() + absl::Seconds(10));
  REQUIRE(out.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(out[i].status.ok());
    REQUIRE(out[i].iteration_us.size() == 4);
    CHECK(out[i].iteration_us[0] == part.local_ranks[i]);  // the fake's marker
  }
  CHECK(transport->aborts().empty());
}

TEST_CASE("a P2P candidate is refused in a partial run, and the other daemons are told") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto transport = std::make_shared<RecordingTransport>();
  PartialRun part;
  part.local_ranks = {0};
  part.transport = transport;
  part.backend_token = (*b)->CrossRunToken();
  auto out = (*b)->RunPartial(AllReduce(), {"all_reduce/one_shot", {}}, Quick(), part,
                              absl::Now() + absl::Seconds(10));
  REQUIRE(out.size() == 1);
  CHECK(out[0].status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(out[0].status.message()),
             Catch::Contains("needs all ranks on one daemon"));
  const std::vector<absl::Status> aborts = transport->aborts();
  REQUIRE(aborts.size() == 1);
  CHECK(aborts[0] == out[0].status);
  CHECK((*b)->workers_started() == 1);
}

TEST_CASE("a partial run without a token or a transport is refused without the worker") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto transport = std::make_shared<RecordingTransport>();
  PartialRun part;
  part.local_ranks = {0};
  part.transport = transport;
  auto out = (*b)->RunPartial(AllReduce(), {"all_reduce/nccl", {}}, Quick(), part,
                              absl::Now() + absl::Seconds(10));
  REQUIRE(out.size() == 1);
  CHECK(out[0].status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(transport->aborts().size() == 1);
  part.transport = nullptr;
  part.backend_token = (*b)->CrossRunToken();
  out = (*b)->RunPartial(AllReduce(), {"all_reduce/nccl", {}}, Quick(), part,
                         absl::Now() + absl::Seconds(10));
  CHECK(out[0].status.code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a worker that dies during a partial run is replaced, and the run aborted") {
  auto b = CudaBackend::Create(Options());
  REQUIRE(b.ok());
  auto transport = std::make_shared<RecordingTransport>();
  PartialRun part;
  part.local_ranks = {1};
  part.transport = transport;
  part.backend_token = (*b)->CrossRunToken();
  auto died = (*b)->RunPartial(AllReduce(), {"all_reduce/nccl", {{"blocks", 13}}}, Quick(),
                               part, absl::Now() + absl::Seconds(10));
  REQUIRE(died.size() == 1);
  CHECK(died[0].status.code() == absl::StatusCode::kUnavailable);
  CHECK(transport->aborts().size() == 1);
  CHECK((*b)->CrossRunToken().size() == 128);  // from a fresh worker
  CHECK((*b)->workers_started() == 2);
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
