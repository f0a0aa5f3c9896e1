// The fleet cache's keys and values (docs/operations.md, "Fleet cache"):
// what one daemon publishes to Redis and another reads back.
//
// Key: "<prefix>:v1:<fingerprint>:<digest>", where <fingerprint> is the
// node fingerprint (NodeFingerprint) and <digest> is CacheKeyDigest of the
// entry's full key text (CacheKeyText: fingerprint, group shape, placement,
// timing mode and canonical problem), so only identical nodes running the
// same problem on the same shape share an entry. "v1" is the format version:
// a daemon reads only keys of its own version.
//
// Value:
//   offset 0   8 bytes  magic "ATFLEET1"
//   offset 8   32 bytes CacheKeyDigest of the bytes from offset 40 on, the
//                       checksum that tells a garbled value from a good one
//   offset 40           an entry file (daemon/state/cache/entry_file.h) of the
//                       ATCACHE1 form, holding the CacheEntry: key, key text,
//                       result, time stored
//
// Thread-safety: pure functions, safe to call from any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/state/cache/cache_entry.pb.h"
#include "proto/autotuned.pb.h"

namespace autotuned::fleetcache {

inline constexpr char kValueMagic[] = "ATFLEET1";  // 8 bytes, no NUL
inline constexpr size_t kValueHeaderBytes = 40;

// The Redis key of the entry whose key text is `key_text` on a node of
// `fingerprint`.
std::string FleetKey(const std::string& prefix, const std::string& fingerprint,
                     const std::string& key_text);

// The value for `entry` (deterministic).
std::string EncodeFleetValue(const cache::CacheEntry& entry);

// The entry in `value`, accepted only as the answer for `key_text`: its key
// text is `key_text`, its key CacheKeyDigest(key_text), its result a TUNED
// ranking whose winner is one of its problem's candidates (CheckEntryResult,
// daemon/state/cache/entry_file.h). DATA_LOSS with the reason
// otherwise (short, bad magic, checksum mismatch, a bad entry file, another
// key, an unusable result).
absl::StatusOr<cache::CacheEntry> DecodeFleetValue(const std::string& value,
                                                   const std::string& key_text);

}  // namespace autotuned::fleetcache
