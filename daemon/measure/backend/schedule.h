// The per-rank half of the lockstep schedule: what every rank does for one
// candidate, in the same order on every rank. Backends call it on each rank's
// device worker (a thread for sim, a thread of the supervised GPU worker
// process for cuda); the engine (daemon/measure/engine) orders the candidates and
// ranks their timings.
#pragma once

#include "daemon/measure/backend/backend.h"

namespace autotuned {

// Verify against the reference (unless options.verify is false), barrier,
// warmup, barrier, timed iterations. Stops at the first failing step and reports it, naming the step.
RankOutcome RunRankSchedule(RankRun& run, const ScheduleOptions& options);

// CUDA_GRAPH timing: the collectives captured in one graph for `problem`, so
// that one replay lasts about 200 us of GPU time guessed from its bytes
// (count, or for all_to_all the sum of split_counts, times the dtype's
// size); 1 to 64, the same on every rank. The clients' rank runs use the
// same rule (docs/gpu.md#timing).
int GraphCalls(const ProblemSpec& problem);

}  // namespace autotuned
