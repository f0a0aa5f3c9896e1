#include "daemon/measure/backend/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

absl::Status Step(const char* name, absl::Status s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

// GraphCalls: the replay's target and a collective's time guessed from its
// bytes (latency + bytes / bandwidth).
constexpr double kGraphReplayTargetUs = 200.0;
constexpr int kMaxCallsPerGraph = 64;
constexpr double kGuessLatencyUs = 8.0;
constexpr double kGuessBytesPerUs = 200e3;

}  // namespace

int GraphCalls(const ProblemSpec& problem) {
  int64_t elements = problem.count;
  for (int64_t c : problem.split_counts) elements += c;
  const int64_t bytes = std::max<int64_t>(0, elements) * DTypeSize(problem.dtype);
  const double guess = kGuessLatencyUs + static_cast<double>(bytes) / kGuessBytesPerUs;
  const double calls = std::ceil(kGraphReplayTargetUs / guess);
  return static_cast<int>(std::clamp(calls, 1.0, static_cast<double>(kMaxCallsPerGraph)));
}

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
