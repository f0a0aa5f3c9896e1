#include "daemon/backend/schedule.h"

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

absl::Status Step(const char* name, absl::Status s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

}  // namespace

RankOutcome RunRankSchedule(RankRun& run, const ScheduleOptions& options) {
  RankOutcome out;
  if (options.verify) {
    out.status = Step("verify", run.RunAndVerify());
    if (!out.status.ok()) return out;
  }
  out.status = Step("barrier", run.Barrier());
  if (!out.status.ok()) return out;
  if (options.warmup > 0) {
    out.status = Step("warmup", run.Run(options.warmup, nullptr));
    if (!out.status.ok()) return out;
  }
  out.status = Step("barrier", run.Barrier());
  if (!out.status.ok()) return out;
  out.iteration_us.reserve(options.iterations);
  out.status = Step("timed", run.Run(options.iterations, &out.iteration_us));
  if (out.status.ok() &&
      static_cast<int>(out.iteration_us.size()) != options.iterations) {
    out.status = absl::InternalError(
        absl::StrCat("timed: ", out.iteration_us.size(), " samples for ",
                     options.iterations, " iterations"));
  }
  return out;
}

}  // namespace autotuned
