#include "daemon/state/fleetcache/codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/state/cache/entry_file.h"
#include "daemon/state/cache/key.h"

namespace autotuned::fleetcache {

std::string FleetKey(const std::string& prefix, const std::string& fingerprint,
                     const std::string& key_text) {
  return absl::StrCat(prefix, ":v1:", fingerprint, ":", CacheKeyDigest(key_text));
}

std::string EncodeFleetValue(const cache::CacheEntry& entry) {
  const std::string file = EncodeEntryFile(entry);
  return absl::StrCat(absl::string_view(kValueMagic, 8), CacheKeyDigest(file), file);
}

absl::StatusOr<cache::CacheEntry> DecodeFleetValue(const std::string& value,
                                                   const std::string& key_text) {
  if (value.size() < kValueHeaderBytes) {
    return absl::DataLossError(absl::StrCat("value of ", value.size(), " bytes is too short"));
  }
  if (std::memcmp(value.data(), kValueMagic, 8) != 0) {
    return absl::DataLossError("bad magic (not an ATFLEET1 value)");
  }
  const std::string file = value.substr(kValueHeaderBytes);
  if (value.compare(8, 32, CacheKeyDigest(file)) != 0) {
    return absl::DataLossError("checksum mismatch");
  }
  absl::StatusOr<cache::CacheEntry> entry = DecodeEntryFile(file);
  if (!entry.ok()) return entry.status();
  if (entry->key_text() != key_text || entry->key() != CacheKeyDigest(key_text)) {
    return absl::DataLossError("the entry is another problem's");
  }
  const v1::ProblemResult& r = entry->result();
  if (r.status() != v1::TUNED || r.winner_index() < 0 ||
      r.winner_index() >= r.problem().candidates_size()) {
    return absl::DataLossError("the entry's result is not a TUNED ranking with a winner");
  }
  return entry;
}

}  // namespace autotuned::fleetcache
