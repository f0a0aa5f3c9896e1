// Device-side fill and check of the predictable test pattern (pattern.h), so
// that a GPU backend verifies a candidate's output on the device without
// copying whole buffers to the host; and the spin its timing queues ahead.
//
// Host and device apart: this header is plain C++ (no CUDA headers); the
// kernels live in pattern_kernels.cu. Launch functions return a cudaError_t
// value as int (0 = success) and are asynchronous on `stream`.
#pragma once

#include <stdint.h>

#include "kernels/types.h"

namespace autotuned::kernels {

struct FillPatternArgs {
  void* data = nullptr;  // device buffer of `count` elements of `dtype`
  DType dtype = DType::kFloat32;
  int64_t count = 0;
  int rank = 0;          // element i gets pattern::InputValue(rank, offset + i)
  int64_t offset = 0;
};

// What a buffer should hold after a collective, element i of `count`
// (all_to_all: even splits, `count` elements per pair of ranks).
struct ExpectArgs {
  Collective collective = Collective::kAllReduce;
  ReduceOp op = ReduceOp::kSum;
  int world = 1;
  int rank = 0;
  int root = 0;
  int64_t count = 0;  // the problem's per-rank count
};

struct CheckPatternArgs {
  const void* data = nullptr;  // device buffer of `count` output elements
  DType dtype = DType::kFloat32;
  int64_t count = 0;
  ExpectArgs expect;
  // Device memory for the results: the number of mismatches and the lowest
  // mismatching index (initialize to 0 and INT64_MAX).
  unsigned long long* mismatches = nullptr;
  long long* first_bad = nullptr;
};

int LaunchFillPattern(const FillPatternArgs& args, void* stream);
int LaunchCheckPattern(const CheckPatternArgs& args, void* stream);

// One thread that spins for about `cycles` GPU clock cycles. Queued ahead
// of a timed replay, it keeps the GPU busy while the host queues what
// follows, so that no timing event waits for a launch.
int LaunchSpin(int64_t cycles, void* stream);

}  // namespace autotuned::kernels
