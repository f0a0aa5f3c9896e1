// A follower's ranks against a leader played by the test: a real peer
// server on loopback (daemon/coordinate/peer, daemon/serve/server) whose Ready handler says
// what the test wants, or no leader at all.
#include "daemon/coordinate/leadership/follower.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/synchronization/mutex.h"
#include "daemon/coordinate/peer/peer_service.h"
#include "daemon/serve/server/server.h"
#include "daemon/coordinate/request/validate_testing.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned::leadership {
namespace {

using testing::SpreadRequest;

constexpr char kToken[] = "a-test-peer-token-16+";

// A leader whose Ready answers with `answer` (after `delay`).
class FakeLeader {
 public:
  FakeLeader() {
    config_ = testing::TestConfig();
    config_.set_peer_listen("127.0.0.1:0");
    service_ = std::make_unique<PeerService>(kToken, "leader", "f");
    service_->SetReadyHandler(
        [this](const v1::ReadyRequest& request, absl::Time,
               const std::function<bool()>&) -> absl::StatusOr<v1::Decision> {
          std::function<absl::StatusOr<v1::Decision>(const v1::ReadyRequest&)> by;
          {
            absl::MutexLock lock(&mu_);
            asked_.push_back(request);
            by = answer_by_;
          }
          if (by) return by(request);
          absl::MutexLock lock(&mu_);
          absl::SleepFor(delay_);
          return answer_;
        });
    absl::StatusOr<PeerListening> started = StartPeerServer(config_, service_.get());
    REQUIRE(started.ok());
    listening_ = std::move(*started);
  }
  ~FakeLeader() { listening_.server->Shutdown(); }

  const std::string& address() const { return listening_.address; }
  void Answer(absl::StatusOr<v1::Decision> answer, absl::Duration delay = absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
    delay_ = delay;
  }
  // Each Ready answered by `by` (outside the lock) from now on.
  void AnswerBy(std::function<absl::StatusOr<v1::Decision>(const v1::ReadyRequest&)> by) {
    absl::MutexLock lock(&mu_);
    answer_by_ = std::move(by);
  }
  std::vector<v1::ReadyRequest> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }
  // Serves a run: records what followers report and send, answers their
  // timings with `answer` and every exchange at once.
  void ServeRun(v1::Decision answer) {
    ServeRun([answer](const std::string&) -> absl::StatusOr<v1::Decision> { return answer; });
  }
  // The same, each daemon's timings answered with `answer(its name)` (after
  // the answer's own wait, outside the lock).
  void ServeRun(std::function<absl::StatusOr<v1::Decision>(const std::string& from)> answer) {
    service_->SetRunHandlers(
        [this, answer](const v1::RankTimings& t, absl::Time) -> absl::StatusOr<v1::Decision> {
          {
            absl::MutexLock lock(&mu_);
            timings_.push_back(t);
          }
          return answer(t.from_daemon());
        },
        [this](const v1::ExchangeRequest& e, absl::Time) -> absl::StatusOr<v1::ExchangeReply> {
          absl::MutexLock lock(&mu_);
          exchanges_.push_back(e);
          return v1::ExchangeReply();
        });
  }
  std::vector<v1::RankTimings> timings() {
    absl::MutexLock lock(&mu_);
    return timings_;
  }
  std::vector<v1::ExchangeRequest> exchanges() {
    absl::MutexLock lock(&mu_);
    return exchanges_;
  }

 private:
  config::DaemonConfig config_;
  std::unique_ptr<PeerService> service_;
  PeerListening listening_;
  absl::Mutex mu_;
  absl::StatusOr<v1::Decision> answer_ ABSL_GUARDED_BY(mu_) = v1::Decision();
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  std::function<absl::StatusOr<v1::Decision>(const v1::ReadyRequest&)> answer_by_
      ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReadyRequest> asked_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RankTimings> timings_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ExchangeRequest> exchanges_ ABSL_GUARDED_BY(mu_);
};

class FollowerFixture {
 public:
  // `leader`: the leader's address, the one peer of this follower.
  explicit FollowerFixture(const std::string& leader)
      : backend_(testing::ScriptedBackend()),
        config_(testing::TestConfig()),
        engine_(backend_.get()),
        client_(kToken, "follow:1", {leader}),
        follower_(&client_, &engine_, backend_.get(), "follow:1") {
    config_.set_peer_advertise("follow:1");
    config_.add_peers(leader);
  }

  absl::StatusOr<v1::TuneResponse> Ask(const v1::TuneRequest& request,
                                       absl::Duration within = absl::Seconds(20)) {
    const ValidRequest valid = testing::MustValidate(
        request, testing::ContextFor(*backend_, config_, /*peers=*/true));
    return follower_.Round(valid, absl::Now() + within);
  }
  FakeBackend& backend() { return *backend_; }

 private:
  std::unique_ptr<FakeBackend> backend_;
  config::DaemonConfig config_;
  Engine engine_;
  PeerClient client_;
  Follower follower_;
};

v1::Decision Rejected(int code, const std::string& message) {
  v1::Decision d;
  d.set_verdict(v1::REJECTED);
  d.set_error_code(code);
  d.set_error_message(message);
  return d;
}

TEST_CASE("a follower never decides: its leader unreachable is UNAVAILABLE for its ranks") {
  FollowerFixture f("127.0.0.1:1");
  // Port 1 on loopback: nobody listens.
  const std::vector<std::string> daemons = {"127.0.0.1:1", "follow:1", "follow:1"};
  std::vector<absl::Status> answers(2);
  std::vector<std::thread> ranks;
  for (int r = 1; r <= 2; ++r) {
    ranks.emplace_back([&, r] { answers[r - 1] = f.Ask(SpreadRequest("g", r, daemons)).status(); });
  }
  for (std::thread& t : ranks) t.join();
  for (const absl::Status& s : answers) {
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(s.message()),
               Catch::StartsWith("leader 127.0.0.1:1 unreachable (followers never decide"));
  }
  CHECK(answers[0] == answers[1]);
  CHECK(answers[0] == LeaderUnreachable("127.0.0.1:1"));
  CHECK(f.backend().runs() == 0);
}

TEST_CASE("the leader's answer goes to the rank as is, its labels restored") {
  FakeLeader leader;
  FollowerFixture f(leader.address());
  const std::vector<std::string> daemons = {leader.address(), "follow:1"};
  v1::Decision answered;
  answered.set_verdict(v1::ANSWERED);
  v1::ProblemResult* r = answered.mutable_response()->add_results();
  r->set_status(v1::FALLBACK);
  r->set_winner("all_reduce/a");
  r->mutable_problem()->set_label("op-of-rank-0");
  leader.Answer(answered);
  absl::StatusOr<v1::TuneResponse> out = f.Ask(SpreadRequest("g", 1, daemons));
  REQUIRE(out.ok());
  CHECK(out->results(0).winner() == "all_reduce/a");
  CHECK(out->results(0).problem().label() == "op-of-rank-1");
  // What the leader was asked: this rank, its canonical request, the round.
  const std::vector<v1::ReadyRequest> asked = leader.asked();
  REQUIRE(asked.size() == 1);
  const v1::ReadyRequest& ready = asked[0];
  CHECK(ready.from_daemon() == "follow:1");
  CHECK(ready.ranks_size() == 1);
  CHECK(ready.ranks(0) == 1);
  CHECK(ready.round().group_id() == "g");
  CHECK(ready.round().problems_digest().size() == 32);
  CHECK(ready.request().problems(0).label() == "op-of-rank-1");
}

TEST_CASE("a REJECTED decision is the rank's error; a code off the range is UNKNOWN") {
  FakeLeader leader;
  FollowerFixture f(leader.address());
  const v1::TuneRequest ask = SpreadRequest("g", 1, {leader.address(), "follow:1"});
  leader.Answer(Rejected(9, "group.members: they disagree"));
  CHECK(f.Ask(ask).status() == absl::FailedPreconditionError("group.members: they disagree"));
  leader.Answer(Rejected(1234, "newer"));
  CHECK(f.Ask(ask).status() ==
        absl::UnknownError("status code 1234 is not a known code (0 to 16); the message: newer"));
  leader.Answer(Rejected(0, "no code"));
  CHECK(f.Ask(ask).status() ==
        absl::UnknownError("the leader rejected the round with status code 0: no code"));
  v1::Decision odd;
  odd.set_verdict(static_cast<v1::RoundVerdict>(7));
  leader.Answer(odd);
  absl::Status s = f.Ask(ask).status();
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(s.message()), Catch::EndsWith("which this daemon version does not serve"));
  // An error status from the leader's side of the call is the leader's loss.
  leader.Answer(absl::ResourceExhaustedError("busy"));
  CHECK(f.Ask(ask).status() == LeaderUnreachable(leader.address()));
}

TEST_CASE("a rank's own deadline ends its wait for the leader") {
  FakeLeader leader;
  FollowerFixture f(leader.address());
  leader.Answer(v1::Decision(), absl::Seconds(2));
  const absl::Status s =
      f.Ask(SpreadRequest("g", 1, {leader.address(), "follow:1"}), absl::Milliseconds(200))
          .status();
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith("no decision from the leader 127.0.0.1:"));
}

TEST_CASE("only the operator's peers are dialed: a request's address never gets the token") {
  FakeLeader leader;
  config::DaemonConfig config = testing::TestConfig();
  config.set_peer_advertise("follow:1");
  std::unique_ptr<FakeBackend> backend = testing::ScriptedBackend();
  const ValidationContext context = testing::ContextFor(*backend, config, /*peers=*/true);
  for (const std::string& at : {leader.address(), std::string("unix:/tmp/collect.sock")}) {
    INFO(at);
    const absl::StatusOr<ValidRequest> valid =
        ValidateTune(SpreadRequest("g", 1, {at, "follow:1"}), context);
    CHECK(valid.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(valid.status().message()),
               Catch::StartsWith("group.members[0].daemon: \"" + at +
                                 "\" is not one of this daemon's peers"));
  }
  // The peer client itself dials nothing else, whatever reaches it.
  PeerClient client(kToken, "follow:1", {"lead:1"});
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  CHECK(client.Ready(leader.address(), v1::ReadyRequest(), deadline).status().code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(client.Ping("unix:/tmp/collect.sock", deadline).code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(leader.asked().empty());
}

}  // namespace
}  // namespace autotuned::leadership

namespace autotuned::leadership {
namespace {

TEST_CASE("a go asking for more passes than the request has iterations is refused, unmeasured") {
  FakeLeader leader;
  FollowerFixture f(leader.address());
  const std::vector<std::string> daemons = {leader.address(), "follow:1"};
  v1::Decision go;
  go.set_verdict(v1::GO);
  go.mutable_go()->set_run_id("run-1");
  go.mutable_go()->add_problems(0);
  go.mutable_go()->set_candidate_timeout_ms(1000);
  go.mutable_go()->set_catalogue_version(f.backend().catalogue().Version());
  go.mutable_go()->set_passes(1 << 30);
  leader.Answer(go);
  leader.ServeRun(Rejected(grpc::StatusCode::ABORTED, "the round was refused"));
  const absl::Time start = absl::Now();
  const absl::StatusOr<v1::TuneResponse> answer = f.Ask(SpreadRequest("g", 1, daemons));
  CHECK(absl::Now() - start < absl::Seconds(15));
  CHECK(answer.status().code() == absl::StatusCode::kAborted);  // the leader's word
  CHECK(f.backend().runs() == 0);
  // The follower's ranks report the refusal, naming the field, and its
  // first pass is aborted for the other daemons' ranks.
  const std::vector<v1::RankTimings> timings = leader.timings();
  REQUIRE(timings.size() == 1);
  REQUIRE(timings[0].steps_size() > 0);
  REQUIRE(timings[0].steps(0).ranks_size() == 1);
  CHECK_THAT(timings[0].steps(0).ranks(0).message(),
             Catch::StartsWith("go.passes: 1073741824 is outside 0.."));
  bool aborted = false;
  for (const v1::ExchangeRequest& e : leader.exchanges()) aborted |= e.abort_code() != 0;
  CHECK(aborted);
}

}  // namespace
}  // namespace autotuned::leadership

namespace autotuned::leadership {
namespace {

// A follower daemon that serves Peer.RunOutcome on a loopback port of its
// own, which is its name; `peers`: the leader and the other followers.
class ServingFollower {
 public:
  ServingFollower()
      : backend_(testing::ScriptedBackend()),
        config_(testing::TestConfig()),
        engine_(backend_.get()),
        service_(kToken, "follower", "f") {
    config_.set_peer_listen("127.0.0.1:0");
    absl::StatusOr<PeerListening> started = StartPeerServer(config_, &service_);
    REQUIRE(started.ok());
    listening_ = std::move(*started);
    config_.set_peer_advertise(address());
  }
  ~ServingFollower() { listening_.server->Shutdown(); }

  const std::string& address() const { return listening_.address; }
  void Connect(const std::vector<std::string>& peers) {
    for (const std::string& p : peers) config_.add_peers(p);
    client_ = std::make_unique<PeerClient>(kToken, address(), peers);
    follower_ =
        std::make_unique<Follower>(client_.get(), &engine_, backend_.get(), address());
    service_.SetOutcomeHandler([this](const v1::OutcomeRequest& r, absl::Time deadline) {
      return follower_->Outcome(r, deadline);
    });
  }
  absl::StatusOr<v1::TuneResponse> Ask(const v1::TuneRequest& request) {
    const ValidRequest valid = testing::MustValidate(
        request, testing::ContextFor(*backend_, config_, /*peers=*/true));
    return follower_->Round(valid, absl::Now() + absl::Seconds(20));
  }
  Follower& follower() { return *follower_; }

 private:
  std::unique_ptr<FakeBackend> backend_;
  config::DaemonConfig config_;
  Engine engine_;
  PeerService service_;
  PeerListening listening_;
  std::unique_ptr<PeerClient> client_;
  std::unique_ptr<Follower> follower_;
};

// A leader and two followers, one rank each (ranks 1 and 2 on the
// followers); the leader says GO for run "run-1", which the followers
// refuse unmeasured (another catalogue), and answers their timings as
// `answer` says. The answers of ranks 1 and 2.
std::vector<absl::StatusOr<v1::TuneResponse>> RunWithTwoFollowers(
    FakeLeader& leader, ServingFollower& a, ServingFollower& b,
    std::function<absl::StatusOr<v1::Decision>(const std::string& from)> answer) {
  a.Connect({leader.address(), b.address()});
  b.Connect({leader.address(), a.address()});
  v1::Decision go;
  go.set_verdict(v1::GO);
  go.mutable_go()->set_run_id("run-1");
  go.mutable_go()->add_problems(0);
  go.mutable_go()->set_candidate_timeout_ms(1000);
  go.mutable_go()->set_catalogue_version("another catalogue");
  leader.Answer(go);
  leader.ServeRun(std::move(answer));
  const std::vector<std::string> daemons = {leader.address(), a.address(), b.address()};
  std::vector<absl::StatusOr<v1::TuneResponse>> answers(2, absl::UnknownError("not asked"));
  std::thread rank1([&] { answers[0] = a.Ask(SpreadRequest("g", 1, daemons)); });
  std::thread rank2([&] { answers[1] = b.Ask(SpreadRequest("g", 2, daemons)); });
  rank1.join();
  rank2.join();
  return answers;
}

v1::Decision Decided(const std::string& winner) {
  v1::Decision d;
  d.set_verdict(v1::ANSWERED);
  v1::ProblemResult* r = d.mutable_response()->add_results();
  r->set_status(v1::FAILED);
  r->set_winner(winner);
  return d;
}

TEST_CASE("a leader lost while it answers the followers' timings: the follower it never "
          "answered hands out the decision another one received") {
  FakeLeader leader;
  ServingFollower a, b;
  const std::string a_name = a.address();
  // The leader answers a (after b's call has failed, so that b asks a while
  // a's own call is still with the leader) and is lost before answering b.
  const auto answers = RunWithTwoFollowers(
      leader, a, b, [a_name](const std::string& from) -> absl::StatusOr<v1::Decision> {
        if (from != a_name) return absl::UnavailableError("the leader was killed");
        absl::SleepFor(absl::Milliseconds(300));
        return Decided("all_reduce/a");
      });
  for (const absl::StatusOr<v1::TuneResponse>& answer : answers) {
    INFO(answer.status().ToString());
    REQUIRE(answer.ok());
    REQUIRE(answer->results_size() == 1);
    CHECK(answer->results(0).winner() == "all_reduce/a");
  }
  CHECK(testing::Shared(*answers[0]) == testing::Shared(*answers[1]));
}

TEST_CASE("a leader lost before it answered any follower's timings: every follower's ranks "
          "get leader unreachable") {
  FakeLeader leader;
  ServingFollower a, b;
  const auto answers =
      RunWithTwoFollowers(leader, a, b, [](const std::string&) -> absl::StatusOr<v1::Decision> {
        return absl::UnavailableError("the leader was killed");
      });
  CHECK(answers[0].status() == LeaderUnreachable(leader.address()));
  CHECK(answers[1].status() == LeaderUnreachable(leader.address()));
}

TEST_CASE("a leader lost after it answered a round to some ranks: the ranks whose asks "
          "failed, on that follower and on another, get the same answer") {
  FakeLeader leader;
  ServingFollower a, b;
  a.Connect({leader.address(), b.address()});
  b.Connect({leader.address(), a.address()});
  // Rank 1 (on a) is answered, after a's rank 2 and b's rank 3 found the
  // leader lost, so that both wait for that answer.
  leader.AnswerBy([](const v1::ReadyRequest& ready) -> absl::StatusOr<v1::Decision> {
    if (ready.ranks(0) != 1) return absl::UnavailableError("the leader was killed");
    absl::SleepFor(absl::Milliseconds(300));
    v1::Decision fallback = Decided("all_reduce/a");
    fallback.mutable_response()->mutable_results(0)->set_status(v1::FALLBACK);
    return fallback;
  });
  const std::vector<std::string> daemons = {leader.address(), a.address(), a.address(),
                                            b.address()};
  std::vector<absl::StatusOr<v1::TuneResponse>> answers(3, absl::UnknownError("not asked"));
  std::vector<std::thread> ranks;
  for (int r = 1; r <= 3; ++r) {
    ranks.emplace_back([&, r] {
      answers[r - 1] = (r < 3 ? a : b).Ask(SpreadRequest("g", r, daemons));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const absl::StatusOr<v1::TuneResponse>& answer : answers) {
    INFO(answer.status().ToString());
    REQUIRE(answer.ok());
    REQUIRE(answer->results_size() == 1);
    CHECK(answer->results(0).status() == v1::FALLBACK);
    CHECK(answer->results(0).winner() == "all_reduce/a");
  }
  // The next round of the key is another round: nobody was answered it.
  leader.AnswerBy([](const v1::ReadyRequest&) -> absl::StatusOr<v1::Decision> {
    return absl::UnavailableError("the leader was killed");
  });
  CHECK(b.Ask(SpreadRequest("g", 3, daemons)).status() == LeaderUnreachable(leader.address()));
}

TEST_CASE("RunOutcome: only the run's daemons are told, a run without part here is undecided") {
  FakeLeader leader;
  ServingFollower a, b;
  RunWithTwoFollowers(leader, a, b, [](const std::string&) -> absl::StatusOr<v1::Decision> {
    return Decided("all_reduce/b");
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  v1::OutcomeRequest ask;
  ask.set_from_daemon(b.address());
  CHECK(a.follower().Outcome(ask, deadline).status() ==
        absl::InvalidArgumentError("run_id: required"));
  ask.set_run_id("run-1");
  absl::StatusOr<v1::OutcomeReply> told = a.follower().Outcome(ask, deadline);
  REQUIRE(told.ok());
  CHECK(told->decided());
  CHECK(told->decision().response().results(0).winner() == "all_reduce/b");
  ask.set_from_daemon("stranger:1");
  const absl::Status denied = a.follower().Outcome(ask, deadline).status();
  CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(denied.message()), Catch::StartsWith("from_daemon: \"stranger:1\""));
  ask.set_from_daemon(b.address());
  ask.set_run_id("run-2");
  told = a.follower().Outcome(ask, deadline);
  REQUIRE(told.ok());
  CHECK_FALSE(told->decided());
}

}  // namespace
}  // namespace autotuned::leadership
