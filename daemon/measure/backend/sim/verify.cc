#include "daemon/measure/backend/sim/verify.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/pattern.h"

namespace autotuned::sim {
namespace {

absl::Status Mismatch(int rank, int64_t index, float got, float expected) {
  return absl::DataLossError(absl::StrCat("rank ", rank, ": output[", index,
                                          "] is ", got, ", expected ",
                                          expected));
}

}  // namespace

void FillInput(const ProblemSpec& problem, int rank, float* input) {
  const int64_t n = problem.InputCount(rank);
  for (int64_t i = 0; i < n; ++i) input[i] = pattern::InputValue(rank, i);
}

void PoisonOutput(const ProblemSpec& problem, int rank, float* output) {
  const int64_t n = problem.OutputCount(rank);
  for (int64_t i = 0; i < n; ++i) {
    output[i] = std::numeric_limits<float>::quiet_NaN();
  }
}

absl::Status CheckOutput(const ProblemSpec& p, int rank, const float* output) {
  const int64_t n = p.OutputCount(rank);
  for (int64_t i = 0; i < n; ++i) {
    const float want = ExpectedOutput(p, rank, i);
    // `!=` also catches a NaN never overwritten.
    if (output[i] != want) return Mismatch(rank, i, output[i], want);
  }
  return absl::OkStatus();
}

}  // namespace autotuned::sim
