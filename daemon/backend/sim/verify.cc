#include "daemon/backend/sim/verify.h"

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

// Checks output[begin, begin + n) against expected(j) for j < n.
template <typename Expected>
absl::Status CheckRange(int rank, const float* output, int64_t begin,
                        int64_t n, Expected expected) {
  for (int64_t j = 0; j < n; ++j) {
    const float want = expected(j);
    // `!=` also catches a NaN never overwritten.
    if (output[begin + j] != want) {
      return Mismatch(rank, begin + j, output[begin + j], want);
    }
  }
  return absl::OkStatus();
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
  switch (p.collective) {
    case Collective::kAllReduce:
      return CheckRange(rank, output, 0, n, [&](int64_t i) {
        return pattern::AllReduceExpected(p.op, p.world_size, i);
      });
    case Collective::kAllGather:
      return CheckRange(rank, output, 0, n, [&](int64_t i) {
        return pattern::AllGatherExpected(p.count, i);
      });
    case Collective::kReduceScatter:
      return CheckRange(rank, output, 0, n, [&](int64_t i) {
        return pattern::ReduceScatterExpected(p.op, p.world_size, rank,
                                              p.count, i);
      });
    case Collective::kBroadcast:
      return CheckRange(rank, output, 0, n, [&](int64_t i) {
        return pattern::BroadcastExpected(p.root, i);
      });
    case Collective::kAllToAll:
      for (int src = 0; src < p.world_size; ++src) {
        const int64_t base = p.InputOffset(src, rank);
        absl::Status s = CheckRange(
            rank, output, p.OutputOffset(rank, src), p.SplitCount(src, rank),
            [&](int64_t j) { return pattern::InputValue(src, base + j); });
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
  }
  return absl::InternalError("unknown collective");
}

}  // namespace autotuned::sim
