// The byte format of one cache entry file (daemon/state/cache/cache.h):
//
//   offset 0   8 bytes  magic "ATCACHE1"
//   offset 8   8 bytes  payload length N, uint64 little-endian
//   offset 16  N bytes  payload: a serialized autotuned.cache.CacheEntry
//                       (daemon/state/cache/cache_entry.proto)
//
// Nothing may follow the payload. A new incompatible format gets a new magic.
//
// Thread-safety: pure functions, safe to call from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/state/cache/cache_entry.pb.h"

namespace autotuned {

inline constexpr char kEntryFileMagic[] = "ATCACHE1";  // 8 bytes, no NUL
inline constexpr size_t kEntryFileHeaderBytes = 16;
// The largest entry file the cache writes or reads (64 MiB): an entry holds
// one problem and its ranked results, far smaller. A larger file is not read
// (daemon/state/cache/cache.h), so that no file in the directory can make the
// daemon allocate more.
inline constexpr size_t kMaxEntryFileBytes = size_t{64} << 20;

// The file bytes for `entry` (deterministic serialization of the payload).
std::string EncodeEntryFile(const cache::CacheEntry& entry);

// Parses file bytes. DATA_LOSS with the reason when they are not a well-formed
// entry: shorter than the header, bad magic, payload length not matching the
// file's size, or a payload that does not parse. Does not check the entry's
// key; that is the cache's job.
absl::StatusOr<cache::CacheEntry> DecodeEntryFile(const std::string& bytes);

}  // namespace autotuned
