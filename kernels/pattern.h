// Exactly predictable test data (in the manner of nccl-tests' verifiable/).
//
// Every input element is a small integer determined by (rank, index), so any
// sum, max or min over up to 8 ranks is exact in float32, bfloat16 and
// float16, and every rank can compute the exact expected output of a
// collective without seeing its peers' data. Callable from host and device.
#pragma once

#include <stdint.h>

#include "kernels/types.h"

#if defined(__CUDACC__)
#define AT_HD __host__ __device__
#else
#define AT_HD
#endif

namespace autotuned::pattern {

// Input element `index` of rank `rank`: an integer in [1, 16].
AT_HD inline float InputValue(int rank, int64_t index) {
  return static_cast<float>((static_cast<uint64_t>(index) * 7u +
                             static_cast<uint64_t>(rank) * 5u) % 16u + 1u);
}

AT_HD inline float Reduce(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kMax: return a > b ? a : b;
    case ReduceOp::kMin: return a < b ? a : b;
    case ReduceOp::kSum:
    default: return a + b;
  }
}

// The reduction over ranks 0..world-1 of InputValue(r, index).
AT_HD inline float ReducedValue(ReduceOp op, int world, int64_t index) {
  float acc = InputValue(0, index);
  for (int r = 1; r < world; ++r) acc = Reduce(op, acc, InputValue(r, index));
  return acc;
}

// Expected output element `index` on `rank` for the collectives with regular
// shapes (see Problem in proto/autotuned.proto for the size conventions;
// `count` is the per-rank count). All-to-all needs the split matrix: see
// ExpectedOutput in daemon/common/problem.h, which covers every collective.
AT_HD inline float AllReduceExpected(ReduceOp op, int world, int64_t index) {
  return ReducedValue(op, world, index);
}
AT_HD inline float AllGatherExpected(int64_t count, int64_t index) {
  return InputValue(static_cast<int>(index / count), index % count);
}
AT_HD inline float ReduceScatterExpected(ReduceOp op, int world, int rank,
                                         int64_t count, int64_t index) {
  return ReducedValue(op, world, static_cast<int64_t>(rank) * count + index);
}
AT_HD inline float BroadcastExpected(int root, int64_t index) {
  return InputValue(root, index);
}
// All-to-all with even splits (`count` elements from every rank to every
// rank): segment p of `rank`'s output is segment `rank` of rank p's input.
AT_HD inline float AllToAllEvenExpected(int rank, int64_t count, int64_t index) {
  return InputValue(static_cast<int>(index / count), rank * count + index % count);
}

}  // namespace autotuned::pattern
