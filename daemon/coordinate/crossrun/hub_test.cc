// The cross-daemon hub on its own, and sim backends of three "daemons"
// running one group through it: the data crosses, verification proves it;
// their engines' interleaved passes (Engine::MeasurePart) through it.
#include "daemon/coordinate/crossrun/hub.h"

#include <atomic>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/measure/backend/sim/sim_backend.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/coordinate/crossrun/transport.h"

namespace autotuned::crossrun {
namespace {

const std::vector<std::string> kDaemons = {"a", "b", "c"};

// A daemon's side of the hub as the leader's own transport would be, under
// any name (the leader is "a").
class NamedTransport : public RunTransport {
 public:
  NamedTransport(Hub* hub, std::string run, int64_t step, std::string name)
      : hub_(hub), run_(std::move(run)), step_(step), name_(std::move(name)) {}
  absl::StatusOr<std::vector<std::string>> Exchange(int64_t generation, std::string data,
                                                    absl::Time deadline) override {
    return hub_->Exchange(run_, step_, generation, name_, std::move(data), deadline);
  }
  void Abort(const absl::Status& reason) override { hub_->Abort(run_, step_, name_, reason); }

 private:
  Hub* hub_;
  std::string run_;
  int64_t step_;
  std::string name_;
};

TEST_CASE("Exchange is an all-gather per barrier; unknown runs and strangers are refused") {
  Hub hub("a", nullptr);
  hub.Open("r1", kDaemons);
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> threads;
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back([&, d] {
      for (int g = 0; g < 4; ++g) {
        auto out = hub.Exchange("r1", 0, g, kDaemons[d], absl::StrCat(kDaemons[d], g),
                                absl::Now() + absl::Seconds(10));
        REQUIRE(out.ok());
        for (const std::string& s : *out) got[d].push_back(s);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(got[0] == std::vector<std::string>{"b0", "c0", "b1", "c1", "b2", "c2", "b3", "c3"});
  CHECK(got[2] == std::vector<std::string>{"a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"});

  CHECK(hub.Exchange("nope", 0, 0, "a", "", absl::Now()).status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(hub.Exchange("r1", 1, 0, "z", "", absl::Now()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  const absl::Time start = absl::Now();
  auto late = hub.Exchange("r1", 1, 0, "a", "", absl::Now() + absl::Milliseconds(100));
  CHECK(late.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(late.status().message()), Catch::Contains("still waits for b, c"));
  CHECK(absl::Now() - start < absl::Seconds(2));
}

TEST_CASE("steps numbered out of order (a run's passes) keep each barrier's data until "
          "every daemon read it") {
  Hub hub("a", nullptr);
  hub.Open("r", kDaemons);
  const std::vector<int64_t> steps = {0, 10, 1, 11, 2, 12, 3, 13};
  std::vector<std::vector<std::string>> got(3);
  std::vector<std::thread> threads;
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back([&, d] {
      for (int64_t step : steps) {
        for (int g = 0; g < 3; ++g) {
          auto out = hub.Exchange("r", step, g, kDaemons[d], absl::StrCat(kDaemons[d], step, g),
                                  absl::Now() + absl::Seconds(10));
          REQUIRE(out.ok());
          for (const std::string& x : *out) got[d].push_back(x);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(got[1].size() == steps.size() * 3 * 2);
  CHECK(got[1][0] == "a00");
  CHECK(got[1][1] == "c00");
  CHECK(got[1][6] == "a100");  // step 10, generation 0
  CHECK(got[1].back() == "c132");
}

TEST_CASE("an abort ends the step for every daemon, at once and later") {
  Hub hub("a", nullptr);
  hub.Open("r", kDaemons);
  std::thread waiter([&] {
    auto out = hub.Exchange("r", 3, 0, "a", "x", absl::Now() + absl::Seconds(20));
    CHECK(out.status().code() == absl::StatusCode::kInternal);
    CHECK(out.status().message() == "rank 4 failed");
  });
  absl::SleepFor(absl::Milliseconds(50));
  hub.Abort("r", 3, "c", absl::InternalError("rank 4 failed"));
  hub.Abort("r", 3, "b", absl::InternalError("second"));  // the first wins
  waiter.join();
  CHECK(hub.Exchange("r", 3, 1, "b", "", absl::Now() + absl::Seconds(5)).status().message() ==
        "rank 4 failed");
  // Other steps go on.
  hub.Abort("r", 4, "a", absl::OkStatus());
  CHECK(hub.Exchange("r", 4, 0, "b", "", absl::Now()).status().code() ==
        absl::StatusCode::kAborted);
}

TEST_CASE("a peer cannot park data or aborts in the hub past its calls, nor after the run") {
  Hub hub("a", nullptr);
  hub.Open("r", kDaemons);
  const std::string mib(size_t{1} << 20, 'x');
  // Barriers nobody else meets, each call ending at its deadline.
  for (int64_t step = 0; step < 64; ++step) {
    auto out = hub.Exchange("r", 1000 + step, 0, "b", mib, absl::Now() + absl::Milliseconds(1));
    CHECK(out.status().code() == absl::StatusCode::kDeadlineExceeded);
  }
  CHECK(hub.KeptForTesting("r").bytes == 0);
  CHECK(hub.KeptForTesting("r").steps == 0);

  // Nor does a daemon waiting with the others lose what they met.
  std::thread waiter([&] {
    auto out = hub.Exchange("r", 5, 0, "a", "a5", absl::Now() + absl::Seconds(10));
    REQUIRE(out.ok());
    CHECK(*out == std::vector<std::string>{"b5", "c5"});
  });
  std::thread late([&] {
    auto out = hub.Exchange("r", 5, 0, "c", "c5", absl::Now() + absl::Seconds(10));
    CHECK(out.ok());
  });
  CHECK(hub.Exchange("r", 5, 0, "b", "b5", absl::Now() + absl::Seconds(10)).ok());
  waiter.join();
  late.join();
  CHECK(hub.KeptForTesting("r").steps == 0);  // a barrier met and read: nothing kept

  // Negative numbers are refused, naming the field.
  auto negative = hub.Exchange("r", 0, std::numeric_limits<int64_t>::min(), "b", "x",
                               absl::Now() + absl::Seconds(1));
  CHECK(negative.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(negative.status().message()), Catch::StartsWith("generation: "));
  CHECK(hub.Exchange("r", -1, 0, "b", "x", absl::Now()).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // Aborts: each reason cut, and no more steps than the bound.
  const std::string long_reason(size_t{1} << 20, 'y');
  for (int64_t step = 0; step < 100; ++step) {
    hub.Abort("r", 2000 + step, "b", absl::InternalError(long_reason));
  }
  CHECK(hub.KeptForTesting("r").steps == 100);
  CHECK(hub.KeptForTesting("r").bytes < 100 * (Hub::kMaxReasonBytes + 64));
  auto aborted = hub.Exchange("r", 2000, 0, "a", "", absl::Now());
  CHECK(aborted.status().code() == absl::StatusCode::kInternal);
  CHECK(aborted.status().message().size() < Hub::kMaxReasonBytes + 64);
  for (size_t step = 0; step < Hub::kMaxStepsKept + 10; ++step) {
    hub.Abort("r", 10000 + static_cast<int64_t>(step), "b", absl::InternalError("x"));
  }
  CHECK(hub.KeptForTesting("r").steps == Hub::kMaxStepsKept);
  auto over = hub.Exchange("r", 999999999, 0, "b", "x", absl::Now() + absl::Seconds(1));
  CHECK(over.status().code() == absl::StatusCode::kResourceExhausted);

  // A finished run takes nothing more: an Exchange is refused at once, and
  // one waiting when the run finishes lets its data go.
  hub.Open("f", kDaemons);
  std::thread parked([&] {
    auto out = hub.Exchange("f", 7, 0, "b", mib, absl::Now() + absl::Seconds(30));
    CHECK(out.status().code() == absl::StatusCode::kAborted);
  });
  absl::SleepFor(absl::Milliseconds(50));
  CHECK(hub.KeptForTesting("f").bytes == mib.size());
  const absl::Time finish = absl::Now();
  hub.Finish("f", v1::Decision());
  parked.join();
  CHECK(absl::Now() - finish < absl::Seconds(5));
  const absl::Time start = absl::Now();
  auto after = hub.Exchange("f", 8, 0, "b", mib, absl::Now() + absl::Seconds(30));
  CHECK(after.status().code() == absl::StatusCode::kAborted);
  CHECK_THAT(std::string(after.status().message()), Catch::Contains("is over"));
  CHECK(absl::Now() - start < absl::Seconds(5));
  hub.Abort("f", 9, "b", absl::InternalError("late"));
  v1::RankTimings timings;
  timings.add_steps()->add_ranks()->mutable_iteration_us()->Resize(100000, 1.0);
  CHECK(hub.SubmitTimings("f", "b", timings).ok());
  CHECK(hub.WaitDecision("f", 0, absl::Now()).ok());
  CHECK(hub.KeptForTesting("f").bytes == 0);
}

TEST_CASE("a daemon that stops answering is lost: waits end within a probe, the run fails "
          "the same way after, and timings stop waiting for it") {
  std::atomic<bool> c_alive{true};
  Hub hub("a", [&](const std::string& d) { return d != "c" || c_alive.load(); });
  hub.Open("r", kDaemons);
  c_alive = false;
  const absl::Time start = absl::Now();
  auto out = hub.Exchange("r", 0, 0, "a", "x", absl::Now() + absl::Seconds(30));
  CHECK(out.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("daemon c"));
  CHECK(absl::Now() - start < absl::Seconds(3));
  CHECK(hub.Exchange("r", 7, 0, "b", "x", absl::Now() + absl::Seconds(30)).status().code() ==
        absl::StatusCode::kUnavailable);

  v1::RankTimings t;
  t.set_run_id("r");
  REQUIRE(hub.SubmitTimings("r", "b", t).ok());
  std::map<std::string, std::string> missing;
  auto timings = hub.WaitTimings("r", 0, absl::Now() + absl::Seconds(30), &missing);
  CHECK(timings.size() == 1);
  CHECK(timings.count("b") == 1);
  REQUIRE(missing.count("c") == 1);
  CHECK_THAT(missing["c"], Catch::StartsWith("lost"));

  CHECK(hub.WaitDecision("r", 0, absl::Now() + absl::Milliseconds(50)).status().code() ==
        absl::StatusCode::kDeadlineExceeded);
  v1::Decision d;
  d.set_verdict(v1::ANSWERED);
  hub.Finish("r", d);
  auto final_decision = hub.WaitDecision("r", 0, absl::Now() + absl::Seconds(1));
  REQUIRE(final_decision.ok());
  CHECK(final_decision->verdict() == v1::ANSWERED);
}

TEST_CASE("a daemon slower than the deadline: WaitTimings returns what came in") {
  Hub hub("a", nullptr);
  hub.Open("r", kDaemons);
  std::map<std::string, std::string> missing;
  auto timings = hub.WaitTimings("r", 0, absl::Now() + absl::Milliseconds(100), &missing);
  CHECK(timings.empty());
  CHECK(missing.size() == 2);
  CHECK(missing["b"] == "no timings by the run's deadline");
}

TEST_CASE("continuations: each pass's timings apart, each answered with the next pass, "
          "the last with the final decision; a pass not handed out is refused") {
  Hub hub("a", nullptr);
  hub.Open("r", kDaemons);
  v1::RankTimings t;
  t.set_run_id("r");
  t.set_pass(8);
  absl::Status early = hub.SubmitTimings("r", "b", t);
  CHECK(early.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(early.message()), Catch::StartsWith("pass: 8"));

  t.set_pass(0);
  REQUIRE(hub.SubmitTimings("r", "b", t).ok());
  REQUIRE(hub.SubmitTimings("r", "c", t).ok());
  std::map<std::string, std::string> missing;
  CHECK(hub.WaitTimings("r", 0, absl::Now() + absl::Seconds(30), &missing).size() == 2);
  CHECK(missing.empty());

  v1::Decision next;
  next.set_verdict(v1::GO);
  next.mutable_go()->mutable_next()->set_pass(8);
  hub.Continue("r", 0, next);
  auto answer = hub.WaitDecision("r", 0, absl::Now() + absl::Seconds(1));
  REQUIRE(answer.ok());
  CHECK(answer->verdict() == v1::GO);
  CHECK(answer->go().next().pass() == 8);
  // Pass 8's timings are waited for on their own: none is in yet.
  CHECK(hub.WaitTimings("r", 8, absl::Now() + absl::Milliseconds(50), &missing).empty());
  CHECK(missing.size() == 2);
  CHECK(hub.WaitDecision("r", 8, absl::Now() + absl::Milliseconds(50)).status().code() ==
        absl::StatusCode::kDeadlineExceeded);

  t.set_pass(8);
  REQUIRE(hub.SubmitTimings("r", "b", t).ok());
  auto some = hub.WaitTimings("r", 8, absl::Now() + absl::Milliseconds(50), &missing);
  CHECK(some.count("b") == 1);
  CHECK(missing.count("c") == 1);
  v1::Decision d;
  d.set_verdict(v1::ANSWERED);
  hub.Finish("r", d);
  auto final_decision = hub.WaitDecision("r", 8, absl::Now() + absl::Seconds(1));
  REQUIRE(final_decision.ok());
  CHECK(final_decision->verdict() == v1::ANSWERED);
  // The fixed passes' timings keep their own answer.
  CHECK(hub.WaitDecision("r", 0, absl::Now())->verdict() == v1::GO);
}

// Three sim backends of 2 GPUs each run ranks {0,1}, {2,3}, {4,5} of one group.
std::vector<std::vector<RankOutcome>> RunAcross(const ProblemSpec& problem,
                                                const CandidateSpec& candidate,
                                                const config::SimConfig& config,
                                                int64_t step, Hub* hub, const std::string& run) {
  std::vector<std::vector<RankOutcome>> out(3);
  std::vector<std::thread> threads;
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back([&, d] {
      auto backend = sim::SimBackend::Create(config);
      REQUIRE(backend.ok());
      PartialRun part;
      part.local_ranks = {2 * d, 2 * d + 1};
      part.transport = std::make_shared<NamedTransport>(hub, run, step, kDaemons[d]);
      ScheduleOptions options;
      options.warmup = 1;
      options.iterations = 3;
      out[d] = (*backend)->RunPartial(problem, candidate, options, part,
                                      absl::Now() + absl::Seconds(20));
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST_CASE("sim ranks on three daemons run every built-in algorithm with the data crossing "
          "the hub, verified exactly") {
  Hub hub("a", nullptr);
  hub.Open("run", kDaemons);
  config::SimConfig config;
  config.set_gpus(2);
  auto probe = sim::SimBackend::Create(config);
  REQUIRE(probe.ok());
  int64_t step = 0;
  int runs = 0;
  for (const ImplInfo* info : (*probe)->catalogue().List()) {
    const ImplInfo& impl = *info;
    // A small count, and one of many blocks (changes sent block by block).
    for (int64_t count : {1000, 6 * 20011}) {
      ProblemSpec problem;
      problem.collective = impl.collective;
      problem.world_size = 6;
      problem.count = impl.collective == Collective::kAllToAll ? 6 * (count / 6) : count;
      CandidateSpec candidate;
      candidate.impl = impl.name;
      auto outcomes = RunAcross(problem, candidate, config, step++, &hub, "run");
      for (int d = 0; d < 3; ++d) {
        REQUIRE(outcomes[d].size() == 2);
        for (const RankOutcome& o : outcomes[d]) {
          INFO(impl.name << " count " << count << " daemon " << d << ": "
                         << o.status.ToString());
          CHECK(o.status.ok());
          CHECK(o.iteration_us.size() == 3);
        }
      }
    }
    ++runs;
  }
  CHECK(runs >= 5);
}

TEST_CASE("a rank failing on one daemon stops the ranks of the others promptly") {
  Hub hub("a", nullptr);
  hub.Open("run", kDaemons);
  config::SimConfig config;
  config.set_gpus(2);
  config::Fault* f = config.add_faults();
  f->set_name("all_reduce/fails");
  f->set_base("all_reduce/ring");
  f->set_kind(config::Fault::FAIL);
  f->set_rank(1);
  ProblemSpec problem;
  problem.collective = Collective::kAllReduce;
  problem.world_size = 6;
  problem.count = 1000;
  CandidateSpec candidate;
  candidate.impl = "all_reduce/fails";
  const absl::Time start = absl::Now();
  auto outcomes = RunAcross(problem, candidate, config, 0, &hub, "run");
  CHECK(absl::Now() - start < absl::Seconds(5));
  CHECK(outcomes[0][1].status.code() == absl::StatusCode::kInternal);
  for (int d = 1; d < 3; ++d) {
    for (const RankOutcome& o : outcomes[d]) {
      INFO(o.status.ToString());
      CHECK(o.status.code() == absl::StatusCode::kAborted);
      CHECK_THAT(std::string(o.status.message()), Catch::Contains("rank 1 failed"));
    }
  }
}

// A sim daemon whose ranks all fail the `fail_run`-th run (from 0) of
// `impl` after its last barrier (in its timed iterations): the other
// daemons' ranks do not see it. Counts the runs of `impl`.
class FailsOneRun : public Backend {
 public:
  FailsOneRun(std::unique_ptr<Backend> sim, std::string impl, int fail_run)
      : sim_(std::move(sim)), impl_(std::move(impl)), fail_run_(fail_run) {}
  const NodeDescription& node() const override { return sim_->node(); }
  const Catalogue& catalogue() const override { return sim_->catalogue(); }
  int max_world_size() const override { return sim_->max_world_size(); }
  std::vector<RankOutcome> RunCandidate(const ProblemSpec& problem,
                                        const CandidateSpec& candidate,
                                        const ScheduleOptions& options,
                                        absl::Time deadline) override {
    return sim_->RunCandidate(problem, candidate, options, deadline);
  }
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options, const PartialRun& part,
                                      absl::Time deadline) override {
    std::vector<RankOutcome> out = sim_->RunPartial(problem, candidate, options, part, deadline);
    if (candidate.impl == impl_ && runs_++ == fail_run_) {
      for (RankOutcome& o : out) {
        o = RankOutcome{absl::InternalError("scripted failure in its second pass"), {}};
      }
    }
    return out;
  }
  int runs() const { return runs_; }

 private:
  std::unique_ptr<Backend> sim_;
  const std::string impl_;
  const int fail_run_;
  std::atomic<int> runs_{0};
};

TEST_CASE("engines of three daemons measure in interleaved passes through the hub; a "
          "candidate failing only in pass 1, on one daemon alone, stops everywhere") {
  Hub hub("a", nullptr);
  hub.Open("run", kDaemons);
  config::SimConfig config;
  config.set_gpus(2);
  ProblemSpec problem;
  problem.collective = Collective::kAllReduce;
  problem.world_size = 6;
  problem.count = 1000;
  const std::vector<CandidateSpec> candidates = {{"all_reduce/ring", {}},
                                                 {"all_reduce/one_shot", {}}};
  EngineOptions options;
  options.schedule.warmup = 1;
  options.schedule.iterations = 7;
  options.passes.warmup = 1;
  options.passes.min_passes = options.passes.max_passes = 3;
  options.timeout = absl::Seconds(20);
  // Steps of a run of two problems, this one second after three candidates.
  const int64_t base = 3;
  const int64_t total = 5;
  std::vector<std::unique_ptr<FailsOneRun>> backends;
  for (int d = 0; d < 3; ++d) {
    auto sim = sim::SimBackend::Create(config);
    REQUIRE(sim.ok());
    backends.push_back(std::make_unique<FailsOneRun>(*std::move(sim), "all_reduce/ring",
                                                     d == 1 ? 1 : -1));
  }
  std::vector<std::vector<std::vector<RankOutcome>>> out(3);
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int d = 0; d < 3; ++d) {
    threads.emplace_back([&, d] {
      Engine engine(backends[d].get());
      out[d] = engine.MeasurePart(
          problem, candidates, options, {2 * d, 2 * d + 1}, "", 3,
          [&, d](int c, int pass) -> std::shared_ptr<RunTransport> {
            return std::make_shared<NamedTransport>(&hub, "run",
                                                    CrossStep(base, c, pass, total), kDaemons[d]);
          });
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(absl::Now() - start < absl::Seconds(10));  // not at a timeout

  std::vector<std::vector<RankOutcome>> all(2, std::vector<RankOutcome>(6));
  for (int d = 0; d < 3; ++d) {
    REQUIRE(out[d].size() == 2);
    // Ring in every pass, but on the failing daemon not after pass 1: it
    // aborts pass 2, so the others' ranks stop at their first barrier.
    CHECK(backends[d]->runs() == (d == 1 ? 2 : 3));
    for (int c = 0; c < 2; ++c) {
      REQUIRE(out[d][c].size() == 2);
      for (int i = 0; i < 2; ++i) all[c][2 * d + i] = out[d][c][i];
    }
  }
  for (int r = 0; r < 6; ++r) {
    INFO("rank " << r << ": " << all[0][r].status.ToString());
    CHECK(all[0][r].status.code() == (r / 2 == 1 ? absl::StatusCode::kInternal
                                                 : absl::StatusCode::kAborted));
    if (r / 2 != 1) {
      CHECK_THAT(std::string(all[0][r].status.message()),
                 Catch::EndsWith("rank 2 failed in an earlier pass: scripted failure in its "
                                 "second pass"));
    }
    CHECK(all[1][r].status.ok());
    CHECK(all[1][r].iteration_us.size() == 7);  // 3 + 2 + 2
  }
  std::vector<int> sizes;
  for (int pass = 0; pass < 3; ++pass) sizes.push_back(PassIterations(options, pass));
  const std::vector<CandidateOutcome> ranked = RankRanks(candidates, all, RankRule(), sizes);
  REQUIRE(ranked.size() == 2);
  CHECK(ranked[0].candidate.impl == "all_reduce/one_shot");
  CHECK(ranked[0].iterations == 7);
  CHECK(ranked[1].reason == "rank 2: INTERNAL: scripted failure in its second pass");
}

}  // namespace
}  // namespace autotuned::crossrun
