#include "daemon/coordinate/request/validate_problem.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/escape.h"
#include "common/status_macros.h"
#include "daemon/coordinate/request/checks.h"
#include "daemon/coordinate/request/enums.h"

namespace autotuned::request_internal {
namespace {

// The strings of problem `p` (`f`: its field path) within their bounds.
absl::Status CheckProblemStrings(const v1::Problem& p, const std::string& f) {
  AT_RETURN_IF_ERROR(CheckString(f + ".label", p.label(), kMaxLabelBytes, false));
  for (int i = 0; i < p.candidates_size(); ++i) {
    const std::string cf = absl::StrCat(f, ".candidates[", i, "]");
    AT_RETURN_IF_ERROR(CheckString(cf + ".impl", p.candidates(i).impl(), kMaxNameBytes, false));
    for (const auto& param : p.candidates(i).params()) {
      if (param.first.size() > kMaxNameBytes) {
        return Invalid(absl::StrCat(cf, ".params[\"", LogEscaped(param.first, 32), "\"]"),
                       absl::StrCat("a parameter name of at most ", kMaxNameBytes,
                                    " bytes, got ", param.first.size()));
      }
    }
  }
  return absl::OkStatus();
}

// Sizes: every product is checked against the memory cap before it is
// formed, so no request can overflow int64. One rank's input and output
// (ProblemSpec::MaxRankBytes) over the cap fit no candidate: every backend's
// MemoryNeed counts at least those.
absl::Status ValidateSizes(const v1::Problem& p, const std::string& f,
                           const ValidationContext& ctx, ProblemSpec* spec) {
  const int64_t cap = CapOf(ctx);
  const int64_t elem = DTypeSize(spec->dtype);
  const int64_t w = spec->world_size;
  const int64_t cap_elems = cap / elem;
  auto over_cap = [&](const std::string& field, int64_t need_elems_lower) {
    return Invalid(field, absl::StrCat(need_elems_lower, " elements of ", elem,
                                       " bytes per rank exceed ", CapText(cap)));
  };
  if (spec->collective == Collective::kAllToAll && p.split_counts_size() > 0) {
    if (p.split_counts_size() != w * w) {
      return Invalid(f + ".split_counts",
                     absl::StrCat("needs world_size * world_size = ", w * w,
                                  " entries, got ", p.split_counts_size()));
    }
    int64_t total = 0;
    for (int i = 0; i < p.split_counts_size(); ++i) {
      const int64_t c = p.split_counts(i);
      if (c < 0) {
        return Invalid(absl::StrCat(f, ".split_counts[", i, "]"),
                       absl::StrCat("must not be negative, got ", c));
      }
      if (c > cap_elems || total > cap_elems) {
        return over_cap(absl::StrCat(f, ".split_counts[", i, "]"), c);
      }
      total += c;
    }
    if (total == 0) return Invalid(f + ".split_counts", "all entries are zero");
    spec->split_counts.assign(p.split_counts().begin(), p.split_counts().end());
    spec->count = 0;
  } else {
    if (p.split_counts_size() > 0) {
      return Invalid(f + ".split_counts", "only all_to_all takes split counts");
    }
    if (p.count() <= 0) {
      return Invalid(f + ".count",
                     absl::StrCat("must be positive, got ", p.count()));
    }
    // Input + output of a rank: count each (all_reduce, broadcast), or
    // count and world_size * count (all_gather, reduce_scatter).
    const bool by_world = spec->collective == Collective::kAllGather ||
                          spec->collective == Collective::kReduceScatter;
    if (p.count() > cap_elems / (by_world ? w + 1 : 2)) {
      return over_cap(f + ".count", p.count());
    }
    spec->count = p.count();
  }
  if (spec->MaxRankBytes() > cap) {
    return Invalid(f + (spec->split_counts.empty() ? ".count" : ".split_counts"),
                   absl::StrCat("needs ", spec->MaxRankBytes(), " bytes per rank, over ",
                                CapText(cap)));
  }
  return absl::OkStatus();
}

// Collective, dtype, reduce op and root of `p` into `spec`.
absl::Status ValidateShape(const v1::Problem& p, const std::string& f, ProblemSpec* spec) {
  if (!ToCollective(p.collective(), &spec->collective)) {
    return Invalid(f + ".collective",
                   p.collective() == v1::COLLECTIVE_UNSPECIFIED
                       ? std::string("is required")
                       : absl::StrCat("unknown collective ", p.collective()));
  }
  if (!ToDType(p.dtype(), &spec->dtype)) {
    return Invalid(f + ".dtype", p.dtype() == v1::DTYPE_UNSPECIFIED
                                     ? std::string("is required")
                                     : absl::StrCat("unknown dtype ", p.dtype()));
  }
  if (!ToReduceOp(p.op(), &spec->op)) {
    return Invalid(f + ".op", absl::StrCat("unknown reduce op ", p.op()));
  }
  if (!Reducing(*spec) && p.op() != v1::REDUCE_OP_UNSPECIFIED) {
    return Invalid(f + ".op", absl::StrCat(CollectiveName(spec->collective),
                                           " takes no reduce op"));
  }
  if (spec->collective == Collective::kBroadcast) {
    if (p.root() < 0 || p.root() >= spec->world_size) {
      return Invalid(f + ".root", absl::StrCat("must be a rank in [0, ", spec->world_size,
                                               "), got ", p.root()));
    }
    spec->root = p.root();
  } else if (p.root() != 0) {
    return Invalid(f + ".root", "only broadcast takes a root");
  }
  return absl::OkStatus();
}

bool ClientKeyChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == ':' || c == '/' || c == '+' || c == '=' || c == '-';
}

// A candidate the ranks run: its key and name, into `out` (not checked
// against the catalogue: the daemon never runs it).
absl::StatusOr<CandidateSpec> ValidateClientCandidate(const v1::Candidate& c,
                                                      const std::string& cf) {
  if (!c.impl().empty()) {
    return Invalid(cf + ".impl", "must be empty for a candidate the ranks run (client set)");
  }
  if (!c.params().empty()) {
    return Invalid(cf + ".params", "must be empty for a candidate the ranks run (client set)");
  }
  const std::string& key = c.client().key();
  if (key.empty() || key.size() > 128) {
    return Invalid(cf + ".client.key",
                   absl::StrCat("must be 1 to 128 characters, got ", key.size()));
  }
  for (size_t i = 0; i < key.size(); ++i) {
    if (!ClientKeyChar(key[i])) {
      return Invalid(cf + ".client.key",
                     absl::StrCat("character ", i, " is not one of [A-Za-z0-9._:/+=-]"));
    }
  }
  const std::string& name = c.client().name();
  if (name.empty() || name.size() > 128) {
    return Invalid(cf + ".client.name",
                   absl::StrCat("must be 1 to 128 characters, got ", name.size()));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] < 0x20 || name[i] > 0x7e) {
      return Invalid(cf + ".client.name",
                     absl::StrCat("character ", i, " is not printable ASCII"));
    }
  }
  return CandidateSpec::Client(key, name);
}

// A catalogue candidate, canonical; `runnable` counts those that can run the
// problem, `first_unsupported` keeps the first reason why one cannot.
absl::StatusOr<CandidateSpec> ValidateCatalogueCandidate(const v1::Candidate& c,
                                                         const std::string& cf,
                                                         const ValidationContext& ctx,
                                                         const ProblemSpec& spec,
                                                         int* runnable,
                                                         absl::Status* first_unsupported) {
  CandidateSpec raw{c.impl(), {c.params().begin(), c.params().end()}};
  // What the implementation cannot run (dtype, op, world size, alignment)
  // does not make the request invalid: the engine rules that candidate out
  // with the reason, unless no candidate of the problem can run at all.
  AT_ASSIGN_OR_RETURN(CandidateSpec canonical,
                      ctx.catalogue->Canonicalize(spec, raw, cf, /*check_support=*/false));
  const absl::Status supported = ctx.catalogue->Supports(spec, canonical.impl, cf);
  if (supported.ok()) {
    ++*runnable;
  } else if (first_unsupported->ok()) {
    *first_unsupported = supported;
  }
  return canonical;
}

// The candidates of `p`, canonical, into `out` (whose spec is validated).
absl::Status ValidateCandidates(const v1::Problem& p, const std::string& f,
                                const ValidationContext& ctx, ValidProblem* out) {
  if (p.candidates_size() == 0) {
    return Invalid(f + ".candidates", "at least one candidate is required");
  }
  if (p.candidates_size() > ctx.limits->max_candidates()) {
    return Invalid(f + ".candidates",
                   absl::StrCat(p.candidates_size(), " candidates, over the "
                                "limit of ", ctx.limits->max_candidates(),
                                " (limits.max_candidates)"));
  }
  int runnable = 0;
  absl::Status first_unsupported;
  for (int i = 0; i < p.candidates_size(); ++i) {
    const std::string cf = absl::StrCat(f, ".candidates[", i, "]");
    const v1::Candidate& c = p.candidates(i);
    absl::StatusOr<CandidateSpec> canonical =
        c.has_client() ? ValidateClientCandidate(c, cf)
                       : ValidateCatalogueCandidate(c, cf, ctx, out->spec, &runnable,
                                                    &first_unsupported);
    if (!canonical.ok()) return canonical.status();
    if (canonical->client()) ++runnable;
    for (size_t j = 0; j < out->candidates.size(); ++j) {
      const CandidateSpec& other = out->candidates[j];
      if (canonical->client() && other.client_key == canonical->client_key) {
        return Invalid(cf + ".client.key",
                       absl::StrCat("duplicate of candidates[", j, "] (key \"",
                                    canonical->client_key, "\")"));
      }
      if (!canonical->client() && !other.client() && other.impl == canonical->impl &&
          other.params == canonical->params) {
        return Invalid(cf, absl::StrCat("duplicate of candidates[", j, "] (",
                                        Describe(*canonical), ")"));
      }
    }
    v1::Candidate* wire = out->canonical.add_candidates();
    if (canonical->client()) {
      wire->mutable_client()->set_key(canonical->client_key);
      wire->mutable_client()->set_name(canonical->client_name);
    } else {
      wire->set_impl(canonical->impl);
      wire->mutable_params()->insert(canonical->params.begin(), canonical->params.end());
    }
    out->candidates.push_back(*std::move(canonical));
  }
  if (runnable == 0 && !first_unsupported.ok()) return first_unsupported;
  return absl::OkStatus();
}

}  // namespace

std::string MemoryShortfall(const ValidProblem& p, const ValidationContext& ctx) {
  if (!ctx.memory_need) return std::string();
  const int64_t cap = CapOf(ctx);
  int64_t least = -1;
  const CandidateSpec* smallest = nullptr;
  for (const CandidateSpec& c : p.candidates) {
    if (c.client()) return std::string();
    const int64_t need = ctx.memory_need(p.spec, c);
    if (need <= cap) return std::string();
    if (least < 0 || need < least) {
      least = need;
      smallest = &c;
    }
  }
  if (smallest == nullptr) return std::string();
  return absl::StrCat("no candidate fits ", CapText(cap), ": the smallest, ", smallest->impl,
                      ", needs ", least, " bytes");
}

absl::StatusOr<ValidProblem> ValidateProblem(const v1::Problem& p,
                                             const std::string& f,
                                             int world_size,
                                             const ValidationContext& ctx) {
  AT_RETURN_IF_ERROR(CheckProblemStrings(p, f));
  ValidProblem out;
  ProblemSpec& spec = out.spec;
  spec.world_size = world_size;
  AT_RETURN_IF_ERROR(ValidateShape(p, f, &spec));
  AT_RETURN_IF_ERROR(ValidateSizes(p, f, ctx, &spec));
  out.canonical.set_collective(p.collective());
  out.canonical.set_dtype(p.dtype());
  out.canonical.set_count(spec.count);
  *out.canonical.mutable_split_counts() = p.split_counts();
  if (Reducing(spec)) out.canonical.set_op(static_cast<v1::ReduceOp>(spec.op));
  out.canonical.set_root(spec.root);
  out.canonical.set_label(p.label());
  AT_RETURN_IF_ERROR(ValidateCandidates(p, f, ctx, &out));
  if (const std::string why = MemoryShortfall(out, ctx); !why.empty()) {
    return Invalid(f + (spec.split_counts.empty() ? ".count" : ".split_counts"), why);
  }
  return out;
}

}  // namespace autotuned::request_internal
