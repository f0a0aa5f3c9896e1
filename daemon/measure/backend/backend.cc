#include "daemon/measure/backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace autotuned {

int DeviceOf(const std::vector<int>& devices, int i) {
  return devices.empty() ? i : devices[i];
}

int DeviceOf(const ScheduleOptions& options, int i) { return DeviceOf(options.devices, i); }

absl::Status CheckPlacement(const ScheduleOptions& options, int ranks_here,
                            int devices_on_node) {
  if (options.devices.empty()) return absl::OkStatus();
  if (static_cast<int>(options.devices.size()) != ranks_here) {
    return absl::InvalidArgumentError(absl::StrCat("devices: ", options.devices.size(),
                                                   " for ", ranks_here, " ranks here"));
  }
  std::vector<bool> used(std::max(devices_on_node, 0), false);
  for (int d : options.devices) {
    if (d < 0 || d >= devices_on_node) {
      return absl::InvalidArgumentError(absl::StrCat(
          "devices: device ", d, " is not on this node (devices 0..", devices_on_node - 1, ")"));
    }
    if (used[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices: device ", d, " is given to two ranks"));
    }
    used[d] = true;
  }
  return absl::OkStatus();
}

int64_t Backend::memory_free_bytes() const {
  int64_t least = 0;
  for (const GpuDescription& g : node().gpus) {
    if (g.free_bytes <= 0) return 0;
    least = least == 0 ? g.free_bytes : std::min(least, g.free_bytes);
  }
  return least;
}

int64_t MemoryCap(const Backend& backend, int64_t max_buffer_bytes, double fraction) {
  const int64_t free = backend.memory_free_bytes();
  if (free <= 0) return max_buffer_bytes;
  const double share = std::clamp(fraction, 0.0, 1.0) * static_cast<double>(free);
  return std::min(max_buffer_bytes, static_cast<int64_t>(share));
}

std::vector<RankOutcome> Backend::RunPartial(const ProblemSpec&, const CandidateSpec&,
                                             const ScheduleOptions&, const PartialRun& part,
                                             absl::Time) {
  const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
      "the ", node().backend,
      " backend cannot run a group spread over several daemons in this version"));
  if (part.transport != nullptr) part.transport->Abort(refused);
  return std::vector<RankOutcome>(std::max<size_t>(part.local_ranks.size(), 1),
                                  RankOutcome{refused, {}});
}

}  // namespace autotuned
