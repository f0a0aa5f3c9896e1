// Loading and checking the daemon's configuration (schema:
// config/config.proto).
//
// The daemon starts from its embedded default (config/default.textproto, see
// default_config.h), merges the file given with --config over it, and checks
// the result; command-line flags are applied by the caller afterwards (call
// ValidateConfig again once they are).
//
// Thread-safety: free functions without shared state; safe to call from any
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.pb.h"

namespace autotuned {
namespace config {

// The largest configuration file read; a larger one is refused unread.
inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;
// The longest string a configuration field may hold.
inline constexpr size_t kMaxConfigStringBytes = 4096;
// The longest duration a field may give (a day, in ms; in us for the _us
// fields): a longer one is a typo, and every wait has a deadline.
inline constexpr int64_t kMaxDurationMs = int64_t{24} * 3600 * 1000;

// Returns the embedded default merged with the file at `path` (nothing is
// merged when `path` is empty), validated with ValidateConfig.
//
// Merging: every field the file sets replaces the default's value (inside
// sub-messages field by field, so `sim { gpus: 8 }` keeps the other `sim`
// fields); repeated fields (sim.faults) are appended to the default's, which
// has none.
//
// The file is opened without blocking (a FIFO or device in its place is
// refused, never waited on); a symbolic link to a regular file is followed.
//
// Errors:
//   NOT_FOUND / PERMISSION_DENIED / ... (from errno): the file cannot be read;
//     the message names `path`.
//   INVALID_ARGUMENT: `path` is not a regular file (a directory, FIFO,
//     socket or device; the message says which) or holds more than
//     kMaxConfigFileBytes, each naming `path`. Or the file is not valid text
//     format for DaemonConfig
//     (syntax errors, unknown fields, wrong types, a non-repeated field set
//     twice); the message reads "PATH:LINE:COL: what" with 1-based line and
//     column, one line per error (at most 8, control bytes escaped as
//     "\ooo", each cut at 256 bytes). Or the merged result fails
//     ValidateConfig.
//   INTERNAL: the embedded default does not parse (a build defect).
absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path);

// Parses the embedded default alone, without validating it. INTERNAL when it
// does not parse.
absl::StatusOr<DaemonConfig> DefaultConfig();

// Parses `text` alone (no default merged, nothing validated), with the
// errors of LoadConfig: INVALID_ARGUMENT "NAME:LINE:COL: what" where NAME is
// `name`. The entry point the configuration fuzzer drives (fuzz/).
absl::StatusOr<DaemonConfig> ParseConfigText(const std::string& text,
                                             const std::string& name);

// Checks the values of `config`. OK, or INVALID_ARGUMENT naming the first
// offending field by its path and the reason, e.g.
//   "sim.gpus: must be between 1 and 1024, got 0".
// A string value a message quotes is shown as text format writes it (quoted,
// C-escaped), its first 64 bytes only.
// Rules: every string field (repeated ones too) without control characters
// (bytes below 0x20, 0x7f) and at most kMaxConfigStringBytes long;
// backend in {auto, sim, cuda}; log_level in {trace, debug, info,
// warn, error}; unix_socket_mode <= 0777; unix_socket and tcp_listen not both
// empty; sim.gpus in 1..1024; each sim.faults[i] has a name, a base, a kind,
// rank >= 0, calls >= 0 and delay_us in 0..kMaxDurationMs x 1000; every
// limits.* > 0, limits.max_timeout_ms at most kMaxDurationMs and
// limits.max_presync_window_us at most kMaxDurationMs x 1000; defaults
// inside the limits (warmup 0..max_warmup, iterations 1..max_iterations, timeout_ms
// 1..max_timeout_ms, presync_window_us 0..max_presync_window_us);
// defaults.timing_mode in {event_loop, cuda_graph}; cache.dir non-empty when
// cache.enabled; limits.max_request_bytes >= 1024; metrics_listen and
// peer_listen empty or "HOST:PORT" (port 0..65535, HOST a name, an IPv4
// address or a bracketed IPv6 one, at most 255 characters); peer_listen
// needs exactly one of peer_token (at least 16 characters) and
// peer_token_file; drain_timeout_ms, rendezvous.decision_ttl_ms and
// cuda.worker_start_timeout_ms in 1..kMaxDurationMs; fleet_cache, when
// fleet_cache.redis is set: redis "HOST:PORT" (a port) or "unix:/path", key_prefix non-empty without spaces or ':', user
// only with password_file, ttl_s 1..10 years, connect_timeout_ms and
// command_timeout_ms 1..60000, max_backoff_ms 1 ms..1 hour.
// Files named here (peer_token_file, fleet_cache.password_file) are not
// read.
absl::Status ValidateConfig(const DaemonConfig& config);

}  // namespace config
}  // namespace autotuned
