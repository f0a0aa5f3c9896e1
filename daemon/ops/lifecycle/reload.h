// What a configuration reload (SIGHUP) changes: the fields that differ
// between the running configuration and the newly read one, split into those
// the daemon applies at once and those that take effect only after a
// restart.
//
// Live: log_level, every limits.* field except limits.max_request_bytes (a
// gRPC server setting), every defaults.* field. Everything else (sockets and
// listeners, backend, sim, cache, peer token, drain timeout,
// limits.max_request_bytes) needs a restart; a reload logs it and keeps the
// running value.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/config.pb.h"

namespace autotuned {

// How much of a value a ConfigChange shows.
inline constexpr size_t kMaxShownValueBytes = 128;

struct ConfigChange {
  std::string field;   // path, e.g. "limits.max_iterations" or "sim.faults"
  // Text form of the value (strings quoted and C-escaped, so on one line;
  // past kMaxShownValueBytes cut and followed by "...(N bytes)"), or
  // "N entries" when repeated.
  std::string before;
  std::string after;
};

struct ConfigChanges {
  std::vector<ConfigChange> live;
  std::vector<ConfigChange> need_restart;
  bool empty() const { return live.empty() && need_restart.empty(); }
};

// Every leaf field whose value differs, in schema order; a repeated field
// (sim.faults) counts as one field. Fields set to their default compare
// equal to unset ones.
ConfigChanges DiffConfig(const config::DaemonConfig& before,
                         const config::DaemonConfig& after);

// True for a field path applied without a restart (see above).
bool IsLiveField(const std::string& field);

// "limits.max_iterations 100 -> 1000, log_level info -> debug" (values of
// peer_token are shown as "<redacted>").
std::string Describe(const std::vector<ConfigChange>& changes);

// The live part of `after` over `running`: log_level, limits (but
// max_request_bytes) and defaults from `after`, the rest from `running`.
config::DaemonConfig ApplyLive(const config::DaemonConfig& running,
                               const config::DaemonConfig& after);

}  // namespace autotuned
