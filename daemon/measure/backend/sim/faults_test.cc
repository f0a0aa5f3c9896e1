#include "daemon/measure/backend/sim/faults.h"

#include <string>
#include <vector>

#include "daemon/measure/backend/sim/test_util.h"

namespace autotuned::sim {
namespace {

using testing::MakeBackend;
using testing::Problem;
using testing::Quick;

void AddFault(config::SimConfig* c, const std::string& name,
              const std::string& base, config::Fault::Kind kind, int rank,
              int64_t delay_us = 1000) {
  config::Fault* f = c->add_faults();
  f->set_name(name);
  f->set_base(base);
  f->set_kind(kind);
  f->set_rank(rank);
  f->set_delay_us(delay_us);
}

std::unique_ptr<SimBackend> FaultyBackend() {
  config::SimConfig c;
  c.set_gpus(4);
  AddFault(&c, "all_reduce/hangs", "all_reduce/ring", config::Fault::HANG, 1);
  AddFault(&c, "all_reduce/fails", "all_reduce/one_shot", config::Fault::FAIL, 2);
  AddFault(&c, "all_gather/wrong", "all_gather/ring",
           config::Fault::WRONG_RESULT, 3);
  AddFault(&c, "all_reduce/slow", "all_reduce/two_shot",
           config::Fault::SLOW_RANK, 1, 20000);
  return MakeBackend(c);
}

std::vector<RankOutcome> Run(Backend& b, const std::string& impl,
                             absl::Duration timeout,
                             Collective c = Collective::kAllReduce) {
  return b.RunCandidate(Problem(c, 4, 1000), {impl, {}}, Quick(3),
                        absl::Now() + timeout);
}

TEST_CASE("a fault entry copies its base and says what it does") {
  auto backend = FaultyBackend();
  const ImplInfo* hang = backend->catalogue().Find("all_reduce/hangs");
  const ImplInfo* ring = backend->catalogue().Find("all_reduce/ring");
  REQUIRE(hang != nullptr);
  REQUIRE(ring != nullptr);
  CHECK(hang->collective == ring->collective);
  REQUIRE(hang->params.size() == 1);
  CHECK(hang->params[0].name == "chunk_kib");
  CHECK(hang->ops == ring->ops);
  CHECK_THAT(hang->description,
             Catch::Contains("HANG") && Catch::Contains("all_reduce/ring") &&
                 Catch::Contains("rank 1"));
}

TEST_CASE("HANG is cut off at the deadline and the backend stays usable") {
  auto backend = FaultyBackend();
  const absl::Duration timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  std::vector<RankOutcome> out = Run(*backend, "all_reduce/hangs", timeout);
  const absl::Duration took = absl::Now() - start;
  CHECK(took >= timeout);
  CHECK(took < timeout + SimBackend::kAbortGrace + absl::Seconds(1));
  REQUIRE(out.size() == 4);
  // The hanging rank is cut off; its peers were stopped at a barrier,
  // waiting for it, and say so (ABORTED), so the blame falls on rank 1.
  for (int r = 0; r < 4; ++r) {
    INFO(out[r].status.ToString());
    CHECK(out[r].status.code() == (r == 1 ? absl::StatusCode::kDeadlineExceeded
                                          : absl::StatusCode::kAborted));
    CHECK_THAT(std::string(out[r].status.message()),
               Catch::Contains("cut off at the timeout"));
  }

  out = Run(*backend, "all_reduce/ring", absl::Seconds(20));
  for (const RankOutcome& o : out) {
    INFO(o.status.ToString());
    CHECK(o.status.ok());
    CHECK(o.iteration_us.size() == 3);
  }
}

TEST_CASE("FAIL reports the injected error and releases the peers") {
  auto backend = FaultyBackend();
  const absl::Time start = absl::Now();
  std::vector<RankOutcome> out = Run(*backend, "all_reduce/fails", absl::Seconds(20));
  CHECK(absl::Now() - start < absl::Seconds(10));  // not held to the deadline
  REQUIRE(out.size() == 4);
  CHECK(out[2].status.code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(out[2].status.message()),
             Catch::Contains("injected failure"));
  for (int r : {0, 1, 3}) {
    INFO(out[r].status.ToString());
    CHECK(out[r].status.code() == absl::StatusCode::kAborted);
    CHECK_THAT(std::string(out[r].status.message()),
               Catch::Contains("rank 2 failed"));
  }
}

TEST_CASE("WRONG_RESULT fails verification with DATA_LOSS") {
  auto backend = FaultyBackend();
  std::vector<RankOutcome> out = Run(*backend, "all_gather/wrong",
                                     absl::Seconds(20), Collective::kAllGather);
  REQUIRE(out.size() == 4);
  INFO(out[3].status.ToString());
  CHECK(out[3].status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(out[3].status.message()),
             Catch::Contains("rank 3: output[0]"));
  for (int r : {0, 1, 2}) {
    CHECK(out[r].status.code() == absl::StatusCode::kAborted);
  }
}

TEST_CASE("SLOW_RANK sleeps in every timed iteration of its rank") {
  auto backend = FaultyBackend();
  std::vector<RankOutcome> out = Run(*backend, "all_reduce/slow", absl::Seconds(20));
  REQUIRE(out.size() == 4);
  for (const RankOutcome& o : out) {
    INFO(o.status.ToString());
    REQUIRE(o.status.ok());
    REQUIRE(o.iteration_us.size() == 3);
  }
  for (double us : out[1].iteration_us) CHECK(us >= 20000.0);
}

TEST_CASE("SLOW_RANK with calls: only the first calls of its rank sleep, over every run") {
  config::SimConfig c;
  c.set_gpus(4);
  constexpr int64_t kDelayUs = 200000;
  AddFault(&c, "all_reduce/burst", "all_reduce/ring", config::Fault::SLOW_RANK, 1, kDelayUs);
  c.mutable_faults(0)->set_calls(4);
  auto backend = MakeBackend(c);
  CHECK_THAT(backend->catalogue().Find("all_reduce/burst")->description,
             Catch::Contains("each of its first 4 calls"));
  ScheduleOptions timed_only;
  timed_only.verify = false;
  timed_only.warmup = 0;
  timed_only.iterations = 3;
  // The first run's 3 calls sleep, then the second run's first one only.
  for (int expect_slow : {3, 1}) {
    std::vector<RankOutcome> out = backend->RunCandidate(
        Problem(Collective::kAllReduce, 4, 1000), {"all_reduce/burst", {}}, timed_only,
        absl::Now() + absl::Seconds(20));
    REQUIRE(out.size() == 4);
    REQUIRE(out[1].status.ok());
    REQUIRE(out[1].iteration_us.size() == 3);
    for (int i = 0; i < 3; ++i) {
      INFO("iteration " << i);
      CHECK((out[1].iteration_us[i] >= kDelayUs) == (i < expect_slow));
    }
  }
}

TEST_CASE("a fault on a rank outside the group does nothing") {
  auto backend = FaultyBackend();
  ProblemSpec p = Problem(Collective::kAllReduce, 2, 100);
  for (const RankOutcome& o : backend->RunCandidate(
           p, {"all_reduce/fails", {}}, Quick(), absl::Now() + absl::Seconds(20))) {
    CHECK(o.status.ok());
  }
}

TEST_CASE("bad faults are rejected with the field named") {
  auto err = [](config::SimConfig c) {
    std::vector<Algorithm> algorithms = BuiltinAlgorithms();
    const size_t before = algorithms.size();
    absl::Status s = AddFaults(c, &algorithms);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(algorithms.size() == before);
    // The backend rejects the same configs.
    CHECK(SimBackend::Create(c).status() == s);
    return std::string(s.message());
  };
  const auto kFail = config::Fault::FAIL;
  config::SimConfig c;
  AddFault(&c, "", "all_reduce/ring", kFail, 0);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].name:"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/ring", kFail, 0);
  AddFault(&c, "all_reduce/x", "all_reduce/ring", kFail, 0);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[1].name:") &&
                         Catch::Contains("already"));

  c.Clear();
  AddFault(&c, "all_reduce/ring", "all_reduce/one_shot", kFail, 0);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].name:"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/nope", kFail, 0);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].base:") &&
                         Catch::Contains("all_reduce/nope"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/ring", config::Fault::KIND_UNSPECIFIED, 0);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].kind:"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/ring", kFail, -1);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].rank:"));

  c.Clear();
  c.set_gpus(2);
  AddFault(&c, "all_reduce/x", "all_reduce/ring", kFail, 2);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].rank:"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/ring", config::Fault::SLOW_RANK, 0, -5);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].delay_us:"));

  c.Clear();
  AddFault(&c, "all_reduce/x", "all_reduce/ring", config::Fault::SLOW_RANK, 0);
  c.mutable_faults(0)->set_calls(-1);
  CHECK_THAT(err(c), Catch::StartsWith("sim.faults[0].calls:"));
}

TEST_CASE("a fault may wrap an earlier fault") {
  config::SimConfig c;
  AddFault(&c, "all_reduce/slow", "all_reduce/ring", config::Fault::SLOW_RANK, 0, 10);
  AddFault(&c, "all_reduce/slow_fails", "all_reduce/slow", config::Fault::FAIL, 1);
  std::vector<Algorithm> algorithms = BuiltinAlgorithms();
  REQUIRE(AddFaults(c, &algorithms).ok());
  CHECK(algorithms.back().info.name == "all_reduce/slow_fails");
}

}  // namespace
}  // namespace autotuned::sim
