// The Backend defaults every backend inherits.
#include "daemon/measure/backend/backend.h"

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

class Minimal : public Backend {
 public:
  Minimal() { node_.backend = "minimal"; }
  NodeDescription& mutable_node() { return node_; }
  const NodeDescription& node() const override { return node_; }
  const Catalogue& catalogue() const override { return catalogue_; }
  int max_world_size() const override { return 2; }
  std::vector<RankOutcome> RunCandidate(const ProblemSpec&, const CandidateSpec&,
                                        const ScheduleOptions&, absl::Time) override {
    return {};
  }

 private:
  NodeDescription node_;
  Catalogue catalogue_;
};

class Recording : public RunTransport {
 public:
  absl::StatusOr<std::vector<std::string>> Exchange(int64_t, std::string,
                                                    absl::Time) override {
    return std::vector<std::string>();
  }
  void Abort(const absl::Status& reason) override { aborts.push_back(reason); }
  std::vector<absl::Status> aborts;
};

TEST_CASE("a backend that cannot run a group across daemons refuses every local rank and "
          "tells the others") {
  Minimal backend;
  CHECK(backend.CrossRunToken().empty());
  auto recording = std::make_shared<Recording>();
  Recording& transport = *recording;
  PartialRun part;
  part.local_ranks = {2, 3};
  part.transport = recording;
  ProblemSpec problem;
  problem.world_size = 4;
  problem.count = 8;
  std::vector<RankOutcome> out = backend.RunPartial(problem, CandidateSpec{"x", {}},
                                                    ScheduleOptions(), part, absl::Now());
  REQUIRE(out.size() == 2);
  for (const RankOutcome& o : out) {
    CHECK(o.status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(o.status.message()),
               Catch::Contains("minimal backend cannot run a group spread over"));
  }
  REQUIRE(transport.aborts.size() == 1);
  CHECK(transport.aborts[0] == out[0].status);
}

TEST_CASE("the memory cap is the ceiling or the fraction of the smallest GPU's free memory") {
  Minimal b;
  ProblemSpec p;
  p.collective = Collective::kAllGather;
  p.dtype = DType::kBFloat16;
  p.world_size = 4;
  p.count = 1000;
  // By default a candidate needs its largest rank's input and output.
  CHECK(b.MemoryNeed(p, CandidateSpec("all_gather/any")) == (1000 + 4000) * 2);

  // No GPU's free memory known: the configured ceiling alone.
  CHECK(b.memory_free_bytes() == 0);
  CHECK(MemoryCap(b, int64_t{1} << 30, 0.5) == int64_t{1} << 30);
  const int64_t gib = int64_t{1} << 30;
  b.mutable_node().gpus = {{0, "g", 80 * gib, "", 60 * gib}, {1, "g", 80 * gib, "", 70 * gib}};
  CHECK(b.memory_free_bytes() == 60 * gib);
  CHECK(MemoryCap(b, 64 * gib, 0.5) == 30 * gib);
  CHECK(MemoryCap(b, 16 * gib, 0.5) == 16 * gib);
  CHECK(MemoryCap(b, 64 * gib, 1.0) == 60 * gib);
  // One GPU that did not say: unknown, as a whole.
  b.mutable_node().gpus.push_back({2, "g", 80 * gib, "", 0});
  CHECK(b.memory_free_bytes() == 0);
  CHECK(MemoryCap(b, 16 * gib, 0.5) == 16 * gib);
}

}  // namespace
}  // namespace autotuned
