#include "daemon/coordinate/leadership/cross_passes.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autotuned::leadership {
namespace {

bool AllOk(const std::vector<RankOutcome>& ranks) {
  return !ranks.empty() && std::all_of(ranks.begin(), ranks.end(),
                                       [](const RankOutcome& r) { return r.status.ok(); });
}

}  // namespace

RankOutcome CheckedSamples(RankOutcome r, int iterations) {
  if (!r.status.ok()) return r;
  if (static_cast<int>(r.iteration_us.size()) != iterations) {
    return RankOutcome{absl::InvalidArgumentError(absl::StrCat(
                           "iteration_us: ", r.iteration_us.size(),
                           " samples where the pass times ", iterations)),
                       {}};
  }
  for (double us : r.iteration_us) {
    if (!std::isfinite(us) || us < 0) {
      return RankOutcome{absl::InvalidArgumentError(absl::StrCat(
                             "iteration_us: ", us, " is not a finite, non-negative time")),
                         {}};
    }
  }
  return r;
}

void JoinPass(PassSamples* samples, std::vector<RankOutcome> pass, int pass_id, int iterations) {
  for (RankOutcome& r : pass) r = CheckedSamples(std::move(r), iterations);
  if (!samples->ranks.empty() && !AllOk(samples->ranks)) return;  // ruled out before
  if (samples->ranks.empty() || !AllOk(pass) || samples->ranks.size() != pass.size()) {
    samples->ranks = std::move(pass);
    samples->pass_sizes = {iterations};
    samples->pass_ids = {pass_id};
    return;
  }
  samples->pass_sizes.push_back(iterations);
  samples->pass_ids.push_back(pass_id);
  for (size_t r = 0; r < pass.size(); ++r) {
    std::vector<double>& into = samples->ranks[r].iteration_us;
    into.insert(into.end(), pass[r].iteration_us.begin(), pass[r].iteration_us.end());
  }
}

CandidateOutcome OutcomeOf(int index, const CandidateSpec& candidate, const PassSamples& samples) {
  CandidateOutcome o =
      Summarize(index, candidate, samples.ranks, samples.pass_sizes, samples.pass_ids);
  o.passes = o.ok ? static_cast<int>(samples.pass_ids.size()) : 0;
  return o;
}

std::optional<v1::CrossPass> NextCrossPass(
    const std::vector<std::vector<CandidateOutcome>>& ranked, const EngineOptions& options,
    const RunState& state) {
  const PassOptions& passes = options.passes;
  if (!state.everyone || state.pass >= passes.max_passes || state.pass >= kMaxCrossPasses ||
      state.spent >= passes.budget * static_cast<int64_t>(std::max(state.problems, 1))) {
    return std::nullopt;
  }
  v1::CrossPass next;
  next.set_pass(state.pass);
  next.set_warmup(passes.warmup);
  next.set_iterations(passes.iterations);
  int steps = 0;
  for (const std::vector<CandidateOutcome>& problem : ranked) {
    v1::CrossPassProblem* p = next.add_problems();
    for (int c : PassOrder(NextPass(problem, options), state.pass)) {
      p->add_candidates(c);
      ++steps;
    }
  }
  if (steps == 0 || steps * options.timeout > state.left) return std::nullopt;
  return next;
}

ScheduleOptions CrossPassSchedule(const EngineOptions& options, const v1::CrossPass& pass) {
  ScheduleOptions schedule = options.schedule;
  schedule.verify = false;
  schedule.warmup = pass.warmup();
  schedule.iterations = pass.iterations();
  return schedule;
}

absl::Status CheckCrossPass(const v1::CrossPass& pass, int last,
                            const std::vector<int>& candidates) {
  if (pass.pass() <= last || pass.pass() >= kMaxCrossPasses) {
    return absl::InvalidArgumentError(absl::StrCat("go.next.pass: ", pass.pass(),
                                                   " is not after pass ", last, " and below ",
                                                   kMaxCrossPasses));
  }
  if (pass.problems_size() != static_cast<int>(candidates.size())) {
    return absl::InvalidArgumentError(absl::StrCat("go.next.problems: ", pass.problems_size(),
                                                   " entries for the run's ", candidates.size(),
                                                   " problems"));
  }
  for (int m = 0; m < pass.problems_size(); ++m) {
    std::set<int> seen;
    for (int i = 0; i < pass.problems(m).candidates_size(); ++i) {
      const int c = pass.problems(m).candidates(i);
      if (c < 0 || c >= candidates[m] || !seen.insert(c).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("go.next.problems[", m, "].candidates[", i, "]: ", c,
                         " is outside 0..", candidates[m] - 1, " or repeated"));
      }
    }
  }
  if (pass.warmup() < 0 || pass.warmup() > kMaxPassWarmup) {
    return absl::InvalidArgumentError(absl::StrCat("go.next.warmup: ", pass.warmup(),
                                                   " is outside 0..", kMaxPassWarmup));
  }
  if (pass.iterations() < 1 || pass.iterations() > kMaxPassIterations) {
    return absl::InvalidArgumentError(absl::StrCat("go.next.iterations: ", pass.iterations(),
                                                   " is outside 1..", kMaxPassIterations));
  }
  return absl::OkStatus();
}

}  // namespace autotuned::leadership
