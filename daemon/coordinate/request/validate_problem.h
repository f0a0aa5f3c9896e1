// One problem of a request: its strings within their bounds, its shape
// (collective, dtype, reduce op, root), its sizes against the memory cap and
// its candidates, canonical. Private to daemon/coordinate/request: ValidateTune and
// ValidateSweep (validate.h, whose contract this follows) call it once per
// problem.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/request/validate.h"
#include "proto/autotuned.pb.h"

namespace autotuned::request_internal {

// Problem `p` (`f`: its field path, e.g. "problems[0]") of a group of
// `world_size` ranks. Errors name the field under `f`.
absl::StatusOr<ValidProblem> ValidateProblem(const v1::Problem& p, const std::string& f,
                                             int world_size, const ValidationContext& ctx);

// Why no candidate of `p` fits the memory cap (each measured by
// ctx.memory_need), or "" when one does, or when the context measures none.
// Candidates the ranks run are the ranks' to place: they fit here.
std::string MemoryShortfall(const ValidProblem& p, const ValidationContext& ctx);

}  // namespace autotuned::request_internal
