// Runs of candidates the ranks run: ValidateStep and ValidateReport of
// validate.h.
#include "daemon/coordinate/request/validate.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/coordinate/request/checks.h"

namespace autotuned {
namespace {

using request_internal::Invalid;

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
    if (!std::isfinite(step.host_us()) || step.host_us() < 0) {
      return Invalid(f + ".host_us",
                     absl::StrCat("must be finite and not negative, got ", step.host_us()));
    }
    if (step.timed_by() != v1::TIMING_MODE_UNSPECIFIED && step.timed_by() != v1::EVENT_LOOP &&
        step.timed_by() != v1::CUDA_GRAPH) {
      return Invalid(f + ".timed_by",
                     absl::StrCat("unknown timing mode ", static_cast<int>(step.timed_by())));
    }
  }
  return absl::OkStatus();
}

}  // namespace autotuned
