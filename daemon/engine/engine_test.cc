#include "daemon/engine/engine.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "daemon/backend/fake_backend.h"

namespace autotuned {
namespace {

ProblemSpec AllReduce(int world) {
  ProblemSpec p;
  p.count = 1024;
  p.world_size = world;
  return p;
}

EngineOptions Quick() {
  EngineOptions o;
  o.schedule.warmup = 2;
  o.schedule.iterations = 5;
  o.timeout = absl::Seconds(5);
  return o;
}

TEST_CASE("statistics over iterations") {
  Stats s = ComputeStats({4, 1, 3, 2});
  CHECK(s.min_us == 1);
  CHECK(s.max_us == 4);
  CHECK(s.mean_us == Approx(2.5));
  CHECK(s.median_us == Approx(2.5));
  CHECK(s.spread == Approx(3 / 2.5));
  CHECK(ComputeStats({7}).median_us == 7);
  CHECK(std::isinf(ComputeStats({}).mean_us));
}

TEST_CASE("an iteration's time is the slowest rank's") {
  std::vector<RankOutcome> ranks(2);
  ranks[0].iteration_us = {1, 5, 1};
  ranks[1].iteration_us = {2, 2, 2};
  CandidateOutcome o = Summarize(0, {"x", {}}, ranks);
  REQUIRE(o.ok);
  CHECK(o.stats.max_us == 5);
  CHECK(o.stats.min_us == 2);
  CHECK(o.stats.median_us == 2);
  CHECK(o.rank_mean_us == std::vector<double>{7.0 / 3, 2.0});
}

TEST_CASE("RankRanks: the outcomes of every daemon's ranks ranked as on one daemon") {
  std::vector<CandidateSpec> candidates = {{"a", {}}, {"b", {}}, {"c", {}}};
  std::vector<std::vector<RankOutcome>> ranks(3, std::vector<RankOutcome>(4));
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < 4; ++r) ranks[c][r].iteration_us = {10.0 * (c + 1), 10.0 * (c + 1)};
  }
  ranks[0][3].iteration_us = {90, 90};  // a is slow on one remote rank only
  ranks[2][2].status = absl::UnavailableError("daemon d:1 sent no timings");
  std::vector<CandidateOutcome> ranked = RankRanks(candidates, ranks);
  REQUIRE(ranked.size() == 3);
  CHECK(ranked[0].candidate.impl == "b");
  CHECK(ranked[1].candidate.impl == "a");
  CHECK(ranked[1].stats.median_us == 90);
  CHECK(ranked[1].rank_mean_us.size() == 4);
  CHECK_FALSE(ranked[2].ok);
  CHECK(ranked[2].reason == "rank 2: UNAVAILABLE: daemon d:1 sent no timings");
}

TEST_CASE("MeasurePart: every candidate in order on the local ranks, each with its "
          "transport") {
  FakeBackend backend(2, {{"a", {}}, {"b", {}}});
  Engine engine(&backend);
  std::vector<int> asked;
  std::vector<std::vector<RankOutcome>> out = engine.MeasurePart(
      AllReduce(6), {{"a", {}}, {"b", {}}}, Quick(), {2, 3}, "",
      [&asked](int c) -> std::shared_ptr<RunTransport> {
        asked.push_back(c);
        return nullptr;
      });
  CHECK(asked == std::vector<int>{0, 1});
  REQUIRE(out.size() == 2);
  for (const auto& ranks : out) {
    REQUIRE(ranks.size() == 2);
    for (const RankOutcome& r : ranks) {
      CHECK(r.status.ok());
      CHECK(r.iteration_us.size() == 5);
    }
  }
  CHECK(backend.runs() == 2);
}

TEST_CASE("the reason is the rank that failed, not the ranks it aborted") {
  std::vector<RankOutcome> ranks(3);
  ranks[0].status = absl::AbortedError("peer gone");
  ranks[1].status = absl::DataLossError("index 3: got 1, want 2");
  ranks[2].status = absl::AbortedError("peer gone");
  CandidateOutcome o = Summarize(4, {"x", {}}, ranks);
  CHECK_FALSE(o.ok);
  CHECK(o.index == 4);
  CHECK(o.reason == "rank 1: DATA_LOSS: index 3: got 1, want 2");
  CHECK(std::isinf(o.stats.median_us));
}

TEST_CASE("ranking is by median, ties by request order, failures last") {
  auto make = [](int index, bool ok, double median) {
    CandidateOutcome o;
    o.index = index;
    o.ok = ok;
    o.stats.median_us = median;
    return o;
  };
  std::vector<CandidateOutcome> ranked =
      Rank({make(0, false, 0), make(1, true, 9), make(2, true, 3),
            make(3, true, 9), make(4, false, 0), make(5, true, 3)});
  std::vector<int> order;
  for (const auto& o : ranked) order.push_back(o.index);
  CHECK(order == std::vector<int>{2, 5, 1, 3, 0, 4});
  // Pure: the same input gives the same output.
  std::vector<CandidateOutcome> again =
      Rank({make(0, false, 0), make(1, true, 9), make(2, true, 3),
            make(3, true, 9), make(4, false, 0), make(5, true, 3)});
  for (size_t i = 0; i < ranked.size(); ++i) {
    CHECK(again[i].index == ranked[i].index);
  }
}

TEST_CASE("every rank runs verify, barrier, warmup, barrier, timed") {
  FakeBackend backend(4, {{"a", {}}});
  Engine engine(&backend);
  auto ranked = engine.Measure(AllReduce(4), {{"a", {}}}, Quick());
  REQUIRE(ranked.size() == 1);
  CHECK(ranked[0].ok);
  CHECK(ranked[0].iterations == 5);
  CHECK(backend.last_steps() ==
        std::vector<std::string>{"verify", "barrier", "warmup", "barrier", "timed"});
}

TEST_CASE("the engine ranks measured candidates and rules out failures") {
  FakeBackend::Script slow;
  slow.iteration_us = {30.0};
  FakeBackend::Script fast;
  fast.iteration_us = {5.0, 12.0};  // rank 1 and up take 12 us
  FakeBackend::Script broken;
  broken.fail_rank = 2;
  broken.fail_step = "warmup";
  FakeBackend backend(4, {{"slow", slow}, {"fast", fast}, {"broken", broken}});
  Engine engine(&backend);
  auto ranked = engine.Measure(
      AllReduce(4), {{"broken", {}}, {"slow", {}}, {"fast", {}}}, Quick());
  REQUIRE(ranked.size() == 3);
  CHECK(ranked[0].candidate.impl == "fast");
  CHECK(ranked[0].stats.median_us == 12.0);
  CHECK(ranked[1].candidate.impl == "slow");
  CHECK(ranked[2].candidate.impl == "broken");
  CHECK_FALSE(ranked[2].ok);
  CHECK(ranked[2].reason == "rank 2: INTERNAL: warmup: scripted failure");
  CHECK_FALSE(ranked[2].timed_out);
}

TEST_CASE("a candidate its implementation cannot run is ruled out without running") {
  FakeBackend backend(4, {{"fp32_only", {}}});  // the fake's entries are float32 only
  Engine engine(&backend);
  ProblemSpec bf16 = AllReduce(2);
  bf16.dtype = DType::kBFloat16;
  auto ranked = engine.Measure(bf16, {{"fp32_only", {}}}, Quick());
  REQUIRE(ranked.size() == 1);
  CHECK_FALSE(ranked[0].ok);
  CHECK(ranked[0].reason == "candidate.impl: \"fp32_only\" does not support dtype bfloat16");
  CHECK(backend.runs() == 0);
}

TEST_CASE("a hanging candidate is cut off at its timeout") {
  FakeBackend::Script hang;
  hang.fail_rank = 1;
  hang.hang = true;
  FakeBackend backend(2, {{"hang", hang}, {"ok", {}}});
  Engine engine(&backend);
  EngineOptions o = Quick();
  o.timeout = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  auto ranked = engine.Measure(AllReduce(2), {{"hang", {}}, {"ok", {}}}, o);
  CHECK(absl::Now() - start < absl::Seconds(3));
  REQUIRE(ranked.size() == 2);
  CHECK(ranked[0].candidate.impl == "ok");
  CHECK_THAT(ranked[1].reason, Catch::Contains("DEADLINE_EXCEEDED"));
  CHECK(ranked[1].timed_out);
  CHECK_FALSE(ranked[0].timed_out);
}

}  // namespace
}  // namespace autotuned
