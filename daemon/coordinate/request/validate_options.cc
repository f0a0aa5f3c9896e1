// Options: ValidateOptions of validate.h.
#include "daemon/coordinate/request/validate.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/coordinate/request/checks.h"

namespace autotuned {
namespace {

using request_internal::CapOf;
using request_internal::Invalid;

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

}  // namespace

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

}  // namespace autotuned
