#include "daemon/request/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/common/escape.h"
#include "daemon/common/status_macros.h"

namespace autotuned {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

bool PrintableAscii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

// `value` of `field` is at most `max` bytes (and printable ASCII when
// `printable`).
absl::Status CheckString(const std::string& field, const std::string& value, size_t max,
                         bool printable) {
  if (value.size() > max) {
    return Invalid(field, absl::StrCat("at most ", max, " bytes, got ", value.size()));
  }
  if (printable && !PrintableAscii(value)) {
    return Invalid(field, absl::StrCat("printable ASCII only, got \"", LogEscaped(value), "\""));
  }
  return absl::OkStatus();
}

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

// The memory cap of `ctx`, in bytes (ValidationContext::memory_cap_bytes,
// else limits.max_buffer_bytes).
int64_t CapOf(const ValidationContext& ctx) {
  return ctx.memory_cap_bytes > 0 ? ctx.memory_cap_bytes : ctx.limits->max_buffer_bytes();
}

std::string CapText(int64_t cap) {
  return absl::StrCat("the memory cap of ", cap,
                      " bytes per GPU (limits.max_buffer_bytes, limits.gpu_memory_fraction)");
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

// Why no candidate of `p` fits the memory cap (each measured by
// ctx.memory_need), or "" when one does, or when the context measures none.
// Candidates the ranks run are the ranks' to place: they fit here.
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

template <typename T>
absl::StatusOr<T> Bounded(const std::string& field, T value, T fallback,
                          T lowest, T highest, const std::string& limit_name) {
  if (value == 0) return fallback;
  if (value < lowest || value > highest) {
    return Invalid(field, absl::StrCat("must be between ", lowest, " and ",
                                       highest, " (", limit_name, "), got ",
                                       value));
  }
  return value;
}

// Which member (index in group.members) holds each rank and each local GPU
// so far; -1: none.
struct MemberIndex {
  std::vector<int> of_rank;
  std::vector<int> of_gpu;
};

// group.members[i]: its rank, its daemon, and (on this daemon) its GPU.
absl::Status ValidateMember(const v1::Group& g, int i, const ValidationContext& ctx,
                            MemberIndex* index) {
  const v1::Member& m = g.members(i);
  const std::string f = absl::StrCat("group.members[", i, "]");
  if (m.rank() < 0 || m.rank() >= g.world_size()) {
    return Invalid(f + ".rank", absl::StrCat("must be in [0, ", g.world_size(),
                                             "), got ", m.rank()));
  }
  if (index->of_rank[m.rank()] >= 0) {
    return Invalid(f + ".rank", absl::StrCat("rank ", m.rank(), " is listed twice (also members[",
                                             index->of_rank[m.rank()], "])"));
  }
  index->of_rank[m.rank()] = i;
  AT_RETURN_IF_ERROR(CheckString(f + ".daemon", m.daemon(), kMaxDaemonBytes, true));
  if (!m.daemon().empty() && m.daemon() != ctx.self_daemon) {
    if (!ctx.peers || g.whole_group()) {
      return absl::UnimplementedError(absl::StrCat(
          f, ".daemon: \"", m.daemon(), "\" is another daemon (this one is ",
          ctx.self_daemon.empty() ? std::string("unnamed: peer_advertise is empty")
                                  : absl::StrCat("\"", ctx.self_daemon, "\""),
          "); groups spread over several daemons need ranks asking one by one "
          "(whole_group false) and this daemon's peer_listen and peer_advertise"));
    }
    if (std::find(ctx.allowed_peers.begin(), ctx.allowed_peers.end(), m.daemon()) ==
        ctx.allowed_peers.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          f, ".daemon: \"", LogEscaped(m.daemon()), "\" is not one of this daemon's peers ",
          ctx.allowed_peers.empty() ? std::string("(none configured: groups spread over daemons "
                                                  "need the configuration's peers)")
                                    : std::string("(the configuration's peers)")));
    }
    if (m.rank() == g.rank() && m.daemon() != ctx.asking_daemon) {
      return Invalid("group.rank",
                     absl::StrCat("rank ", g.rank(), " is on daemon \"", m.daemon(),
                                  "\" (", f, "); ask that daemon"));
    }
    return absl::OkStatus();  // its local_gpu is its own daemon's to check
  }
  if (m.rank() == g.rank() && !ctx.asking_daemon.empty()) {
    return Invalid("group.rank",
                   absl::StrCat("rank ", g.rank(), " is on this daemon (", f,
                                "), not on \"", ctx.asking_daemon, "\""));
  }
  if (m.local_gpu() < 0 || m.local_gpu() >= ctx.max_world_size) {
    return Invalid(f + ".local_gpu",
                   absl::StrCat("must be in [0, ", ctx.max_world_size, ") on this ",
                                ctx.backend_name, " node, got ", m.local_gpu()));
  }
  if (index->of_gpu[m.local_gpu()] >= 0) {
    return Invalid(f + ".local_gpu",
                   absl::StrCat("GPU ", m.local_gpu(), " is listed twice (also members[",
                                index->of_gpu[m.local_gpu()], "])"));
  }
  index->of_gpu[m.local_gpu()] = i;
  return absl::OkStatus();
}

// Candidates the ranks run need ranks asking one by one, all on this daemon.
absl::Status CheckClientCandidatesServed(const v1::TuneRequest& request,
                                         const ValidRequest& valid) {
  for (int i = 0; i < request.problems_size(); ++i) {
    for (int j = 0; j < request.problems(i).candidates_size(); ++j) {
      if (!request.problems(i).candidates(j).has_client()) continue;
      const std::string field = absl::StrCat("problems[", i, "].candidates[", j, "].client");
      if (!valid.per_rank) {
        return Invalid(field, "candidates the ranks run need ranks asking one by one "
                              "(group.members given, whole_group false)");
      }
      if (valid.spread()) {
        return Invalid(field, "candidates the ranks run need every rank on this daemon "
                              "(the group spreads over several daemons)");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGroup(const v1::Group& g, const ValidationContext& ctx) {
  AT_RETURN_IF_ERROR(CheckString("group.id", g.id(), kMaxGroupIdBytes, true));
  if (g.world_size() <= 0) {
    return Invalid("group.world_size",
                   absl::StrCat("must be positive, got ", g.world_size()));
  }
  bool remote = false;  // members on other daemons
  for (const v1::Member& m : g.members()) {
    remote = remote || (!m.daemon().empty() && m.daemon() != ctx.self_daemon);
  }
  if (!remote && g.world_size() > ctx.max_world_size) {
    return Invalid("group.world_size",
                   absl::StrCat(g.world_size(), " ranks, but the ",
                                ctx.backend_name, " backend serves at most ",
                                ctx.max_world_size, " on this node"));
  }
  if (g.rank() < 0 || g.rank() >= g.world_size()) {
    return Invalid("group.rank", absl::StrCat("must be in [0, ", g.world_size(),
                                              "), got ", g.rank()));
  }
  if (g.members_size() == 0) return absl::OkStatus();
  if (g.members_size() != g.world_size()) {
    return Invalid("group.members",
                   absl::StrCat(g.members_size(), " members for world_size ",
                                g.world_size(), "; list every rank once"));
  }
  MemberIndex index{std::vector<int>(g.world_size(), -1),
                    std::vector<int>(ctx.max_world_size, -1)};
  for (int i = 0; i < g.members_size(); ++i) {
    AT_RETURN_IF_ERROR(ValidateMember(g, i, ctx, &index));
  }
  if (!g.whole_group()) {
    if (g.id().empty()) {
      return Invalid("group.id", "is required when ranks ask one by one (members "
                                 "given, whole_group false)");
    }
  }
  return absl::OkStatus();
}

std::string CanonicalMembers(const v1::Group& g) {
  std::vector<const v1::Member*> by_rank;
  for (const v1::Member& m : g.members()) by_rank.push_back(&m);
  std::sort(by_rank.begin(), by_rank.end(),
            [](const v1::Member* a, const v1::Member* b) { return a->rank() < b->rank(); });
  std::string out = absl::StrCat("world_size=", g.world_size());
  for (const v1::Member* m : by_rank) {
    absl::StrAppend(&out, "\n", m->rank(), ":", m->local_gpu(), "@", m->daemon().size(),
                    ":", m->daemon());
  }
  return out;
}

absl::StatusOr<EngineOptions> ValidateOptions(const v1::Options& o,
                                              const ValidationContext& ctx) {
  const config::Limits& lim = *ctx.limits;
  const config::Defaults& def = *ctx.defaults;
  EngineOptions out;
  AT_ASSIGN_OR_RETURN(out.schedule.warmup,
                      Bounded<int32_t>("options.warmup", o.warmup(), def.warmup(),
                                       0, lim.max_warmup(), "limits.max_warmup"));
  AT_ASSIGN_OR_RETURN(
      out.schedule.iterations,
      Bounded<int32_t>("options.iterations", o.iterations(), def.iterations(), 1,
                       lim.max_iterations(), "limits.max_iterations"));
  AT_ASSIGN_OR_RETURN(
      int64_t timeout_ms,
      Bounded<int64_t>("options.timeout_ms", o.timeout_ms(), def.timeout_ms(), 1,
                       lim.max_timeout_ms(), "limits.max_timeout_ms"));
  out.timeout = absl::Milliseconds(timeout_ms);
  AT_RETURN_IF_ERROR(Bounded<int64_t>("options.presync_window_us",
                                      o.presync_window_us(),
                                      def.presync_window_us(), 0,
                                      lim.max_presync_window_us(),
                                      "limits.max_presync_window_us")
                         .status());
  switch (o.timing_mode()) {
    case v1::TIMING_MODE_UNSPECIFIED:
      out.schedule.cuda_graph = def.timing_mode() == "cuda_graph";
      break;
    case v1::EVENT_LOOP: out.schedule.cuda_graph = false; break;
    case v1::CUDA_GRAPH: out.schedule.cuda_graph = true; break;
    default:
      return Invalid("options.timing_mode",
                     absl::StrCat("unknown timing mode ", o.timing_mode()));
  }
  out.rule.min_speedup = o.has_min_speedup() ? o.min_speedup() : def.min_speedup();
  out.rule.median_only = def.ranking() == "median";
  if (!(out.rule.min_speedup >= 0 && out.rule.min_speedup <= lim.max_min_speedup())) {
    return Invalid("options.min_speedup",
                   absl::StrCat("must be in [0, ", lim.max_min_speedup(),
                                "] (limits.max_min_speedup), got ", o.min_speedup()));
  }
  out.passes.min_passes = def.min_passes();
  out.passes.max_passes = def.max_passes();
  out.passes.warmup = def.pass_warmup();
  out.passes.iterations = def.pass_iterations();
  out.passes.max_iterations = def.max_measured_iterations();
  out.passes.budget = absl::Milliseconds(def.pass_budget_ms());
  out.memory_cap_bytes = ctx.memory_need ? CapOf(ctx) : 0;
  return out;
}

absl::StatusOr<ValidRequest> ValidateTune(const v1::TuneRequest& request,
                                          const ValidationContext& ctx) {
  AT_RETURN_IF_ERROR(ValidateGroup(request.group(), ctx));
  ValidRequest out;
  out.world_size = request.group().world_size();
  out.group_id = request.group().id();
  AT_ASSIGN_OR_RETURN(out.engine, ValidateOptions(request.options(), ctx));
  const v1::Group& group = request.group();
  out.per_rank = group.members_size() > 0 && !group.whole_group();
  out.rank = group.rank();
  if (out.per_rank) out.members_text = CanonicalMembers(group);
  if (out.per_rank) out.rank_daemons.assign(out.world_size, "");
  for (const v1::Member& m : group.members()) {
    if (out.per_rank && m.rank() >= 0 && m.rank() < out.world_size &&
        !m.daemon().empty() && m.daemon() != ctx.self_daemon) {
      out.rank_daemons[m.rank()] = m.daemon();
    }
    if (out.per_rank && m.rank() == 0 && !m.daemon().empty() && m.daemon() != ctx.self_daemon) {
      out.leader = m.daemon();
    }
  }
  // Placement: this daemon's members on their local GPUs, in rank order.
  std::vector<const v1::Member*> here;
  for (const v1::Member& m : group.members()) {
    if (m.daemon().empty() || m.daemon() == ctx.self_daemon) here.push_back(&m);
  }
  std::sort(here.begin(), here.end(),
            [](const v1::Member* a, const v1::Member* b) { return a->rank() < b->rank(); });
  for (const v1::Member* m : here) out.engine.schedule.devices.push_back(m->local_gpu());
  out.presync_window = absl::Microseconds(request.options().presync_window_us() > 0
                                              ? request.options().presync_window_us()
                                              : ctx.defaults->presync_window_us());
  out.refresh = request.options().refresh();
  out.cuda_graph = out.engine.schedule.cuda_graph;
  if (request.problems_size() == 0) {
    return Invalid("problems", "at least one problem is required");
  }
  if (request.problems_size() > ctx.limits->max_problems()) {
    return Invalid("problems", absl::StrCat(request.problems_size(),
                                            " problems, over the limit of ",
                                            ctx.limits->max_problems(),
                                            " (limits.max_problems)"));
  }
  for (int i = 0; i < request.problems_size(); ++i) {
    AT_ASSIGN_OR_RETURN(
        ValidProblem p,
        ValidateProblem(request.problems(i), absl::StrCat("problems[", i, "]"),
                        out.world_size, ctx));
    out.problems.push_back(std::move(p));
  }
  AT_RETURN_IF_ERROR(CheckClientCandidatesServed(request, out));
  if (!out.leader.empty()) {
    *out.wire.mutable_group() = request.group();
    *out.wire.mutable_options() = request.options();
    for (const ValidProblem& p : out.problems) *out.wire.add_problems() = p.canonical;
  }
  return out;
}

absl::StatusOr<std::vector<ValidRequest>> ValidateSweep(
    const v1::SweepRequest& request, const ValidationContext& ctx) {
  if (request.counts_size() == 0) {
    return Invalid("counts", "at least one count is required");
  }
  if (request.counts_size() > ctx.limits->max_sweep_sizes()) {
    return Invalid("counts", absl::StrCat(request.counts_size(),
                                          " sizes, over the limit of ",
                                          ctx.limits->max_sweep_sizes(),
                                          " (limits.max_sweep_sizes)"));
  }
  if (request.problem().split_counts_size() > 0) {
    return Invalid("problem.split_counts",
                   "a sweep varies count; send uneven splits with Tune");
  }
  for (int j = 0; j < request.problem().candidates_size(); ++j) {
    if (request.problem().candidates(j).has_client()) {
      return Invalid(absl::StrCat("problem.candidates[", j, "].client"),
                     "a sweep cannot time candidates the ranks run; ask Tune with one "
                     "problem per size");
    }
  }
  // Each size is validated without the memory cap (kNoCap only keeps every
  // product far from overflow), then held against it: a size that does not
  // fit is left out with the reason, not an error.
  ValidationContext uncapped = ctx;
  uncapped.memory_cap_bytes = kNoCap;
  uncapped.memory_need = nullptr;
  std::vector<ValidRequest> out;
  for (int i = 0; i < request.counts_size(); ++i) {
    v1::TuneRequest one;
    *one.mutable_group() = request.group();
    *one.mutable_options() = request.options();
    v1::Problem* p = one.add_problems();
    *p = request.problem();
    p->set_count(request.counts(i));
    absl::StatusOr<ValidRequest> v = ValidateTune(one, uncapped);
    if (!v.ok()) {
      // Name the sweep's own fields: counts[i] rather than problems[0].count.
      std::string msg(v.status().message());
      const std::string count_field = "problems[0].count";
      if (msg.rfind(count_field, 0) == 0) {
        msg = absl::StrCat("counts[", i, "]", msg.substr(count_field.size()));
      } else if (msg.rfind("problems[0]", 0) == 0) {
        msg = absl::StrCat("problem", msg.substr(11));
      }
      return absl::Status(v.status().code(), msg);
    }
    // The dispatch table's ranges run from one size to the next: sizes out
    // of order or repeated would make them overlap.
    if (i > 0 && request.counts(i) <= request.counts(i - 1)) {
      return Invalid(absl::StrCat("counts[", i, "]"),
                     absl::StrCat("sizes must increase strictly (no repeats), got ",
                                  request.counts(i), " after ", request.counts(i - 1)));
    }
    const int64_t cap = CapOf(ctx);
    const ProblemSpec& spec = v->problems[0].spec;
    std::string why = spec.MaxRankBytes() > cap
                          ? absl::StrCat("needs ", spec.MaxRankBytes(), " bytes per rank, over ",
                                         CapText(cap))
                          : MemoryShortfall(v->problems[0], ctx);
    if (!why.empty()) v->skipped = absl::StrCat("skipped: ", why);
    v->engine.memory_cap_bytes = ctx.memory_need ? cap : 0;
    out.push_back(*std::move(v));
  }
  return out;
}

namespace {

// The display names of `problem`'s client candidates on `result`.
void RestoreNames(const ValidProblem& problem, v1::ProblemResult* result) {
  const int n = static_cast<int>(problem.candidates.size());
  auto name_of = [&](int index) -> const std::string* {
    if (index < 0 || index >= n || !problem.candidates[index].client()) return nullptr;
    return &problem.candidates[index].client_name;
  };
  for (v1::CandidateResult& c : *result->mutable_ranked()) {
    if (const std::string* name = name_of(c.index()); name && c.candidate().has_client()) {
      c.mutable_candidate()->mutable_client()->set_name(*name);
    }
  }
  v1::Problem* wire = result->mutable_problem();
  for (int i = 0; i < wire->candidates_size() && i < n; ++i) {
    if (const std::string* name = name_of(i); name && wire->candidates(i).has_client()) {
      wire->mutable_candidates(i)->mutable_client()->set_name(*name);
    }
  }
  if (const std::string* name = name_of(result->winner_index()); name) {
    result->set_winner(*name);
  }
}

}  // namespace

void RestoreLabels(const ValidRequest& request, v1::TuneResponse* response) {
  for (int i = 0;
       i < response->results_size() && i < static_cast<int>(request.problems.size()); ++i) {
    v1::ProblemResult* result = response->mutable_results(i);
    result->mutable_problem()->set_label(request.problems[i].canonical.label());
    RestoreNames(request.problems[i], result);
  }
}

namespace {

absl::Status ValidateRunIds(const std::string& run_id, const std::string& group_id,
                            int rank) {
  if (run_id.empty() || run_id.size() > 64) {
    return Invalid("run_id", absl::StrCat("must be 1 to 64 characters, got ", run_id.size()));
  }
  if (group_id.size() > 256) {
    return Invalid("group_id",
                   absl::StrCat("at most 256 characters, got ", group_id.size()));
  }
  if (rank < 0) return Invalid("rank", absl::StrCat("must not be negative, got ", rank));
  return absl::OkStatus();
}

absl::Status ValidateReason(const std::string& field, const std::string& reason) {
  if (reason.size() > 1024) {
    return Invalid(field, absl::StrCat("at most 1024 characters, got ", reason.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStep(const v1::StepRequest& request) {
  AT_RETURN_IF_ERROR(ValidateRunIds(request.run_id(), request.group_id(), request.rank()));
  if (request.step() < 0) {
    return Invalid("step", absl::StrCat("must not be negative, got ", request.step()));
  }
  if (request.phase() != v1::VERIFIED && request.phase() != v1::WARMED_UP) {
    return Invalid("phase", absl::StrCat("must be VERIFIED or WARMED_UP, got ",
                                         static_cast<int>(request.phase())));
  }
  return ValidateReason("reason", request.reason());
}

absl::Status ValidateReport(const v1::RunReport& report) {
  AT_RETURN_IF_ERROR(ValidateRunIds(report.run_id(), report.group_id(), report.rank()));
  if (report.first_step() < 0) {
    return Invalid("first_step", absl::StrCat("must not be negative, got ", report.first_step()));
  }
  for (int i = 0; i < report.steps_size(); ++i) {
    const v1::StepTimes& step = report.steps(i);
    const std::string f = absl::StrCat("steps[", i, "]");
    const int64_t want = int64_t{report.first_step()} + i;
    if (step.step() != want) {
      return Invalid(f + ".step",
                     absl::StrCat("must be ", want, " (steps in order), got ", step.step()));
    }
    AT_RETURN_IF_ERROR(ValidateReason(f + ".reason", step.reason()));
    if (step.ok() && step.timed_out()) {
      return Invalid(f + ".timed_out", "a step that timed out is not ok");
    }
    for (int t = 0; t < step.times_us_size(); ++t) {
      const double us = step.times_us(t);
      if (!std::isfinite(us) || us < 0) {
        return Invalid(absl::StrCat(f, ".times_us[", t, "]"),
                       absl::StrCat("must be finite and not negative, got ", us));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateListImplementations(const v1::ListImplementationsRequest& request) {
  if (!v1::Collective_IsValid(request.collective())) {
    return Invalid("collective", absl::StrCat("unknown collective ", request.collective()));
  }
  return absl::OkStatus();
}

}  // namespace autotuned
