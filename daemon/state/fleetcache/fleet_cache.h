// The fleet cache: a Redis server shared by identical hosts as a second
// cache tier behind the local one (daemon/state/cache). A daemon's local miss asks
// it before measuring, and the daemon that measured a TUNED result publishes
// it, so that a fleet measures each problem once. Keys and values:
// codec.h. Where it is consulted and why every rank of a group still gets
// one answer: docs/protocol.md ("The fleet cache"); operating it:
// docs/operations.md ("Fleet cache").
//
// Failures never reach the caller: Redis unreachable, slow, refusing
// (AUTH, an error reply) or answering garbage makes a lookup a miss and a
// publish a no-op, counted in the metrics (autotuned_fleet_cache_*). The
// first failure after a success starts an outage: logged once (spdlog::warn,
// the reason escaped; never the password), gauge autotuned_fleet_cache_outage
// 1; during it Redis is left alone for a backoff that doubles from 100 ms
// (or max_backoff when shorter) up to max_backoff, and calls in between
// fail at once
// without any I/O. The first success ends it, logged once (spdlog::info).
// A value that does not decode (codec.h) is counted as corrupt and logged
// with its key; it is a miss, and the next publish of that key replaces it.
//
// Bounds: one call (Lookup or Publish) waits at most command_timeout for
// the connection (calls share one), then at most connect_timeout to
// connect and AUTH when it has no connection, then at most command_timeout
// for its command. A host name is resolved at each connect by the system's
// resolver, whose own timeouts apply: name Redis by its address (or a Unix
// socket) to keep the bound.
//
// TLS (fleet_cache.tls): the connection is TLS 1.2 or later, Redis's
// certificate verified against the configured CA and the host of `redis`,
// this daemon's certificate presented when one is configured (redis_link.h:
// Debian's hiredis 0.14 has no TLS, so OpenSSL carries hiredis's RESP). A
// refused handshake is a failure like any other (an outage, its reason
// logged once).
//
// The process must ignore SIGPIPE (the daemon does, IgnoreBrokenPipes):
// hiredis writes to a socket that Redis may have closed.
//
// Thread-safety: every method may be called concurrently; no lock is held
// during I/O.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/ops/tls/tls_files.h"
#include "daemon/state/fleetcache/redis_link.h"
#include "proto/autotuned.pb.h"

namespace autotuned::fleetcache {

struct FleetCacheOptions {
  // "HOST:PORT" (IPv6 in brackets) or "unix:/path".
  std::string redis;
  // AUTH: `user` (may be "") and `password`; no AUTH when `password` is "".
  std::string user;
  std::string password;
  std::string key_prefix = "autotuned";
  absl::Duration ttl = absl::Hours(24 * 7);
  absl::Duration connect_timeout = absl::Milliseconds(200);
  absl::Duration command_timeout = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(30);
  // TLS to Redis when set (not with "unix:").
  std::optional<TlsFiles> tls;
};

// The options of `config` (validated by config::ValidateConfig), the
// password read from fleet_cache.password_file. Errors name the field:
// the file cannot be opened (errno's code), is not a regular file, is
// readable or writable by others (PERMISSION_DENIED, with its mode), or
// holds not exactly one non-empty line (INVALID_ARGUMENT). The files of
// fleet_cache.tls are read and checked as LoadTlsFiles says
// (daemon/ops/tls/tls_files.h), for a TLS client.
absl::StatusOr<FleetCacheOptions> FleetCacheOptionsFrom(const config::FleetCacheConfig& config);

class FleetCache {
 public:
  // `metrics` is not owned and outlives the cache. Connects at the first
  // call, not here.
  FleetCache(FleetCacheOptions options, metrics::DaemonMetrics* metrics);
  ~FleetCache();

  FleetCache(const FleetCache&) = delete;
  FleetCache& operator=(const FleetCache&) = delete;

  // The TUNED result stored for `key_text` (CacheKeyText on a node of
  // `fingerprint`), or none: a miss, a failure or a corrupt value (each
  // counted, see above).
  std::optional<v1::ProblemResult> Lookup(const std::string& fingerprint,
                                          const std::string& key_text);
  // Stores `result` (as the local cache keeps it) for `key_text`, expiring
  // after the TTL. Counted; a failure is not returned.
  void Publish(const std::string& fingerprint, const std::string& key_text,
               const v1::ProblemResult& result);

  // True during an outage (above).
  bool in_outage() const;
  const std::string& redis() const { return options_.redis; }
  bool tls() const { return options_.tls.has_value(); }

 private:
  using Context = std::unique_ptr<RedisLink>;
  using Reply = RedisReply;

  // Runs one command (`argv`) within the bounds above: its reply, or why
  // not. Ends or starts an outage.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& argv);
  // A new connection, AUTHed, within connect_timeout.
  absl::StatusOr<Context> Connect() const;
  // `context`'s reply to `argv` by `deadline`; an error reply is an error:
  // DATA_LOSS for WRONGTYPE (the key holds garbage; the connection is
  // fine), FAILED_PRECONDITION for any other (Redis refuses: an outage).
  static absl::StatusOr<Reply> Send(RedisLink* context, const std::vector<std::string>& argv,
                                    absl::Time deadline);
  void Succeeded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Failed(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const FleetCacheOptions options_;
  metrics::DaemonMetrics* const metrics_;

  mutable absl::Mutex mu_;
  // The connection, when one is open and no call holds it (busy_).
  Context context_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool outage_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time outage_since_ ABSL_GUARDED_BY(mu_);
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace autotuned::fleetcache
