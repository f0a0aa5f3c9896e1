#include "daemon/state/cache/key.h"

#include <cstdint>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "common/digest.h"
#include "google/protobuf/text_format.h"

namespace autotuned {
namespace {

// The second digest of a cache key starts from another basis (the 64-bit
// golden ratio), so the two halves are not the same function of the text.
constexpr uint64_t kSecondBasis = 0x9e3779b97f4a7c15ull;

constexpr char kKeyTextHeader[] = "autotuned-cache-key v2";
constexpr char kWorldSizeField[] = "world_size: ";
constexpr char kPlacementField[] = "placement: ";
constexpr char kLinksPrefix[] = "links: ";

// A quoted, escaped string: no separator inside a value can make two
// different inputs produce the same text.
std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::CEscape(s), "\"");
}

}  // namespace

std::string NodeFingerprint(const NodeDescription& node,
                            const std::string& catalogue_version) {
  std::string text = "autotuned-node v1\n";
  absl::StrAppend(&text, "backend: ", Quote(node.backend), "\n");
  absl::StrAppend(&text, "gpus: ", node.gpus.size(), "\n");
  for (const GpuDescription& gpu : node.gpus) {
    absl::StrAppend(&text, "gpu: ", Quote(gpu.name), " ", gpu.memory_bytes,
                    "\n");
  }
  absl::StrAppend(&text, "topology:");
  for (const std::string& link : node.topology) {
    absl::StrAppend(&text, " ", Quote(link));
  }
  absl::StrAppend(&text, "\n");
  absl::StrAppend(&text, "driver: ", Quote(node.driver_version), "\n");
  absl::StrAppend(&text, "cuda: ", Quote(node.cuda_version), "\n");
  absl::StrAppend(&text, "nccl: ", Quote(node.nccl_version), "\n");
  absl::StrAppend(&text, "catalogue: ", Quote(catalogue_version), "\n");
  return Hex64(Fnv1a64(text, kFnvOffsetBasis));
}

std::string CacheKeyText(const std::string& fingerprint, int world_size,
                         int ranks_per_host,
                         const v1::Problem& canonical_problem,
                         int timing_mode, const std::string& placement) {
  v1::Problem problem = canonical_problem;
  problem.clear_label();
  for (v1::Candidate& c : *problem.mutable_candidates()) {
    if (c.has_client()) c.mutable_client()->clear_name();
  }
  // Single-line text format: fields in field-number order, map entries
  // sorted by key, strings escaped (no newline can appear).
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string problem_text;
  printer.PrintToString(problem, &problem_text);
  absl::StripTrailingAsciiWhitespace(&problem_text);

  return absl::StrCat(kKeyTextHeader, "\n",                       //
                      "fingerprint: ", Quote(fingerprint), "\n",  //
                      kWorldSizeField, world_size, "\n",          //
                      "ranks_per_host: ", ranks_per_host, "\n",   //
                      "timing_mode: ", timing_mode, "\n",         //
                      kPlacementField, Quote(placement), "\n",    //
                      "problem: {", problem_text, "}\n");
}

std::string PlacementText(const NodeDescription& node, const std::vector<int>& devices,
                          int ranks_here) {
  const int gpus = static_cast<int>(node.gpus.size());
  if (node.topology.size() != static_cast<size_t>(gpus) * gpus) return "";
  std::vector<int> on;
  for (int i = 0; i < ranks_here; ++i) {
    const int d = DeviceOf(devices, i);
    if (d < 0 || d >= gpus) return "";
    on.push_back(d);
  }
  std::vector<std::string> links;
  for (size_t i = 0; i < on.size(); ++i) {
    for (size_t j = i + 1; j < on.size(); ++j) {
      links.push_back(node.topology[on[i] * gpus + on[j]]);
    }
  }
  return absl::StrCat(kLinksPrefix, absl::StrJoin(links, " "));
}

std::string CacheKeyDigest(const std::string& key_text) {
  return absl::StrCat(Hex64(Fnv1a64(key_text, kFnvOffsetBasis)),
                      Hex64(Fnv1a64(key_text, kSecondBasis)));
}

std::string CacheKey(const std::string& fingerprint, int world_size,
                     int ranks_per_host, const v1::Problem& canonical_problem,
                     int timing_mode, const std::string& placement) {
  return CacheKeyDigest(CacheKeyText(fingerprint, world_size, ranks_per_host,
                                     canonical_problem, timing_mode, placement));
}

bool IsCacheKey(const std::string& key) {
  if (key.size() != 32) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {

// The rest of the first line of `key_text` that starts with `field`.
absl::optional<absl::string_view> KeyTextField(absl::string_view key_text,
                                               absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(key_text, '\n')) {
    if (absl::ConsumePrefix(&line, field)) return line;
  }
  return absl::nullopt;
}

}  // namespace

int KeyTextWorldSize(const std::string& key_text) {
  const absl::optional<absl::string_view> value = KeyTextField(key_text, kWorldSizeField);
  int world_size = 0;
  return value && absl::SimpleAtoi(*value, &world_size) ? world_size : 0;
}

std::string KeyTextLinks(const std::string& key_text) {
  absl::optional<absl::string_view> value = KeyTextField(key_text, kPlacementField);
  std::string placement;
  if (!value || !absl::ConsumePrefix(&*value, "\"") || !absl::ConsumeSuffix(&*value, "\"") ||
      !absl::CUnescape(*value, &placement)) {
    return "";
  }
  absl::string_view links = placement;
  return absl::ConsumePrefix(&links, kLinksPrefix) ? std::string(links) : "";
}

}  // namespace autotuned
