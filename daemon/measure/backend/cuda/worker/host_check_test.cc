// Host-side verification (host_check.h): runs anywhere, no GPU.
#include "daemon/measure/backend/cuda/worker/host_check.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "kernels/pattern.h"

namespace autotuned::cuda {
namespace {

uint16_t Bf16(float f) {  // the test values are exact in bf16: truncate
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

TEST_CASE("elements decode from every dtype") {
  const float f[] = {1.5f, -16.0f};
  CHECK(DecodeElement(DType::kFloat32, f, 1) == -16.0f);
  const uint16_t b[] = {Bf16(3.0f), Bf16(-0.5f)};
  CHECK(DecodeElement(DType::kBFloat16, b, 0) == 3.0f);
  CHECK(DecodeElement(DType::kBFloat16, b, 1) == -0.5f);
  // fp16: 1.0 = 0x3c00, 16 = 0x4c00, -2 = 0xc000, 2^-24 = 0x0001, inf, NaN.
  const uint16_t h[] = {0x3c00, 0x4c00, 0xc000, 0x0001, 0x7c00, 0xffff};
  CHECK(DecodeElement(DType::kFloat16, h, 0) == 1.0f);
  CHECK(DecodeElement(DType::kFloat16, h, 1) == 16.0f);
  CHECK(DecodeElement(DType::kFloat16, h, 2) == -2.0f);
  CHECK(DecodeElement(DType::kFloat16, h, 3) == std::ldexp(1.0f, -24));
  CHECK(std::isinf(DecodeElement(DType::kFloat16, h, 4)));
  CHECK(std::isnan(DecodeElement(DType::kFloat16, h, 5)));
}

// Rank `rank`'s all-to-all output as a correct collective leaves it.
std::vector<float> AllToAllOutput(const ProblemSpec& p, int rank) {
  std::vector<float> out;
  for (int src = 0; src < p.world_size; ++src) {
    for (int64_t j = 0; j < p.SplitCount(src, rank); ++j) {
      out.push_back(pattern::InputValue(src, p.InputOffset(src, rank) + j));
    }
  }
  return out;
}

TEST_CASE("all_to_all outputs are checked segment by segment") {
  ProblemSpec p;
  p.collective = Collective::kAllToAll;
  p.world_size = 3;
  p.split_counts = {2, 0, 5, 7, 1, 0, 3, 4, 6};
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<float> out = AllToAllOutput(p, rank);
    REQUIRE(static_cast<int64_t>(out.size()) == p.OutputCount(rank));
    for (size_t i = 0; i < out.size(); ++i) {
      CHECK(ExpectedOutput(p, rank, static_cast<int64_t>(i)) == out[i]);
    }
    CHECK(CheckHostOutput(p, rank, out.data()).ok());
  }
  std::vector<float> out = AllToAllOutput(p, 1);  // 0 from rank 0, 1 from 1, 4 from 2
  out[3] = NAN;
  out[4] = 99;
  const absl::Status s = CheckHostOutput(p, 1, out.data());
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(absl::StrContains(s.message(), "output[3]: got nan, want "));
  CHECK(absl::StrContains(s.message(), "(2 of 5 elements differ)"));
}

TEST_CASE("regular collectives expect the pattern's values") {
  ProblemSpec p;
  p.collective = Collective::kReduceScatter;
  p.op = ReduceOp::kMax;
  p.world_size = 4;
  p.count = 10;
  CHECK(ExpectedOutput(p, 2, 3) == pattern::ReduceScatterExpected(ReduceOp::kMax, 4, 2, 10, 3));
  p.collective = Collective::kBroadcast;
  p.root = 3;
  CHECK(ExpectedOutput(p, 0, 7) == pattern::InputValue(3, 7));
  p.collective = Collective::kAllGather;
  CHECK(ExpectedOutput(p, 1, 25) == pattern::InputValue(2, 5));
  p.collective = Collective::kAllReduce;
  p.op = ReduceOp::kSum;
  std::vector<float> out(10);
  for (int i = 0; i < 10; ++i) out[i] = pattern::AllReduceExpected(ReduceOp::kSum, 4, i);
  CHECK(CheckHostOutput(p, 0, out.data()).ok());
  out[9] += 1;
  CHECK(CheckHostOutput(p, 0, out.data()).code() == absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace autotuned::cuda
