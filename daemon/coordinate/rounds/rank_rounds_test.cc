// Per-rank rounds over the scripted node (daemon/testing/scripted_node.h):
// ranks are threads, each calling Round as its Tune would.
#include "daemon/coordinate/rounds/rank_rounds.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/coordinate/solver/solver_testing.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned::rounds {
namespace {

using testing::RankRequest;
using testing::Shared;

struct Answer {
  absl::Status status;
  v1::TuneResponse response;
};

// A cross-daemon runner that measures nothing: every planned problem comes
// back FAILED with the reason "scripted".
class FakeCrossRunner : public CrossRunner {
 public:
  std::optional<Plan> PlanRun(const ValidRequest& request,
                              const rendezvous::Arrival& arrival) override {
    ++planned;
    Plan plan;
    auto run = std::make_shared<v1::CrossRun>();
    run->set_run_id(absl::StrCat("run-", arrival.round_id));
    for (size_t i = 0; i < request.problems.size(); ++i) {
      run->add_problems(static_cast<int>(i));
      plan.cached.emplace_back();
    }
    plan.run = std::move(run);
    return plan;
  }
  rendezvous::Decision Run(const ValidRequest& request, const rendezvous::Arrival&,
                           const Plan& plan, absl::Time, const PublishFn& publish) override {
    v1::TuneResponse measured;
    measured.set_round_id(plan.run->run_id());
    for (size_t i = 0; i < request.problems.size(); ++i) {
      v1::ProblemResult* r = measured.add_results();
      r->set_status(v1::FAILED);
      r->set_reason("scripted");
    }
    absl::SleepFor(absl::Milliseconds(50));
    ++ran;
    return publish(std::move(measured));
  }
  std::atomic<int> planned{0};
  std::atomic<int> ran{0};
};

class RoundsFixture {
 public:
  explicit RoundsFixture(const std::string& cache_name, const std::string& self_daemon = "",
                         bool measure_after_fallback = true)
      : stack_(cache_name, self_daemon) {
    RankRoundsOptions options;
    options.measure_after_fallback = measure_after_fallback;
    options.max_world_size = stack_.backend().max_world_size();
    rounds_ = std::make_unique<RankRounds>(&stack_.solver(), &cross_, nullptr,
                                           &stack_.metrics(), options);
  }

  ValidRequest Valid(const v1::TuneRequest& request, const std::string& asking = "") const {
    return stack_.Valid(request, asking);
  }
  Answer Ask(const v1::TuneRequest& request) {
    absl::StatusOr<v1::TuneResponse> r =
        rounds_->Round(Valid(request), absl::Now() + absl::Seconds(30));
    return r.ok() ? Answer{absl::OkStatus(), *std::move(r)} : Answer{r.status(), {}};
  }
  // Each request from its own thread, all at once.
  std::vector<Answer> AskTogether(const std::vector<v1::TuneRequest>& requests) {
    std::vector<Answer> answers(requests.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < requests.size(); ++i) {
      threads.emplace_back([&, i] { answers[i] = Ask(requests[i]); });
    }
    for (std::thread& t : threads) t.join();
    return answers;
  }
  // Waits (bounded) until `n` ranks wait in the rendezvous.
  bool Waiting(int n) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (rounds_->waiting() == n) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  }

  RankRounds& rounds() { return *rounds_; }
  FakeBackend& backend() { return stack_.backend(); }
  ResultCache& cache() { return stack_.cache(); }
  FakeCrossRunner& cross() { return cross_; }
  const metrics::DaemonMetrics& metrics() { return stack_.metrics(); }

 private:
  testing::ScriptedSolver stack_;
  FakeCrossRunner cross_;
  std::unique_ptr<RankRounds> rounds_;
};

TEST_CASE("four ranks asking one by one: one measurement, identical answers") {
  RoundsFixture f("ranks");
  std::vector<v1::TuneRequest> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(RankRequest("job", r));
  std::vector<Answer> answers = f.AskTogether(ranks);
  for (int r = 0; r < 4; ++r) {
    REQUIRE(answers[r].status.ok());
    const v1::ProblemResult& p = answers[r].response.results(0);
    CHECK(p.status() == v1::TUNED);
    CHECK(p.winner() == "all_reduce/b");
    CHECK(p.problem().label() == absl::StrCat("op-of-rank-", r));
    CHECK(Shared(answers[r].response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 3);  // one round: three candidates, measured once

  // Asked again: the next round, answered from the cache at once.
  answers = f.AskTogether(ranks);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::CACHED);
    CHECK(Shared(a.response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 3);
  const metrics::DaemonMetrics& m = f.metrics();
  CHECK(m.rounds->value() == 8);
  CHECK(m.results_tuned->value() == 4);
  CHECK(m.results_cached->value() == 4);
  // One round was measured: its rendezvous overhead is on record, positive
  // and a part of what the rounds took.
  CHECK(m.round_overhead->snapshot().count == 1);
  CHECK(m.round_overhead->snapshot().sum > 0);
  CHECK(m.round_overhead->snapshot().sum < m.round_latency->snapshot().sum);
  CHECK(f.cross().planned == 0);  // one daemon: nothing across
}

TEST_CASE("a rank missing: FALLBACK for the three, the same for the fourth asking late") {
  RoundsFixture f("missing");
  std::vector<v1::TuneRequest> three;
  for (int r : {0, 1, 3}) three.push_back(RankRequest("job", r, 4, 1000000));
  std::vector<Answer> answers = f.AskTogether(three);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    REQUIRE(a.response.results_size() == 1);
    const v1::ProblemResult& p = a.response.results(0);
    CHECK(p.status() == v1::FALLBACK);
    CHECK(p.winner() == "all_reduce/a");  // the default: the first candidate
    CHECK(p.winner_index() == 0);
    CHECK(p.reason() ==
          "not every rank arrived within the pre-sync window (3 of 4 after 1000000 us)");
    CHECK(p.ranked_size() == 0);
    CHECK(Shared(a.response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 0);

  Answer late = f.Ask(RankRequest("job", 2, 4, 1000000));
  REQUIRE(late.status.ok());
  CHECK(Shared(late.response) == Shared(answers[0].response));
  CHECK(late.response.results(0).problem().label() == "op-of-rank-2");

  // Everyone has asked now: the round is measured in the background, and
  // the next round of the group is answered from the cache at once.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && f.cache().size() < 1) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(f.cache().size() == 1);
  CHECK(f.cache().List()[0].winner() == "all_reduce/b");
  std::vector<v1::TuneRequest> four;
  for (int r = 0; r < 4; ++r) four.push_back(RankRequest("job", r, 4, 1000000));
  answers = f.AskTogether(four);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::CACHED);
    CHECK(a.response.results(0).winner() == "all_reduce/b");
  }
  CHECK(f.metrics().results_fallback->value() == 4);
  CHECK(f.metrics().results_cached->value() == 4);
}

TEST_CASE("no measurement after a fallback when the configuration says so") {
  RoundsFixture f("no_background", "", /*measure_after_fallback=*/false);
  std::vector<v1::TuneRequest> three;
  for (int r : {0, 1, 3}) three.push_back(RankRequest("job", r, 4, 1000));
  for (const Answer& a : f.AskTogether(three)) REQUIRE(a.status.ok());
  REQUIRE(f.Ask(RankRequest("job", 2, 4, 1000)).status.ok());
  absl::SleepFor(absl::Milliseconds(200));
  CHECK(f.backend().runs() == 0);
  CHECK(f.cache().size() == 0);
}

TEST_CASE("a round with candidates the ranks run is not measured after its fallback") {
  RoundsFixture f("no_background_own");
  auto own = [](int r) {
    v1::TuneRequest req = testing::ClientRankRequest("own", r, 2, {"all_reduce/c", "client:k"});
    req.mutable_options()->set_presync_window_us(1000);
    return req;
  };
  Answer first = f.Ask(own(0));
  REQUIRE(first.status.ok());
  CHECK(first.response.results(0).status() == v1::FALLBACK);
  CHECK(first.response.results(0).winner() == "all_reduce/c");
  REQUIRE(f.Ask(own(1)).status.ok());
  // A round of catalogue candidates falling back after it is measured in the
  // background (one worker, in order): only its candidates ran.
  std::vector<v1::TuneRequest> three;
  for (int r : {0, 1, 3}) three.push_back(RankRequest("job", r, 4, 1000));
  for (const Answer& a : f.AskTogether(three)) REQUIRE(a.status.ok());
  REQUIRE(f.Ask(RankRequest("job", 2, 4, 1000)).status.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && f.cache().size() < 1) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(f.cache().size() == 1);
  CHECK(f.backend().runs() == 3);
}

TEST_CASE("inconsistent ranks: every rank involved gets the same clear error") {
  RoundsFixture f("inconsistent");
  SECTION("members that disagree") {
    v1::TuneRequest odd = RankRequest("m", 1, 2);
    odd.mutable_group()->mutable_members(0)->set_local_gpu(3);
    Answer first;
    std::thread t([&] { first = f.Ask(RankRequest("m", 0, 2)); });
    REQUIRE(f.Waiting(1));
    Answer second = f.Ask(odd);
    t.join();
    CHECK(second.status.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(second.status.message()),
               Catch::StartsWith("group.members: ranks of group \"m\" disagree on the "
                                 "world size or member list: rank "));
    CHECK(first.status == second.status);
  }
  SECTION("a problem set that differs") {
    v1::TuneRequest odd = RankRequest("p", 1, 2);
    odd.mutable_problems(0)->set_count(2048);
    Answer first;
    std::thread t([&] { first = f.Ask(RankRequest("p", 0, 2)); });
    REQUIRE(f.Waiting(1));
    Answer second = f.Ask(odd);
    t.join();
    CHECK_THAT(std::string(second.status.message()),
               Catch::StartsWith("problems: ranks of group \"p\" asked for different "
                                 "problem sets at the same time"));
    CHECK(first.status == second.status);
  }
  SECTION("two callers claiming one rank") {
    Answer first;
    std::thread t([&] { first = f.Ask(RankRequest("d", 0, 2)); });
    REQUIRE(f.Waiting(1));
    Answer second = f.Ask(RankRequest("d", 0, 2));
    t.join();
    CHECK(second.status ==
          absl::InvalidArgumentError(
              "group.rank: rank 0 of group \"d\" already asked for this round"));
    CHECK(first.status == second.status);
    // The rank that asks later for that round gets it too.
    CHECK(f.Ask(RankRequest("d", 1, 2)).status == second.status);
  }
  CHECK(f.backend().runs() == 0);
}

TEST_CASE("a rank's own deadline ends its wait alone") {
  RoundsFixture f("deadline");
  const ValidRequest req = f.Valid(RankRequest("late", 0, 2));
  absl::StatusOr<v1::TuneResponse> r =
      f.rounds().Round(req, absl::Now() + absl::Milliseconds(50));
  CHECK(r.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("this ask is withdrawn"));
  CHECK(f.rounds().waiting() == 0);
}

TEST_CASE("ranks on several daemons: the GO round goes to the cross-daemon runner") {
  RoundsFixture f("across", "lead:1");
  const std::vector<std::string> daemons = {"lead:1", "follow:1"};
  SECTION("a follower's ask: GO at once, the run beside it") {
    Answer local;
    std::thread rank0([&] { local = f.Ask(testing::SpreadRequest("g", 0, daemons)); });
    REQUIRE(f.Waiting(1));
    std::shared_ptr<const v1::CrossRun> go;
    absl::StatusOr<v1::TuneResponse> remote =
        f.rounds().Round(f.Valid(testing::SpreadRequest("g", 1, daemons), "follow:1"),
                         absl::Now() + absl::Seconds(20), &go);
    REQUIRE(remote.ok());
    REQUIRE(go != nullptr);
    CHECK(remote->results_size() == 0);
    CHECK_THAT(go->run_id(), Catch::StartsWith("run-"));
    rank0.join();
    REQUIRE(local.status.ok());
    CHECK(local.response.round_id() == go->run_id());
    CHECK(local.response.results(0).status() == v1::FAILED);
    CHECK(local.response.results(0).problem().label() == "op-of-rank-0");
    CHECK(f.cross().ran == 1);
  }
  SECTION("the leader's own rank completing the round runs it") {
    std::shared_ptr<const v1::CrossRun> go;
    absl::StatusOr<v1::TuneResponse> remote;
    std::thread rank1([&] {
      remote = f.rounds().Round(f.Valid(testing::SpreadRequest("g", 1, daemons), "follow:1"),
                                absl::Now() + absl::Seconds(20), &go);
    });
    REQUIRE(f.Waiting(1));
    Answer local = f.Ask(testing::SpreadRequest("g", 0, daemons));
    rank1.join();
    REQUIRE(local.status.ok());
    CHECK(local.response.results(0).reason() == "scripted");
    REQUIRE(remote.ok());
    REQUIRE(go != nullptr);  // the follower's caller left at the announcement
    CHECK(f.cross().ran == 1);
  }
  CHECK(f.cross().planned == 1);
  CHECK(f.backend().runs() == 0);
}

}  // namespace
}  // namespace autotuned::rounds
