#include "daemon/state/cache/entry_file.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "daemon/state/cache/key.h"

namespace autotuned {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kChecksumBytes = 32;
static_assert(sizeof(kEntryFileMagic) == kMagicBytes + 1, "8-byte magic");
static_assert(sizeof(kUncheckedEntryFileMagic) == kMagicBytes + 1, "8-byte magic");
static_assert(kEntryFileHeaderBytes == kMagicBytes + 8 + kChecksumBytes, "ATCACHE2 header");
static_assert(kUncheckedEntryFileHeaderBytes == kMagicBytes + 8, "ATCACHE1 header");

void PutUint64Le(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetUint64Le(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

std::string EncodeEntryFile(const cache::CacheEntry& entry, EntryFileFormat format) {
  std::string payload;
  {
    google::protobuf::io::StringOutputStream stream(&payload);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    entry.SerializeToCodedStream(&coded);
  }
  const bool checked = format == EntryFileFormat::kChecked;
  std::string bytes(checked ? kEntryFileMagic : kUncheckedEntryFileMagic, kMagicBytes);
  PutUint64Le(payload.size(), &bytes);
  if (checked) bytes += CacheKeyDigest(payload);
  bytes += payload;
  return bytes;
}

absl::StatusOr<cache::CacheEntry> DecodeEntryFile(const std::string& bytes) {
  if (bytes.size() < kMagicBytes) {
    return absl::DataLossError(absl::StrCat("truncated: ", bytes.size(),
                                            " bytes, shorter than the magic"));
  }
  size_t header;
  if (std::memcmp(bytes.data(), kEntryFileMagic, kMagicBytes) == 0) {
    header = kEntryFileHeaderBytes;
  } else if (std::memcmp(bytes.data(), kUncheckedEntryFileMagic, kMagicBytes) == 0) {
    header = kUncheckedEntryFileHeaderBytes;
  } else {
    return absl::DataLossError("bad magic (not an ATCACHE2 or ATCACHE1 entry file)");
  }
  if (bytes.size() < header) {
    return absl::DataLossError(absl::StrCat("truncated: ", bytes.size(),
                                            " bytes, shorter than the ", header,
                                            "-byte header"));
  }
  const uint64_t length = GetUint64Le(bytes.data() + kMagicBytes);
  const uint64_t have = bytes.size() - header;
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
  if (header == kEntryFileHeaderBytes &&
      bytes.compare(kMagicBytes + 8, kChecksumBytes,
                    CacheKeyDigest(bytes.substr(header))) != 0) {
    return absl::DataLossError("checksum mismatch: the payload is damaged");
  }
  cache::CacheEntry entry;
  if (!entry.ParseFromArray(bytes.data() + header, static_cast<int>(have))) {
    return absl::DataLossError("unparsable CacheEntry payload");
  }
  return entry;
}

absl::Status CheckEntryResult(const v1::ProblemResult& result) {
  auto bad = [](auto&&... why) {
    return absl::DataLossError(absl::StrCat("its result ", why...));
  };
  if (result.status() != v1::TUNED) {
    return bad("has status ", v1::DecisionStatus_Name(result.status()), ", not TUNED");
  }
  const int n = result.problem().candidates_size();
  const int w = result.winner_index();
  if (w < 0 || w >= n) {
    return bad("has winner_index ", w, ", not one of its problem's ", n, " candidates");
  }
  if (result.ranked_size() == 0 || !result.ranked(0).ok() || result.ranked(0).index() != w) {
    return bad("ranks first another candidate than its winner_index ", w);
  }
  const v1::Candidate& winner = result.problem().candidates(w);
  const v1::Candidate& first = result.ranked(0).candidate();
  const std::string& name = winner.has_client() ? winner.client().key() : winner.impl();
  if (first.has_client() != winner.has_client() ||
      (winner.has_client() ? first.client().key() : first.impl()) != name) {
    return bad("ranks first another candidate than its candidate ", w, " \"", name, "\"");
  }
  if (result.winner() != name) {
    return bad("names its winner \"", result.winner(), "\", not candidate ", w, " \"", name,
               "\"");
  }
  std::set<int> seen;
  for (int i = 0; i < result.ranked_size(); ++i) {
    const v1::CandidateResult& c = result.ranked(i);
    if (c.index() < 0 || c.index() >= n || !seen.insert(c.index()).second) {
      return bad("ranks candidate index ", c.index(), " (ranked[", i,
                 "]): outside its problem's candidates or repeated");
    }
    if (!c.ok()) continue;
    for (double us : {c.mean_us(), c.median_us(), c.min_us(), c.max_us()}) {
      if (!std::isfinite(us) || us < 0) {
        return bad("holds a time of ", us, " us (ranked[", i,
                   "]), not a finite, non-negative time");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace autotuned
