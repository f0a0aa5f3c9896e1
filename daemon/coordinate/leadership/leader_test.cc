// The leader's side of a group spread over daemons, the follower played by
// the test: its forwarded asks (Leader::Ready), its timings and barriers
// (CrossRuns), against the scripted node.
#include "daemon/coordinate/leadership/leader.h"

#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "daemon/coordinate/leadership/cross_runs.h"
#include "daemon/coordinate/solver/solver_testing.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned::leadership {
namespace {

using testing::SpreadRequest;

const std::vector<std::string> kDaemons = {"lead:1", "follow:1"};

class LeaderFixture {
 public:
  explicit LeaderFixture(const std::string& cache_name)
      : stack_(cache_name, "lead:1"),
        peer_client_("a-test-peer-token-16+", "lead:1", {"follow:1"}),
        cross_(&stack_.backend(), &stack_.engine(), &stack_.solver(), &peer_client_, "lead:1"),
        admission_(16, nullptr),
        rounds_(&stack_.solver(), &cross_, nullptr, &stack_.metrics(), Options()),
        leader_(&rounds_, &admission_) {}
  ~LeaderFixture() {
    if (rank0_.joinable()) rank0_.join();
  }

  ValidationContext Context() const { return stack_.Context(); }
  absl::StatusOr<v1::Decision> Ready(const v1::TuneRequest& req,
                                     const std::string& from = "follow:1") {
    v1::ReadyRequest ready;
    ready.set_from_daemon(from);
    ready.add_ranks(req.group().rank());
    ready.mutable_round()->set_group_id(req.group().id());
    *ready.mutable_request() = req;
    return leader_.Ready(ready, Context(), absl::Now() + absl::Seconds(20));
  }
  // Starts the cross-daemon round of `group`: the leader's own rank 0 asks
  // on a thread of its own, the follower's rank 1 is forwarded; the
  // leader's GO decision for it.
  v1::Decision StartRun(const std::string& group) {
    rank0_ = std::thread([this, group] {
      local_ = rounds_.Round(stack_.Valid(SpreadRequest(group, 0, kDaemons)),
                             absl::Now() + absl::Seconds(20));
    });
    absl::StatusOr<v1::Decision> remote = Ready(SpreadRequest(group, 1, kDaemons));
    REQUIRE(remote.ok());
    REQUIRE(remote->verdict() == v1::GO);
    return *remote;
  }
  // Ends the round StartRun started with the follower's `timings`: rank 0's
  // answer, and in `*decision` the leader's reply to the timings.
  v1::TuneResponse FinishRun(const v1::RankTimings& timings, v1::Decision* decision) {
    absl::StatusOr<v1::Decision> remote =
        cross_.Reduce(timings, absl::Now() + absl::Seconds(20));
    rank0_.join();
    REQUIRE(local_.ok());
    REQUIRE(remote.ok());
    *decision = *std::move(remote);
    return *std::move(local_);
  }

  FakeBackend& backend() { return stack_.backend(); }
  CrossRuns& cross() { return cross_; }
  Leader& leader() { return leader_; }
  Admission& admission() { return admission_; }

 private:
  static rounds::RankRoundsOptions Options() {
    rounds::RankRoundsOptions options;
    options.max_world_size = 4;
    return options;
  }

  testing::ScriptedSolver stack_;
  PeerClient peer_client_;
  CrossRuns cross_;
  Admission admission_;
  rounds::RankRounds rounds_;
  Leader leader_;
  absl::StatusOr<v1::TuneResponse> local_;  // StartRun's rank 0: its answer
  std::thread rank0_;                       // and its thread
};

// The follower's timings of rank 1 for three candidates, `us` per iteration.
v1::RankTimings Timings(const std::string& run_id, const std::vector<double>& us) {
  v1::RankTimings timings;
  timings.set_run_id(run_id);
  timings.set_from_daemon("follow:1");
  for (double t : us) {
    v1::RankResult* r = timings.add_steps()->add_ranks();
    r->set_rank(1);
    for (int i = 0; i < 3; ++i) r->add_iteration_us(t);
  }
  return timings;
}

TEST_CASE("the leader counts a follower's forwarded rank like a local one: GO, and the "
          "follower's timings max-reduced into the one answer") {
  LeaderFixture f("leader");
  const v1::Decision started = f.StartRun("g");
  CHECK(started.round().group_id() == "g");
  const v1::CrossRun go = started.go();
  CHECK(!go.run_id().empty());
  CHECK(go.problems_size() == 1);
  CHECK(go.candidate_timeout_ms() > 0);
  CHECK(go.passes() == 1);  // the test configuration's fixed passes

  // What the follower's rank 1 measured: a 10, 50, 25 us per iteration (rank
  // 0's script: 30, 10, 20). The max over ranks makes c the fastest.
  CHECK(f.cross().Reduce(v1::RankTimings(), absl::Now()).status() ==
        absl::InvalidArgumentError("run_id: required"));
  v1::RankTimings timings = Timings(go.run_id(), {10.0, 50.0, 25.0});
  v1::RankTimings stranger = timings;
  stranger.set_from_daemon("other:1");
  CHECK(f.cross().Reduce(stranger, absl::Now()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  v1::Decision remote;
  const v1::TuneResponse local = f.FinishRun(timings, &remote);
  REQUIRE(remote.verdict() == v1::ANSWERED);
  const v1::ProblemResult& result = local.results(0);
  CHECK(result.status() == v1::TUNED);
  CHECK(result.winner() == "all_reduce/c");
  REQUIRE(result.ranked_size() == 3);
  CHECK(result.ranked(0).rank_mean_us_size() == 2);
  CHECK(result.ranked(1).candidate().impl() == "all_reduce/a");
  CHECK(testing::Shared(remote.response()) == testing::Shared(local));
  CHECK(f.backend().runs() == 3);  // rank 0 alone, each candidate once

  // The run's other peer calls: bad input names the field; a finished run's
  // barriers are no longer open to strangers.
  CHECK(f.cross().Exchange(v1::ExchangeRequest(), absl::Now()).status().message() ==
        "run_id: required");
  v1::ExchangeRequest exchange;
  exchange.set_run_id(go.run_id());
  exchange.set_from_daemon("other:1");
  CHECK(f.cross().Exchange(exchange, absl::Now()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  exchange.set_run_id("no-such-run");
  CHECK(f.cross().Exchange(exchange, absl::Now()).status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("asks this daemon must not serve are REJECTED, nothing run") {
  LeaderFixture f("not_mine");
  absl::StatusOr<v1::Decision> remote = f.Ready(SpreadRequest("g", 0, kDaemons));
  REQUIRE(remote.ok());
  CHECK(remote->verdict() == v1::REJECTED);
  CHECK(remote->error_code() == static_cast<int>(absl::StatusCode::kInvalidArgument));
  CHECK_THAT(remote->error_message(), Catch::Contains("rank 0 is on this daemon"));

  remote = f.Ready(SpreadRequest("g", 1, {"other:1", "follow:1"}));
  REQUIRE(remote.ok());
  CHECK(remote->verdict() == v1::REJECTED);
  CHECK(remote->error_code() == static_cast<int>(absl::StatusCode::kFailedPrecondition));
  CHECK_THAT(remote->error_message(), Catch::Contains("does not lead group \"g\""));

  remote = f.Ready(SpreadRequest("g", 1, kDaemons), /*from=*/"");
  REQUIRE(remote.ok());
  CHECK(remote->verdict() == v1::REJECTED);
  CHECK(remote->error_message() == "from_daemon: must name the follower");

  v1::ReadyRequest two;
  two.set_from_daemon("follow:1");
  *two.mutable_request() = SpreadRequest("g", 1, kDaemons);
  two.add_ranks(1);
  two.add_ranks(1);
  remote = f.leader().Ready(two, f.Context(), absl::Now() + absl::Seconds(5));
  REQUIRE(remote.ok());
  CHECK(remote->error_message() == "ranks: one rank per Ready, the request's group.rank");

  f.admission().BeginDrain();
  CHECK(f.Ready(SpreadRequest("g", 1, kDaemons)).status() == Admission::DrainingError());
  CHECK(f.backend().runs() == 0);
}

TEST_CASE("a follower's abort with a status code this version does not know is UNKNOWN") {
  LeaderFixture f("abort");
  const std::string run_id = f.StartRun("a").go().run_id();

  v1::ExchangeRequest abort;
  abort.set_run_id(run_id);
  abort.set_step(0);
  abort.set_from_daemon("follow:1");
  abort.set_abort_code(99);
  abort.set_abort_message("from the future");
  REQUIRE(f.cross().Exchange(abort, absl::Now() + absl::Seconds(5)).ok());
  v1::ExchangeRequest barrier = abort;
  barrier.set_abort_code(0);
  const absl::Status step = f.cross().Exchange(barrier, absl::Now() + absl::Seconds(5)).status();
  CHECK(step.code() == absl::StatusCode::kUnknown);
  CHECK(step.message() ==
        "status code 99 is not a known code (0 to 16); the message: from the future");

  // Timings whose rank outcome carries such a code rule that candidate out.
  v1::RankTimings timings = Timings(run_id, {10.0, 10.0, 10.0});
  timings.mutable_steps(0)->mutable_ranks(0)->set_code(-3);
  timings.mutable_steps(0)->mutable_ranks(0)->set_message("odd");
  v1::Decision remote;
  const v1::TuneResponse local = f.FinishRun(timings, &remote);
  const v1::ProblemResult& result = local.results(0);
  REQUIRE(result.ranked_size() == 3);
  CHECK(result.winner() == "all_reduce/b");
  CHECK_FALSE(result.ranked(2).ok());
  CHECK_THAT(result.ranked(2).reason(), Catch::Contains("UNKNOWN") &&
                                            Catch::Contains("status code -3 is not a known"));
}

}  // namespace
}  // namespace autotuned::leadership
