// The sim's check of a collective's result: inputs filled with the exactly
// predictable pattern (kernels/pattern.h), outputs poisoned with NaN before
// the run, and every output element compared with its exact expected value.
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include "absl/status/status.h"
#include "daemon/common/problem.h"

namespace autotuned::sim {

// input[i] = pattern::InputValue(rank, i) for i < problem.InputCount(rank).
void FillInput(const ProblemSpec& problem, int rank, float* input);

// Every output element NaN, so one the collective never writes fails the
// check.
void PoisonOutput(const ProblemSpec& problem, int rank, float* output);

// Compares each of problem.OutputCount(rank) elements with its expected
// value. All-to-all: element j of the segment from src is
// InputValue(src, InputOffset(src, rank) + j). DATA_LOSS naming the rank, the
// first mismatching index, the value found and the value expected.
absl::Status CheckOutput(const ProblemSpec& problem, int rank,
                         const float* output);

}  // namespace autotuned::sim
