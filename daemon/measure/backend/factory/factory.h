// Chooses and builds the node's backend from the configuration: "sim",
// "cuda", or "auto" (cuda when the GPU worker finds a GPU, else sim).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned {

// `self_exe` is the daemon's own binary: the cuda backend runs it with
// --gpu_worker as its GPU worker process. Errors: the backend's own (e.g.
// NOT_FOUND for "cuda" on a node without a GPU, INVALID_ARGUMENT for a bad
// sim section, FAILED_PRECONDITION for "cuda" in a build without CUDA, where
// "auto" and "sim" log that there is no cuda backend and give sim).
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const config::DaemonConfig& config,
                                                     const std::string& self_exe);

}  // namespace autotuned
