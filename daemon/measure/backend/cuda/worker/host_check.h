// Host side of output verification: what every output element of a rank
// must be after a collective on the predictable pattern (kernels/pattern.h),
// decoding of fp32 / bf16 / fp16 elements copied to the host, and the
// DATA_LOSS status that reports a mismatch. Pure host code (no CUDA), so it
// is tested on machines without a GPU.
//
// Inputs are filled with pattern::InputValue(rank, i) over a rank's whole
// input buffer (all_to_all: segment for dst starts at InputOffset(rank, dst)).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "daemon/common/problem.h"

namespace autotuned::cuda {

// Element `index` of a host buffer of `dtype` elements, as float.
float DecodeElement(DType dtype, const void* data, int64_t index);

// Expected values come from ExpectedOutput (daemon/common/problem.h).

// DATA_LOSS: "output[index]: got X, want Y (N of M elements differ)".
absl::Status MismatchError(int64_t index, float got, float want, int64_t mismatches,
                           int64_t elements);

// Checks all problem.OutputCount(rank) elements of `data` (host memory):
// OK, or MismatchError for the first mismatch.
absl::Status CheckHostOutput(const ProblemSpec& problem, int rank, const void* data);

}  // namespace autotuned::cuda
