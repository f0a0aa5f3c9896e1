#include "daemon/common/problem.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  if (c.params.empty()) return c.impl;
  return absl::StrCat(c.impl, "{",
                      absl::StrJoin(c.params, ",", absl::PairFormatter("=")),
                      "}");
}

}  // namespace autotuned
