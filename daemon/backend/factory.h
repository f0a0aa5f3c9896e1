// Chooses and builds the node's backend from the configuration: "sim", "cuda",
// or "auto" (cuda where the build has it and a GPU is present, else sim).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include "daemon/backend/backend.h"

namespace autotuned {

// UNIMPLEMENTED when "cuda" is asked of a build without it; the backend's own
// errors (e.g. INVALID_ARGUMENT for a bad sim section) otherwise.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const config::DaemonConfig& config);

}  // namespace autotuned
