// The daemon's core: the parts that serve requests, made and wired in one
// place, in the order each needs the others, and handed to the services
// that adapt them (built in daemon/main.cc):
//   - admission (daemon/coordinate/admission) and the live settings calls validate
//     against (daemon/coordinate/request/live_settings.h);
//   - the engine (daemon/measure/engine) and the Solver of whole-group rounds
//     (daemon/coordinate/solver), over the backend, the cache and the fleet cache;
//   - the leader's cross-daemon runs (leadership::CrossRuns), the runs of
//     candidates the ranks run (clientrun::ClientRuns), the per-rank rounds
//     of groups this daemon leads (rounds::RankRounds), the leader's side
//     of a follower's ask (leadership::Leader), and the follower's side
//     (leadership::Follower).
// The client service (daemon/serve/service) is given the parts it serves through
// the accessors below; the peer service (daemon/coordinate/peer) is handed the
// leader's and the follower's handlers by ServePeers. A request's path is
// a straight line down: a service, then the part that serves it.
//
// Lifecycle: UpdateSettings on SIGHUP; BeginDrain, then WaitForRounds, on
// SIGTERM (daemon/ops/lifecycle).
//
// Metrics: the node sets the start time and build info of
// metrics::DaemonMetrics and the cache's figures when it is made, and the
// draining gauge in BeginDrain; its parts count the rest.
//
// Ownership: `backend`, `cache` (null: no cache) and what NodeOptions
// points to are not owned and outlive the node. The node owns its parts;
// the services holding them are destroyed before it.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/coordinate/admission/admission.h"
#include "daemon/coordinate/clientrun/client_runs.h"
#include "daemon/coordinate/leadership/cross_runs.h"
#include "daemon/coordinate/leadership/follower.h"
#include "daemon/coordinate/leadership/leader.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/peer/peer_service.h"
#include "daemon/coordinate/request/live_settings.h"
#include "daemon/coordinate/rounds/rank_rounds.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/state/cache/cache.h"
#include "daemon/state/fleetcache/fleet_cache.h"

namespace autotuned {

struct NodeOptions {
  // Where the figures go (not owned; outlives the node). Null: the node
  // keeps its own.
  metrics::DaemonMetrics* metrics = nullptr;
  // How this daemon reaches the leaders of multi-daemon groups (not owned;
  // outlives the node). Null, or config peer_advertise empty: members on
  // other daemons are UNIMPLEMENTED.
  PeerClient* peer_client = nullptr;
  // The fleet cache, the second tier behind `cache` (not owned; outlives
  // the node). Null: none. Give it the same `metrics`.
  fleetcache::FleetCache* fleet = nullptr;
};

class Node {
 public:
  Node(Backend* backend, ResultCache* cache, const config::DaemonConfig& config,
       const NodeOptions& options = {});
  // Stops the background measurement (waits for the problem it is
  // measuring) and the cross-daemon runs started for followers.
  ~Node() = default;

  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Serves the peer calls of groups this daemon leads and of runs it
  // follows through `peer` (not owned; the node outlives its calls): Ready
  // by leadership::Leader::Ready against the live settings, ReduceTimings
  // and Exchange by leadership::CrossRuns, RunOutcome by
  // leadership::Follower::Outcome; their statuses as those say. Nothing is
  // set when the node has no peer client (each then stays UNAVAILABLE).
  void ServePeers(PeerService* peer);

  // Replaces the limits and defaults that later calls validate against and
  // are admitted under (limits.max_request_bytes is the gRPC server's and
  // is ignored here).
  void UpdateSettings(const config::Limits& limits, const config::Defaults& defaults);
  // Refuses every later Tune and Sweep (admission: UNAVAILABLE
  // "draining: ...") and measures no more rounds in the background.
  void BeginDrain();
  // True once no Tune or Sweep is in progress; false at `deadline`.
  bool WaitForRounds(absl::Time deadline) { return admission_.WaitIdle(deadline); }
  // True after BeginDrain.
  bool draining() const { return admission_.draining(); }

  // The node fingerprint (daemon/state/cache/key.h, NodeFingerprint).
  const std::string& fingerprint() const { return solver_.fingerprint(); }
  // When the node was made: the daemon's start (metrics and NodeInfo).
  absl::Time started() const { return started_; }

  // The parts the client service serves (daemon/serve/service/service.h).
  Backend& backend() { return *backend_; }
  ResultCache* cache() { return cache_; }
  metrics::DaemonMetrics& metrics() { return *metrics_; }
  Admission& admission() { return admission_; }
  const LiveSettings& settings() const { return settings_; }
  Solver& solver() { return solver_; }
  rounds::RankRounds& rounds() { return rounds_; }
  clientrun::ClientRuns& client_runs() { return client_runs_; }
  leadership::Follower& follower() { return follower_; }

 private:
  // Constant after construction.
  Backend* const backend_;
  ResultCache* const cache_;
  PeerClient* const peer_client_;
  const absl::Time started_;
  std::unique_ptr<metrics::Registry> own_registry_;  // when options.metrics is null
  std::unique_ptr<metrics::DaemonMetrics> own_metrics_;
  metrics::DaemonMetrics* const metrics_;

  // The parts, each using those declared before it (and destroyed first).
  Admission admission_;
  LiveSettings settings_;
  Engine engine_;
  Solver solver_;
  leadership::CrossRuns cross_runs_;
  clientrun::ClientRuns client_runs_;
  rounds::RankRounds rounds_;
  leadership::Leader leader_;
  leadership::Follower follower_;
};

}  // namespace autotuned
