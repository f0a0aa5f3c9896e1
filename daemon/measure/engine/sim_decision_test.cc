// The decision rules on the sim backend, with candidates whose true speeds
// differ by known fractions: each sleeps a set time in every iteration on
// one rank (the sim's SLOW_RANK fault), 0, 2, 5 and 20 % above the base.
// Every run, on the daemon's default schedule, checks what follows from the
// verdict whatever the timings: a decisive winner is apart from every other
// candidate beyond the noise, a tie goes to the better estimate. Whether
// the verdict is true to the known speeds is a claim at 99 % confidence per
// comparison, which a burst of load on a shared machine can break now and
// then: it is checked by the long twin
// (AUTOTUNED_LONG=1, //daemon/measure/engine:sim_decision_long_test), over several
// repetitions, and measured at scale by bench/regret.sh.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "config/config.pb.h"
#include "daemon/measure/backend/sim/sim_backend.h"
#include "daemon/measure/engine/engine.h"

namespace autotuned {
namespace {

constexpr int64_t kBaseUs = 1000;

// Candidate names by how much slower than the base they are, in percent.
const std::map<std::string, int> kSlowerPercent = {
    {"all_reduce/base", 0}, {"all_reduce/same", 0}, {"all_reduce/slower2", 2},
    {"all_reduce/slower5", 5}, {"all_reduce/slower20", 20}};

std::unique_ptr<Backend> Backend2() {
  config::SimConfig config;
  config.set_gpus(2);
  for (const auto& [name, percent] : kSlowerPercent) {
    config::Fault* f = config.add_faults();
    f->set_name(name);
    f->set_base("all_reduce/ring");
    f->set_kind(config::Fault::SLOW_RANK);
    f->set_rank(1);
    f->set_delay_us(kBaseUs * (100 + percent) / 100);
  }
  absl::StatusOr<std::unique_ptr<sim::SimBackend>> backend = sim::SimBackend::Create(config);
  REQUIRE(backend.ok());
  return std::move(*backend);
}

ProblemSpec AllReduce2() {
  ProblemSpec p;
  p.world_size = 2;
  p.count = 256;
  return p;
}

// The daemon's default schedule (config/default.textproto).
EngineOptions Options() {
  EngineOptions o;
  o.schedule.warmup = 5;
  o.schedule.iterations = 20;
  o.timeout = absl::Seconds(20);
  o.rule.min_speedup = 0.01;
  o.passes.min_passes = 8;
  o.passes.max_passes = 16;
  o.passes.iterations = 3;
  return o;
}

bool Long() { return std::getenv("AUTOTUNED_LONG") != nullptr; }
int Repetitions() { return Long() ? 5 : 1; }

// What a verdict means, whatever the timings: every candidate is compared
// with the winner by paired passes; DECISIVE, the winner and every other
// candidate are apart beyond the noise; WITHIN_NOISE, some are not, and the
// winner has the best estimate (with two candidates, its paired ratio to
// each other is at least 1 whichever is the reference); BELOW_MARGIN, the
// winner is the default (listed first). In the long twin also the truth: a
// truly slower winner is never reported DECISIVE.
void CheckDecision(const std::vector<CandidateOutcome>& ranked) {
  REQUIRE(ranked.size() >= 2);
  REQUIRE(ranked[0].ok);
  const Verdict verdict = Judge(ranked);
  for (size_t i = 1; i < ranked.size(); ++i) {
    const CandidateOutcome& o = ranked[i];
    CHECK(o.vs_winner.pairs >= kMinPairs);
    const bool apart = Beats(ranked[0], o) || Beats(o, ranked[0]);
    if (verdict.confidence == v1::DECISIVE) CHECK(apart);
    if (verdict.confidence == v1::WITHIN_NOISE) CHECK(o.vs_winner.median >= 1.0);
    if (verdict.confidence == v1::BELOW_MARGIN) CHECK(ranked[0].index == 0);
  }
  const int winner = kSlowerPercent.at(ranked[0].candidate.impl);
  for (size_t i = 1; Long() && i < ranked.size(); ++i) {
    INFO(ranked[0].candidate.impl << " over " << ranked[i].candidate.impl << ": "
                                  << v1::Confidence_Name(verdict.confidence));
    if (kSlowerPercent.at(ranked[i].candidate.impl) < winner) {
      CHECK(verdict.confidence != v1::DECISIVE);
    }
  }
}

TEST_CASE("20 % faster: decided beyond the noise, whichever comes first") {
  std::unique_ptr<Backend> backend = Backend2();
  Engine engine(backend.get());
  const ProblemSpec p = AllReduce2();
  int runs = 0, wins = 0, decisive = 0;
  for (int rep = 0; rep < Repetitions(); ++rep) {
    for (const std::vector<CandidateSpec>& order :
         {std::vector<CandidateSpec>{{"all_reduce/slower20", {}}, {"all_reduce/base", {}}},
          std::vector<CandidateSpec>{{"all_reduce/base", {}}, {"all_reduce/slower20", {}}}}) {
      const std::vector<CandidateOutcome> ranked = engine.Measure(p, order, Options());
      CheckDecision(ranked);
      if (Long()) {
        ++runs;
        wins += ranked[0].candidate.impl == "all_reduce/base";
        decisive += Judge(ranked).confidence == v1::DECISIVE;
      }
    }
  }
  // The faster one wins, decisively, in most runs. A heavily loaded machine
  // can disturb enough passes that the two tie within the noise; the tie
  // then goes to the better estimate, whichever comes first, and is never
  // reported DECISIVE (CheckDecision).
  if (!Long()) return;
  std::printf("20 %% faster: %d of %d won, %d decisive\n", wins, runs, decisive);
  INFO(wins << " of " << runs << " won, " << decisive << " decisive");
  CHECK(wins * 2 > runs);
  CHECK(decisive * 2 >= runs);
}

TEST_CASE("0, 2 and 5 %: never a slower winner beyond noise, ties to the better estimate") {
  std::unique_ptr<Backend> backend = Backend2();
  Engine engine(backend.get());
  const ProblemSpec p = AllReduce2();
  for (int rep = 0; rep < Repetitions(); ++rep) {
    for (const char* other : {"all_reduce/same", "all_reduce/slower2", "all_reduce/slower5"}) {
      for (bool base_first : {true, false}) {
        std::vector<CandidateSpec> order = {{"all_reduce/base", {}}, {other, {}}};
        if (!base_first) std::swap(order[0], order[1]);
        CheckDecision(engine.Measure(p, order, Options()));
      }
    }
  }
}

}  // namespace
}  // namespace autotuned
