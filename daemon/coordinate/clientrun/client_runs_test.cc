// Runs of candidates the ranks run over the scripted node: the round's
// runner opens a run (Start), ranks are threads calling Step and Report as
// their RunStep and Report would. Short candidate timeouts and a short
// report grace keep the faults quick.
#include "daemon/coordinate/clientrun/client_runs.h"

#include <atomic>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/solver/solver_testing.h"
#include "daemon/measure/engine/lease.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned::clientrun {
namespace {

using testing::ClientRankRequest;
using testing::Shared;

constexpr int64_t kTimeoutMs = 200;

// What one rank does in a run.
struct RankScript {
  // Per iteration time of each step (us).
  std::function<double(int step)> time_us = [](int) { return 50.0; };
  // Why the step fails at its verify ("" = it works).
  std::function<std::string(int step)> fails = [](int) { return std::string(); };
  int stop_before_step = -1;  // never reaches this step's barrier, never reports
  bool report = true;
  int reports = -1;         // how many schedules it reports before it goes silent (-1: all)
  int timed_out_step = -1;  // passes this step's barriers, then runs past its timeout
  // How each step was timed (0: not said) and the host's time per call.
  std::function<v1::TimingMode(int step)> timed_by = [](int) {
    return v1::TIMING_MODE_UNSPECIFIED;
  };
  std::function<double(int step)> host_us = [](int) { return 0.0; };
  // Reports that it runs continuations (RunReport.continues), and runs them.
  bool continues = false;
  // When set, the time of each iteration of a step from the step itself
  // (its candidate and pass), in place of time_us.
  std::function<double(const v1::ClientStep&)> step_us;
  // A note sent ok at the step's WARMED_UP barrier ("" = none).
  std::function<std::string(int step)> note = [](int) { return std::string(); };
  // As autotuned.rankrun: a candidate that passed its VERIFIED barrier in an
  // earlier pass gets none (its step's one barrier is WARMED_UP).
  bool verify_once = false;
  // Every step after pass 0 without its VERIFIED barrier, refused or not.
  bool warmed_alone_after_pass_0 = false;
};

struct RankEnd {
  std::vector<v1::StepReply> verified;  // per step reached
  std::vector<v1::StepReply> warmed;    // per step that passed its VERIFIED
  absl::StatusOr<v1::TuneResponse> answer = absl::UnknownError("no report");
  std::vector<v1::ClientRun> continuations;  // as handed to this rank, in order
};

class Runs {
 public:
  explicit Runs(const std::string& cache, absl::Duration grace = absl::Milliseconds(300),
                int max_runs_kept = 16, int64_t max_kept_bytes = int64_t{256} << 20)
      : stack_(cache),
        runs_(&stack_.solver(), &stack_.engine(), &stack_.metrics(),
              ClientRunsOptions{grace, absl::Minutes(10), max_runs_kept, max_kept_bytes}) {}

  // Rank 0's ask of `world` ranks, opened as the round's runner would, in
  // `passes` interleaved passes.
  std::optional<v1::TuneResponse> Open(const std::string& group, int world,
                                       const std::vector<std::string>& candidates,
                                       absl::Duration lease_wait = absl::Seconds(10),
                                       int passes = 1) {
    ValidRequest request = stack_.Valid(ClientRankRequest(group, 0, world, candidates, kTimeoutMs));
    request.engine.passes.min_passes = request.engine.passes.max_passes = passes;
    return runs_.Start(request, "round-1", absl::Now() + lease_wait, absl::ZeroDuration());
  }

  // As Open, with `passes` (min_passes fixed passes of one timed iteration
  // each, then later passes as `passes` allows) and a margin of 1 %.
  std::optional<v1::TuneResponse> OpenAdaptive(const std::string& group, int world,
                                               const std::vector<std::string>& candidates,
                                               const PassOptions& passes) {
    ValidRequest request = stack_.Valid(ClientRankRequest(group, 0, world, candidates, kTimeoutMs));
    request.engine.passes = passes;
    request.engine.schedule.iterations = passes.min_passes;
    request.engine.rule.min_speedup = 0.01;
    return runs_.Start(request, "round-1", absl::Now() + absl::Seconds(10), absl::ZeroDuration());
  }

  // The rank's part of the run: every step of `first`, its Report, and then
  // every continuation that its Report's answer hands out, in turn.
  RankEnd RunRank(const v1::ClientRun& first, const std::string& group, int rank,
                  const RankScript& script) {
    RankEnd end;
    v1::ClientRun run = first;
    int reported = 0;
    std::set<std::pair<int, int>> passed;  // (problem, candidate) past VERIFIED
    while (true) {
      v1::RunReport report;
      report.set_run_id(run.run_id());
      report.set_group_id(group);
      report.set_rank(rank);
      report.set_first_step(run.first_step());
      report.set_continues(script.continues);
      for (int k = 0; k < run.steps_size(); ++k) {
        const int i = run.first_step() + k;
        if (i == script.stop_before_step) return end;
        v1::StepTimes* times = report.add_steps();
        times->set_step(i);
        const std::string fails = script.fails(i);
        const std::pair<int, int> key = {run.steps(k).problem(), run.steps(k).candidate()};
        const bool alone = (script.verify_once && passed.count(key) != 0) ||
                           (script.warmed_alone_after_pass_0 && run.steps(k).pass() > 0);
        if (!alone) {
          v1::StepReply verified = Step(run, group, rank, i, v1::VERIFIED, fails);
          end.verified.push_back(verified);
          if (!verified.proceed()) {
            times->set_reason(verified.reason());
            continue;
          }
          passed.insert(key);
        }
        v1::StepReply warmed = Step(run, group, rank, i, v1::WARMED_UP, "", script.note(i));
        end.warmed.push_back(warmed);
        if (!warmed.proceed()) {
          times->set_reason(warmed.reason());
          continue;
        }
        if (i == script.timed_out_step) {
          times->set_timed_out(true);
          continue;
        }
        times->set_ok(true);
        times->set_timed_by(script.timed_by(i));
        times->set_host_us(script.host_us(i));
        const double us = script.step_us ? script.step_us(run.steps(k)) : script.time_us(i);
        for (int t = 0; t < run.iterations(); ++t) times->add_times_us(us);
      }
      if (!script.report || script.reports == reported++) return end;
      end.answer = runs_.Report(report, absl::Now() + absl::Seconds(30));
      if (!end.answer.ok() || !end.answer->has_run()) return end;
      run = end.answer->run();
      end.continuations.push_back(run);
    }
  }

  v1::StepReply Step(const v1::ClientRun& run, const std::string& group, int rank, int step,
                     v1::StepPhase phase, const std::string& fails,
                     const std::string& note = "") {
    v1::StepRequest req;
    req.set_run_id(run.run_id());
    req.set_group_id(group);
    req.set_rank(rank);
    req.set_step(step);
    req.set_phase(phase);
    req.set_ok(fails.empty());
    req.set_reason(fails.empty() ? note : fails);
    absl::StatusOr<v1::StepReply> reply = runs_.Step(req, absl::Now() + absl::Seconds(30));
    return reply.ok() ? *reply : v1::StepReply();
  }

  // Every rank at once, each with its script.
  std::vector<RankEnd> RunAll(const v1::ClientRun& run, const std::string& group,
                              const std::vector<RankScript>& scripts) {
    std::vector<RankEnd> ends(scripts.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < scripts.size(); ++r) {
      threads.emplace_back(
          [&, r] { ends[r] = RunRank(run, group, static_cast<int>(r), scripts[r]); });
    }
    for (std::thread& t : threads) t.join();
    return ends;
  }

  ClientRuns& runs() { return runs_; }
  testing::ScriptedSolver& stack() { return stack_; }

 private:
  testing::ScriptedSolver stack_;
  ClientRuns runs_;
};

// RankScript::fails of a rank whose candidate raises at step 0 only.
std::string RaisesAtStep0(int step) {
  return step == 0 ? std::string("raised ValueError: no") : std::string();
}

const v1::CandidateResult& Ranked(const v1::TuneResponse& r, int index) {
  for (const v1::CandidateResult& c : r.results(0).ranked()) {
    if (c.index() == index) return c;
  }
  FAIL("no candidate " << index);
  return r.results(0).ranked(0);
}

TEST_CASE("the schedule: client candidates of the missed problems, in order") {
  Runs f("schedule");
  CHECK_FALSE(f.Open("g", 2, {"all_reduce/a", "all_reduce/b"}).has_value());

  v1::TuneRequest ask = ClientRankRequest("g", 0, 2, {"all_reduce/a", "client:k1", "client:k2"},
                                          kTimeoutMs);
  *ask.add_problems() = ClientRankRequest("g", 0, 2, {"all_reduce/b"}).problems(0);
  *ask.add_problems() = ClientRankRequest("g", 0, 2, {"client:k3"}).problems(0);
  ask.mutable_problems(2)->set_count(2048);
  std::optional<v1::TuneResponse> opened =
      f.runs().Start(f.stack().Valid(ask), "r", absl::Now() + absl::Seconds(5), {});
  REQUIRE(opened.has_value());
  CHECK(opened->results_size() == 0);
  const v1::ClientRun& run = opened->run();
  CHECK(run.run_id().size() == 32);
  REQUIRE(run.steps_size() == 3);
  CHECK((run.steps(0).problem() == 0 && run.steps(0).candidate() == 1 &&
         run.steps(0).reference() == 1));
  CHECK((run.steps(1).problem() == 0 && run.steps(1).candidate() == 2 &&
         run.steps(1).reference() == 1));
  CHECK((run.steps(2).problem() == 2 && run.steps(2).candidate() == 0 &&
         run.steps(2).reference() == 0));
  CHECK(run.warmup() == 1);
  CHECK(run.iterations() == 3);
  CHECK(run.timing_mode() == v1::EVENT_LOOP);
  CHECK(run.candidate_timeout_ms() == kTimeoutMs);
  CHECK(run.report_within_ms() == 300 + 3 * kTimeoutMs);
  // The catalogue candidates were measured first: a, then b (its problem
  // decided and stored already).
  CHECK(f.stack().backend().runs() == 2);
  CHECK(f.stack().cache().size() == 1);
  CHECK(f.stack().engine().lease().busy());
}

TEST_CASE("the schedule in passes: per problem, each pass one step per client candidate, "
          "rotated, the request's iterations shared out rounding up") {
  Runs f("passes");
  std::optional<v1::TuneResponse> opened = f.Open(
      "g", 2, {"all_reduce/a", "client:k1", "client:k2", "client:k3"}, absl::Seconds(10), 2);
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  REQUIRE(run.steps_size() == 6);
  const std::vector<std::pair<int, int>> want = {{1, 0}, {2, 0}, {3, 0},
                                                 {2, 1}, {3, 1}, {1, 1}};
  for (int i = 0; i < 6; ++i) {
    INFO("step " << i);
    CHECK(run.steps(i).problem() == 0);
    CHECK(run.steps(i).candidate() == want[i].first);
    CHECK(run.steps(i).pass() == want[i].second);
    CHECK(run.steps(i).reference() == 1);
  }
  CHECK(run.iterations() == 2);  // 3 over 2 passes
  CHECK(run.report_within_ms() == 300 + 6 * kTimeoutMs);
  CHECK(f.stack().backend().runs() == 2);  // the catalogue candidate's passes

  Runs g("passes-3");
  opened = g.Open("g", 2, {"client:k1"}, absl::Seconds(10), 3);
  REQUIRE(opened.has_value());
  CHECK(opened->run().steps_size() == 3);
  CHECK(opened->run().iterations() == 1);
}

TEST_CASE("in passes, a client that follows the steps gets every pass's times joined") {
  Runs f("joined");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2"}, absl::Seconds(10), 2);
  REQUIRE(opened.has_value());
  // Steps: k1, k2 (pass 0), k2, k1 (pass 1). k1 100 us, then 300 us.
  RankScript r;
  r.time_us = [](int step) { return step == 0 ? 100.0 : step == 3 ? 300.0 : 150.0; };
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, r});
  REQUIRE(ends[0].answer.ok());
  REQUIRE(ends[1].answer.ok());
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  const v1::ProblemResult& p = ends[0].answer->results(0);
  CHECK(p.status() == v1::TUNED);
  const v1::CandidateResult& k1 = Ranked(*ends[0].answer, 0);
  CHECK(k1.ok());
  CHECK(k1.iterations() == 4);
  CHECK(k1.passes() == 2);
  CHECK(k1.median_us() == 200);
  CHECK(k1.min_us() == 100);
  CHECK(k1.max_us() == 300);
  CHECK(Ranked(*ends[0].answer, 1).iterations() == 4);
  CHECK(p.measured_iterations() == 8);
}

TEST_CASE("in passes, a candidate ruled out at a barrier is refused at its later steps' "
          "first barrier, the same reply for every rank") {
  Runs f("skip");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2"}, absl::Seconds(10), 2);
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.fails = RaisesAtStep0;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  for (const RankEnd& e : ends) {
    REQUIRE(e.verified.size() == 4);
    CHECK_FALSE(e.verified[0].proceed());
    CHECK(e.verified[1].proceed());
    CHECK(e.verified[2].proceed());
    CHECK_FALSE(e.verified[3].proceed());  // k1 in pass 1: every rank says ok
    CHECK(e.verified[3].reason() == "ruled out in pass 0: rank 1: raised ValueError: no");
    REQUIRE(e.answer.ok());
  }
  const v1::TuneResponse& a = *ends[0].answer;
  CHECK(Shared(a) == Shared(*ends[1].answer));
  CHECK(a.results(0).winner() == "name of k2");
  CHECK(Ranked(a, 0).reason() == "rank 1: raised ValueError: no");
  CHECK(Ranked(a, 0).passes() == 1);
  CHECK(Ranked(a, 1).iterations() == 4);
  CHECK(f.stack().metrics().client_candidates_ruled_out->value() == 1);
}

TEST_CASE("in passes, a verified candidate's later steps have one barrier, WARMED_UP") {
  Runs f("verify_once");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2"}, absl::Seconds(10), 3);
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r0.verify_once = r1.verify_once = true;
  r0.time_us = r1.time_us = [](int step) { return step % 2 == 0 ? 100.0 : 300.0; };
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  for (const RankEnd& e : ends) {
    CHECK(e.verified.size() == 2);  // pass 0 only
    CHECK(e.warmed.size() == 6);
    for (const v1::StepReply& w : e.warmed) CHECK(w.proceed());
    REQUIRE(e.answer.ok());
    const v1::ProblemResult& p = e.answer->results(0);
    CHECK(p.status() == v1::TUNED);
    CHECK(Ranked(*e.answer, 0).passes() == 3);
    CHECK(Ranked(*e.answer, 1).passes() == 3);
  }
}

TEST_CASE("a candidate ruled out earlier is refused at WARMED_UP when a step comes without its "
          "VERIFIED barrier") {
  Runs f("warmed_alone");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2"}, absl::Seconds(10), 2);
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.fails = RaisesAtStep0;
  r0.warmed_alone_after_pass_0 = r1.warmed_alone_after_pass_0 = true;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  for (const RankEnd& e : ends) {
    REQUIRE(e.warmed.size() == 3);  // k2 in pass 0, both in pass 1
    CHECK(e.warmed[0].proceed());
    // Pass 1 rotates: k2 (step 2), then k1 (step 3), refused at once.
    CHECK(e.warmed[1].proceed());
    CHECK_FALSE(e.warmed[2].proceed());
    CHECK(e.warmed[2].reason() == "ruled out in pass 0: rank 1: raised ValueError: no");
    REQUIRE(e.answer.ok());
    CHECK_FALSE(Ranked(*e.answer, 0).ok());
    CHECK(Ranked(*e.answer, 1).ok());
  }
}

TEST_CASE("in passes, a failure of a later pass's timed iterations rules the candidate out") {
  Runs f("late-failure");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2"}, absl::Seconds(10), 2);
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.timed_out_step = 3;  // k1 in pass 1
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  REQUIRE(ends[0].answer.ok());
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  const v1::CandidateResult& k1 = Ranked(*ends[0].answer, 0);
  CHECK_FALSE(k1.ok());
  CHECK(k1.reason() == "rank 1: ran past the candidate timeout of 200 ms");
  CHECK(k1.passes() == 2);
  CHECK(ends[0].answer->results(0).winner() == "name of k2");
}

TEST_CASE("client and catalogue candidates ranked together; the slowest rank's time counts") {
  Runs f("ranked");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"all_reduce/a", "client:k1", "client:k2"});
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  // k1: rank 0 1000 us, rank 1 2000 us: 2000 per iteration. k2: 10 us.
  r0.time_us = [](int step) { return step == 0 ? 1000.0 : 10.0; };
  r1.time_us = [](int step) { return step == 0 ? 2000.0 : 10.0; };
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  REQUIRE(ends[0].answer.ok());
  REQUIRE(ends[1].answer.ok());
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  CHECK(ends[1].answer->results(0).problem().label() == "op-of-rank-0");  // unattached

  const v1::ProblemResult& r = ends[0].answer->results(0);
  CHECK(r.status() == v1::TUNED);
  CHECK(r.winner() == "name of k2");
  CHECK(r.winner_index() == 2);
  REQUIRE(r.ranked_size() == 3);
  CHECK(r.ranked(1).candidate().impl() == "all_reduce/a");
  CHECK(r.ranked(2).candidate().client().key() == "k1");
  CHECK(r.ranked(2).median_us() == 2000);
  CHECK(r.ranked(2).rank_mean_us(0) == 1000);
  CHECK(r.ranked(2).rank_mean_us(1) == 2000);
  CHECK(f.stack().cache().size() == 1);  // stored: every rank reported
  CHECK_FALSE(f.stack().engine().lease().busy());
  CHECK(f.stack().metrics().runs_decided->value() == 1);
}

TEST_CASE("a candidate failing on one rank is ruled out at its barrier, the same everywhere") {
  Runs f("failing");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"client:k1", "client:k2", "client:k3"});
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r0.fails = [](int step) {
    return step == 1 ? std::string("output differs from the reference \"name of k1\"")
                     : std::string();
  };
  r1.fails = RaisesAtStep0;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  for (const RankEnd& e : ends) {
    CHECK_FALSE(e.verified[0].proceed());
    CHECK(e.verified[0].reason() == "rank 1: raised ValueError: no");
    CHECK(e.verified[1].reason() == "rank 0: output differs from the reference \"name of k1\"");
    CHECK(e.verified[2].proceed());
    REQUIRE(e.answer.ok());
  }
  const v1::TuneResponse& a = *ends[1].answer;
  CHECK(Shared(*ends[0].answer) == Shared(a));
  CHECK(a.results(0).winner() == "name of k3");
  CHECK(Ranked(a, 0).reason() == "rank 1: raised ValueError: no");
  CHECK(Ranked(a, 1).reason() == "rank 0: output differs from the reference \"name of k1\"");
  CHECK(f.stack().metrics().client_candidates_ruled_out->value() == 2);
}

TEST_CASE("a step that ran past its timeout is ruled out as timed out") {
  Runs f("timed-out");
  std::optional<v1::TuneResponse> opened = f.Open("g", 2, {"client:k1", "client:k2"});
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.timed_out_step = 0;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  REQUIRE(ends[0].answer.ok());
  CHECK(Ranked(*ends[0].answer, 0).reason() ==
        "rank 1: ran past the candidate timeout of 200 ms");
  CHECK(ends[0].answer->results(0).winner() == "name of k2");
  CHECK(f.stack().metrics().candidate_timeouts->value() == 1);
}

TEST_CASE("a rank that never reaches a barrier is lost: the others go on, nothing stored") {
  // A run's bound of a minute: the answer comes once the other rank has
  // reported, not at the bound.
  Runs f("lost", absl::Minutes(1));
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"all_reduce/a", "client:k1", "client:k2"});
  REQUIRE(opened.has_value());
  REQUIRE(opened->run().report_within_ms() >= 60000);
  RankScript r0, r1;
  r1.stop_before_step = 0;
  const absl::Time start = absl::Now();
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  CHECK(absl::Now() - start < absl::Seconds(30));
  REQUIRE(ends[0].verified.size() == 2);
  const std::string lost = "rank 1 did not reach step 0 (verified) within 200 ms";
  CHECK(ends[0].verified[0].reason() == lost);
  CHECK(ends[0].verified[1].reason() == lost);  // at once: the rank is lost
  REQUIRE(ends[0].answer.ok());
  const v1::ProblemResult& r = ends[0].answer->results(0);
  CHECK(r.status() == v1::TUNED);
  CHECK(r.winner() == "all_reduce/a");  // the catalogue candidate keeps its timing
  CHECK(Ranked(*ends[0].answer, 1).reason() == lost);
  CHECK(f.stack().cache().size() == 0);  // a rank's report is missing

  // The lost rank's report after the decision gets the decision.
  RankScript late;
  RankEnd again = f.RunRank(opened->run(), "g", 1, late);
  REQUIRE(again.answer.ok());
  CHECK(Shared(*again.answer) == Shared(*ends[0].answer));
}

TEST_CASE("a rank lost at a later step's barrier: the steps it passed say why it sent no "
          "report") {
  Runs f("lost-later", absl::Minutes(1));
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 2, {"all_reduce/a", "client:k1", "client:k2"});
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.stop_before_step = 1;  // passes step 0's barriers, never reaches step 1's
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  REQUIRE(ends[0].answer.ok());
  const std::string lost = "rank 1 did not reach step 1 (verified) within 200 ms";
  CHECK(Ranked(*ends[0].answer, 1).reason() ==
        absl::StrCat("rank 1 sent no report (lost for the run: ", lost, ")"));
  CHECK(Ranked(*ends[0].answer, 2).reason() == lost);
}

TEST_CASE("a rank that never reports: decided at the bound, client candidates ruled out") {
  Runs f("silent");
  std::optional<v1::TuneResponse> opened = f.Open("g", 2, {"all_reduce/a", "client:k1"});
  REQUIRE(opened.has_value());
  RankScript r0, r1;
  r1.report = false;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r0, r1});
  REQUIRE(ends[0].answer.ok());
  CHECK(Ranked(*ends[0].answer, 1).reason() == "rank 1 sent no report within 500 ms");
  CHECK(ends[0].answer->results(0).winner() == "all_reduce/a");
  CHECK(f.stack().cache().size() == 0);
  CHECK_FALSE(f.stack().engine().lease().busy());
}

v1::RunReport Report(const v1::ClientRun& run, int rank, int steps, int times) {
  v1::RunReport report;
  report.set_run_id(run.run_id());
  report.set_group_id("g");
  report.set_rank(rank);
  for (int i = 0; i < steps; ++i) {
    v1::StepTimes* s = report.add_steps();
    s->set_step(i);
    s->set_ok(true);
    for (int t = 0; t < times; ++t) s->add_times_us(5);
  }
  return report;
}

TEST_CASE("unknown runs, strangers, bad reports and second reports change nothing") {
  Runs f("strangers", absl::Seconds(30));
  std::optional<v1::TuneResponse> opened = f.Open("g", 2, {"client:k1"});
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  const absl::Time soon = absl::Now() + absl::Seconds(5);

  v1::RunReport unknown = Report(run, 0, 1, 3);
  unknown.set_run_id("0123");
  absl::StatusOr<v1::TuneResponse> r = f.runs().Report(unknown, soon);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(r.status().message() ==
        "run \"0123\" is unknown to this daemon (forgotten, or opened before a restart)");

  v1::RunReport other = Report(run, 0, 1, 3);
  other.set_group_id("h");
  CHECK_THAT(std::string(f.runs().Report(other, soon).status().message()),
             Catch::StartsWith("group_id: run \""));
  CHECK_THAT(std::string(f.runs().Report(Report(run, 2, 1, 3), soon).status().message()),
             Catch::StartsWith("rank: must be in [0, 2)"));
  CHECK_THAT(std::string(f.runs().Report(Report(run, 0, 2, 3), soon).status().message()),
             Catch::Contains("has 1 steps, got 2") && Catch::StartsWith("steps: "));
  CHECK(std::string(f.runs().Report(Report(run, 0, 1, 2), soon).status().message()) ==
        "steps[0].times_us: the run times 3 iterations, got 2 times");
  v1::StepRequest step;
  step.set_run_id(run.run_id());
  step.set_group_id("g");
  step.set_step(1);
  step.set_phase(v1::VERIFIED);
  CHECK(f.runs().Step(step, soon).status().message() ==
        absl::StrCat("step: run \"", run.run_id(), "\" has 1 steps, got 1"));

  // Rank 0 reports and stops waiting at its own deadline; its second report
  // is refused; rank 1's report decides the run for both.
  absl::StatusOr<v1::TuneResponse> first =
      f.runs().Report(Report(run, 0, 1, 3), absl::Now() + absl::Milliseconds(20));
  CHECK(first.status().code() == absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<v1::TuneResponse> second = f.runs().Report(Report(run, 0, 1, 3), soon);
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  // The barriers were never passed: the step is ruled out.
  absl::StatusOr<v1::TuneResponse> last = f.runs().Report(Report(run, 1, 1, 3), soon);
  REQUIRE(last.ok());
  CHECK(last->results(0).status() == v1::FAILED);
  CHECK(last->results(0).ranked(0).reason() == "the ranks did not pass the step's barriers");
  absl::StatusOr<v1::TuneResponse> after = f.runs().Report(Report(run, 0, 1, 3), soon);
  REQUIRE(after.ok());
  CHECK(Shared(*after) == Shared(*last));
}

TEST_CASE("two runs on one daemon do not overlap: the second waits for the lease") {
  Runs f("two-runs");
  std::optional<v1::TuneResponse> first = f.Open("g", 2, {"client:k1"});
  REQUIRE(first.has_value());

  // A round whose bound passes while the first run holds the devices falls
  // back, saying why.
  std::optional<v1::TuneResponse> busy =
      f.Open("h", 2, {"client:k2"}, absl::Milliseconds(50));
  REQUIRE(busy.has_value());
  CHECK_FALSE(busy->has_run());
  CHECK(busy->results(0).status() == v1::FALLBACK);
  CHECK_THAT(busy->results(0).reason(), Catch::StartsWith("not measured: the devices"));

  std::atomic<bool> first_decided{false};
  std::atomic<bool> second_opened_early{false};
  std::optional<v1::TuneResponse> second;
  std::thread opener([&] {
    second = f.Open("h", 2, {"client:k2"});
    second_opened_early = !first_decided.load();
  });
  absl::SleepFor(absl::Milliseconds(100));
  first_decided = true;
  f.RunAll(first->run(), "g", {RankScript(), RankScript()});
  opener.join();
  CHECK_FALSE(second_opened_early.load());
  REQUIRE(second.has_value());
  CHECK(second->has_run());
}

// Client candidates k0 .. k{n-1}: a schedule of n steps in one pass.
std::vector<std::string> ClientCandidates(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("client:k", i));
  return out;
}

TEST_CASE("a run no rank calls gives the lease back at its first step's bound; a late call "
          "finds it forgotten") {
  Runs f("idle");
  const absl::Time before = absl::Now();
  std::optional<v1::TuneResponse> opened = f.Open("g", 2, ClientCandidates(10));
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  // The first step's bound: the fixture's report grace and one step.
  const absl::Duration first = absl::Milliseconds(300 + kTimeoutMs);
  const absl::Duration within = absl::Milliseconds(run.report_within_ms());
  REQUIRE(first * 3 < within);
  CHECK(f.stack().engine().lease().busy());

  // Another measurement waiting for the devices gets them at the first
  // step's bound, well before the schedule's.
  absl::StatusOr<DeviceLease::Token> next =
      f.stack().engine().lease().Acquire(before + within / 2);
  const absl::Time got = absl::Now();
  REQUIRE(next.ok());
  CHECK(got - before >= first);

  // The run was forgotten undecided (any call drops it); a rank's late
  // RunStep and Report are refused as for any run this daemon forgot.
  v1::StepRequest unknown;
  unknown.set_run_id("0123");
  unknown.set_group_id("g");
  CHECK(f.runs().Step(unknown, absl::Now()).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(f.runs().size() == 0);
  v1::StepRequest late;
  late.set_run_id(run.run_id());
  late.set_group_id("g");
  late.set_phase(v1::VERIFIED);
  late.set_ok(true);
  absl::StatusOr<v1::StepReply> step = f.runs().Step(late, absl::Now() + absl::Seconds(5));
  CHECK(step.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(step.status().message() ==
        absl::StrCat("run \"", run.run_id(),
                     "\" is unknown to this daemon (forgotten, or opened before a restart)"));
  CHECK(f.runs().Report(Report(run, 1, run.steps_size(), run.iterations()), absl::Now())
            .status()
            .code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.stack().metrics().runs_decided->value() == 0);
  CHECK(next->held());
}

TEST_CASE("a run holds the lease while its ranks call, and gives it back when they all fall "
          "silent, before its schedule's bound") {
  Runs f("stepped");
  const absl::Time before = absl::Now();
  std::optional<v1::TuneResponse> opened = f.Open("g", 1, ClientCandidates(10));
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  const absl::Duration first = absl::Milliseconds(300 + kTimeoutMs);
  // What a call holds the lease for: two candidate timeouts and the grace.
  const absl::Duration hold = absl::Milliseconds(2 * kTimeoutMs + 300);
  const absl::Duration within = absl::Milliseconds(run.report_within_ms());
  REQUIRE(first + 2 * hold < within);
  CHECK(f.Step(run, "g", 0, 0, v1::VERIFIED, "").proceed());

  // Past the first step's bound the devices are still the run's.
  DeviceLease& lease = f.stack().engine().lease();
  CHECK(lease.Acquire(before + first).status().code() == absl::StatusCode::kDeadlineExceeded);
  const absl::Time last_call = absl::Now();
  CHECK(f.Step(run, "g", 0, 0, v1::WARMED_UP, "").proceed());
  // The rank falls silent: free a hold after its last call, well before the
  // schedule's bound, though the rank never reported.
  absl::StatusOr<DeviceLease::Token> next = lease.Acquire(before + within + absl::Seconds(10));
  const absl::Time got = absl::Now();
  REQUIRE(next.ok());
  CHECK(got - last_call >= hold);
  CHECK(got - before < within);
  // The run was kept to its bound: the rank's report after it gets the
  // decision, the devices staying with their new holder.
  absl::SleepFor(before + within + absl::Milliseconds(50) - absl::Now());
  absl::StatusOr<v1::TuneResponse> answer =
      f.runs().Report(Report(run, 0, run.steps_size(), run.iterations()), absl::Now());
  REQUIRE(answer.ok());
  CHECK(Ranked(*answer, 0).reason() ==
        absl::StrCat("rank 0 sent no report within ", run.report_within_ms(), " ms"));
  CHECK(f.stack().metrics().runs_decided->value() == 1);
  CHECK(next->held());
}

TEST_CASE("runs are forgotten past their bound and retention") {
  Runs f("forgotten");
  std::optional<v1::TuneResponse> a = f.Open("g", 1, {"client:first"});
  REQUIRE(a.has_value());
  CHECK(f.runs().size() == 1);
  f.RunAll(a->run(), "g", {RankScript()});
  for (int i = 0; i < 20; ++i) {
    std::optional<v1::TuneResponse> next =
        f.Open(absl::StrCat("g", i), 1, {absl::StrCat("client:k", i)});
    REQUIRE(next.has_value());
    f.RunAll(next->run(), absl::StrCat("g", i), {RankScript()});
  }
  CHECK(f.runs().size() == 16);  // max_runs_kept
  v1::RunReport late = Report(a->run(), 0, 1, 3);
  CHECK(f.runs().Report(late, absl::Now()).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("how a candidate was timed: graph unless some rank timed a step by events; the "
          "host's time per call, the largest rank median") {
  Runs f("timed-by");
  ValidRequest request = f.stack().Valid(
      ClientRankRequest("g", 0, 2, {"client:k1", "client:k2"}, kTimeoutMs));
  request.engine.passes.min_passes = request.engine.passes.max_passes = 3;
  request.engine.schedule.cuda_graph = request.cuda_graph = true;
  std::optional<v1::TuneResponse> opened =
      f.runs().Start(request, "round-1", absl::Now() + absl::Seconds(10), absl::ZeroDuration());
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  CHECK(run.timing_mode() == v1::CUDA_GRAPH);
  REQUIRE(run.steps_size() == 6);
  // k2 (candidate 1) could not be captured on rank 1 in its last pass.
  auto by = [&run](int rank) {
    return [&run, rank](int step) {
      const bool late_k2 = run.steps(step).candidate() == 1 && run.steps(step).pass() == 2;
      return rank == 1 && late_k2 ? v1::EVENT_LOOP : v1::CUDA_GRAPH;
    };
  };
  RankScript r0, r1;
  r0.timed_by = by(0);
  r1.timed_by = by(1);
  // Rank 0: host times 10, 30, 20 per pass (median 20); rank 1: 5, 40, 41 (median 40).
  r0.host_us = [&run](int step) { return std::vector<double>{10, 30, 20}[run.steps(step).pass()]; };
  r1.host_us = [&run](int step) { return std::vector<double>{5, 40, 41}[run.steps(step).pass()]; };
  std::vector<RankEnd> ends = f.RunAll(run, "g", {r0, r1});
  for (const RankEnd& end : ends) {
    REQUIRE(end.answer.ok());
    CHECK(Ranked(*end.answer, 0).timed_by() == v1::CUDA_GRAPH);
    CHECK(Ranked(*end.answer, 1).timed_by() == v1::EVENT_LOOP);
    CHECK(Ranked(*end.answer, 0).host_us() == 40.0);
    CHECK(Ranked(*end.answer, 1).host_us() == 40.0);
  }
}

// 8 fixed passes, then up to 8 more of 2 timed iterations each.
PassOptions Adaptive() {
  PassOptions passes;
  passes.min_passes = 8;
  passes.max_passes = 16;
  passes.warmup = 1;
  passes.iterations = 2;
  passes.max_iterations = 200;
  passes.budget = absl::Seconds(30);
  return passes;
}

// k1 100 us; k2 90 us, but 105 us in pass 0 (a burst): after the 8 fixed
// passes its ratio to k1 ranges over [0.90, 1.05], a tie; each later pass
// adds a 0.90. k3 200 us, a clear loser.
double Resolving(const v1::ClientStep& step) {
  if (step.candidate() == 0) return 100;
  if (step.candidate() == 2) return 200;
  return step.pass() == 0 ? 105 : 90;
}

const std::vector<std::string> kThree = {"client:k1", "client:k2", "client:k3"};

TEST_CASE(
    "a tie after the fixed passes is measured again, the contenders only, until it is "
    "resolved; every rank gets the same continuations and the same decision") {
  Runs f("continued");
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 2, kThree, Adaptive());
  REQUIRE(opened.has_value());
  REQUIRE(opened->run().steps_size() == 24);
  CHECK(opened->run().first_step() == 0);
  RankScript r;
  r.continues = true;
  r.step_us = Resolving;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, r});
  for (const RankEnd& e : ends) REQUIRE(e.answer.ok());
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  REQUIRE(ends[0].continuations.size() == ends[1].continuations.size());
  // With 12 pairs the 99 % interval drops the burst: k2 is faster beyond
  // the noise, k1 contends no more.
  REQUIRE(ends[0].continuations.size() == 4);
  int first = 24;
  for (size_t c = 0; c < ends[0].continuations.size(); ++c) {
    INFO("continuation " << c);
    const v1::ClientRun& run = ends[0].continuations[c];
    CHECK(run.SerializeAsString() == ends[1].continuations[c].SerializeAsString());
    CHECK(run.run_id() == opened->run().run_id());
    CHECK(run.first_step() == first);
    REQUIRE(run.steps_size() == 2);  // k1 and k2, never k3
    std::vector<int> candidates;
    for (const v1::ClientStep& s : run.steps()) {
      CHECK(s.problem() == 0);
      CHECK(s.pass() == 8 + static_cast<int>(c));
      CHECK(s.reference() == 0);
      candidates.push_back(s.candidate());
    }
    // Rotated as the engine's passes are.
    CHECK(candidates == (c % 2 == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0}));
    CHECK(run.iterations() == 2);
    CHECK(run.warmup() == 1);
    CHECK(run.candidate_timeout_ms() == kTimeoutMs);
    CHECK(run.report_within_ms() == 300 + 2 * kTimeoutMs);
    first += run.steps_size();
  }
  const v1::ProblemResult& p = ends[0].answer->results(0);
  CHECK(p.status() == v1::TUNED);
  CHECK(p.winner() == "name of k2");
  CHECK(p.confidence() == v1::DECISIVE);
  CHECK(Ranked(*ends[0].answer, 1).passes() == 12);
  CHECK(Ranked(*ends[0].answer, 1).iterations() == 8 + 4 * 2);
  CHECK(Ranked(*ends[0].answer, 0).passes() == 12);
  CHECK(Ranked(*ends[0].answer, 0).paired() == 12);
  CHECK(Ranked(*ends[0].answer, 2).passes() == 8);
  CHECK(p.measured_iterations() == 16 + 16 + 8);
  CHECK(f.stack().cache().size() == 1);  // every rank reported every schedule
  CHECK_FALSE(f.stack().engine().lease().busy());
}

TEST_CASE("a client that does not say it continues gets the decision of the fixed passes") {
  Runs f("not-continued");
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 2, kThree, Adaptive());
  REQUIRE(opened.has_value());
  RankScript r, old;
  r.continues = true;
  r.step_us = old.step_us = Resolving;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, old});
  for (const RankEnd& e : ends) {
    REQUIRE(e.answer.ok());
    CHECK(e.continuations.empty());
  }
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  const v1::ProblemResult& p = ends[0].answer->results(0);
  CHECK(p.winner() == "name of k2");  // the better estimate of a tie
  CHECK(p.confidence() == v1::WITHIN_NOISE);
  CHECK(Ranked(*ends[0].answer, 1).passes() == 8);
}

TEST_CASE("a clear winner after the fixed passes is decided at once") {
  Runs f("clear");
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 2, kThree, Adaptive());
  REQUIRE(opened.has_value());
  RankScript r;
  r.continues = true;
  r.step_us = [](const v1::ClientStep& s) { return s.candidate() == 1 ? 50.0 : 100.0; };
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, r});
  for (const RankEnd& e : ends) {
    REQUIRE(e.answer.ok());
    CHECK(e.continuations.empty());
  }
  const v1::ProblemResult& p = ends[0].answer->results(0);
  CHECK(p.winner() == "name of k2");
  CHECK(p.confidence() == v1::DECISIVE);
  CHECK(Ranked(*ends[0].answer, 1).passes() == 8);
}

TEST_CASE("continuations stop at max_passes, at the iteration cap and at the pass budget") {
  // k1 100 us; k2 97 us and 103 us in turn: a tie that never resolves.
  RankScript r;
  r.continues = true;
  r.step_us = [](const v1::ClientStep& s) {
    return s.candidate() == 0 ? 100.0 : s.pass() % 2 == 0 ? 97.0 : 103.0;
  };
  struct Case {
    const char* name;
    std::function<void(PassOptions*)> change;
    size_t continuations;
  };
  const std::vector<Case> cases = {
      {"max_passes 11", [](PassOptions* p) { p->max_passes = 11; }, 3},
      {"8 + 2 x 2 iterations at most", [](PassOptions* p) { p->max_iterations = 12; }, 2},
      {"no budget", [](PassOptions* p) { p->budget = absl::ZeroDuration(); }, 0},
      {"max_passes 16", [](PassOptions*) {}, 8},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Runs f(absl::StrCat("stops-", &c - cases.data()));
    PassOptions passes = Adaptive();
    c.change(&passes);
    std::optional<v1::TuneResponse> opened =
        f.OpenAdaptive("g", 2, {"client:k1", "client:k2"}, passes);
    REQUIRE(opened.has_value());
    std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, r});
    for (const RankEnd& e : ends) {
      REQUIRE(e.answer.ok());
      CHECK(e.continuations.size() == c.continuations);
      CHECK_FALSE(e.answer->has_run());
    }
    CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
    const v1::ProblemResult& p = ends[0].answer->results(0);
    CHECK(p.status() == v1::TUNED);
    CHECK(p.confidence() != v1::DECISIVE);
    CHECK(Ranked(*ends[0].answer, 1).passes() == 8 + static_cast<int>(c.continuations));
  }
}

TEST_CASE(
    "a rank lost during a continuation: the others get one answer from the schedules "
    "every rank completed, within the bound; nothing stored") {
  Runs f("lost-continued", absl::Minutes(1));
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 3, kThree, Adaptive());
  REQUIRE(opened.has_value());
  RankScript r, gone;
  r.continues = gone.continues = true;
  r.step_us = gone.step_us = Resolving;
  gone.stop_before_step = 25;  // the second step of the first continuation
  const absl::Time start = absl::Now();
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, r, gone});
  CHECK(absl::Now() - start < absl::Seconds(30));  // not the minute of the bound
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    REQUIRE(ends[rank].answer.ok());
    CHECK(ends[rank].continuations.size() == 1);
    CHECK(ends[rank].verified.back().reason() ==
          "rank 2 did not reach step 25 (verified) within 200 ms");
  }
  CHECK(Shared(*ends[0].answer) == Shared(*ends[1].answer));
  const v1::ProblemResult& p = ends[0].answer->results(0);
  // The fixed passes' decision: the continuation is not used.
  CHECK(p.status() == v1::TUNED);
  CHECK(p.winner() == "name of k2");
  CHECK(p.confidence() == v1::WITHIN_NOISE);
  for (int c = 0; c < 3; ++c) {
    CHECK(Ranked(*ends[0].answer, c).ok());
    CHECK(Ranked(*ends[0].answer, c).passes() == 8);
  }
  CHECK(f.stack().cache().size() == 0);
  CHECK_FALSE(f.stack().engine().lease().busy());

  // The lost rank's report of the continuation gets that decision.
  v1::RunReport late = Report(ends[0].continuations[0], 2, 2, 2);
  late.set_first_step(24);
  for (int i = 0; i < 2; ++i) late.mutable_steps(i)->set_step(24 + i);
  absl::StatusOr<v1::TuneResponse> again = f.runs().Report(late, absl::Now() + absl::Seconds(5));
  REQUIRE(again.ok());
  CHECK(Shared(*again) == Shared(*ends[0].answer));
}

TEST_CASE(
    "a rank that does not report its continuation: decided at that schedule's bound "
    "from the schedules every rank completed") {
  Runs f("silent-continued");
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 2, kThree, Adaptive());
  REQUIRE(opened.has_value());
  RankScript r, silent;
  r.continues = silent.continues = true;
  r.step_us = silent.step_us = Resolving;
  silent.reports = 1;  // runs the continuation's steps, sends no report of them
  const absl::Time start = absl::Now();
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {r, silent});
  REQUIRE(ends[0].answer.ok());
  REQUIRE(ends[0].continuations.size() == 1);
  // Its bound: 300 ms + 2 steps x 200 ms after it was handed out.
  CHECK(absl::Now() - start < absl::Seconds(10));
  const v1::ProblemResult& p = ends[0].answer->results(0);
  CHECK(p.confidence() == v1::WITHIN_NOISE);
  CHECK(Ranked(*ends[0].answer, 1).passes() == 8);
  CHECK(f.stack().cache().size() == 0);
}

TEST_CASE("a continuation's reports are checked against its own schedule") {
  Runs f("continued-reports", absl::Seconds(30));
  std::optional<v1::TuneResponse> opened = f.OpenAdaptive("g", 2, kThree, Adaptive());
  REQUIRE(opened.has_value());
  RankScript r;
  r.continues = true;
  r.step_us = Resolving;
  // Rank 0 reports the fixed passes alone (its thread), rank 1 here too:
  // the continuation comes back to both.
  RankScript once = r;
  once.stop_before_step = 24;
  std::vector<RankEnd> ends = f.RunAll(opened->run(), "g", {once, once});
  REQUIRE(ends[0].continuations.size() == 1);
  const v1::ClientRun& next = ends[0].continuations[0];
  const absl::Time soon = absl::Now() + absl::Seconds(5);

  v1::RunReport wrong = Report(next, 0, 2, 2);
  wrong.set_first_step(23);
  for (int i = 0; i < 2; ++i) wrong.mutable_steps(i)->set_step(23 + i);
  CHECK(f.runs().Report(wrong, soon).status().message() ==
        absl::StrCat("first_step: run \"", next.run_id(),
                     "\" has no schedule from step 23 (its schedules start at 0, 24)"));
  v1::RunReport longer = Report(next, 0, 3, 2);
  longer.set_first_step(24);
  for (int i = 0; i < 3; ++i) longer.mutable_steps(i)->set_step(24 + i);
  CHECK(f.runs().Report(longer, soon).status().message() ==
        absl::StrCat("steps: run \"", next.run_id(), "\" has 2 steps from step 24, got 3"));
  v1::RunReport fewer = Report(next, 0, 2, 3);
  fewer.set_first_step(24);
  for (int i = 0; i < 2; ++i) fewer.mutable_steps(i)->set_step(24 + i);
  CHECK(f.runs().Report(fewer, soon).status().message() ==
        "steps[0].times_us: the run times 2 iterations, got 3 times");
  // A second report of the fixed passes while the continuation runs.
  v1::RunReport again = Report(opened->run(), 0, 24, 1);
  CHECK(f.runs().Report(again, soon).status().code() == absl::StatusCode::kFailedPrecondition);
  v1::StepRequest step;
  step.set_run_id(next.run_id());
  step.set_group_id("g");
  step.set_step(26);
  step.set_phase(v1::VERIFIED);
  CHECK(f.runs().Step(step, soon).status().message() ==
        absl::StrCat("step: run \"", next.run_id(), "\" has 26 steps, got 26"));
}

TEST_CASE("a note sent ok at a barrier reaches every rank, the lowest rank's first, and the "
          "step goes on") {
  Runs f("note");
  std::optional<v1::TuneResponse> opened =
      f.Open("g", 3, {"client:k1", "client:k2"}, absl::Seconds(10), 1);
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  REQUIRE(run.steps_size() == 2);
  // Ranks 1 and 2 could not capture k2 (step 1) as a graph; rank 0 could.
  RankScript r0, r1, r2;
  r1.note = [](int step) { return step == 1 ? std::string("timed by events: one") : ""; };
  r2.note = [](int step) { return step == 1 ? std::string("timed by events: two") : ""; };
  std::vector<RankEnd> ends = f.RunAll(run, "g", {r0, r1, r2});
  for (const RankEnd& end : ends) {
    REQUIRE(end.warmed.size() == 2);
    CHECK(end.warmed[0].proceed());
    CHECK(end.warmed[0].reason().empty());
    CHECK(end.warmed[1].proceed());
    CHECK(end.warmed[1].reason() == "rank 1: timed by events: one");
    REQUIRE(end.answer.ok());
    CHECK(Ranked(*end.answer, 0).ok());
    CHECK(Ranked(*end.answer, 1).ok());
  }
}

TEST_CASE("runs are forgotten past max_kept_bytes, the oldest first") {
  constexpr int64_t kMaxBytes = 32 << 10;
  Runs f("bytes", absl::Milliseconds(300), 4096, kMaxBytes);
  std::optional<v1::TuneResponse> first = f.Open("g", 1, {"client:first"});
  REQUIRE(first.has_value());
  f.RunAll(first->run(), "g", {RankScript()});
  const int64_t one = f.runs().kept_bytes();
  INFO("one decided run: " << one << " bytes");
  REQUIRE(one > 0);
  const int runs = static_cast<int>(2 * kMaxBytes / one) + 2;
  std::optional<v1::TuneResponse> last;
  for (int i = 0; i < runs; ++i) {
    last = f.Open(absl::StrCat("g", i), 1, {absl::StrCat("client:k", i)});
    REQUIRE(last.has_value());
    f.RunAll(last->run(), absl::StrCat("g", i), {RankScript()});
    CHECK(f.runs().kept_bytes() <= kMaxBytes);
  }
  CHECK(f.runs().size() < runs);
  CHECK(f.runs().size() >= 2);
  CHECK(f.runs().Report(Report(first->run(), 0, 1, 3), absl::Now()).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  v1::RunReport late = Report(last->run(), 0, 1, 3);
  late.set_group_id(absl::StrCat("g", runs - 1));
  CHECK(f.runs().Report(late, absl::Now()).ok());  // the newest is kept
}

// Every rank of `run` at both barriers of each of its steps, with a note of
// `note_bytes` bytes at each.
void StepThroughWithNotes(Runs& f, const v1::ClientRun& run, int world, size_t note_bytes) {
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&f, &run, r, note_bytes] {
      const std::string note(note_bytes, 'n');
      for (int k = 0; k < run.steps_size(); ++k) {
        f.Step(run, "g", r, k, v1::VERIFIED, "", note);
        f.Step(run, "g", r, k, v1::WARMED_UP, "", note);
      }
    });
  }
  for (std::thread& t : ranks) t.join();
}

TEST_CASE("the barriers' notes count among the kept bytes and are let go at the decision") {
  constexpr size_t kNote = 1000;
  SECTION("counted while the run is undecided, let go when it is decided") {
    Runs f("barrier-bytes");
    std::optional<v1::TuneResponse> opened = f.Open("g", 2, ClientCandidates(8));
    REQUIRE(opened.has_value());
    const v1::ClientRun& run = opened->run();
    const int64_t before = f.runs().kept_bytes();
    StepThroughWithNotes(f, run, 2, kNote);
    // Before: the barriers' notes (2 ranks x 2 barriers x 8 steps, and each
    // barrier's reply) were held by the run but not counted, nor ever let go.
    const int64_t stepped = f.runs().kept_bytes();
    INFO("before " << before << ", after the barriers " << stepped);
    CHECK(stepped - before >= static_cast<int64_t>(2 * 2 * 8 * kNote));
    for (int r = 0; r < 2; ++r) {
      CHECK(f.runs()
                .Report(Report(run, r, run.steps_size(), run.iterations()),
                        absl::Now() + absl::Seconds(5))
                .ok());
    }
    REQUIRE(f.stack().metrics().runs_decided->value() == 1);
    // The decision is kept, the notes are not.
    const int64_t decided = f.runs().kept_bytes();
    CHECK(decided - before < static_cast<int64_t>(2 * 8 * kNote));
    // A barrier of the decided run: refused at once, nothing kept for it.
    const v1::StepReply late = f.Step(run, "g", 0, 0, v1::VERIFIED, "", std::string(kNote, 'n'));
    CHECK_FALSE(late.proceed());
    CHECK(late.reason() == "the run was already decided");
    CHECK(f.runs().kept_bytes() == decided);
  }
  SECTION("a run whose barriers pass max_kept_bytes is forgotten") {
    constexpr int64_t kMaxBytes = 64 << 10;
    Runs f("barrier-cap", absl::Milliseconds(300), 4096, kMaxBytes);
    std::optional<v1::TuneResponse> opened = f.Open("g", 2, ClientCandidates(32));
    REQUIRE(opened.has_value());
    const v1::ClientRun& run = opened->run();
    StepThroughWithNotes(f, run, 2, kNote);
    CHECK(f.runs().kept_bytes() <= kMaxBytes);
    CHECK(f.runs()
              .Report(Report(run, 0, run.steps_size(), run.iterations()), absl::Now())
              .status()
              .code() == absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("a report's times longer than its schedule's bound are refused, naming the field") {
  Runs f("absurd-times", absl::Seconds(30));
  std::optional<v1::TuneResponse> opened = f.Open("g", 1, {"client:k1", "client:k2"});
  REQUIRE(opened.has_value());
  const v1::ClientRun& run = opened->run();
  const double bound_us = 1e3 * static_cast<double>(run.report_within_ms());
  const absl::Time soon = absl::Now() + absl::Seconds(5);
  // Before: 1e308 us was taken, and the answer held an ok candidate whose
  // median and mean were inf.
  v1::RunReport absurd = Report(run, 0, run.steps_size(), run.iterations());
  absurd.mutable_steps(1)->set_times_us(0, 1e308);
  absl::StatusOr<v1::TuneResponse> refused = f.runs().Report(absurd, soon);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.status().message() ==
        absl::StrCat("steps[1].times_us[0]: 1e+308 us is longer than the schedule's bound of ",
                     run.report_within_ms(), " ms (report_within_ms)"));
  v1::RunReport host = Report(run, 0, run.steps_size(), run.iterations());
  host.mutable_steps(0)->set_host_us(2 * bound_us);
  CHECK_THAT(
      std::string(f.runs().Report(host, soon).status().message()),
      Catch::StartsWith("steps[0].host_us: ") &&
          Catch::EndsWith("us is longer than the schedule's bound of " +
                          std::to_string(run.report_within_ms()) + " ms (report_within_ms)"));
  // Nothing of the refused reports was kept: the rank's report within the
  // bound decides the run.
  v1::RunReport within = Report(run, 0, run.steps_size(), run.iterations());
  within.mutable_steps(1)->set_times_us(0, bound_us);
  absl::StatusOr<v1::TuneResponse> answer = f.runs().Report(within, soon);
  REQUIRE(answer.ok());
  CHECK(answer->results(0).status() == v1::FAILED);  // no barrier was passed
}

}  // namespace
}  // namespace autotuned::clientrun

