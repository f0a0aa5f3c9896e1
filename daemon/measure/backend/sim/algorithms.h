// The sim backend's collective algorithms: real CPU implementations working
// on a Group's host buffers, float32 only, each a different communication
// pattern (one-shot, two-shot, ring, tree, pipeline...) so that their
// timings differ with message size and world size as they do on GPUs.
//
// Contract of every RankFn (one rank's part of one call of the collective):
//  - It starts with group.Barrier(), the entry barrier. Once every rank has
//    entered, every input is ready and every rank has finished the previous
//    call, so a call never writes what a peer still reads from the previous
//    one: no barrier is needed at the end, and calls run back to back.
//  - It calls Barrier() the same number of times on every rank.
//  - It never writes an input or a peer's buffer; it writes only its own
//    output and scratch, and returns once its own output is complete (peers
//    may still be reading it).
//  - It works for any world size >= 1 and any count, slices of unequal size
//    (including empty ones) included.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/sim/group.h"
#include "daemon/measure/catalogue/catalogue.h"

namespace autotuned::sim {

// The most ranks (virtual GPUs) the sim supports.
inline constexpr int kMaxRanks = 1024;

using RankFn = std::function<absl::Status(Group& group, int rank,
                                          const CandidateSpec& candidate)>;

struct Algorithm {
  ImplInfo info;
  RankFn run;
  // Scratch floats every rank needs for `problem`; null when none.
  int64_t (*scratch)(const ProblemSpec& problem) = nullptr;
  // Checks beyond the catalogue's limits, e.g. a "root" parameter that must
  // name a rank of the group; null when none. INVALID_ARGUMENT when unmet.
  absl::Status (*check)(const ProblemSpec& problem,
                        const CandidateSpec& candidate) = nullptr;
};

// Every built-in algorithm, in catalogue order.
std::vector<Algorithm> BuiltinAlgorithms();

}  // namespace autotuned::sim
