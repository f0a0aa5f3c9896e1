// Request validation and translation: the only place where wire messages
// (proto/autotuned.proto) become the daemon's internal problem descriptions.
// Everything a round needs is checked here, before anything runs, so that a
// bad request never starts a half-done round.
//
// Every error is INVALID_ARGUMENT (UNIMPLEMENTED for a group shape this daemon
// version does not serve) with a message that starts with the offending
// field's path, e.g. "problems[0].count: must be positive, got 0".
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include "daemon/catalogue/catalogue.h"
#include "daemon/common/problem.h"
#include "daemon/engine/engine.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// What the service needs to know about the node to validate a request.
struct ValidationContext {
  const Catalogue* catalogue = nullptr;
  const config::Limits* limits = nullptr;
  const config::Defaults* defaults = nullptr;
  int max_world_size = 1;
  std::string backend_name;
};

struct ValidProblem {
  ProblemSpec spec;
  std::vector<CandidateSpec> candidates;  // canonical: every param present
  v1::Problem canonical;                  // the wire form of the above
};

struct ValidRequest {
  int world_size = 1;
  std::string group_id;
  std::vector<ValidProblem> problems;
  EngineOptions engine;
  bool refresh = false;
  bool cuda_graph = false;
};

absl::StatusOr<ValidRequest> ValidateTune(const v1::TuneRequest& request,
                                          const ValidationContext& context);

// A sweep becomes one tune request per count (the problem's count replaced).
absl::StatusOr<std::vector<ValidRequest>> ValidateSweep(
    const v1::SweepRequest& request, const ValidationContext& context);

// Validates group and options alone (shared by both of the above).
absl::Status ValidateGroup(const v1::Group& group, const ValidationContext& context);
absl::StatusOr<EngineOptions> ValidateOptions(const v1::Options& options,
                                              const ValidationContext& context);

}  // namespace autotuned
