#include "daemon/coordinate/request/validate_testing.h"

#include <catch2/catch.hpp>

namespace autotuned::testing {

ValidationContext ContextFor(const Backend& backend, const config::DaemonConfig& config,
                             bool peers) {
  ValidationContext context;
  context.catalogue = &backend.catalogue();
  context.limits = &config.limits();
  context.defaults = &config.defaults();
  context.max_world_size = backend.max_world_size();
  context.backend_name = backend.node().backend;
  context.self_daemon = config.peer_advertise();
  context.peers = peers && !config.peer_advertise().empty();
  context.allowed_peers.assign(config.peers().begin(), config.peers().end());
  return context;
}

ValidRequest MustValidate(const v1::TuneRequest& request, const ValidationContext& context) {
  absl::StatusOr<ValidRequest> valid = ValidateTune(request, context);
  // Catch's macros only on failure: they are not thread-safe, and ranks
  // validate on threads of their own.
  if (!valid.ok()) FAIL(valid.status().ToString());
  return *std::move(valid);
}

}  // namespace autotuned::testing
