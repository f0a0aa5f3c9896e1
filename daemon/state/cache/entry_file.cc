#include "daemon/state/cache/entry_file.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace autotuned {
namespace {

constexpr size_t kMagicBytes = 8;
static_assert(sizeof(kEntryFileMagic) == kMagicBytes + 1, "8-byte magic");

void PutUint64Le(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetUint64Le(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

std::string EncodeEntryFile(const cache::CacheEntry& entry) {
  std::string payload;
  {
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    entry.SerializeToCodedStream(&coded);
  }
  std::string bytes(kEntryFileMagic, kMagicBytes);
  PutUint64Le(payload.size(), &bytes);
  bytes += payload;
  return bytes;
}

absl::StatusOr<cache::CacheEntry> DecodeEntryFile(const std::string& bytes) {
  if (bytes.size() < kEntryFileHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat("truncated: ", bytes.size(), " bytes, shorter than the ",
                     kEntryFileHeaderBytes, "-byte header"));
  }
  if (std::memcmp(bytes.data(), kEntryFileMagic, kMagicBytes) != 0) {
    return absl::DataLossError("bad magic (not an ATCACHE1 entry file)");
  }
  const uint64_t length = GetUint64Le(bytes.data() + kMagicBytes);
  const uint64_t have = bytes.size() - kEntryFileHeaderBytes;
  if (length != have) {
    return absl::DataLossError(
        absl::StrCat(have < length ? "truncated" : "trailing bytes",
                     ": length mismatch, the header says ", length,
                     " payload bytes, the file has ", have));
  }
  if (have > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return absl::DataLossError(
        absl::StrCat("payload too large: ", have, " bytes"));
  }
  cache::CacheEntry entry;
  if (!entry.ParseFromArray(bytes.data() + kEntryFileHeaderBytes,
                            static_cast<int>(have))) {
    return absl::DataLossError("unparsable CacheEntry payload");
  }
  return entry;
}

}  // namespace autotuned
