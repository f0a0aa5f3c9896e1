// The wire form of a problem's answer (v1::ProblemResult) as every path of
// the daemon builds it: from a measured ranking, or the fallback when a
// round is not measured.
//
// Thread-safety: pure functions (ToProblemResult reads the clock).
#pragma once

#include <string>
#include <vector>

#include "daemon/coordinate/request/valid_request.h"
#include "daemon/measure/engine/engine.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// A measured ranking (Rank with `min_speedup`), best first: TUNED with the
// first candidate as the winner when it works, its Judge verdict and the
// cost, else FAILED ("every candidate was ruled out"); bandwidths from the
// problem's size, measured_unix_ms now. No cache key.
v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked,
                                  double min_speedup);

// Not measured: FALLBACK with the default (first) candidate as the winner,
// nothing ranked, no reason (the rendezvous writes it), under `cache_key`.
v1::ProblemResult FallbackResult(const ValidProblem& problem, const std::string& cache_key);

}  // namespace autotuned
