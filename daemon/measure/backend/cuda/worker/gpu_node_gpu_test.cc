// GPU test of GpuNode: every implementation of the cuda catalogue (but the
// test fault all_reduce/hang_test) on all visible GPUs, verified on the
// pattern and timed, eagerly and as CUDA graphs. Where there is no GPU,
// CreateCudaGpuNode says NOT_FOUND: the test prints "SKIPPED: no GPU" on
// stderr and passes. The P2P implementations need 2 GPUs; with one, they are
// reported as skipped.
#include "daemon/measure/backend/cuda/worker/cuda_gpu_node.h"
#include "daemon/measure/backend/cuda/worker/nccl_tuner_link.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "daemon/measure/backend/cuda/cuda_catalogue.h"

namespace autotuned::cuda {
namespace {

// A generous spin limit: a kernel waiting this long is a bug, and the run
// fails (ABORTED, naming the peer) instead of hanging the test.
constexpr int64_t kSpinLimit = int64_t{1} << 24;
const int64_t kCounts[] = {1, 1000, 4096 + 3, 1 << 20};

// The node, or nullptr after printing why the test is skipped. Any error but
// NOT_FOUND fails the test.
// The tuner plugin, loaded before the first NCCL communicator as the worker
// does (gpu_worker_main.cc): NCCL looks for a tuner once per process.
const absl::Status& Tuner() {
  static const absl::Status* loaded = new absl::Status(LoadNcclTuner());
  return *loaded;
}

std::unique_ptr<GpuNode> MakeNode(GpuNodeOptions options = {}) {
  Tuner();
  options.spin_limit = kSpinLimit;
  absl::StatusOr<std::unique_ptr<GpuNode>> node = CreateCudaGpuNode(options);
  if (!node.ok() && node.status().code() == absl::StatusCode::kNotFound) {
    std::fprintf(stderr, "SKIPPED: no GPU (%s)\n", node.status().ToString().c_str());
    return nullptr;
  }
  INFO(node.status().ToString());
  REQUIRE(node.ok());
  return std::move(*node);
}

int Gpus(const GpuNode& node) { return static_cast<int>(node.node().gpus.size()); }

ScheduleOptions Schedule(bool cuda_graph = false) {
  ScheduleOptions o;
  o.warmup = 2;
  o.iterations = 5;
  o.cuda_graph = cuda_graph;
  return o;
}

absl::Time Deadline() { return absl::Now() + absl::Seconds(120); }

// The ranks an implementation runs on here: all GPUs, within its limits; 0
// (after saying so) when this node has too few.
int WorldFor(const GpuNode& node, const ImplInfo& impl) {
  const int world = std::min(Gpus(node), impl.max_world_size);
  if (world < impl.min_world_size) {
    std::fprintf(stderr, "SKIPPED: %s needs %d GPUs, found %d\n", impl.name.c_str(),
                 impl.min_world_size, Gpus(node));
    return 0;
  }
  return world;
}

std::string Name(const ProblemSpec& p, const CandidateSpec& c, bool graph) {
  return Describe(p) + " " + Describe(c) + (graph ? " graph" : " eager");
}

// Runs `impl` (defaults filled in, extra params applied) and requires every
// rank to verify and report `iterations` positive samples.
void ExpectRuns(GpuNode& node, const ProblemSpec& problem, const std::string& impl,
                bool graph = false, const std::vector<int>& devices = {}) {
  const Catalogue catalogue = CudaCatalogue(false);
  absl::StatusOr<CandidateSpec> c = catalogue.Canonicalize(problem, {impl, {}}, "test");
  if (!c.ok()) return;  // e.g. an alignment the implementation does not allow
  INFO(Name(problem, *c, graph));
  ScheduleOptions schedule = Schedule(graph);
  schedule.devices = devices;
  const std::vector<RankOutcome> out = node.Run(problem, *c, schedule, Deadline());
  REQUIRE(static_cast<int>(out.size()) == problem.world_size);
  for (size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r << ": " << out[r].status.ToString());
    CHECK(out[r].status.ok());
    CHECK(out[r].iteration_us.size() == 5);
    for (double us : out[r].iteration_us) CHECK(us > 0);
  }
}

ProblemSpec Problem(const ImplInfo& impl, int world, DType dtype, int64_t count) {
  ProblemSpec p;
  p.collective = impl.collective;
  p.dtype = dtype;
  p.count = count;
  p.world_size = world;
  return p;
}

TEST_CASE("ranks run on the GPUs they are placed on", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const int gpus = Gpus(*node);
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* nccl = catalogue.Find("all_reduce/nccl");
  REQUIRE(nccl != nullptr);
  // One rank on the last GPU; a GPU this node does not have is refused.
  ExpectRuns(*node, Problem(*nccl, 1, DType::kBFloat16, 4096), "all_reduce/nccl", false,
             {gpus - 1});
  ScheduleOptions off_node = Schedule();
  off_node.devices = {gpus};
  const std::vector<RankOutcome> refused = node->Run(
      Problem(*nccl, 1, DType::kBFloat16, 4096), {"all_reduce/nccl", {}}, off_node, Deadline());
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].status.code() == absl::StatusCode::kInvalidArgument);
  if (gpus < 2) {
    std::fprintf(stderr, "SKIPPED: placing 2 ranks needs 2 GPUs, found %d\n", gpus);
    return;
  }
  // Every GPU, in reverse order: NCCL and the P2P kernels.
  std::vector<int> reversed;
  for (int d = gpus - 1; d >= 0; --d) reversed.push_back(d);
  for (const char* name : {"all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot",
                           "all_reduce/two_shot_push", "all_reduce/one_shot_push",
                           "all_reduce/push_pipelined", "all_reduce/p2p_ring",
                           "all_reduce/ce_ring", "all_reduce/two_shot_in_place"}) {
    const ImplInfo* impl = catalogue.Find(name);
    REQUIRE(impl != nullptr);
    const int world = std::min(gpus, impl->max_world_size);
    const std::vector<int> devices(reversed.end() - world, reversed.end());
    for (bool graph : {false, true}) {
      ExpectRuns(*node, Problem(*impl, world, DType::kBFloat16, 1 << 20), name, graph,
                 devices);
    }
  }
}

TEST_CASE("communicators and P2P groups of other placements are released and remade",
          "[gpu]") {
  GpuNodeOptions options;
  options.max_comm_sets = 2;
  std::unique_ptr<GpuNode> made = MakeNode(options);
  if (!made) return;
  GpuNode& node = *made;
  if (Gpus(node) < 2) {
    std::fprintf(stderr, "SKIPPED: needs 2 GPUs, found %d\n", Gpus(node));
    return;
  }
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* nccl = catalogue.Find("all_reduce/nccl");
  const ImplInfo* one_shot = catalogue.Find("all_reduce/one_shot");
  REQUIRE(nccl != nullptr);
  REQUIRE(one_shot != nullptr);
  // Three communicator sets through a cap of two, then the first again; P2P
  // groups on GPUs 0,1 and 1,0 replace each other.
  const std::vector<std::vector<int>> placements = {{0, 1}, {1, 0}, {1}, {0, 1}};
  for (const std::vector<int>& devices : placements) {
    const int world = static_cast<int>(devices.size());
    ExpectRuns(node, Problem(*nccl, world, DType::kBFloat16, 4096), "all_reduce/nccl", false,
               devices);
    if (world >= 2) {
      ExpectRuns(node, Problem(*one_shot, world, DType::kBFloat16, 4096), "all_reduce/one_shot",
                 false, devices);
    }
  }
  CHECK(node.held_bytes() > 0);
  CHECK(node.nccl_aborts() == 0);
}

TEST_CASE("the node describes its GPUs", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const NodeDescription& d = node->node();
  const size_t n = d.gpus.size();
  REQUIRE(n >= 1);
  CHECK(d.backend == "cuda");
  for (size_t i = 0; i < n; ++i) {
    CHECK(d.gpus[i].index == static_cast<int>(i));
    CHECK(!d.gpus[i].name.empty());
    CHECK(d.gpus[i].memory_bytes > 0);
    CHECK(d.gpus[i].free_bytes > 0);
    CHECK(d.gpus[i].free_bytes <= d.gpus[i].memory_bytes);
    CHECK(!d.gpus[i].pci_bus_id.empty());
  }
  REQUIRE(d.topology.size() == n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const std::string& link = d.topology[i * n + j];
      if (i == j) {
        CHECK(link == "X");
      } else {
        CHECK((link == "P2P" || link == "SYS"));
      }
    }
  }
  CHECK(!d.driver_version.empty());
  CHECK(!d.cuda_version.empty());
  CHECK(absl::StrContains(d.nccl_version, "."));
  std::fprintf(stderr, "%zu x %s, driver %s, CUDA %s, NCCL %s\n", n, d.gpus[0].name.c_str(),
               d.driver_version.c_str(), d.cuda_version.c_str(), d.nccl_version.c_str());
}

TEST_CASE("every implementation verifies and times", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const Catalogue catalogue = CudaCatalogue(false);
  for (const ImplInfo* impl : catalogue.List()) {
    const int world = WorldFor(*node, *impl);
    if (world == 0) continue;
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (int64_t count : kCounts) {
        ExpectRuns(*node, Problem(*impl, world, dtype, count), impl->name);
      }
    }
    ExpectRuns(*node, Problem(*impl, world, DType::kFloat16, 4096 + 3), impl->name);
    if (!impl->ops.empty()) {
      for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
        ProblemSpec p = Problem(*impl, world, DType::kBFloat16, 1000);
        p.op = op;
        ExpectRuns(*node, p, impl->name);
      }
    }
  }
}

TEST_CASE("broadcast from the last rank", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  ProblemSpec p;
  p.collective = Collective::kBroadcast;
  p.count = 4096 + 3;
  p.world_size = Gpus(*node);
  p.root = p.world_size - 1;
  ExpectRuns(*node, p, "broadcast/nccl");
  const Catalogue catalogue = CudaCatalogue(false);
  for (const char* name : {"broadcast/p2p", "broadcast/push_pipelined"}) {
    const ImplInfo* impl = catalogue.Find(name);
    REQUIRE(impl != nullptr);
    if (WorldFor(*node, *impl) != p.world_size) return;
    for (bool graph : {false, true}) ExpectRuns(*node, p, name, graph);
  }
}

TEST_CASE("cuda graph mode replays the captured iterations", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const Catalogue catalogue = CudaCatalogue(false);
  for (const ImplInfo* impl : catalogue.List()) {
    const int world = WorldFor(*node, *impl);
    if (world == 0) continue;
    ExpectRuns(*node, Problem(*impl, world, DType::kFloat32, 4096 + 3), impl->name, true);
    ExpectRuns(*node, Problem(*impl, world, DType::kBFloat16, 1 << 20), impl->name, true);
    // Eager launches after the replays still agree (P2P sequence numbers).
    ExpectRuns(*node, Problem(*impl, world, DType::kFloat32, 1000), impl->name, false);
  }
}

TEST_CASE("all_to_all with uneven splits", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const int w = Gpus(*node);
  for (bool graph : {false, true}) {
    ProblemSpec p;
    p.collective = Collective::kAllToAll;
    p.dtype = DType::kBFloat16;
    p.world_size = w;
    for (int s = 0; s < w; ++s) {
      for (int d = 0; d < w; ++d) p.split_counts.push_back((s * 7 + d * 3 + 1) % 5 * 517 + d);
    }
    if (w >= 2) p.split_counts[1] = 0;  // rank 0 sends nothing to rank 1
    ExpectRuns(*node, p, "all_to_all/nccl", graph);
    if (w >= 2 && w <= 8) ExpectRuns(*node, p, "all_to_all/p2p", graph);
  }
}

TEST_CASE("all_to_all/p2p runs even and uneven split matrices", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* impl = catalogue.Find("all_to_all/p2p");
  REQUIRE(impl != nullptr);
  const int w = WorldFor(*node, *impl);
  if (w == 0) return;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    ProblemSpec p;
    p.collective = Collective::kAllToAll;
    p.dtype = dtype;
    p.world_size = w;
    p.split_counts.assign(static_cast<size_t>(w) * w, 1000 + 3);  // even
    ExpectRuns(*node, p, impl->name);
    p.split_counts[1] = 7;  // uneven: at_p2p_all_to_all_v
    for (bool graph : {false, true}) ExpectRuns(*node, p, impl->name, graph);
    // Rank 0 sends nothing, the last rank receives nothing, odd lengths
    // (pieces that are not 16-byte aligned alike).
    for (int s = 0; s < w; ++s) {
      for (int d = 0; d < w; ++d) {
        p.split_counts[s * w + d] = s == 0 || d == w - 1 ? 0 : (s * 5 + d * 3) % 7 * 4099 + 1;
      }
    }
    ExpectRuns(*node, p, impl->name);
    // The NCCL candidate alongside, on the same buffers.
    ExpectRuns(*node, p, "all_to_all/nccl");
  }
}

TEST_CASE("a launch shape the kernels reject is ruled out", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* impl = catalogue.Find("all_reduce/one_shot");
  REQUIRE(impl != nullptr);
  const int world = WorldFor(*node, *impl);
  if (world == 0) return;
  const ProblemSpec p = Problem(*impl, world, DType::kFloat32, 1000);
  absl::StatusOr<CandidateSpec> c =
      catalogue.Canonicalize(p, {impl->name, {{"threads", 33}}}, "test");
  REQUIRE(c.ok());  // in the catalogue's range; not a multiple of 32
  const std::vector<RankOutcome> out = node->Run(p, *c, Schedule(), Deadline());
  REQUIRE(static_cast<int>(out.size()) == world);
  for (const RankOutcome& o : out) {
    INFO(o.status.ToString());
    CHECK(o.status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(o.status.message(), "threads 33"));
    CHECK(o.iteration_us.empty());
  }
  // The node keeps serving.
  ExpectRuns(*node, p, impl->name);
}

TEST_CASE("NCCL with its algorithm, protocol and channels forced runs; what it refuses is named",
          "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  INFO(Tuner().ToString());  // from AUTOTUNED_NCCL_TUNER_PLUGIN or beside the test
  REQUIRE(Tuner().ok());
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* impl = catalogue.Find("all_reduce/nccl");
  REQUIRE(impl != nullptr);
  const int world = WorldFor(*node, *impl);
  if (world < 2) return;
  for (bool graph : {false, true}) {
    const ProblemSpec p = Problem(*impl, world, DType::kBFloat16, 1 << 16);
    // ring (2) with ll, ll128, simple; a channel limit alone.
    for (const CandidateSpec& wanted :
         {CandidateSpec{impl->name, {{"algo", 2}, {"proto", 1}}},
          CandidateSpec{impl->name, {{"algo", 2}, {"proto", 2}, {"channels", 2}}},
          CandidateSpec{impl->name, {{"algo", 2}, {"proto", 3}}},
          CandidateSpec{impl->name, {{"channels", 4}}}}) {
      absl::StatusOr<CandidateSpec> c = catalogue.Canonicalize(p, wanted, "test");
      REQUIRE(c.ok());
      INFO(Name(p, *c, graph));
      const std::vector<RankOutcome> out = node->Run(p, *c, Schedule(graph), Deadline());
      for (const RankOutcome& o : out) {
        INFO(o.status.ToString());
        CHECK(o.status.ok());
        CHECK(o.iteration_us.size() == 5);
      }
    }
    // NVLS (5) is off here (no multicast): NCCL does not offer it.
    absl::StatusOr<CandidateSpec> nvls =
        catalogue.Canonicalize(p, {impl->name, {{"algo", 5}, {"proto", 3}}}, "test");
    REQUIRE(nvls.ok());
    for (const RankOutcome& o : node->Run(p, *nvls, Schedule(graph), Deadline())) {
      INFO(o.status.ToString());
      CHECK(o.status.code() == absl::StatusCode::kInvalidArgument);
      CHECK(absl::StrContains(o.status.message(), "does not offer nvls/simple"));
    }
    // NCCL's own choice still runs after a refusal (new communicators).
    ExpectRuns(*node, p, impl->name, graph);
  }
}

TEST_CASE("the P2P buffers held between runs are counted and freed when idle", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const Catalogue catalogue = CudaCatalogue(false);
  const ImplInfo* impl = catalogue.Find("all_reduce/two_shot");
  REQUIRE(impl != nullptr);
  const int world = WorldFor(*node, *impl);
  if (world == 0) return;
  const ProblemSpec p = Problem(*impl, world, DType::kFloat32, 1 << 20);
  ExpectRuns(*node, p, impl->name);
  const int64_t held = node->held_bytes();
  std::fprintf(stderr, "held after a 4 MiB two_shot on %d GPUs: %lld bytes\n", world,
               static_cast<long long>(held));
  CHECK(held >= int64_t{4} << 20);  // at least one GPU's scratch
  node->ReleaseIdle();
  CHECK(node->held_bytes() == 0);
  ExpectRuns(*node, p, impl->name);  // made again on demand
  CHECK(node->held_bytes() == held);
}

TEST_CASE("problems the node cannot run are rejected", "[gpu]") {
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  ProblemSpec p;
  p.count = 1000;
  p.world_size = Gpus(*node) + 1;
  for (const RankOutcome& o : node->Run(p, {"all_reduce/nccl", {}}, Schedule(), Deadline())) {
    CHECK(o.status.code() == absl::StatusCode::kInvalidArgument);
  }
  p.world_size = Gpus(*node);
  for (const char* impl : {"all_reduce/no_such_thing", "all_gather/nccl",
                           "all_reduce/hang_test", "all_reduce/nccl_hang_test"}) {
    INFO(impl);
    for (const RankOutcome& o : node->Run(p, {impl, {}}, Schedule(), Deadline())) {
      CHECK(o.status.code() == absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST_CASE("a partial run connects its ranks through a unique id", "[gpu]") {
  // Every rank of the group on this node, but made the cross-daemon way:
  // ncclCommInitRank from a unique id, the device-side barrier.
  std::unique_ptr<GpuNode> node = MakeNode();
  if (!node) return;
  const int world = Gpus(*node);
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(r);
  absl::StatusOr<std::string> token = node->NewUniqueId();
  INFO(token.status().ToString());
  REQUIRE(token.ok());
  CHECK(token->size() == 128);
  const Catalogue catalogue = CudaCatalogue(false);
  ProblemSpec p;
  p.dtype = DType::kBFloat16;
  p.count = 1 << 19;  // 1 MiB
  p.world_size = world;
  for (bool graph : {false, true}) {
    for (const char* impl : {"all_reduce/nccl", "all_gather/nccl"}) {
      p.collective = absl::StartsWith(impl, "all_gather") ? Collective::kAllGather
                                                          : Collective::kAllReduce;
      absl::StatusOr<CandidateSpec> c = catalogue.Canonicalize(p, {impl, {}}, "test");
      REQUIRE(c.ok());
      INFO(Name(p, *c, graph));
      const std::vector<RankOutcome> out =
          node->RunPartial(p, *c, Schedule(graph), ranks, *token, Deadline());
      REQUIRE(static_cast<int>(out.size()) == world);
      for (const RankOutcome& o : out) {
        INFO(o.status.ToString());
        CHECK(o.status.ok());
        CHECK(o.iteration_us.size() == 5);
      }
      if (!out.empty() && !out[0].iteration_us.empty()) {
        std::fprintf(stderr, "partial %s: rank 0 %.2f us\n", Name(p, *c, graph).c_str(),
                     out[0].iteration_us[0]);
      }
    }
  }
  p.collective = Collective::kAllReduce;
  if (world >= 2) {
    for (const RankOutcome& o :
         node->RunPartial(p, {"all_reduce/one_shot", {}}, Schedule(), ranks, *token,
                          Deadline())) {
      CHECK(o.status.code() == absl::StatusCode::kFailedPrecondition);
      CHECK_THAT(std::string(o.status.message()),
                 Catch::Contains("needs all ranks on one daemon"));
    }
  }
  // A new token (a new round): new communicators replace the old ones.
  absl::StatusOr<std::string> next = node->NewUniqueId();
  REQUIRE(next.ok());
  CHECK(*next != *token);
  for (const RankOutcome& o :
       node->RunPartial(p, {"all_reduce/nccl", {}}, Schedule(), ranks, *next, Deadline())) {
    INFO(o.status.ToString());
    CHECK(o.status.ok());
  }
  // The whole-group path still works beside them.
  for (const RankOutcome& o : node->Run(p, {"all_reduce/nccl", {}}, Schedule(), Deadline())) {
    CHECK(o.status.ok());
  }
}

}  // namespace
}  // namespace autotuned::cuda
