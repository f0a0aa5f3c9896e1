#include "kernels/pattern.h"

#include <algorithm>

#include <catch2/catch.hpp>

namespace autotuned::pattern {
namespace {

TEST_CASE("inputs are small integers that differ between ranks") {
  for (int r = 0; r < 8; ++r) {
    for (int64_t i = 0; i < 100; ++i) {
      const float v = InputValue(r, i);
      CHECK(v >= 1.0f);
      CHECK(v <= 16.0f);
      CHECK(v == static_cast<float>(static_cast<int>(v)));
    }
  }
  CHECK(InputValue(0, 0) != InputValue(1, 0));
  CHECK(InputValue(0, 0) != InputValue(0, 1));
}

TEST_CASE("expected outputs follow the collectives' definitions") {
  CHECK(AllReduceExpected(ReduceOp::kSum, 3, 5) ==
        InputValue(0, 5) + InputValue(1, 5) + InputValue(2, 5));
  CHECK(AllReduceExpected(ReduceOp::kMax, 2, 0) ==
        std::max(InputValue(0, 0), InputValue(1, 0)));
  CHECK(AllGatherExpected(10, 23) == InputValue(2, 3));
  CHECK(ReduceScatterExpected(ReduceOp::kSum, 2, 1, 4, 2) ==
        InputValue(0, 6) + InputValue(1, 6));
  CHECK(BroadcastExpected(1, 7) == InputValue(1, 7));
}

}  // namespace
}  // namespace autotuned::pattern
