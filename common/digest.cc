#include "common/digest.h"

#include <cstdio>

namespace autotuned {

uint64_t Fnv1a64(absl::string_view s, uint64_t basis) {
  constexpr uint64_t kFnvPrime = 1099511628211ull;
  uint64_t h = basis;
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace autotuned
