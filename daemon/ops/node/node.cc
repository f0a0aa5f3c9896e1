#include "daemon/ops/node/node.h"

#include <functional>
#include <memory>

#include "absl/time/clock.h"
#include "common/version.h"

namespace autotuned {
namespace {

rounds::RankRoundsOptions RoundsOptions(const config::DaemonConfig& config,
                                        const Backend& backend) {
  rounds::RankRoundsOptions options;
  options.table.decision_ttl = absl::Milliseconds(config.rendezvous().decision_ttl_ms());
  options.table.max_rounds_kept = config.rendezvous().max_rounds_kept();
  options.table.max_kept_bytes = config.rendezvous().max_kept_bytes();
  options.table.resync_after_missed_rounds = config.rendezvous().resync_after_missed_rounds();
  options.measure_after_fallback = config.rendezvous().measure_after_fallback();
  options.max_world_size = backend.max_world_size();
  return options;
}

clientrun::ClientRunsOptions RunsOptions(const config::DaemonConfig& config) {
  clientrun::ClientRunsOptions options;
  options.decision_ttl = absl::Milliseconds(config.rendezvous().decision_ttl_ms());
  options.max_runs_kept = config.rendezvous().max_rounds_kept();
  options.max_kept_bytes = config.rendezvous().max_kept_bytes();
  return options;
}

}  // namespace

Node::Node(Backend* backend, ResultCache* cache, const config::DaemonConfig& config,
           const NodeOptions& options)
    : backend_(backend),
      cache_(cache),
      peer_client_(options.peer_client),
      started_(absl::Now()),
      own_registry_(options.metrics ? nullptr : std::make_unique<metrics::Registry>()),
      own_metrics_(options.metrics ? nullptr
                                   : std::make_unique<metrics::DaemonMetrics>(own_registry_.get())),
      metrics_(options.metrics ? options.metrics : own_metrics_.get()),
      admission_(config.limits().max_concurrent_rounds(), metrics_->rounds_in_flight,
                 config.limits().max_waiting_ranks()),
      settings_(backend, config,
                options.peer_client != nullptr && !config.peer_advertise().empty()),
      engine_(backend),
      solver_(backend, cache, &engine_, metrics_, options.fleet),
      cross_runs_(backend, &engine_, &solver_, options.peer_client, config.peer_advertise()),
      client_runs_(&solver_, &engine_, metrics_, RunsOptions(config)),
      rounds_(&solver_, &cross_runs_, &client_runs_, metrics_, RoundsOptions(config, *backend)),
      leader_(&rounds_, &admission_),
      follower_(options.peer_client, &engine_, backend, config.peer_advertise()) {
  metrics_->SetStartTime(absl::ToUnixSeconds(started_));
  metrics_->SetBuildInfo(kDaemonVersion, backend->node().backend);
  solver_.SyncCacheFigures();
}

void Node::ServePeers(PeerService* peer) {
  if (peer_client_ == nullptr) return;
  peer->SetReadyHandler([this](const v1::ReadyRequest& request, absl::Time deadline,
                               const std::function<bool()>& gone) {
    const std::shared_ptr<const LiveSettings::Values> now = settings_.Now();
    return leader_.Ready(request, settings_.Validation(*now), deadline, gone);
  });
  peer->SetRunHandlers(
      [this](const v1::RankTimings& timings, absl::Time deadline) {
        return cross_runs_.Reduce(timings, deadline);
      },
      [this](const v1::ExchangeRequest& request, absl::Time deadline) {
        return cross_runs_.Exchange(request, deadline);
      });
  peer->SetOutcomeHandler([this](const v1::OutcomeRequest& request, absl::Time deadline) {
    return follower_.Outcome(request, deadline);
  });
}

void Node::UpdateSettings(const config::Limits& limits, const config::Defaults& defaults) {
  admission_.SetLimits(limits.max_concurrent_rounds(), limits.max_waiting_ranks());
  settings_.Replace(limits, defaults);
}

void Node::BeginDrain() {
  admission_.BeginDrain();
  rounds_.StopBackground();
  metrics_->draining->Set(1);
}

}  // namespace autotuned
