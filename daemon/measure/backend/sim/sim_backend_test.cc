#include "daemon/measure/backend/sim/sim_backend.h"

#include <string>
#include <vector>

#include "daemon/measure/backend/sim/test_util.h"

namespace autotuned::sim {
namespace {

using testing::MakeBackend;
using testing::Problem;
using testing::Quick;

TEST_CASE("the node describes the virtual GPUs") {
  auto backend = MakeBackend(3);
  const NodeDescription& node = backend->node();
  CHECK(node.backend == "sim");
  REQUIRE(node.gpus.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(node.gpus[i].index == i);
    CHECK(node.gpus[i].name == "sim-cpu");
    CHECK(node.gpus[i].memory_bytes == 0);
    CHECK(node.gpus[i].pci_bus_id.empty());
  }
  CHECK(node.topology == std::vector<std::string>{"X", "SHM", "SHM",   //
                                                  "SHM", "X", "SHM",   //
                                                  "SHM", "SHM", "X"});
  CHECK(node.driver_version == "n/a");
  CHECK(node.cuda_version == "n/a");
  CHECK(node.nccl_version == "n/a");
  CHECK(backend->max_world_size() == 3);
}

TEST_CASE("a candidate's memory is every rank's buffers together, in float32") {
  auto backend = MakeBackend(4);
  // all_gather of 1000 bfloat16 on 4 ranks: each rank holds 1000 + 4000
  // floats, whatever the dtype.
  ProblemSpec gather = Problem(Collective::kAllGather, 4, 1000);
  gather.dtype = DType::kBFloat16;
  CHECK(backend->MemoryNeed(gather, {"all_gather/direct", {}}) == 4 * 5000 * 4);
  // reduce_scatter/ring adds its scratch on every rank.
  const ProblemSpec scatter = Problem(Collective::kReduceScatter, 4, 1000);
  const int64_t plain = backend->MemoryNeed(scatter, {"reduce_scatter/direct", {}});
  CHECK(plain == 4 * 5000 * 4);
  CHECK(backend->MemoryNeed(scatter, {"reduce_scatter/ring", {}}) > plain);
  // The host's memory is what the cap protects.
  CHECK(backend->memory_free_bytes() > 0);
  CHECK(MemoryCap(*backend, int64_t{1} << 40, 0.5) <= backend->memory_free_bytes() / 2);
}

TEST_CASE("the default config has four GPUs") {
  auto backend = MakeBackend(config::SimConfig());
  CHECK(backend->max_world_size() == 4);
}

TEST_CASE("Create rejects a GPU count outside 1..1024") {
  for (int gpus : {0, -1, 1025}) {
    config::SimConfig c;
    c.set_gpus(gpus);
    auto got = SimBackend::Create(c);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(got.status().message()), Catch::StartsWith("sim.gpus:"));
  }
  config::SimConfig most;
  most.set_gpus(1024);
  CHECK(SimBackend::Create(most).ok());
}

// Sizes matter only if there is a choice to make: every collective offers at
// least two algorithms, each float32-only and reducing ones with every op.
TEST_CASE("the catalogue offers at least two algorithms per collective") {
  auto backend = MakeBackend(4);
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather,
                       Collective::kReduceScatter, Collective::kAllToAll,
                       Collective::kBroadcast}) {
    const std::vector<const ImplInfo*> impls = backend->catalogue().List(&c);
    INFO(CollectiveName(c));
    CHECK(impls.size() >= 2);
    for (const ImplInfo* info : impls) {
      CHECK_THAT(info->name, Catch::StartsWith(std::string(CollectiveName(c)) + "/"));
      CHECK(info->dtypes == std::vector<DType>{DType::kFloat32});
      CHECK(info->min_world_size == 1);
      const bool reducing =
          c == Collective::kAllReduce || c == Collective::kReduceScatter;
      CHECK(info->ops.size() == (reducing ? 3u : 0u));
    }
  }
}

TEST_CASE("runs that cannot start fail on every rank") {
  auto backend = MakeBackend(4);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  auto codes = [&](const ProblemSpec& p, const CandidateSpec& c) {
    std::vector<absl::StatusCode> out;
    for (const RankOutcome& o : backend->RunCandidate(p, c, Quick(), deadline)) {
      out.push_back(o.status.code());
    }
    return out;
  };
  using Codes = std::vector<absl::StatusCode>;
  const auto kNotFound = absl::StatusCode::kNotFound;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const ProblemSpec ar = Problem(Collective::kAllReduce, 3, 10);
  CHECK(codes(ar, {"all_reduce/nope", {}}) == Codes(3, kNotFound));
  CHECK(codes(Problem(Collective::kAllReduce, 5, 10), {"all_reduce/ring", {}}) ==
        Codes(5, kInvalid));  // more ranks than GPUs
  CHECK(codes(ar, {"all_gather/ring", {}}) == Codes(3, kInvalid));
  CHECK(codes(ar, {"all_reduce/ring", {{"chunk_kib", 0}}}) == Codes(3, kInvalid));
  CHECK(codes(ar, {"all_reduce/gather_reduce", {{"root", 3}}}) ==
        Codes(3, kInvalid));
  ProblemSpec bf = ar;
  bf.dtype = DType::kBFloat16;
  CHECK(codes(bf, {"all_reduce/ring", {}}) == Codes(3, kInvalid));
  ProblemSpec a2a = Problem(Collective::kAllToAll, 2, 0);
  a2a.split_counts = {1, 2, 3};
  CHECK(codes(a2a, {"all_to_all/direct", {}}) == Codes(2, kInvalid));
  a2a.split_counts = {1, 2, -3, 4};
  CHECK(codes(a2a, {"all_to_all/direct", {}}) == Codes(2, kInvalid));
  ProblemSpec bc = Problem(Collective::kBroadcast, 2, 5);
  bc.root = 2;
  CHECK(codes(bc, {"broadcast/direct", {}}) == Codes(2, kInvalid));

  // Placement: one device per rank, on this node, none twice.
  auto placed = [&](std::vector<int> devices) {
    ScheduleOptions o = Quick();
    o.devices = std::move(devices);
    return backend->RunCandidate(ar, {"all_reduce/ring", {}}, o, deadline)[0].status;
  };
  CHECK(placed({3, 1, 0}).ok());
  CHECK(placed({0, 1}).message() == "devices: 2 for 3 ranks here");
  CHECK(placed({0, 4, 1}).message() == "devices: device 4 is not on this node (devices 0..3)");
  CHECK(placed({2, 0, 2}).message() == "devices: device 2 is given to two ranks");
}

TEST_CASE("a run whose deadline has passed is cut off at once") {
  auto backend = MakeBackend(4);
  const absl::Time start = absl::Now();
  std::vector<RankOutcome> out = backend->RunCandidate(
      Problem(Collective::kAllReduce, 4, 1000), {"all_reduce/ring", {}},
      Quick(), start - absl::Seconds(1));
  CHECK(absl::Now() - start < SimBackend::kAbortGrace + absl::Seconds(1));
  REQUIRE(out.size() == 4);
  for (const RankOutcome& o : out) {
    INFO(o.status.ToString());
    CHECK((o.status.code() == absl::StatusCode::kDeadlineExceeded ||
           o.status.code() == absl::StatusCode::kAborted));
    CHECK_THAT(std::string(o.status.message()),
               Catch::Contains("cut off at the timeout"));
  }
}

TEST_CASE("timed runs report one sample per iteration, back to back") {
  auto backend = MakeBackend(4);
  ScheduleOptions options;
  options.warmup = 3;
  options.iterations = 25;
  for (const RankOutcome& o : backend->RunCandidate(
           Problem(Collective::kReduceScatter, 4, 4099),
           {"reduce_scatter/ring", {}}, options, absl::Now() + absl::Seconds(20))) {
    REQUIRE(o.status.ok());
    REQUIRE(o.iteration_us.size() == 25);
    for (double us : o.iteration_us) CHECK(us > 0);
  }
}

}  // namespace
}  // namespace autotuned::sim
