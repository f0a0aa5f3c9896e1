#include "client/cli/enums.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace autotuned {
namespace cli {
namespace {

template <typename Enum>
using Names = std::vector<std::pair<const char*, Enum>>;

const Names<v1::Collective>& CollectiveNames() {
  static const auto* names = new Names<v1::Collective>{
      {"all_reduce", v1::ALL_REDUCE},
      {"all_gather", v1::ALL_GATHER},
      {"reduce_scatter", v1::REDUCE_SCATTER},
      {"all_to_all", v1::ALL_TO_ALL},
      {"broadcast", v1::BROADCAST},
  };
  return *names;
}

const Names<v1::DType>& DTypeNames() {
  static const auto* names = new Names<v1::DType>{
      {"float32", v1::FLOAT32},
      {"bfloat16", v1::BFLOAT16},
      {"float16", v1::FLOAT16},
  };
  return *names;
}

const Names<v1::DType>& DTypeAliases() {
  static const auto* names = new Names<v1::DType>{
      {"fp32", v1::FLOAT32},
      {"bf16", v1::BFLOAT16},
      {"fp16", v1::FLOAT16},
  };
  return *names;
}

const Names<v1::ReduceOp>& ReduceOpNames() {
  static const auto* names = new Names<v1::ReduceOp>{
      {"sum", v1::SUM},
      {"max", v1::MAX},
      {"min", v1::MIN},
  };
  return *names;
}

const Names<v1::TimingMode>& TimingModeNames() {
  static const auto* names = new Names<v1::TimingMode>{
      {"event_loop", v1::EVENT_LOOP},
      {"cuda_graph", v1::CUDA_GRAPH},
  };
  return *names;
}

template <typename Enum>
absl::StatusOr<Enum> Parse(absl::string_view what, absl::string_view text,
                           const Names<Enum>& names,
                           const Names<Enum>* aliases = nullptr) {
  const std::string key = absl::StrReplaceAll(
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(text)), {{"-", "_"}});
  for (const auto& [name, value] : names) {
    if (key == name) return value;
  }
  if (aliases != nullptr) {
    for (const auto& [name, value] : *aliases) {
      if (key == name) return value;
    }
  }
  std::vector<std::string> valid;
  for (const auto& entry : names) valid.push_back(entry.first);
  if (aliases != nullptr) {
    for (const auto& entry : *aliases) valid.push_back(entry.first);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " \"", text, "\" (expected one of ",
                   absl::StrJoin(valid, ", "), ")"));
}

template <typename Enum>
std::string Name(Enum value, const Names<Enum>& names) {
  if (static_cast<int>(value) == 0) return "unspecified";
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return absl::StrCat("?", static_cast<int>(value));
}

}  // namespace

absl::StatusOr<v1::Collective> ParseCollective(absl::string_view text) {
  return Parse("collective", text, CollectiveNames());
}

absl::StatusOr<v1::DType> ParseDType(absl::string_view text) {
  return Parse("dtype", text, DTypeNames(), &DTypeAliases());
}

absl::StatusOr<v1::ReduceOp> ParseReduceOp(absl::string_view text) {
  return Parse("reduction op", text, ReduceOpNames());
}

absl::StatusOr<v1::TimingMode> ParseTimingMode(absl::string_view text) {
  return Parse("timing mode", text, TimingModeNames());
}

std::string CollectiveName(v1::Collective c) {
  return Name(c, CollectiveNames());
}
std::string DTypeName(v1::DType d) { return Name(d, DTypeNames()); }
std::string ReduceOpName(v1::ReduceOp op) { return Name(op, ReduceOpNames()); }
std::string TimingModeName(v1::TimingMode mode) {
  return Name(mode, TimingModeNames());
}

std::string DecisionStatusName(v1::DecisionStatus status) {
  switch (status) {
    case v1::TUNED: return "TUNED";
    case v1::CACHED: return "CACHED";
    case v1::FALLBACK: return "FALLBACK";
    case v1::FAILED: return "FAILED";
    case v1::DECISION_STATUS_UNSPECIFIED: return "UNSPECIFIED";
    default: break;
  }
  return absl::StrCat("?", static_cast<int>(status));
}

int64_t DTypeSize(v1::DType d) {
  switch (d) {
    case v1::FLOAT32: return 4;
    case v1::BFLOAT16: return 2;
    case v1::FLOAT16: return 2;
    default: break;
  }
  return 0;
}

bool IsReducing(v1::Collective c) {
  return c == v1::ALL_REDUCE || c == v1::REDUCE_SCATTER;
}

}  // namespace cli
}  // namespace autotuned
