// Names of the API's enums as the CLI spells them, both ways.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// Parsers are case-insensitive and take '-' for '_'. INVALID_ARGUMENT names
// the bad value and lists the accepted ones.

// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast".
absl::StatusOr<v1::Collective> ParseCollective(absl::string_view text);
// "float32", "bfloat16", "float16"; aliases "fp32", "bf16", "fp16".
absl::StatusOr<v1::DType> ParseDType(absl::string_view text);
// "sum", "max", "min".
absl::StatusOr<v1::ReduceOp> ParseReduceOp(absl::string_view text);
// "event_loop", "cuda_graph".
absl::StatusOr<v1::TimingMode> ParseTimingMode(absl::string_view text);

// The spellings above; "unspecified" for 0, "?<n>" for a value this build
// does not know (a newer daemon).
std::string CollectiveName(v1::Collective c);
std::string DTypeName(v1::DType d);
std::string ReduceOpName(v1::ReduceOp op);
std::string TimingModeName(v1::TimingMode mode);
// "TUNED", "CACHED", "FALLBACK", "FAILED".
std::string DecisionStatusName(v1::DecisionStatus status);

// Bytes per element; 0 for DTYPE_UNSPECIFIED or an unknown value.
int64_t DTypeSize(v1::DType d);

// ALL_REDUCE and REDUCE_SCATTER take a reduction op.
bool IsReducing(v1::Collective c);

}  // namespace cli
}  // namespace autotuned
