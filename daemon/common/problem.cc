#include "daemon/common/problem.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/pattern.h"

namespace autotuned {

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
  }
  return "unknown";
}

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "unknown";
}

int64_t DTypeSize(DType d) { return d == DType::kFloat32 ? 4 : 2; }

int64_t ProblemSpec::SplitCount(int src, int dst) const {
  if (split_counts.empty()) return count;
  return split_counts[static_cast<size_t>(src) * world_size + dst];
}

int64_t ProblemSpec::InputOffset(int src, int dst) const {
  int64_t off = 0;
  for (int d = 0; d < dst; ++d) off += SplitCount(src, d);
  return off;
}

int64_t ProblemSpec::OutputOffset(int dst, int src) const {
  int64_t off = 0;
  for (int s = 0; s < src; ++s) off += SplitCount(s, dst);
  return off;
}

int64_t ProblemSpec::InputCount(int rank) const {
  switch (collective) {
    case Collective::kReduceScatter: return count * world_size;
    case Collective::kAllToAll: return InputOffset(rank, world_size);
    default: return count;
  }
}

int64_t ProblemSpec::OutputCount(int rank) const {
  switch (collective) {
    case Collective::kAllGather: return count * world_size;
    case Collective::kAllToAll: return OutputOffset(rank, world_size);
    default: return count;
  }
}

int64_t ProblemSpec::MaxRankBytes() const {
  int64_t most = 0;
  for (int r = 0; r < world_size; ++r) {
    most = std::max(most, InputCount(r) + OutputCount(r));
  }
  return most * DTypeSize(dtype);
}

int64_t ProblemSpec::MessageBytes() const {
  int64_t most = 0;
  for (int r = 0; r < world_size; ++r) {
    most = std::max({most, InputCount(r), OutputCount(r)});
  }
  return most * DTypeSize(dtype);
}

double ProblemSpec::BusBandwidthFactor() const {
  const double n = world_size;
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (n - 1) / n;
    case Collective::kBroadcast: return 1.0;
  }
  return 1.0;
}

absl::Status CheckShape(const ProblemSpec& p, int max_world_size) {
  if (p.world_size < 1 || p.world_size > max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size ", p.world_size, " is outside [1, ", max_world_size,
        "] (this backend's devices)"));
  }
  if (p.count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("count ", p.count, " is negative"));
  }
  if (p.collective == Collective::kAllToAll && !p.split_counts.empty()) {
    const size_t n = static_cast<size_t>(p.world_size);
    if (p.split_counts.size() != n * n) {
      return absl::InvalidArgumentError(
          absl::StrCat("split_counts has ", p.split_counts.size(),
                       " entries, not world_size^2 = ", n * n));
    }
    for (int64_t c : p.split_counts) {
      if (c < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("split_counts has a negative entry ", c));
      }
    }
  }
  if (p.collective == Collective::kBroadcast &&
      (p.root < 0 || p.root >= p.world_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "root ", p.root, " is not a rank of a ", p.world_size, "-rank group"));
  }
  return absl::OkStatus();
}

float ExpectedOutput(const ProblemSpec& p, int rank, int64_t index) {
  switch (p.collective) {
    case Collective::kAllReduce:
      return pattern::AllReduceExpected(p.op, p.world_size, index);
    case Collective::kAllGather:
      return pattern::AllGatherExpected(p.count, index);
    case Collective::kReduceScatter:
      return pattern::ReduceScatterExpected(p.op, p.world_size, rank, p.count, index);
    case Collective::kBroadcast:
      return pattern::BroadcastExpected(p.root, index);
    case Collective::kAllToAll:
      for (int src = p.world_size - 1; src >= 0; --src) {
        const int64_t begin = p.OutputOffset(rank, src);
        if (index >= begin && p.SplitCount(src, rank) > 0) {
          return pattern::InputValue(src, p.InputOffset(src, rank) + index - begin);
        }
      }
      break;
  }
  return std::nanf("");
}

std::string Describe(const ProblemSpec& p) {
  std::string s = absl::StrCat(CollectiveName(p.collective), " ",
                               DTypeName(p.dtype), " x", p.count);
  if (p.collective == Collective::kAllToAll && !p.split_counts.empty()) {
    s = absl::StrCat(CollectiveName(p.collective), " ", DTypeName(p.dtype),
                     " splits[", absl::StrJoin(p.split_counts, ","), "]");
  }
  if (p.collective == Collective::kAllReduce ||
      p.collective == Collective::kReduceScatter) {
    absl::StrAppend(&s, " ", ReduceOpName(p.op));
  }
  if (p.collective == Collective::kBroadcast) absl::StrAppend(&s, " root", p.root);
  absl::StrAppend(&s, " w", p.world_size);
  return s;
}

std::string Describe(const CandidateSpec& c) {
  if (c.client()) return absl::StrCat("client:", c.client_key);
  if (c.params.empty()) return c.impl;
  return absl::StrCat(c.impl, "{",
                      absl::StrJoin(c.params, ",", absl::PairFormatter("=")),
                      "}");
}

}  // namespace autotuned
