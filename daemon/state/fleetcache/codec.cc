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
  // ATCACHE1 inside: the value's own checksum covers it, and daemons of
  // earlier versions read it.
  const std::string file = EncodeEntryFile(entry, EntryFileFormat::kUnchecked);
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
  absl::Status usable = CheckEntryResult(entry->result());
  if (!usable.ok()) return usable;
  return entry;
}

}  // namespace autotuned::fleetcache
