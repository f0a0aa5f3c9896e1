// Helpers shared by the sim backend's tests.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/time.h"
#include "daemon/measure/backend/sim/sim_backend.h"

namespace autotuned::sim::testing {

inline std::unique_ptr<SimBackend> MakeBackend(config::SimConfig config) {
  auto backend = SimBackend::Create(config);
  INFO(backend.status().ToString());
  REQUIRE(backend.ok());
  return std::move(*backend);
}

inline std::unique_ptr<SimBackend> MakeBackend(int gpus) {
  config::SimConfig config;
  config.set_gpus(gpus);
  return MakeBackend(config);
}

inline ProblemSpec Problem(Collective c, int world, int64_t count,
                           ReduceOp op = ReduceOp::kSum) {
  ProblemSpec p;
  p.collective = c;
  p.world_size = world;
  p.count = count;
  p.op = op;
  return p;
}

inline ScheduleOptions Quick(int iterations = 2) {
  ScheduleOptions o;
  o.warmup = 1;
  o.iterations = iterations;
  return o;
}

// Runs `candidate` on `problem` and requires every rank to be OK with one
// sample per iteration.
inline void RequireCorrect(Backend& backend, const ProblemSpec& problem,
                           const CandidateSpec& candidate) {
  const ScheduleOptions options = Quick();
  std::vector<RankOutcome> outcomes = backend.RunCandidate(
      problem, candidate, options, absl::Now() + absl::Seconds(30));
  REQUIRE(outcomes.size() == static_cast<size_t>(problem.world_size));
  for (size_t r = 0; r < outcomes.size(); ++r) {
    INFO(Describe(problem) << " " << Describe(candidate) << " rank " << r
                           << ": " << outcomes[r].status.ToString());
    REQUIRE(outcomes[r].status.ok());
    REQUIRE(outcomes[r].iteration_us.size() ==
            static_cast<size_t>(options.iterations));
  }
}

}  // namespace autotuned::sim::testing
