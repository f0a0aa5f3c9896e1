// The solver over the scripted node (daemon/testing/scripted_node.h) and a
// real cache directory.
#include "daemon/coordinate/solver/solver.h"

#include <unistd.h>

#include <cmath>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/coordinate/request/key_text.h"
#include "daemon/coordinate/request/validate_testing.h"
#include "daemon/coordinate/solver/result.h"
#include "daemon/coordinate/solver/solver_testing.h"
#include "daemon/state/cache/key.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned {
namespace {

using testing::Request;
using testing::ScriptedSolver;

TEST_CASE("a whole-group round comes back ranked, then from the cache") {
  ScriptedSolver f("ranked");
  ValidRequest req =
      f.Valid(Request({"all_reduce/a", "all_reduce/broken", "all_reduce/b", "all_reduce/c"}));
  v1::TuneResponse resp = f.solver().RunRound(req).value();
  CHECK(resp.round_id() == absl::StrCat(getpid(), "-1"));
  CHECK(resp.backend() == "fake");
  CHECK(resp.fingerprint() == f.solver().fingerprint());
  REQUIRE(resp.results_size() == 1);
  const v1::ProblemResult& r = resp.results(0);
  CHECK(r.status() == v1::TUNED);
  CHECK(r.winner() == "all_reduce/b");
  CHECK(r.winner_index() == 2);
  CHECK(r.reason() == "fastest beyond noise of 3 working candidates, 1 ruled out");
  CHECK(r.cache_key().size() == 32);
  CHECK(r.confidence() == v1::DECISIVE);
  CHECK(r.min_speedup() == 0.01);  // the configured default
  CHECK(r.winner_speedup() > 0);
  REQUIRE(r.ranked_size() == 4);
  CHECK(r.ranked(0).median_us() == 10);
  CHECK(r.ranked(0).median_low_us() == 10);  // a scripted, noiseless time
  CHECK(r.ranked(0).median_high_us() == 10);
  CHECK(r.ranked(0).passes() == 1);  // TestConfig: one block per candidate
  int64_t iterations = 0;
  for (const v1::CandidateResult& c : r.ranked()) iterations += c.iterations();
  CHECK(r.measured_iterations() == iterations);
  CHECK(r.ranked(1).candidate().impl() == "all_reduce/c");
  CHECK(r.ranked(2).candidate().impl() == "all_reduce/a");
  CHECK_FALSE(r.ranked(3).ok());
  CHECK_THAT(r.ranked(3).reason(), Catch::Contains("rank 1: DATA_LOSS"));
  CHECK(std::isinf(r.ranked(3).median_us()));
  // 4096 bytes in 10 us: 0.4096 GB/s algbw, x 2(n-1)/n = 1.5 busbw.
  CHECK(r.ranked(0).algbw_gbps() == Approx(0.4096));
  CHECK(r.ranked(0).busbw_gbps() == Approx(0.6144));
  CHECK(r.ranked(0).candidate().params().at("knob") == 1);

  const int runs = f.backend().runs();
  v1::TuneResponse again = f.solver().RunRound(req).value();
  CHECK(again.round_id() == absl::StrCat(getpid(), "-2"));
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(again.results(0).winner() == "all_reduce/b");
  CHECK(again.results(0).cache_key() == r.cache_key());
  CHECK(f.backend().runs() == runs);

  req.refresh = true;
  again = f.solver().RunRound(req).value();
  CHECK(again.results(0).status() == v1::TUNED);
  CHECK(f.backend().runs() == runs + 4);
  CHECK(f.solver().rounds_served() == 3);
  CHECK(f.metrics().rounds->value() == 3);
  CHECK(f.metrics().results_tuned->value() == 2);
  CHECK(f.metrics().results_cached->value() == 1);
  CHECK(f.metrics().cache_hits->value() == 1);
  CHECK(f.metrics().cache_misses->value() == 1);  // a refresh looks nothing up
  CHECK(f.metrics().round_latency->snapshot().count == 3);
  CHECK(f.metrics().rendezvous_latency->snapshot().count == 2);
}

TEST_CASE("a batch gets one answer per problem, in order, each with its label") {
  ScriptedSolver f("batch");
  v1::TuneRequest wire = Request({"all_reduce/a", "all_reduce/b"});
  *wire.add_problems() = wire.problems(0);
  wire.mutable_problems(1)->set_count(2048);
  wire.mutable_problems(1)->set_label("second");
  const ValidRequest req = f.Valid(wire);
  v1::TuneResponse resp = f.solver().RunRound(req).value();
  REQUIRE(resp.results_size() == 2);
  CHECK(resp.results(1).problem().count() == 2048);
  CHECK(resp.results(1).problem().label() == "second");
  // A hit keeps the label of the problem asked, not the stored one.
  wire.mutable_problems(1)->set_label("third");
  resp = f.solver().RunRound(f.Valid(wire)).value();
  CHECK(resp.results(1).status() == v1::CACHED);
  CHECK(resp.results(1).problem().label() == "third");
}

TEST_CASE("every candidate failing is FAILED, not an error, and not stored") {
  ScriptedSolver f("failed");
  v1::TuneResponse resp =
      f.solver().RunRound(f.Valid(Request({"all_reduce/broken"}))).value();
  CHECK(resp.results(0).status() == v1::FAILED);
  CHECK(resp.results(0).winner().empty());
  CHECK(resp.results(0).winner_index() == -1);
  CHECK(resp.results(0).reason() == "every candidate was ruled out");
  CHECK(f.cache().size() == 0);
  CHECK(f.metrics().results_failed->value() == 1);
}

TEST_CASE("a candidate that cannot run the problem is ruled out without running") {
  ScriptedSolver f("unrunnable");
  v1::TuneRequest wire = Request({"all_reduce/four_or_more", "all_reduce/a"});
  wire.mutable_group()->set_world_size(2);
  v1::TuneResponse r = f.solver().RunRound(f.Valid(wire)).value();
  const v1::ProblemResult& p = r.results(0);
  CHECK(p.status() == v1::TUNED);
  CHECK(p.winner() == "all_reduce/a");
  REQUIRE(p.ranked_size() == 2);
  CHECK_FALSE(p.ranked(1).ok());
  CHECK(p.ranked(1).reason() == "candidate.impl: \"all_reduce/four_or_more\" runs on 4 to "
                                "1048576 ranks, not 2");
  CHECK(f.backend().runs() == 1);  // only all_reduce/a ran
  wire.mutable_group()->set_world_size(4);  // now both run
  r = f.solver().RunRound(f.Valid(wire)).value();
  CHECK(r.results(0).winner() == "all_reduce/four_or_more");
}

TEST_CASE("a measured ranking is stored only when TUNED and allowed; cut-offs are counted") {
  ScriptedSolver f("measured");
  const ValidRequest req = f.Valid(Request({"all_reduce/a", "all_reduce/b"}));
  const ValidProblem& p = req.problems[0];
  Engine engine(&f.backend());
  const std::vector<CandidateOutcome> ranked =
      engine.Measure(p.spec, p.candidates, req.engine);
  v1::ProblemResult r = f.solver().Measured(p, req, ranked, /*may_store=*/false);
  CHECK(r.status() == v1::TUNED);
  CHECK(f.cache().size() == 0);
  CHECK_FALSE(f.solver().Cached(p, req).has_value());
  r = f.solver().Measured(p, req, ranked, /*may_store=*/true);
  CHECK(f.cache().size() == 1);
  std::optional<v1::ProblemResult> hit = f.solver().Cached(p, req);
  REQUIRE(hit.has_value());
  CHECK(hit->status() == v1::CACHED);
  CHECK(hit->winner() == "all_reduce/b");
  CHECK(f.metrics().cache_entries->value() == 1);

  v1::TuneRequest hang = Request({"all_reduce/hang", "all_reduce/a"}, 4096);
  hang.mutable_options()->set_timeout_ms(100);
  const ValidRequest cut = f.Valid(hang);
  r = f.solver().Solve(cut.problems[0], cut);
  CHECK(r.winner() == "all_reduce/a");
  CHECK(f.metrics().candidate_timeouts->value() == 1);
}

TEST_CASE("the key text names the placement: alike links share a key") {
  ScriptedSolver f("keys");
  // The fake node links GPUs 0-1 and 2-3 by "NV4", the other pairs by "SYS".
  auto on = [&](int gpu0, int gpu1) {
    v1::TuneRequest wire = testing::RankRequest("pair", 0, 2);
    wire.mutable_group()->mutable_members(0)->set_local_gpu(gpu0);
    wire.mutable_group()->mutable_members(1)->set_local_gpu(gpu1);
    const ValidRequest req = f.Valid(wire);
    return f.solver().KeyText(req.problems[0], req);
  };
  CHECK(on(0, 1) == on(3, 2));
  CHECK(on(0, 1) != on(1, 2));
  CHECK_THAT(on(1, 2), Catch::Contains("SYS"));
}

TEST_CASE("the key text is computed once, at validation, as the solver would") {
  ScriptedSolver f("keyonce");
  const v1::TuneRequest wire = testing::RankRequest("pair", 0, 2);
  const ValidRequest plain = f.Valid(wire);  // a context that does not key
  REQUIRE(plain.problems[0].key_text.empty());
  ValidationContext context = f.Context();
  int calls = 0;
  context.key_text = [&](const ValidProblem& p, const ValidRequest& r) {
    ++calls;
    return ProblemKeyText(f.solver().fingerprint(), f.backend().node(), p, r);
  };
  const ValidRequest keyed = testing::MustValidate(wire, context);
  CHECK(calls == 1);
  CHECK(keyed.problems[0].key_text == f.solver().KeyText(plain.problems[0], plain));
  // The solver takes the stored text, and the round's answers carry its key.
  ValidRequest marked = keyed;
  marked.problems[0].key_text = "stored";
  CHECK(f.solver().KeyText(marked.problems[0], marked) == "stored");
  const v1::TuneResponse r = f.solver().RunRound(keyed).value();
  REQUIRE(r.results_size() == 1);
  CHECK(r.results(0).cache_key() == CacheKeyDigest(keyed.problems[0].key_text));
}

TEST_CASE("the run bound and the fallback answer") {
  ScriptedSolver f("bound");
  v1::TuneRequest wire = Request({"all_reduce/a", "all_reduce/b"});
  wire.mutable_options()->set_timeout_ms(250);
  *wire.add_problems() = wire.problems(0);
  ValidRequest req = f.Valid(wire);
  // TestConfig: one block per candidate.
  CHECK(RoundRunBound(req) == absl::Seconds(10) + 2 * 4 * absl::Milliseconds(250));
  // Per problem: 3 passes over every candidate, the later passes' budget,
  // the pass under way when it ends; twice; plus 10 s.
  req.engine.passes.min_passes = 3;
  req.engine.passes.max_passes = 8;
  CHECK(RoundRunBound(req) ==
        absl::Seconds(10) + 2 * 2 * (4 * 2 * absl::Milliseconds(250) + req.engine.passes.budget));
  const v1::ProblemResult r = FallbackResult(req.problems[0], "k");
  CHECK(r.status() == v1::FALLBACK);
  CHECK(r.winner() == "all_reduce/a");
  CHECK(r.winner_index() == 0);
  CHECK(r.bytes() == 4096);
  CHECK(r.cache_key() == "k");
  CHECK(r.ranked_size() == 0);
}

}  // namespace
}  // namespace autotuned
