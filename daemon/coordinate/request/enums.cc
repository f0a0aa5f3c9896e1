#include "daemon/coordinate/request/enums.h"

#include "absl/strings/str_cat.h"
#include "daemon/coordinate/request/checks.h"
#include "daemon/coordinate/request/validate.h"

namespace autotuned {
namespace request_internal {

bool ToCollective(v1::Collective c, Collective* out) {
  switch (c) {
    case v1::ALL_REDUCE: *out = Collective::kAllReduce; return true;
    case v1::ALL_GATHER: *out = Collective::kAllGather; return true;
    case v1::REDUCE_SCATTER: *out = Collective::kReduceScatter; return true;
    case v1::ALL_TO_ALL: *out = Collective::kAllToAll; return true;
    case v1::BROADCAST: *out = Collective::kBroadcast; return true;
    default: return false;
  }
}

bool ToDType(v1::DType d, DType* out) {
  switch (d) {
    case v1::FLOAT32: *out = DType::kFloat32; return true;
    case v1::BFLOAT16: *out = DType::kBFloat16; return true;
    case v1::FLOAT16: *out = DType::kFloat16; return true;
    default: return false;
  }
}

bool ToReduceOp(v1::ReduceOp op, ReduceOp* out) {
  switch (op) {
    case v1::REDUCE_OP_UNSPECIFIED:
    case v1::SUM: *out = ReduceOp::kSum; return true;
    case v1::MAX: *out = ReduceOp::kMax; return true;
    case v1::MIN: *out = ReduceOp::kMin; return true;
    default: return false;
  }
}

bool Reducing(const ProblemSpec& spec) {
  return spec.collective == Collective::kAllReduce ||
         spec.collective == Collective::kReduceScatter;
}

}  // namespace request_internal

using request_internal::Invalid;

absl::Status ValidateListImplementations(const v1::ListImplementationsRequest& request) {
  if (!v1::Collective_IsValid(request.collective())) {
    return Invalid("collective", absl::StrCat("unknown collective ", request.collective()));
  }
  return absl::OkStatus();
}

}  // namespace autotuned
