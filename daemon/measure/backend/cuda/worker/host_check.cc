#include "daemon/measure/backend/cuda/worker/host_check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/pattern.h"

namespace autotuned::cuda {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return FromBits(sign | static_cast<uint32_t>(exponent - 15 + 127) << 23 |
                  (mantissa << 13));
}

}  // namespace

float DecodeElement(DType dtype, const void* data, int64_t index) {
  switch (dtype) {
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, static_cast<const char*>(data) + index * 2, sizeof(v));
      return FromBits(static_cast<uint32_t>(v) << 16);
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, static_cast<const char*>(data) + index * 2, sizeof(v));
      return HalfToFloat(v);
    }
    case DType::kFloat32:
    default: {
      float v;
      std::memcpy(&v, static_cast<const char*>(data) + index * 4, sizeof(v));
      return v;
    }
  }
}

absl::Status MismatchError(int64_t index, float got, float want, int64_t mismatches,
                           int64_t elements) {
  return absl::DataLossError(absl::StrCat("output[", index, "]: got ", got, ", want ",
                                          want, " (", mismatches, " of ", elements,
                                          " elements differ)"));
}

absl::Status CheckHostOutput(const ProblemSpec& p, int rank, const void* data) {
  const int64_t elements = p.OutputCount(rank);
  int64_t mismatches = 0, first = -1;
  auto compare = [&](int64_t i, float want) {
    if (DecodeElement(p.dtype, data, i) != want && mismatches++ == 0) first = i;
  };
  if (p.collective == Collective::kAllToAll) {
    for (int src = 0; src < p.world_size; ++src) {  // segment by segment
      const int64_t begin = p.OutputOffset(rank, src);
      const int64_t from = p.InputOffset(src, rank);
      const int64_t n = p.SplitCount(src, rank);
      for (int64_t j = 0; j < n; ++j) compare(begin + j, pattern::InputValue(src, from + j));
    }
  } else {
    for (int64_t i = 0; i < elements; ++i) compare(i, ExpectedOutput(p, rank, i));
  }
  if (mismatches == 0) return absl::OkStatus();
  return MismatchError(first, DecodeElement(p.dtype, data, first),
                       ExpectedOutput(p, rank, first), mismatches, elements);
}

}  // namespace autotuned::cuda
