// The byte format of one cache entry file (daemon/state/cache/cache.h), in
// one of two forms:
//
//   ATCACHE2 (what the cache writes):
//   offset 0   8 bytes  magic "ATCACHE2"
//   offset 8   8 bytes  payload length N, uint64 little-endian
//   offset 16  32 bytes CacheKeyDigest of the payload: the checksum that
//                       tells a damaged file from a good one
//   offset 48  N bytes  payload: a serialized autotuned.cache.CacheEntry
//                       (daemon/state/cache/cache_entry.proto)
//
//   ATCACHE1 (files of earlier versions; the entry inside a fleet value,
//   which carries its own checksum: daemon/state/fleetcache/codec.h):
//   offset 0   8 bytes  magic "ATCACHE1"
//   offset 8   8 bytes  payload length N, uint64 little-endian
//   offset 16  N bytes  payload
//
// Nothing may follow the payload. A new incompatible format gets a new magic.
//
// Thread-safety: pure functions, safe to call from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/state/cache/cache_entry.pb.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

inline constexpr char kEntryFileMagic[] = "ATCACHE2";  // 8 bytes, no NUL
inline constexpr size_t kEntryFileHeaderBytes = 48;
inline constexpr char kUncheckedEntryFileMagic[] = "ATCACHE1";
inline constexpr size_t kUncheckedEntryFileHeaderBytes = 16;

enum class EntryFileFormat {
  kChecked,    // ATCACHE2
  kUnchecked,  // ATCACHE1
};

// The largest entry file the cache writes or reads (64 MiB): an entry holds
// one problem and its ranked results, far smaller. A larger file is not read
// (daemon/state/cache/cache.h), so that no file in the directory can make the
// daemon allocate more.
inline constexpr size_t kMaxEntryFileBytes = size_t{64} << 20;

// The file bytes for `entry` (deterministic serialization of the payload).
std::string EncodeEntryFile(const cache::CacheEntry& entry,
                            EntryFileFormat format = EntryFileFormat::kChecked);

// Parses file bytes of either form. DATA_LOSS with the reason when they are
// not a well-formed entry: shorter than the header, bad magic, payload length
// not matching the file's size, a checksum that does not match (ATCACHE2), or
// a payload that does not parse. Does not check the entry's key or result;
// that is the cache's job (CheckEntryResult).
absl::StatusOr<cache::CacheEntry> DecodeEntryFile(const std::string& bytes);

// OK when `result` is what the cache stores (solver.h: a measured ranking):
// status TUNED; a winner_index among its problem's candidates, which
// ranked[0] names (its index, and the candidate itself) and `winner` names
// (the impl, or a client candidate's key); every ranked candidate's index
// among the problem's, at most once; the times of every ok candidate finite
// and not negative. DATA_LOSS saying which part is wrong otherwise. An entry
// that parses may still be damaged (an ATCACHE1 file has no checksum) or
// written by hand: nothing of it is answered unless this holds.
absl::Status CheckEntryResult(const v1::ProblemResult& result);

}  // namespace autotuned
