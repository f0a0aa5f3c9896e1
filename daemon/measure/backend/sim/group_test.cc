#include "daemon/measure/backend/sim/group.h"

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned::sim {
namespace {

ProblemSpec Problem(int world) {
  ProblemSpec p;
  p.collective = Collective::kAllGather;
  p.count = 3;
  p.world_size = world;
  return p;
}

// Runs fn(rank) on `world` threads and returns their statuses.
template <typename Fn>
std::vector<absl::Status> OnThreads(int world, Fn fn) {
  std::vector<absl::Status> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { out[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST_CASE("buffers are sized from the problem") {
  Group g(Problem(3), absl::Now() + absl::Seconds(10), 5);
  g.input(2)[2] = 1;      // count
  g.output(2)[8] = 1;     // count * world
  g.scratch(2)[4] = 1;
  CHECK(g.world_size() == 3);
}

TEST_CASE("the barrier is reusable and orders the ranks") {
  const int world = 5;
  Group g(Problem(world), absl::Now() + absl::Seconds(20), 0);
  std::atomic<int> arrived{0};
  auto statuses = OnThreads(world, [&](int) {
    for (int round = 0; round < 50; ++round) {
      arrived.fetch_add(1);
      absl::Status s = g.Barrier();
      if (!s.ok()) return s;
      // Nobody leaves a generation before everyone has entered it.
      if (arrived.load() < (round + 1) * world) {
        return absl::InternalError("left the barrier early");
      }
      s = g.Barrier();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) CHECK(s.ok());
}

TEST_CASE("abort releases every waiter with the reason, now and later") {
  Group g(Problem(3), absl::Now() + absl::Seconds(20), 0);
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    g.Abort(absl::AbortedError("peer died"));
  });
  // Only two of the three ranks arrive: the barrier cannot complete.
  auto statuses = OnThreads(2, [&](int) { return g.Barrier(); });
  aborter.join();
  for (const absl::Status& s : statuses) {
    CHECK(s.code() == absl::StatusCode::kAborted);
    CHECK(s.message() == "peer died");
  }
  CHECK(g.Barrier().code() == absl::StatusCode::kAborted);
  CHECK(g.Sleep(absl::InfiniteDuration()).message() == "peer died");
  g.Abort(absl::InternalError("second"));  // the first reason wins
  CHECK(g.abort_status().message() == "peer died");
}

TEST_CASE("waits end at the deadline and break the group") {
  Group g(Problem(2), absl::Now() + absl::Milliseconds(100), 0);
  absl::Status s = g.Barrier();  // the peer never comes
  CHECK(s.code() == absl::StatusCode::kAborted);
  CHECK(s.message() ==
        "barrier: cut off at the timeout while waiting for other ranks");
  CHECK(g.abort_status().code() == absl::StatusCode::kDeadlineExceeded);

  Group h(Problem(1), absl::Now() + absl::Milliseconds(100), 0);
  CHECK(h.Sleep(absl::InfiniteDuration()).code() ==
        absl::StatusCode::kDeadlineExceeded);
  CHECK(h.Barrier().code() == absl::StatusCode::kAborted);
}

TEST_CASE("a sleep before the deadline ends normally") {
  Group g(Problem(1), absl::Now() + absl::Seconds(20), 0);
  const absl::Time start = absl::Now();
  CHECK(g.Sleep(absl::Milliseconds(20)).ok());
  CHECK(absl::Now() - start >= absl::Milliseconds(20));
  CHECK(g.Barrier().ok());  // a one-rank barrier never waits
}

// Two groups of one run, ranks {0} and {1}, joined by a scripted transport
// that hands each side the other's data of the same barrier.
class PairTransport : public RunTransport {
 public:
  absl::StatusOr<std::vector<std::string>> Exchange(int64_t generation, std::string data,
                                                    absl::Time deadline) override {
    absl::MutexLock lock(mu_);
    auto& slot = (*slots_)[generation];
    slot[side_] = std::move(data);
    auto both = [&slot]() { return slot.size() == 2; };
    if (!mu_->AwaitWithDeadline(absl::Condition(&both), deadline)) {
      return absl::DeadlineExceededError("cut off");
    }
    if (!abort_->ok()) return *abort_;
    return std::vector<std::string>{slot[1 - side_]};
  }
  void Abort(const absl::Status& reason) override {
    absl::MutexLock lock(mu_);
    ++*aborts_;
    *abort_ = reason;
  }

  int side_ = 0;
  absl::Mutex* mu_ = nullptr;
  std::map<int64_t, std::map<int, std::string>>* slots_ = nullptr;
  absl::Status* abort_ = nullptr;
  int* aborts_ = nullptr;
};

TEST_CASE("across daemons, a barrier brings the remote rank's buffers into the mirrors") {
  absl::Mutex mu;
  std::map<int64_t, std::map<int, std::string>> slots;
  absl::Status abort;
  int aborts = 0;
  std::shared_ptr<PairTransport> t[2];
  for (int side = 0; side < 2; ++side) {
    t[side] = std::make_shared<PairTransport>();
    t[side]->side_ = side;
    t[side]->mu_ = &mu;
    t[side]->slots_ = &slots;
    t[side]->abort_ = &abort;
    t[side]->aborts_ = &aborts;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  Group a(Problem(2), deadline, 2, {0}, t[0]);
  Group b(Problem(2), deadline, 2, {1}, t[1]);
  CHECK(a.is_local(0));
  CHECK_FALSE(a.is_local(1));
  a.input(0)[1] = 7;
  b.input(1)[2] = 9;
  b.scratch(1)[1] = 4;
  std::vector<absl::Status> s = OnThreads(2, [&](int side) {
    return side == 0 ? a.Barrier() : b.Barrier();
  });
  REQUIRE(s[0].ok());
  REQUIRE(s[1].ok());
  CHECK(a.input(1)[2] == 9);
  CHECK(a.scratch(1)[1] == 4);
  CHECK(b.input(0)[1] == 7);
  // After the first barrier, inputs no longer travel: outputs do.
  b.output(1)[5] = 3;
  s = OnThreads(2, [&](int side) { return side == 0 ? a.Barrier() : b.Barrier(); });
  REQUIRE(s[0].ok());
  CHECK(a.output(1)[5] == 3);
  CHECK(slots[1][1].size() < 64);  // one block of b's output, nothing else

  // An abort on one side reaches the transport once.
  b.Abort(absl::InternalError("rank 1 failed"));
  b.Abort(absl::InternalError("again"));
  CHECK(aborts == 1);
  CHECK(abort.message() == "rank 1 failed");
}

TEST_CASE("exchanged data that does not fit the group is DATA_LOSS naming it") {
  Group g(Problem(2), absl::Now() + absl::Seconds(10), 1, {0},
          std::make_shared<PairTransport>());
  Group other(Problem(2), absl::Now() + absl::Seconds(10), 1);
  CHECK(DecodeBuffers(EncodeBuffers(other, {1}, true), g).ok());
  absl::Status s = DecodeBuffers(EncodeBuffers(other, {0}, true), g);
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("rank 0, which is not a remote rank"));
  std::string cut = EncodeBuffers(other, {1}, false);
  cut.resize(cut.size() - 2);
  CHECK(DecodeBuffers(cut, g).code() == absl::StatusCode::kDataLoss);
  Group bigger(Problem(2), absl::Now() + absl::Seconds(10), 3);
  s = DecodeBuffers(EncodeBuffers(bigger, {1}, false), g);
  CHECK_THAT(std::string(s.message()), Catch::Contains("outside the 1 expected"));
}

TEST_CASE("EncodeChanges sends only the blocks that changed since the last call") {
  ProblemSpec p = Problem(2);
  p.count = 5000;
  Group mine(p, absl::Now() + absl::Seconds(10), 0);
  Group theirs(p, absl::Now() + absl::Seconds(10), 0, {1}, nullptr);
  std::vector<std::vector<float>> sent;
  CHECK(EncodeChanges(mine, {0}, &sent).empty());  // all zero, like the mirrors
  mine.input(0)[10] = 1;
  mine.output(0)[9000] = std::nanf("");
  const std::string first = EncodeChanges(mine, {0}, &sent);
  CHECK(first.size() < 2 * (1024 * sizeof(float) + 64));
  REQUIRE(DecodeBuffers(first, theirs).ok());
  CHECK(theirs.input(0)[10] == 1);
  CHECK(std::isnan(theirs.output(0)[9000]));
  CHECK(EncodeChanges(mine, {0}, &sent).empty());  // NaN is no change
  mine.output(0)[9999] = 2;
  REQUIRE(DecodeBuffers(EncodeChanges(mine, {0}, &sent), theirs).ok());
  CHECK(theirs.output(0)[9999] == 2);
}

}  // namespace
}  // namespace autotuned::sim
