// Digests that are stable across processes, builds and hosts (absl::Hash is
// not): cache keys, the node fingerprint, the catalogue version, the NCCL
// tuner table's identity.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace autotuned {

inline constexpr uint64_t kFnvOffsetBasis = 1469598103934665603ull;

// FNV-1a, 64 bit, from `basis`.
uint64_t Fnv1a64(absl::string_view s, uint64_t basis = kFnvOffsetBasis);

// 16 lowercase hex digits.
std::string Hex64(uint64_t v);

}  // namespace autotuned
