#include "daemon/coordinate/request/live_settings.h"

#include <utility>

#include "daemon/coordinate/request/key_text.h"
#include "daemon/state/cache/key.h"

namespace autotuned {

LiveSettings::LiveSettings(const Backend* backend, const config::DaemonConfig& config, bool peers)
    : backend_(backend),
      fingerprint_(NodeFingerprint(backend->node(), backend->catalogue().Version())),
      self_daemon_(config.peer_advertise()),
      peers_(peers),
      allowed_peers_(config.peers().begin(), config.peers().end()),
      values_(std::make_shared<const Values>(Values{config.limits(), config.defaults()})) {}

std::shared_ptr<const LiveSettings::Values> LiveSettings::Now() const {
  absl::MutexLock lock(&mu_);
  return values_;
}

void LiveSettings::Replace(const config::Limits& limits, const config::Defaults& defaults) {
  auto next = std::make_shared<const Values>(Values{limits, defaults});
  absl::MutexLock lock(&mu_);
  values_ = std::move(next);
}

ValidationContext LiveSettings::Validation(const Values& values) const {
  ValidationContext context;
  context.catalogue = &backend_->catalogue();
  context.limits = &values.limits;
  context.defaults = &values.defaults;
  context.memory_cap_bytes = MemoryCap(values.limits);
  const Backend* backend = backend_;
  context.memory_need = [backend](const ProblemSpec& p, const CandidateSpec& c) {
    return backend->MemoryNeed(p, c);
  };
  context.key_text = [backend, fingerprint = fingerprint_](const ValidProblem& p,
                                                           const ValidRequest& r) {
    return ProblemKeyText(fingerprint, backend->node(), p, r);
  };
  context.max_world_size = backend_->max_world_size();
  context.backend_name = backend_->node().backend;
  context.self_daemon = self_daemon_;
  context.peers = peers_;
  context.allowed_peers = allowed_peers_;
  return context;
}

int64_t LiveSettings::MemoryCap(const config::Limits& limits) const {
  return autotuned::MemoryCap(*backend_, limits.max_buffer_bytes(), limits.gpu_memory_fraction());
}

}  // namespace autotuned
