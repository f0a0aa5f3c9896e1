// The cache key text of a validated problem on this node: the one
// computation of it. ValidateTune stores it in ValidProblem::key_text when
// its context can key (ValidationContext::key_text, set by LiveSettings), so
// a round computes each problem's key once; Solver::KeyText takes it from
// there, or computes it here for a request validated without it.
#pragma once

#include <string>

#include "daemon/coordinate/request/valid_request.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned {

// CacheKeyText (daemon/state/cache/key.h) of `problem` in `request` on
// `node`, whose fingerprint is `fingerprint` (NodeFingerprint): the group's
// shape, the canonical problem, the timing mode and the placement of this
// node's ranks.
std::string ProblemKeyText(const std::string& fingerprint, const NodeDescription& node,
                           const ValidProblem& problem, const ValidRequest& request);

}  // namespace autotuned
