// The leader's adaptive passes of a cross-daemon run (docs/protocol.md,
// "Continuations across daemons"): every rank's samples of each candidate
// joined pass by pass, the ranking they give, and whether one more pass is
// worth running, by the rules and limits of one daemon's adaptive passes
// (engine.h NextPass, PassOptions). What a continuation says (v1::CrossPass)
// and what a follower accepts of one.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/engine.h"
#include "proto/peer.pb.h"

namespace autotuned::leadership {

// The most passes a run may have, and the bounds of a continuation's
// schedule (config limits' ceilings: max_warmup, max_iterations).
inline constexpr int kMaxCrossPasses = 1000;
inline constexpr int kMaxPassWarmup = 1000;
inline constexpr int kMaxPassIterations = 10000;

// One candidate of a run, every rank of the group: the samples of every
// pass joined in pass order, or the outcomes of the pass that failed.
struct PassSamples {
  std::vector<RankOutcome> ranks;
  std::vector<int> pass_sizes;  // timed iterations of each pass joined
  std::vector<int> pass_ids;    // the run's number of each
};

// `r`, or, when it is ok but does not hold `iterations` finite,
// non-negative samples, its failure: INVALID_ARGUMENT "iteration_us: ...".
// What a rank's timings from another daemon must hold, in the fixed passes
// (their iterations summed) as in each continuation.
RankOutcome CheckedSamples(RankOutcome r, int iterations);

// Joins pass `pass_id` (`pass`: every rank's outcome, `iterations` timed
// iterations expected of each) into `samples`: appended when every rank ran
// it and none failed before; otherwise the candidate is ruled out: the
// pass's outcomes replace the samples (a candidate ruled out earlier keeps
// its failure). Each outcome goes through CheckedSamples first.
void JoinPass(PassSamples* samples, std::vector<RankOutcome> pass, int pass_id, int iterations);

// Summarize of `samples` as candidate `index`, with `passes` the passes it
// ran (0 when ruled out).
CandidateOutcome OutcomeOf(int index, const CandidateSpec& candidate, const PassSamples& samples);

// Where a run stands before its next pass.
struct RunState {
  int pass = 0;                         // the next pass's number
  bool everyone = true;                 // every daemon's timings came in and said `continues`
  absl::Duration spent;                 // on continuations so far
  absl::Duration left = absl::InfiniteDuration();  // until the leader stops waiting for timings
  int problems = 1;                     // of the run
};

// The next pass after `ranked` (per problem of the run, in its order: Rank
// with options.rule over every pass so far): per problem, NextPass's
// candidates in PassOrder for that pass (none where NextPass finds none);
// options.passes' warmup and iterations. None when no problem has a pass
// worth running, or `state` says stop: not everyone, pass at
// options.passes.max_passes, options.passes.budget x problems spent, or
// the pass's steps, each up to options.timeout, would not end within `left`.
std::optional<v1::CrossPass> NextCrossPass(
    const std::vector<std::vector<CandidateOutcome>>& ranked, const EngineOptions& options,
    const RunState& state);

// What every daemon's ranks run in each step of `pass`: options.schedule
// without verify, with the pass's warmup and iterations.
ScheduleOptions CrossPassSchedule(const EngineOptions& options, const v1::CrossPass& pass);

// Whether a follower runs `pass`, after the run's passes up to `last` and
// for a run whose problems have `candidates` candidates each: a pass after
// `last` and below kMaxCrossPasses, one entry per problem, candidates in
// range and not repeated, warmup and iterations within the bounds above.
// INVALID_ARGUMENT naming the field ("go.next.<field>") otherwise.
absl::Status CheckCrossPass(const v1::CrossPass& pass, int last,
                            const std::vector<int>& candidates);

}  // namespace autotuned::leadership
