// The Backend defaults every backend inherits.
#include "daemon/backend/backend.h"

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

class Minimal : public Backend {
 public:
  Minimal() { node_.backend = "minimal"; }
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

}  // namespace
}  // namespace autotuned
