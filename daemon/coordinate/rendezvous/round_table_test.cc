// RoundTable on a fake clock: ranks are threads blocked in Arrive; the test
// moves time by hand.
#include "daemon/coordinate/rendezvous/round_table.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/rendezvous/fake_clock.h"

namespace autotuned {
namespace rendezvous {
namespace {

constexpr absl::Duration kWindow = absl::Milliseconds(5);

std::shared_ptr<const v1::TuneResponse> Answer(const std::string& winner,
                                               v1::DecisionStatus status) {
  auto r = std::make_shared<v1::TuneResponse>();
  r->set_round_id(winner);
  for (int i = 0; i < 2; ++i) {
    v1::ProblemResult* p = r->add_results();
    p->set_status(status);
    p->set_winner(winner);
  }
  return r;
}

RoundKey Key(const std::string& problems = "p1", const std::string& members = "m1",
             const std::string& group = "g") {
  return RoundKey{group, members, problems};
}

ArriveRequest Ask(int rank, int world = 4, RoundKey key = Key()) {
  ArriveRequest r;
  r.key = std::move(key);
  r.rank = rank;
  r.world_size = world;
  r.window = kWindow;
  r.run_bound = absl::Seconds(1);
  r.fallback = Answer("default", v1::FALLBACK);
  return r;
}

using Pending = std::future<absl::StatusOr<Arrival>>;

Pending Async(RoundTable& table, ArriveRequest request) {
  return std::async(std::launch::async,
                    [&table, request] { return table.Arrive(request); });
}

// Waits (real time, bounded) until `n` callers are blocked in Arrive.
bool Blocked(const RoundTable& table, int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (table.blocked() == n) return true;
    absl::SleepFor(absl::Microseconds(200));
  }
  return false;
}

bool Ready(Pending& p) {
  return p.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
}

TEST_CASE("every rank in time: one runner, the same result for all") {
  FakeClock clock;
  RoundTable table(&clock);
  std::vector<Pending> waiting;
  for (int r = 0; r < 3; ++r) waiting.push_back(Async(table, Ask(r)));
  REQUIRE(Blocked(table, 3));
  clock.Advance(absl::Milliseconds(4));
  absl::StatusOr<Arrival> last = table.Arrive(Ask(3));
  REQUIRE(last.ok());
  REQUIRE(last->run);
  CHECK(last->decision.response == nullptr);
  CHECK(Blocked(table, 3));
  // The window passes while measuring: nothing changes for a GO round.
  clock.Advance(absl::Milliseconds(50));
  CHECK(Blocked(table, 3));
  v1::TuneResponse measured = *Answer("b", v1::TUNED);
  const Decision published = table.Publish(*last, measured);
  CHECK(published.verdict == Verdict::kMeasured);
  CHECK(published.ranks_in_time == 4);
  CHECK(published.waited == absl::Milliseconds(4));
  int announced = 0;
  for (Pending& p : waiting) {
    absl::StatusOr<Arrival> a = p.get();
    REQUIRE(a.ok());
    CHECK_FALSE(a->run);
    CHECK(a->decision.verdict == Verdict::kMeasured);
    CHECK(a->decision.response == published.response);
    CHECK(a->round_id == last->round_id);
    CHECK_FALSE(a->measure_in_background);
    announced += a->decided_here ? 1 : 0;
  }
  CHECK(announced == 0);  // the runner reports a measured round
  CHECK(published.response->results(0).winner() == "b");
  CHECK(table.rounds_kept() == 0);
  CHECK(table.keys() == 0);  // complete and in step: nothing to remember
}

TEST_CASE("a cross-daemon GO: callers asking with return_on_go leave at the announcement, "
          "the others wait for the decision") {
  FakeClock clock;
  RoundTable table(&clock);
  ArriveRequest remote = Ask(1, 3);
  remote.return_on_go = true;
  Pending local = Async(table, Ask(0, 3));
  Pending forwarded = Async(table, remote);
  REQUIRE(Blocked(table, 2));
  absl::StatusOr<Arrival> last = table.Arrive(Ask(2, 3));
  REQUIRE(last.ok());
  REQUIRE(last->run);
  auto go = std::make_shared<v1::CrossRun>();
  go->set_run_id("run-1");
  table.Announce(*last, go);
  absl::StatusOr<Arrival> left = forwarded.get();
  REQUIRE(left.ok());
  CHECK_FALSE(left->run);
  REQUIRE(left->go != nullptr);
  CHECK(left->go->run_id() == "run-1");
  CHECK(left->round_id == last->round_id);
  CHECK(Blocked(table, 1));  // rank 0 waits for the decision
  CHECK_FALSE(Ready(local));
  const Decision published = table.Publish(*last, *Answer("b", v1::TUNED));
  absl::StatusOr<Arrival> a = local.get();
  REQUIRE(a.ok());
  CHECK(a->go == nullptr);
  CHECK(a->decision.response == published.response);
  CHECK(table.keys() == 0);
  // Announcing a decided round changes nothing.
  table.Announce(*last, go);
}

TEST_CASE("a missing rank: FALLBACK at the window for all, and for the late one") {
  FakeClock clock;
  RoundTable table(&clock);
  std::vector<Pending> waiting;
  for (int r : {2, 0, 1}) {
    waiting.push_back(Async(table, Ask(r)));
    REQUIRE(Blocked(table, static_cast<int>(waiting.size())));
    clock.Advance(absl::Milliseconds(1));
  }
  clock.Advance(absl::Milliseconds(1));  // 4 ms after the first ask
  absl::SleepFor(absl::Milliseconds(5));
  for (Pending& p : waiting) CHECK_FALSE(Ready(p));
  clock.Advance(absl::Milliseconds(1));  // the window closes
  std::shared_ptr<const v1::TuneResponse> answer;
  int announced = 0;
  for (Pending& p : waiting) {
    absl::StatusOr<Arrival> a = p.get();
    REQUIRE(a.ok());
    CHECK(a->decision.verdict == Verdict::kFallback);
    CHECK(a->decision.ranks_in_time == 3);
    CHECK(a->decision.world_size == 4);
    if (answer == nullptr) answer = a->decision.response;
    CHECK(a->decision.response == answer);
    announced += a->decided_here ? 1 : 0;
  }
  CHECK(announced == 1);
  REQUIRE(answer->results_size() == 2);
  for (const v1::ProblemResult& r : answer->results()) {
    CHECK(r.status() == v1::FALLBACK);
    CHECK(r.winner() == "default");
    CHECK(r.reason() ==
          "not every rank arrived within the pre-sync window (3 of 4 after 5000 us)");
  }
  CHECK(table.rounds_kept() == 1);

  clock.Advance(absl::Seconds(30));
  absl::StatusOr<Arrival> late = table.Arrive(Ask(3));
  REQUIRE(late.ok());
  CHECK_FALSE(late->run);
  CHECK(late->decision.verdict == Verdict::kFallback);
  CHECK(late->decision.response == answer);
  CHECK(late->measure_in_background);
  CHECK_FALSE(late->decided_here);
  CHECK(table.rounds_kept() == 0);
  CHECK(table.keys() == 0);
}

TEST_CASE("a rank that arrives after the window closed, with nobody awake, falls back") {
  FakeClock clock;
  RoundTable table(&clock);
  ArriveRequest opener = Ask(0, 2);
  opener.window = absl::ZeroDuration();
  absl::StatusOr<Arrival> first = table.Arrive(opener);
  REQUIRE(first.ok());
  CHECK(first->decision.verdict == Verdict::kFallback);
  CHECK(first->decision.ranks_in_time == 1);
  // The late rank's own window plays no part: the opener's governs.
  absl::StatusOr<Arrival> second = table.Arrive(Ask(1, 2));
  REQUIRE(second.ok());
  CHECK(second->decision.response == first->decision.response);
}

TEST_CASE("the opener's cached answer is every rank's, without waiting") {
  FakeClock clock;
  RoundTable table(&clock);
  ArriveRequest opener = Ask(1);
  opener.cached = Answer("c", v1::CACHED);
  absl::StatusOr<Arrival> a = table.Arrive(opener);
  REQUIRE(a.ok());
  CHECK(a->decision.verdict == Verdict::kAnswered);
  CHECK(a->decided_here);
  for (int r : {0, 2, 3}) {
    ArriveRequest other = Ask(r);  // no cached answer of its own: the opener's counts
    absl::StatusOr<Arrival> b = table.Arrive(other);
    REQUIRE(b.ok());
    CHECK(b->decision.verdict == Verdict::kAnswered);
    CHECK(b->decision.response == opener.cached);
    CHECK_FALSE(b->decided_here);
  }
  CHECK(table.keys() == 0);
}

TEST_CASE("a second caller of a waiting rank fails the round for everyone") {
  FakeClock clock;
  RoundTable table(&clock);
  std::vector<Pending> waiting;
  waiting.push_back(Async(table, Ask(0)));
  waiting.push_back(Async(table, Ask(1)));
  REQUIRE(Blocked(table, 2));
  absl::StatusOr<Arrival> dup = table.Arrive(Ask(1));
  REQUIRE(dup.ok());
  const std::string message = "group.rank: rank 1 of group \"g\" already asked for this round";
  CHECK(dup->decision.verdict == Verdict::kError);
  CHECK(dup->decision.error == absl::InvalidArgumentError(message));
  for (Pending& p : waiting) {
    absl::StatusOr<Arrival> a = p.get();
    REQUIRE(a.ok());
    CHECK(a->decision.verdict == Verdict::kError);
    CHECK(a->decision.error == dup->decision.error);
  }
  // Ranks that ask later for that round get the same error.
  for (int r : {2, 3}) {
    absl::StatusOr<Arrival> a = table.Arrive(Ask(r));
    REQUIRE(a.ok());
    CHECK(a->decision.error == dup->decision.error);
  }
  CHECK(table.keys() == 0);  // the duplicate was not counted: ranks in step
}

TEST_CASE("a second caller of a rank whose round is measuring is refused alone") {
  FakeClock clock;
  RoundTable table(&clock);
  Pending rank0 = Async(table, Ask(0, 2));
  REQUIRE(Blocked(table, 1));
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(1, 2));
  REQUIRE(runner.ok());
  REQUIRE(runner->run);
  absl::StatusOr<Arrival> dup = table.Arrive(Ask(0, 2));
  CHECK(dup.status() ==
        absl::InvalidArgumentError("group.rank: rank 0 of group \"g\" already asked for this round"));
  const Decision d = table.Publish(*runner, *Answer("x", v1::TUNED));
  absl::StatusOr<Arrival> a = rank0.get();
  REQUIRE(a.ok());
  CHECK(a->decision.verdict == Verdict::kMeasured);
  CHECK(a->decision.response == d.response);
}

TEST_CASE("ranks of one group with different problem sets or members: one error for all") {
  FakeClock clock;
  RoundTable table(&clock);
  SECTION("problems") {
    std::vector<Pending> waiting;
    waiting.push_back(Async(table, Ask(0, 4, Key("p1"))));
    waiting.push_back(Async(table, Ask(1, 4, Key("p1"))));
    REQUIRE(Blocked(table, 2));
    absl::StatusOr<Arrival> odd = table.Arrive(Ask(2, 4, Key("p2")));
    REQUIRE(odd.ok());
    CHECK(odd->decision.verdict == Verdict::kError);
    CHECK(odd->decision.error.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(odd->decision.error.message()) ==
          "problems: ranks of group \"g\" asked for different problem sets at the same "
          "time: ranks 0,1 sent problem set p1, rank 2 sent p2; every rank of both "
          "rounds gets this error");
    for (Pending& p : waiting) {
      absl::StatusOr<Arrival> a = p.get();
      REQUIRE(a.ok());
      CHECK(a->decision.error == odd->decision.error);
    }
    // Later asks of either side get it too.
    absl::StatusOr<Arrival> late1 = table.Arrive(Ask(3, 4, Key("p1")));
    absl::StatusOr<Arrival> late2 = table.Arrive(Ask(3, 4, Key("p2")));
    REQUIRE(late1.ok());
    REQUIRE(late2.ok());
    CHECK(late1->decision.error == odd->decision.error);
    CHECK(late2->decision.error == odd->decision.error);
  }
  SECTION("members") {
    Pending first = Async(table, Ask(0, 2, Key("p1", "m1")));
    REQUIRE(Blocked(table, 1));
    absl::StatusOr<Arrival> odd = table.Arrive(Ask(1, 2, Key("p1", "m2")));
    REQUIRE(odd.ok());
    CHECK_THAT(std::string(odd->decision.error.message()),
               Catch::StartsWith("group.members: ranks of group \"g\" disagree on the "
                                 "world size or member list: rank 0 sent members m1, "
                                 "rank 1 sent m2"));
    absl::StatusOr<Arrival> a = first.get();
    REQUIRE(a.ok());
    CHECK(a->decision.error == odd->decision.error);
  }
  SECTION("another group is no conflict") {
    Pending first = Async(table, Ask(0, 2, Key("p1", "m1", "g1")));
    REQUIRE(Blocked(table, 1));
    Pending other = Async(table, Ask(0, 2, Key("p2", "m1", "g2")));
    REQUIRE(Blocked(table, 2));
    clock.Advance(kWindow);
    CHECK(first.get()->decision.verdict == Verdict::kFallback);
    CHECK(other.get()->decision.verdict == Verdict::kFallback);
  }
}

TEST_CASE("a runner that overruns its bound: FALLBACK for all, and for the runner") {
  FakeClock clock;
  RoundTable table(&clock);
  Pending rank0 = Async(table, Ask(0, 2));
  REQUIRE(Blocked(table, 1));
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(1, 2));
  REQUIRE(runner->run);
  clock.Advance(absl::Milliseconds(999));
  absl::SleepFor(absl::Milliseconds(5));
  CHECK_FALSE(Ready(rank0));
  clock.Advance(absl::Milliseconds(1));
  absl::StatusOr<Arrival> a = rank0.get();
  REQUIRE(a.ok());
  CHECK(a->decision.verdict == Verdict::kFallback);
  CHECK(a->decision.response->results(0).reason() ==
        "not measured in time: every rank arrived, but the measurement did not finish "
        "within 1000 ms (the round's bound)");
  const Decision late = table.Publish(*runner, *Answer("x", v1::TUNED));
  CHECK(late.verdict == Verdict::kFallback);
  CHECK(late.response == a->decision.response);
  CHECK_FALSE(a->measure_in_background);  // being measured already
}

TEST_CASE("a runner's error is every rank's error") {
  FakeClock clock;
  RoundTable table(&clock);
  Pending rank0 = Async(table, Ask(0, 2));
  REQUIRE(Blocked(table, 1));
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(1, 2));
  REQUIRE(runner->run);
  const Decision d = table.Publish(*runner, absl::InternalError("boom"));
  CHECK(d.verdict == Verdict::kError);
  CHECK(rank0.get()->decision.error == absl::InternalError("boom"));
}

TEST_CASE("a caller's own deadline: withdrawn while undecided, and may ask again") {
  FakeClock clock;
  RoundTable table(&clock);
  Pending a0 = Async(table, Ask(0, 3));
  REQUIRE(Blocked(table, 1));
  ArriveRequest r1 = Ask(1, 3);
  r1.deadline = clock.Now() + absl::Milliseconds(2);
  Pending a1 = Async(table, r1);
  REQUIRE(Blocked(table, 2));
  clock.Advance(absl::Milliseconds(2));
  absl::StatusOr<Arrival> gave_up = a1.get();
  CHECK(gave_up.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(gave_up.status().message()), Catch::Contains("withdrawn"));
  // Asking again rejoins the same round; with rank 2 it goes.
  Pending again = Async(table, Ask(1, 3));
  REQUIRE(Blocked(table, 2));
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(2, 3));
  REQUIRE(runner.ok());
  REQUIRE(runner->run);
  CHECK(runner->sequence == 0);
  const Decision d = table.Publish(*runner, *Answer("y", v1::TUNED));
  CHECK(a0.get()->decision.response == d.response);
  CHECK(again.get()->decision.response == d.response);
  CHECK(table.keys() == 0);
}

TEST_CASE("the n-th ask of each rank is one round: a late rank is not matched ahead") {
  FakeClock clock;
  RoundTable table(&clock);
  // Round 0: rank 0 alone, falls back.
  Pending r0 = Async(table, Ask(0, 2));
  REQUIRE(Blocked(table, 1));
  clock.Advance(kWindow);
  absl::StatusOr<Arrival> first = r0.get();
  REQUIRE(first->decision.verdict == Verdict::kFallback);
  CHECK(first->sequence == 0);
  // Rank 0 asks again (round 1) while rank 1 is still on round 0.
  Pending r0_next = Async(table, Ask(0, 2));
  REQUIRE(Blocked(table, 1));
  absl::StatusOr<Arrival> late = table.Arrive(Ask(1, 2));
  REQUIRE(late.ok());
  CHECK(late->sequence == 0);
  CHECK(late->decision.response == first->decision.response);
  CHECK(late->measure_in_background);
  CHECK_FALSE(Ready(r0_next));
  // Rank 1's next ask is round 1, with rank 0's: GO.
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(1, 2));
  REQUIRE(runner.ok());
  CHECK(runner->sequence == 1);
  REQUIRE(runner->run);
  const Decision d = table.Publish(*runner, *Answer("z", v1::TUNED));
  CHECK(r0_next.get()->decision.response == d.response);
  CHECK(table.keys() == 0);
}

TEST_CASE("retention: a rank later than what is kept gets a clear error, alone") {
  FakeClock clock;
  RoundTableOptions options;
  options.max_rounds_kept = 2;
  options.decision_ttl = absl::Seconds(60);
  RoundTable table(&clock, options);
  // Three rounds that fall back without rank 1; the oldest is forgotten.
  for (const char* p : {"a", "b", "c"}) {
    ArriveRequest r = Ask(0, 2, Key(p));
    r.window = absl::ZeroDuration();
    REQUIRE(table.Arrive(r)->decision.verdict == Verdict::kFallback);
    clock.Advance(absl::Seconds(1));
  }
  absl::StatusOr<Arrival> forgotten = table.Arrive(Ask(1, 2, Key("a")));
  CHECK(forgotten.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(forgotten.status().message()),
             Catch::Contains("rendezvous.max_rounds_kept = 2"));
  absl::StatusOr<Arrival> kept = table.Arrive(Ask(1, 2, Key("b")));
  REQUIRE(kept.ok());
  CHECK(kept->decision.verdict == Verdict::kFallback);
  // After the TTL, "c" is forgotten too.
  clock.Advance(absl::Seconds(61));
  CHECK(table.Arrive(Ask(1, 2, Key("c"))).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(table.rounds_kept() == 0);
  // Keys "a" and "b" are in step again (dropped); "c" still remembers that
  // rank 1 is one ask behind, until two TTLs after its last ask.
  CHECK(table.keys() == 1);
  clock.Advance(absl::Seconds(121));
  ArriveRequest other = Ask(0, 2, Key("p", "m", "other"));
  other.window = absl::ZeroDuration();
  REQUIRE(table.Arrive(other).ok());
  CHECK(table.keys() == 1);  // "c" is gone; the new key keeps its round
}

// Waits (real time, bounded) until `p` is answered or `n` callers are blocked.
bool Settled(Pending& p, const RoundTable& table, int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (Ready(p) || table.blocked() == n) return true;
    absl::SleepFor(absl::Microseconds(200));
  }
  return false;
}

// A lone ask of `rank` of a two-rank group: it waits for its window, which
// the test closes.
void LoneAsk(RoundTable& table, FakeClock& clock, int rank) {
  Pending p = Async(table, Ask(rank, 2));
  REQUIRE(Settled(p, table, 1));
  while (!Ready(p)) {
    clock.Advance(kWindow);
    absl::SleepFor(absl::Milliseconds(2));
  }
  REQUIRE(p.get().ok());
}

// One step of a two-rank group whose ranks ask at about the same time, rank
// 0 first; a round both ranks make in time is measured. True when both got
// the same measured round.
bool Step(RoundTable& table, FakeClock& clock) {
  Pending first = Async(table, Ask(0, 2));
  REQUIRE(Settled(first, table, 1));
  Pending second = Async(table, Ask(1, 2));
  std::vector<Arrival> arrivals;
  std::vector<Pending*> pending = {&first, &second};
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!pending.empty() && absl::Now() < deadline) {
    for (auto it = pending.begin(); it != pending.end();) {
      if (!Ready(**it)) {
        ++it;
        continue;
      }
      absl::StatusOr<Arrival> a = (*it)->get();
      REQUIRE(a.ok());
      if (a->run) table.Publish(*a, *Answer("measured", v1::TUNED));
      arrivals.push_back(*a);
      it = pending.erase(it);
    }
    if (!pending.empty() && table.blocked() == static_cast<int>(pending.size())) {
      clock.Advance(kWindow);
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  REQUIRE(arrivals.size() == 2);
  const bool runner = arrivals[0].run || arrivals[1].run;
  const bool same = arrivals[0].round_id == arrivals[1].round_id;
  return runner && same;
}

TEST_CASE("a stray caller's extra asks for one rank: the group re-syncs within a bound") {
  FakeClock clock;
  RoundTableOptions options;
  options.resync_after_missed_rounds = 3;
  RoundTable table(&clock, options);
  for (int i = 0; i < 20; ++i) LoneAsk(table, clock, 0);
  // The real ranks: every round measured again after at most
  // resync_after_missed_rounds + 1 steps, and in step from then on.
  int first_measured = -1;
  for (int step = 0; step < 10; ++step) {
    const bool measured = Step(table, clock);
    if (measured && first_measured < 0) first_measured = step;
    if (first_measured >= 0) CHECK(measured);
  }
  CHECK(first_measured >= 0);
  CHECK(first_measured <= 4);
  CHECK(table.resyncs() >= 1);
  CHECK(table.rounds_kept() <= 3);  // the stray's rounds are forgotten
}

TEST_CASE("a rank restarted one round behind the others: the group re-syncs") {
  FakeClock clock;
  RoundTableOptions options;
  options.resync_after_missed_rounds = 3;
  RoundTable table(&clock, options);
  LoneAsk(table, clock, 0);  // rank 1 died before asking; it restarts from 0
  int first_measured = -1;
  for (int step = 0; step < 8; ++step) {
    const bool measured = Step(table, clock);
    if (measured && first_measured < 0) first_measured = step;
    if (first_measured >= 0) CHECK(measured);
  }
  CHECK(first_measured >= 0);
  CHECK(first_measured <= 4);
  CHECK(table.resyncs() == 1);
}

TEST_CASE("fewer rounds in a row missing ranks than the bound: a late rank still joins "
          "its own round") {
  FakeClock clock;
  RoundTableOptions options;
  options.resync_after_missed_rounds = 3;
  RoundTable table(&clock, options);
  LoneAsk(table, clock, 0);
  LoneAsk(table, clock, 0);
  for (int64_t round = 0; round < 2; ++round) {
    absl::StatusOr<Arrival> late = table.Arrive(Ask(1, 2));
    REQUIRE(late.ok());
    CHECK(late->sequence == round);
    CHECK(late->decision.verdict == Verdict::kFallback);
  }
  CHECK(table.resyncs() == 0);
  CHECK(Step(table, clock));
}

TEST_CASE("retention in bytes: kept answers never exceed max_kept_bytes, whatever the "
          "requests' sizes") {
  FakeClock clock;
  RoundTableOptions options;
  options.max_kept_bytes = 3 * (1 << 20) + (1 << 19);
  RoundTable table(&clock, options);
  auto big = std::make_shared<v1::TuneResponse>(*Answer("default", v1::FALLBACK));
  big->mutable_results(0)->mutable_problem()->set_label(std::string(1 << 20, 'x'));
  for (int i = 0; i < 10; ++i) {
    ArriveRequest r = Ask(0, 2, Key(absl::StrCat("p", i)));
    r.window = absl::ZeroDuration();
    r.fallback = big;
    REQUIRE(table.Arrive(r)->decision.verdict == Verdict::kFallback);
    CHECK(table.kept_bytes() <= options.max_kept_bytes);
  }
  CHECK(table.rounds_kept() == 3);
  CHECK(table.kept_bytes() > 3 * (1 << 20));
  absl::StatusOr<Arrival> forgotten = table.Arrive(Ask(1, 2, Key("p0")));
  CHECK(forgotten.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(forgotten.status().message()),
             Catch::Contains("rendezvous.max_kept_bytes = 3670016"));
  absl::StatusOr<Arrival> kept = table.Arrive(Ask(1, 2, Key("p9")));
  REQUIRE(kept.ok());
  CHECK(kept->decision.response->results(0).problem().label().size() == 1 << 20);
  CHECK(table.rounds_kept() == 2);
}

TEST_CASE("a rank outside the world size is refused alone and never joins") {
  FakeClock clock;
  RoundTable table(&clock);
  CHECK(table.Arrive(Ask(4)).status() ==
        absl::InvalidArgumentError("group.rank: must be in [0, 4), got 4"));
  CHECK(table.Arrive(Ask(-1)).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(table.keys() == 0);
}

TEST_CASE("a caller that goes away stops waiting: withdrawn from an open round; from a "
          "measuring one it stays counted, and the round is abandoned once no one waits") {
  FakeClock clock;
  RoundTable table(&clock);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  ArriveRequest lone = Ask(0, 2);
  lone.gone = [gone] { return gone->load(); };
  Pending waiting = Async(table, lone);
  REQUIRE(Blocked(table, 1));
  *gone = true;  // the fake clock stands still: only the poll notices
  REQUIRE(Blocked(table, 0));
  absl::StatusOr<Arrival> left = waiting.get();
  CHECK(left.status().code() == absl::StatusCode::kCancelled);
  CHECK_THAT(std::string(left.status().message()), Catch::Contains("this ask is withdrawn"));
  CHECK(table.keys() == 0);  // the round never was

  // Rank 1 waits while rank 0 measures; both callers then go away.
  auto gone1 = std::make_shared<std::atomic<bool>>(false);
  ArriveRequest waiter = Ask(1, 2);
  waiter.gone = [gone1] { return gone1->load(); };
  Pending other = Async(table, waiter);
  REQUIRE(Blocked(table, 1));
  absl::StatusOr<Arrival> runner = table.Arrive(Ask(0, 2));
  REQUIRE(runner.ok());
  REQUIRE(runner->run);
  CHECK_FALSE(table.Abandoned(*runner));  // rank 1 still waits
  *gone1 = true;
  REQUIRE(Blocked(table, 0));
  absl::StatusOr<Arrival> away = other.get();
  CHECK(away.status().code() == absl::StatusCode::kCancelled);
  CHECK_THAT(std::string(away.status().message()), Catch::Contains("stays counted"));
  CHECK(table.Abandoned(*runner));
  const Decision d = table.Publish(*runner, absl::CancelledError("every caller went away"));
  CHECK(d.verdict == Verdict::kError);
  CHECK_FALSE(table.Abandoned(*runner));  // decided
  CHECK(table.keys() == 0);
}

TEST_CASE("admit is asked only of an ask that waits or measures; its refusal is not counted") {
  FakeClock clock;
  RoundTable table(&clock);
  int admitted = 0;
  ArriveRequest cached = Ask(0, 2);
  cached.cached = Answer("hit", v1::CACHED);
  cached.admit = [&admitted] {
    ++admitted;
    return absl::OkStatus();
  };
  REQUIRE(table.Arrive(cached).ok());  // opened and decided at once
  ArriveRequest late = Ask(1, 2);
  late.admit = cached.admit;
  REQUIRE(table.Arrive(late).ok());  // its round is decided already
  CHECK(admitted == 0);

  ArriveRequest full = Ask(0, 2);
  full.admit = [] { return absl::ResourceExhaustedError("full"); };
  CHECK(table.Arrive(full).status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(table.blocked() == 0);
  // Not counted: rank 1 waits alone, and rank 0's next ask (admitted) makes
  // the round GO.
  Pending waits = Async(table, Ask(1, 2));
  REQUIRE(Blocked(table, 1));
  ArriveRequest again = Ask(0, 2);
  again.admit = cached.admit;
  absl::StatusOr<Arrival> runner = table.Arrive(again);
  REQUIRE(runner.ok());
  CHECK(runner->run);
  CHECK(admitted == 1);
  table.Publish(*runner, *Answer("b", v1::TUNED));
  REQUIRE(waits.get().ok());
}

}  // namespace
}  // namespace rendezvous
}  // namespace autotuned
