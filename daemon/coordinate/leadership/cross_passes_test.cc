// The leader's pass decision of a cross-daemon run, on samples made up to
// known times: when one more pass is worth running, of which candidates,
// in which order, and every limit that stops it; how a pass joins the
// samples; what a follower refuses of a continuation.
#include "daemon/coordinate/leadership/cross_passes.h"

#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned::leadership {
namespace {

constexpr int kRanks = 2;

// One pass of one candidate: every rank took `us` in each of `iterations`.
std::vector<RankOutcome> Pass(double us, int iterations = 1) {
  return std::vector<RankOutcome>(kRanks,
                                  RankOutcome{absl::OkStatus(), std::vector<double>(iterations, us)});
}

CandidateSpec Spec(const char* impl) {
  CandidateSpec c;
  c.impl = impl;
  return c;
}

EngineOptions Options() {
  EngineOptions o;
  o.schedule.iterations = 8;
  o.passes.min_passes = 8;
  o.passes.max_passes = 16;
  o.passes.warmup = 1;
  o.passes.iterations = 3;
  o.passes.max_iterations = 200;
  o.passes.budget = absl::Seconds(2);
  o.rule.min_speedup = 0.01;
  o.timeout = absl::Seconds(1);
  return o;
}

// The default "slow" (request position 0) and "fast" (1), about 10 % apart
// in every pass but pass 0, where a burst made "fast" the slower one; both
// through `passes` passes, pass p of 1 iteration in the fixed passes (p <
// 8), of 3 after.
struct TwoCandidates {
  std::vector<PassSamples> samples = std::vector<PassSamples>(2);

  explicit TwoCandidates(int passes) {
    for (int p = 0; p < passes; ++p) {
      const int iterations = p < 8 ? 1 : 3;
      const double jitter = p % 3;  // apart from the burst, noise well below 10 %
      JoinPass(&samples[0], Pass(1100 + jitter, iterations), p, iterations);
      JoinPass(&samples[1], Pass(p == 0 ? 3000 : 1000 - jitter, iterations), p, iterations);
    }
  }
  std::vector<CandidateOutcome> Ranked(const EngineOptions& o) const {
    return Rank({OutcomeOf(0, Spec("slow"), samples[0]), OutcomeOf(1, Spec("fast"), samples[1])},
                o.rule);
  }
};

std::vector<int> Candidates(const v1::CrossPass& pass, int problem) {
  return {pass.problems(problem).candidates().begin(), pass.problems(problem).candidates().end()};
}

TEST_CASE("a tie the fixed passes leave gets passes of both contenders until it is resolved") {
  const EngineOptions o = Options();
  TwoCandidates fixed(8);
  const std::vector<CandidateOutcome> tied = fixed.Ranked(o);
  REQUIRE(tied[0].candidate.impl == "fast");
  REQUIRE(Judge(tied).confidence == v1::WITHIN_NOISE);

  RunState state;
  state.pass = 8;
  std::optional<v1::CrossPass> next = NextCrossPass({tied}, o, state);
  REQUIRE(next.has_value());
  CHECK(next->pass() == 8);
  CHECK(next->warmup() == o.passes.warmup);
  CHECK(next->iterations() == o.passes.iterations);
  REQUIRE(next->problems_size() == 1);
  CHECK(Candidates(*next, 0) == PassOrder({0, 1}, 8));

  // Each pass pairs them again; with 12 pairs the burst's pass is left out
  // of the ratio's interval: decisive, nothing more to run.
  int passes = 8;
  for (; passes < 16; ++passes) {
    state.pass = passes;
    if (!NextCrossPass({TwoCandidates(passes).Ranked(o)}, o, state)) break;
  }
  CHECK(passes == 12);
  const std::vector<CandidateOutcome> resolved = TwoCandidates(12).Ranked(o);
  CHECK(resolved[0].candidate.impl == "fast");
  CHECK(Judge(resolved).confidence == v1::DECISIVE);
  CHECK(resolved[0].passes == 12);
  CHECK(resolved[0].iterations == 8 + 4 * 3);
}

TEST_CASE("no pass past the limits of one daemon's adaptive passes, nor when a daemon cannot "
          "run it or its steps would not end in time") {
  const EngineOptions base = Options();
  const std::vector<CandidateOutcome> tied = TwoCandidates(8).Ranked(base);
  RunState state;
  state.pass = 8;
  REQUIRE(NextCrossPass({tied}, base, state).has_value());

  SECTION("a daemon that does not run continuations, or whose timings are missing") {
    state.everyone = false;
    CHECK_FALSE(NextCrossPass({tied}, base, state).has_value());
  }
  SECTION("max_passes") {
    EngineOptions o = base;
    o.passes.max_passes = 8;
    CHECK_FALSE(NextCrossPass({tied}, o, state).has_value());
    o.passes.max_passes = 9;
    CHECK(NextCrossPass({tied}, o, state).has_value());
  }
  SECTION("max_measured_iterations: 8 + 3 is past 10") {
    EngineOptions o = base;
    o.passes.max_iterations = 10;
    CHECK_FALSE(NextCrossPass({tied}, o, state).has_value());
    o.passes.max_iterations = 11;
    CHECK(NextCrossPass({tied}, o, state).has_value());
  }
  SECTION("the budget, per problem of the run") {
    state.spent = base.passes.budget;
    CHECK_FALSE(NextCrossPass({tied}, base, state).has_value());
    state.problems = 2;
    CHECK(NextCrossPass({tied}, base, state).has_value());
  }
  SECTION("the time left for the pass's two steps of one timeout each") {
    state.left = 2 * base.timeout - absl::Milliseconds(1);
    CHECK_FALSE(NextCrossPass({tied}, base, state).has_value());
    state.left = 2 * base.timeout;
    CHECK(NextCrossPass({tied}, base, state).has_value());
  }
}

TEST_CASE("per problem: a decided problem sits the pass out, a tied one runs it") {
  const EngineOptions o = Options();
  // Apart beyond the noise in every pass: no contender but the winner.
  std::vector<PassSamples> apart(2);
  for (int p = 0; p < 8; ++p) {
    JoinPass(&apart[0], Pass(1100 + p), p, 1);
    JoinPass(&apart[1], Pass(500 + p), p, 1);
  }
  const std::vector<CandidateOutcome> decided =
      Rank({OutcomeOf(0, Spec("a"), apart[0]), OutcomeOf(1, Spec("b"), apart[1])}, o.rule);
  REQUIRE(Judge(decided).confidence == v1::DECISIVE);
  RunState state;
  state.pass = 9;
  CHECK_FALSE(NextCrossPass({decided}, o, state).has_value());
  std::optional<v1::CrossPass> next =
      NextCrossPass({decided, TwoCandidates(9).Ranked(o)}, o, state);
  REQUIRE(next.has_value());
  REQUIRE(next->problems_size() == 2);
  CHECK(next->problems(0).candidates().empty());
  CHECK(Candidates(*next, 1) == PassOrder({0, 1}, 9));
}

TEST_CASE("joining a pass: samples add up; a failed or malformed pass rules the candidate "
          "out for good") {
  PassSamples s;
  JoinPass(&s, Pass(10), 0, 1);
  JoinPass(&s, Pass(20, 3), 8, 3);
  CHECK(s.pass_sizes == std::vector<int>{1, 3});
  CHECK(s.pass_ids == std::vector<int>{0, 8});
  CHECK(s.ranks[1].iteration_us.size() == 4);
  CHECK(OutcomeOf(0, Spec("x"), s).passes == 2);

  SECTION("a rank's failure") {
    std::vector<RankOutcome> pass = Pass(30, 3);
    pass[1].status = absl::UnavailableError("daemon d stopped answering during the run");
    JoinPass(&s, pass, 9, 3);
    const CandidateOutcome o = OutcomeOf(0, Spec("x"), s);
    CHECK_FALSE(o.ok);
    CHECK(o.passes == 0);
    CHECK_THAT(o.reason, Catch::StartsWith("rank 1: UNAVAILABLE"));
    JoinPass(&s, Pass(30, 3), 10, 3);  // stays ruled out
    CHECK_FALSE(OutcomeOf(0, Spec("x"), s).ok);
  }
  SECTION("a count of samples other than the pass's") {
    JoinPass(&s, Pass(30, 2), 9, 3);
    const CandidateOutcome o = OutcomeOf(0, Spec("x"), s);
    CHECK_FALSE(o.ok);
    CHECK_THAT(o.reason, Catch::Contains("iteration_us: 2 samples where the pass times 3"));
  }
  SECTION("a time that is not finite") {
    JoinPass(&s, Pass(std::numeric_limits<double>::infinity(), 3), 9, 3);
    CHECK_THAT(OutcomeOf(0, Spec("x"), s).reason, Catch::Contains("iteration_us: inf"));
  }
}

TEST_CASE("a rank's samples as the fixed passes must have made them, or its failure") {
  const RankOutcome ok{absl::OkStatus(), {5, 6, 7}};
  CHECK(CheckedSamples(ok, 3).status.ok());
  CHECK(CheckedSamples(ok, 3).iteration_us == ok.iteration_us);
  CHECK_THAT(std::string(CheckedSamples(ok, 4).status.message()),
             Catch::Contains("iteration_us: 3 samples where the pass times 4"));
  const RankOutcome negative{absl::OkStatus(), {5, -1, 7}};
  CHECK(CheckedSamples(negative, 3).status.code() == absl::StatusCode::kInvalidArgument);
  const RankOutcome nan{absl::OkStatus(), {5, std::nan(""), 7}};
  CHECK_FALSE(CheckedSamples(nan, 3).status.ok());
  // A failure stays the failure it was.
  const RankOutcome failed{absl::UnavailableError("gone"), {}};
  CHECK(CheckedSamples(failed, 3).status.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("what a follower refuses of a continuation, naming the field") {
  v1::CrossPass pass;
  pass.set_pass(8);
  pass.set_warmup(1);
  pass.set_iterations(3);
  pass.add_problems()->add_candidates(1);
  pass.mutable_problems(0)->add_candidates(0);
  pass.add_problems();
  const std::vector<int> sizes = {2, 3};
  CHECK(CheckCrossPass(pass, 7, sizes).ok());

  auto refused = [&](const v1::CrossPass& p, int last = 7) {
    const absl::Status s = CheckCrossPass(p, last, sizes);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK_THAT(refused(pass, 8), Catch::StartsWith("go.next.pass: 8"));
  v1::CrossPass p = pass;
  p.set_pass(kMaxCrossPasses);
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.pass"));
  p = pass;
  p.add_problems();
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.problems: 3 entries"));
  p = pass;
  p.mutable_problems(0)->add_candidates(1);
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.problems[0].candidates[2]: 1"));
  p = pass;
  p.mutable_problems(1)->add_candidates(3);
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.problems[1].candidates[0]: 3"));
  p = pass;
  p.set_iterations(0);
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.iterations: 0"));
  p = pass;
  p.set_warmup(-1);
  CHECK_THAT(refused(p), Catch::StartsWith("go.next.warmup: -1"));
}

}  // namespace
}  // namespace autotuned::leadership
