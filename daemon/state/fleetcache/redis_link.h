// One connection to Redis, plain (hiredis) or over TLS (OpenSSL for the
// transport, hiredis's command formatter and reply reader for RESP: Debian
// 12's hiredis 0.14 has no TLS of its own). Used by FleetCache, one call at
// a time.
//
// Thread-safety: a RedisLink is used by one thread at a time.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/ops/tls/tls_files.h"

namespace autotuned::fleetcache {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, ReplyFree>;

class RedisLink {
 public:
  virtual ~RedisLink() = default;
  // Sends `argv` as one command and reads its reply by `deadline`: the reply,
  // an error reply included, or UNAVAILABLE ("no answer in time", the
  // connection's error). After an error the link is not used again.
  virtual absl::StatusOr<RedisReply> Roundtrip(const std::vector<std::string>& argv,
                                               absl::Time deadline) = 0;
};

// Connects to `redis` ("HOST:PORT", IPv6 in brackets, or "unix:/path") by
// `deadline`: UNAVAILABLE saying why not.
absl::StatusOr<std::unique_ptr<RedisLink>> ConnectPlain(const std::string& redis,
                                                        absl::Time deadline);

// Connects to `redis` ("HOST:PORT") and completes a TLS handshake (1.2 at
// least) by `deadline`: Redis's certificate verified against tls.ca_pem and
// required to name HOST (SAN, DNS or IP); this side's certificate presented
// when `tls` has one. UNAVAILABLE saying why not (for a refused certificate,
// OpenSSL's reason, e.g. "certificate has expired").
absl::StatusOr<std::unique_ptr<RedisLink>> ConnectTls(const std::string& redis,
                                                      const TlsFiles& tls, absl::Time deadline);

}  // namespace autotuned::fleetcache
