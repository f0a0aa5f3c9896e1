#include "daemon/backend/factory.h"

#include <spdlog/spdlog.h>

#include "daemon/backend/sim/sim_backend.h"

namespace autotuned {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const config::DaemonConfig& c) {
  if (c.backend() == "cuda") {
    return absl::UnimplementedError(
        "backend: \"cuda\" is not part of this build; use \"sim\" or \"auto\"");
  }
  if (c.backend() == "auto") {
    spdlog::info("backend auto: sim (this build has no cuda backend)");
  }
  absl::StatusOr<std::unique_ptr<sim::SimBackend>> sim =
      sim::SimBackend::Create(c.sim());
  if (!sim.ok()) return sim.status();
  return std::unique_ptr<Backend>(std::move(*sim));
}

}  // namespace autotuned
