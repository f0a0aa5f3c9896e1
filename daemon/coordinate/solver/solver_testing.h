// Test support: the Solver over the scripted node
// (daemon/testing/scripted_node.h), as the service builds it, for the tests
// of the solver and of the parts that serve requests over it (rounds,
// leadership).
#pragma once

#include <memory>
#include <string>

#include "config/config.pb.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/backend/fake_backend.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/ops/metrics/registry.h"
#include "daemon/state/cache/cache.h"
#include "proto/autotuned.pb.h"

namespace autotuned::testing {

// A Solver with everything it runs on: its own metrics, ScriptedBackend(),
// TestConfig(), an engine and a real cache directory. Everything is owned
// and lives as long as this object.
class ScriptedSolver {
 public:
  // `cache_name`: the cache's directory under the test's temporary directory
  // (TempDir). `self_daemon`: this daemon's peer address (the configuration's
  // peer_advertise); empty: a daemon without peers.
  explicit ScriptedSolver(const std::string& cache_name, const std::string& self_daemon = "");

  ScriptedSolver(const ScriptedSolver&) = delete;
  ScriptedSolver& operator=(const ScriptedSolver&) = delete;

  // What the service validates against: members on other daemons are
  // served when `self_daemon` was given.
  ValidationContext Context() const;
  // `request` validated against Context() as asked by the daemon `asking`
  // (empty: by a local rank); fails the test when it is invalid.
  ValidRequest Valid(const v1::TuneRequest& request, const std::string& asking = "") const;

  Solver& solver() { return solver_; }
  FakeBackend& backend() { return *backend_; }
  Engine& engine() { return engine_; }
  ResultCache& cache() { return *cache_; }
  metrics::DaemonMetrics& metrics() { return metrics_; }

 private:
  metrics::Registry registry_;
  metrics::DaemonMetrics metrics_{&registry_};
  std::unique_ptr<FakeBackend> backend_;
  config::DaemonConfig config_;
  std::unique_ptr<ResultCache> cache_;
  Engine engine_;
  Solver solver_;
};

}  // namespace autotuned::testing
