// Requests: ValidateTune and ValidateSweep of validate.h.
#include "daemon/coordinate/request/validate.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/coordinate/request/checks.h"
#include "daemon/coordinate/request/validate_problem.h"

namespace autotuned {
namespace {

using request_internal::CapOf;
using request_internal::CapText;
using request_internal::Invalid;
using request_internal::MemoryShortfall;
using request_internal::ValidateProblem;

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
  if (ctx.key_text) {
    for (ValidProblem& p : out.problems) p.key_text = ctx.key_text(p, out);
  }
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
        // A count beyond what any request may describe (kNoCap): the error
        // names the cap in force, as a Tune's would.
        absl::StatusOr<ValidRequest> capped = ValidateTune(one, ctx);
        if (!capped.ok() && capped.status().message().rfind(count_field, 0) == 0) {
          msg = std::string(capped.status().message());
        }
      }
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

}  // namespace autotuned
