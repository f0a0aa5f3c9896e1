#include "daemon/coordinate/request/key_text.h"

#include <vector>

#include "daemon/state/cache/key.h"

namespace autotuned {

std::string ProblemKeyText(const std::string& fingerprint, const NodeDescription& node,
                           const ValidProblem& problem, const ValidRequest& request) {
  const std::vector<int>& devices = request.engine.schedule.devices;
  const int ranks_here = devices.empty() ? request.world_size : static_cast<int>(devices.size());
  return CacheKeyText(fingerprint, request.world_size, request.world_size, problem.canonical,
                      request.timing_mode(), PlacementText(node, devices, ranks_here));
}

}  // namespace autotuned
