#include "daemon/measure/catalogue/catalogue.h"

#include "common/digest.h"
#include "daemon/common/escape.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace autotuned {
namespace {

template <typename T>
bool Contains(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

void Catalogue::Add(ImplInfo info) {
  auto it = index_.find(info.name);
  if (it != index_.end()) {
    entries_[it->second] = std::move(info);
    return;
  }
  index_[info.name] = entries_.size();
  entries_.push_back(std::move(info));
}

const ImplInfo* Catalogue::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<const ImplInfo*> Catalogue::List(const Collective* only) const {
  std::vector<const ImplInfo*> out;
  for (const ImplInfo& e : entries_) {
    if (only == nullptr || e.collective == *only) out.push_back(&e);
  }
  return out;
}

std::string Catalogue::Version() const {
  std::string all;
  for (const ImplInfo& e : entries_) {
    absl::StrAppend(&all, e.name, ";", static_cast<int>(e.collective), ";",
                    e.min_world_size, "-", e.max_world_size, ";",
                    e.alignment_bytes, ";", e.needs_p2p, ";");
    for (DType d : e.dtypes) absl::StrAppend(&all, "d", static_cast<int>(d));
    for (ReduceOp o : e.ops) absl::StrAppend(&all, "o", static_cast<int>(o));
    for (const ParamInfo& p : e.params) {
      absl::StrAppend(&all, "p", p.name, "=", p.default_value, "[",
                      p.min_value, ",", p.max_value, "]");
    }
    all.push_back('\n');
  }
  return Hex64(Fnv1a64(all));
}

absl::Status Catalogue::Supports(const ProblemSpec& problem, const std::string& impl,
                                 const std::string& field) const {
  const ImplInfo* info = Find(impl);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".impl: unknown implementation \"", LogEscaped(impl), "\""));
  }
  if (!Contains(info->dtypes, problem.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".impl: \"", info->name, "\" does not support dtype ",
                     DTypeName(problem.dtype)));
  }
  const bool reducing = problem.collective == Collective::kAllReduce ||
                        problem.collective == Collective::kReduceScatter;
  if (reducing && !Contains(info->ops, problem.op)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".impl: \"", info->name,
                     "\" does not support reduce op ", ReduceOpName(problem.op)));
  }
  if (problem.world_size < info->min_world_size ||
      problem.world_size > info->max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".impl: \"", info->name, "\" runs on ", info->min_world_size,
        " to ", info->max_world_size, " ranks, not ", problem.world_size));
  }
  if (info->alignment_bytes > 1) {
    for (int r = 0; r < problem.world_size; ++r) {
      const int64_t bytes = problem.InputCount(r) * DTypeSize(problem.dtype);
      if (bytes % info->alignment_bytes != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".impl: \"", info->name, "\" needs buffers aligned to ",
            info->alignment_bytes, " bytes; rank ", r, " has ", bytes));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CandidateSpec> Catalogue::Canonicalize(
    const ProblemSpec& problem, const CandidateSpec& candidate,
    const std::string& field, bool check_support) const {
  const ImplInfo* info = Find(candidate.impl);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".impl: unknown implementation \"",
                     LogEscaped(candidate.impl), "\" (see ListImplementations)"));
  }
  if (info->collective != problem.collective) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".impl: \"", info->name, "\" implements ",
        CollectiveName(info->collective), ", not ",
        CollectiveName(problem.collective)));
  }
  if (check_support) {
    absl::Status supported = Supports(problem, candidate.impl, field);
    if (!supported.ok()) return supported;
  }
  CandidateSpec out{candidate.impl, {}};
  for (const auto& [name, value] : candidate.params) {
    // Named, not captured: C++17 lambdas cannot capture structured bindings
    // (gcc allows it, clang does not).
    const std::string& wanted = name;
    auto p = std::find_if(info->params.begin(), info->params.end(),
                          [&](const ParamInfo& pi) { return pi.name == wanted; });
    if (p == info->params.end()) {
      std::vector<std::string> known;
      for (const ParamInfo& pi : info->params) known.push_back(pi.name);
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".params[\"", LogEscaped(name), "\"]: \"", info->name,
          "\" takes no parameter \"", LogEscaped(name), "\" (it takes: ",
          known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
    }
    if (value < p->min_value || value > p->max_value) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".params[\"", name, "\"]: ", value, " is outside [",
          p->min_value, ", ", p->max_value, "]"));
    }
    out.params[name] = value;
  }
  for (const ParamInfo& p : info->params) {
    out.params.emplace(p.name, p.default_value);
  }
  if (!info->together.empty()) {
    std::vector<std::string> set;
    for (const std::string& name : info->together) {
      const ParamInfo* p = nullptr;
      for (const ParamInfo& pi : info->params) {
        if (pi.name == name) p = &pi;
      }
      if (p != nullptr && out.params[name] != p->default_value) set.push_back(name);
    }
    if (!set.empty() && set.size() != info->together.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".params[\"", set.front(), "\"]: \"", info->name, "\" takes ",
          absl::StrJoin(info->together, " and "), " together (both at their defaults, or "
          "neither)"));
    }
  }
  return out;
}

}  // namespace autotuned
