#include "daemon/measure/engine/engine.h"

#include <map>
#include <utility>

#include <catch2/catch.hpp>

#include "daemon/measure/backend/fake_backend.h"

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

TEST_CASE("MeasurePart: one block per candidate in request order for 0 or 1 passes, each "
          "with its transport") {
  for (int passes : {0, 1}) {
    FakeBackend backend(2, {{"a", {}}, {"b", {}}});
    Engine engine(&backend);
    std::vector<std::pair<int, int>> asked;
    std::vector<std::vector<RankOutcome>> out = engine.MeasurePart(
        AllReduce(6), {{"a", {}}, {"b", {}}}, Quick(), {2, 3}, "", passes,
        [&asked](int c, int pass) -> std::shared_ptr<RunTransport> {
          asked.emplace_back(c, pass);
          return nullptr;
        });
    CHECK(asked == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}});
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
}

TEST_CASE("MeasurePart: interleaved passes, rotated, sharing the iterations; later passes "
          "without verify") {
  FakeBackend backend(2, {{"a", {}}, {"b", {}}, {"c", {}}});
  Engine engine(&backend);
  std::vector<std::pair<int, int>> asked;
  std::vector<std::vector<RankOutcome>> out = engine.MeasurePart(
      AllReduce(4), {{"a", {}}, {"b", {}}, {"c", {}}}, Quick(), {0, 1}, "", 2,
      [&asked](int c, int pass) -> std::shared_ptr<RunTransport> {
        asked.emplace_back(c, pass);
        return nullptr;
      });
  CHECK(asked ==
        std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}, {1, 1}, {2, 1}, {0, 1}});
  CHECK(backend.runs() == 6);
  CHECK(backend.last_steps() ==
        std::vector<std::string>{"barrier", "warmup", "barrier", "timed"});
  REQUIRE(out.size() == 3);
  for (const auto& ranks : out) {
    REQUIRE(ranks.size() == 2);
    for (const RankOutcome& r : ranks) {
      CHECK(r.status.ok());
      CHECK(r.iteration_us.size() == 5);  // 3 + 2
    }
  }
}

// Records the aborts of one transport.
class AbortLog : public RunTransport {
 public:
  explicit AbortLog(std::vector<std::string>* log) : log_(log) {}
  absl::StatusOr<std::vector<std::string>> Exchange(int64_t, std::string,
                                                    absl::Time) override {
    return std::vector<std::string>();
  }
  void Abort(const absl::Status& reason) override { log_->push_back(reason.ToString()); }

 private:
  std::vector<std::string>* log_;
};

TEST_CASE("MeasurePart: a candidate that failed is not run again; its later passes' "
          "transports are aborted with the failure") {
  FakeBackend::Script fails;
  fails.fail_rank = 1;
  FakeBackend backend(2, {{"a", {}}, {"bad", fails}});
  Engine engine(&backend);
  std::map<std::pair<int, int>, std::vector<std::string>> aborts;
  std::vector<std::vector<RankOutcome>> out = engine.MeasurePart(
      AllReduce(2), {{"a", {}}, {"bad", {}}}, Quick(), {0, 1}, "", 3,
      [&aborts](int c, int pass) -> std::shared_ptr<RunTransport> {
        return std::make_shared<AbortLog>(&aborts[{c, pass}]);
      });
  CHECK(backend.runs() == 3 + 1);
  REQUIRE(out.size() == 2);
  CHECK(out[0][0].iteration_us.size() == 5);
  REQUIRE(out[1].size() == 2);
  CHECK(out[1][1].status.message() == "verify: scripted failure");
  for (int pass : {1, 2}) {
    const std::vector<std::string>& bad = aborts[std::make_pair(1, pass)];
    REQUIRE(bad.size() == 1);
    CHECK(bad[0] == "ABORTED: rank 1 failed in an earlier pass: verify: scripted failure");
    CHECK(aborts[std::make_pair(0, pass)].empty());
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

TEST_CASE("the pass schedule: iterations shared, the order rotated") {
  EngineOptions o = Quick();
  o.schedule.iterations = 20;
  o.passes.min_passes = 3;
  o.passes.max_passes = 5;
  o.passes.iterations = 4;
  CHECK(FixedPasses(o) == 3);
  CHECK(std::vector<int>{PassIterations(o, 0), PassIterations(o, 1), PassIterations(o, 2),
                         PassIterations(o, 3)} == std::vector<int>{7, 7, 6, 4});
  CHECK(PassOrder({0, 2, 5}, 0) == std::vector<int>{0, 2, 5});
  CHECK(PassOrder({0, 2, 5}, 1) == std::vector<int>{2, 5, 0});
  CHECK(PassOrder({0, 2, 5}, 5) == std::vector<int>{5, 0, 2});
  CHECK(PassOrder({}, 3).empty());
  // Fewer iterations than passes: as many passes as iterations.
  o.schedule.iterations = 2;
  CHECK(FixedPasses(o) == 2);
}

TEST_CASE("interleaved passes: rotated; a tie runs to the bound, a clear winner stops at once") {
  FakeBackend::Script fast;
  fast.iteration_us = {9.0};
  FakeBackend::Script slow;
  slow.iteration_us = {50.0};
  FakeBackend backend(2, {{"a", {}}, {"b", {}}, {"c", slow}, {"f", fast}});
  Engine engine(&backend);
  EngineOptions o = Quick();
  o.schedule.iterations = 16;
  o.passes.min_passes = 8;
  o.passes.max_passes = 12;
  o.passes.iterations = 2;
  o.rule.min_speedup = 0;  // a margin would let equal times stop at once
  auto ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"b", {}}, {"c", {}}}, o);
  const std::vector<std::string> order = backend.run_order();
  REQUIRE(order.size() == 8 * 3 + 4 * 2);
  CHECK(std::vector<std::string>(order.begin(), order.begin() + 9) ==
        std::vector<std::string>{"a", "b", "c", "b", "c", "a", "c", "a", "b"});
  // After the eight passes a and b tie (equal in every pass): both run again
  // up to max_passes, b first in pass 9; c, slower in every pass, does not.
  CHECK(std::vector<std::string>(order.begin() + 24, order.begin() + 28) ==
        std::vector<std::string>{"a", "b", "b", "a"});
  REQUIRE(ranked[0].candidate.impl == "a");
  CHECK(ranked[0].passes == 12);
  CHECK(ranked[0].iterations == 16 + 4 * 2);
  CHECK(ranked[2].candidate.impl == "c");
  CHECK(ranked[2].passes == 8);
  CHECK(ranked[2].vs_winner.pairs == 8);
  CHECK(ranked[2].vs_winner.median == Approx(5.0));
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);

  // One candidate alone: one block of the request's iterations.
  int before = backend.runs();
  ranked = engine.Measure(AllReduce(2), {{"a", {}}}, o);
  CHECK(backend.runs() - before == 1);
  CHECK((ranked[0].passes == 1 && ranked[0].iterations == 16));

  // f is faster than a in every pass: it wins after the eight passes.
  o.rule.min_speedup = 0.01;
  before = backend.runs();
  ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"f", {}}}, o);
  CHECK(backend.runs() - before == 16);
  CHECK(ranked[0].candidate.impl == "f");
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
}

TEST_CASE("interleaved passes: contenders again without verify, clear losers not") {
  FakeBackend::Script same;  // a and b take the same time: they tie
  FakeBackend::Script slow;
  slow.iteration_us = {50.0};
  FakeBackend backend(2, {{"a", same}, {"b", same}, {"c", slow}});
  Engine engine(&backend);
  EngineOptions o = Quick();
  o.passes.max_passes = 3;
  o.passes.iterations = 4;
  o.rule.min_speedup = 0;
  auto ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"b", {}}, {"c", {}}}, o);
  REQUIRE(ranked.size() == 3);
  // First pass: a, b, c; then twice a, b (they overlap, c does not).
  CHECK(backend.runs() == 3 + 2 + 2);
  CHECK(backend.last_steps() ==
        std::vector<std::string>{"barrier", "warmup", "barrier", "timed"});
  CHECK(ranked[0].candidate.impl == "a");  // equal estimates: request order
  CHECK(ranked[0].iterations == 5 + 4 + 4);
  CHECK(ranked[0].passes == 3);
  CHECK(ranked[2].candidate.impl == "c");
  CHECK(ranked[2].passes == 1);
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);

  // With a margin that equal times cannot reach, b stops contending at once.
  o.rule.min_speedup = 0.01;
  const int before = backend.runs();
  ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"b", {}}, {"c", {}}}, o);
  CHECK(backend.runs() - before == 3);
  // And no pass takes a candidate past max_iterations.
  o.rule.min_speedup = 0;
  o.passes.max_iterations = 9;
  ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"b", {}}}, o);
  CHECK(ranked[0].iterations == 9);
}

TEST_CASE("interleaved passes: a burst in one pass of the faster candidate makes a tie, which "
          "it still wins") {
  FakeBackend::Script steady;
  FakeBackend::Script burst;  // faster, but 4 us slower in its last pass
  burst.iteration_us = {9.0};
  burst.run_extra_us = {0, 0, 0, 4};
  FakeBackend backend(2, {{"a", steady}, {"b", burst}});
  Engine engine(&backend);
  EngineOptions o = Quick();
  o.schedule.iterations = 40;
  o.passes.min_passes = 4;
  o.passes.max_passes = 4;
  o.rule.min_speedup = 0;
  auto ranked = engine.Measure(AllReduce(2), {{"a", {}}, {"b", {}}}, o);
  REQUIRE(ranked.size() == 2);
  // b's 40 samples alone: x(14)..x(27), all 9 us, below a's 10 us. Its
  // passes' medians, 9 9 9 13, reach past a: a tie, which b's better
  // estimate (its median: 4 passes do not pair) wins.
  CHECK(ranked[0].candidate.impl == "b");
  CHECK(ranked[0].stats.median_us == 9.0);
  CHECK((ranked[0].stats.median_low_us == 9.0 && ranked[0].stats.median_high_us == 13.0));
  CHECK(ranked[1].candidate.impl == "a");
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
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
