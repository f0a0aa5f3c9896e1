// The settings calls are validated against on this daemon: the limits and
// defaults, replaced while serving (on SIGHUP), and what validation takes
// from the node (daemon/coordinate/request/validate.h, ValidationContext). The client
// service (daemon/serve/service) and the leader's side of a follower's ask
// (daemon/coordinate/leadership, Leader::Ready) validate against the same values.
//
// A call takes the values once (Now) and validates against them to its end,
// whatever replaces them meanwhile.
//
// Ownership: `backend` is not owned and outlives the settings.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "config/config.pb.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned {

class LiveSettings {
 public:
  struct Values {
    config::Limits limits;
    config::Defaults defaults;
  };

  // Starts with config's limits and defaults; config's peer_advertise and
  // peers (which a reload does not change) name this daemon and the
  // daemons members may be on. `peers`: whether members on other daemons
  // are served (this daemon has a peer client and config peer_advertise is
  // set).
  LiveSettings(const Backend* backend, const config::DaemonConfig& config, bool peers);

  LiveSettings(const LiveSettings&) = delete;
  LiveSettings& operator=(const LiveSettings&) = delete;

  // The values now; kept by the caller for the rest of its call.
  std::shared_ptr<const Values> Now() const ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces the values that later calls take (limits.max_request_bytes is
  // the gRPC server's and is not used here).
  void Replace(const config::Limits& limits, const config::Defaults& defaults)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The context that validates against `values` on this node; it points
  // into `values`, which must outlive it.
  ValidationContext Validation(const Values& values) const;
  // The memory cap under `limits` on this backend (backend.h, MemoryCap).
  int64_t MemoryCap(const config::Limits& limits) const;

 private:
  // Constant after construction.
  const Backend* const backend_;
  const std::string fingerprint_;  // NodeFingerprint, for the key texts
  const std::string self_daemon_;
  const bool peers_;
  const std::vector<std::string> allowed_peers_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const Values> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autotuned
