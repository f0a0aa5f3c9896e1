#include "daemon/engine/engine.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A rank that stopped because another rank failed or the run was aborted
// reports ABORTED; its message says nothing about the cause.
bool IsOwnFailure(const absl::Status& s) {
  return !s.ok() && s.code() != absl::StatusCode::kAborted;
}

}  // namespace

Stats ComputeStats(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) {
    s.mean_us = s.median_us = s.min_us = s.max_us = s.spread = kInf;
    return s;
  }
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.min_us = samples.front();
  s.max_us = samples.back();
  s.mean_us = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  s.median_us = n % 2 ? samples[n / 2]
                      : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.spread = s.median_us > 0 ? (s.max_us - s.min_us) / s.median_us : 0.0;
  return s;
}

CandidateOutcome Summarize(int index, const CandidateSpec& candidate,
                           const std::vector<RankOutcome>& ranks) {
  CandidateOutcome out;
  out.index = index;
  out.candidate = candidate;
  int failed = -1;
  for (const RankOutcome& r : ranks) {
    out.timed_out |= r.status.code() == absl::StatusCode::kDeadlineExceeded;
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (IsOwnFailure(ranks[r].status)) {
      failed = static_cast<int>(r);
      break;
    }
    if (!ranks[r].status.ok() && failed < 0) failed = static_cast<int>(r);
  }
  if (ranks.empty()) {
    out.reason = "no ranks ran";
  } else if (failed >= 0) {
    const absl::Status& s = ranks[failed].status;
    out.reason = absl::StrCat("rank ", failed, ": ",
                              absl::StatusCodeToString(s.code()), ": ",
                              s.message());
  }
  size_t iterations = ranks.empty() ? 0 : ranks[0].iteration_us.size();
  for (const RankOutcome& r : ranks) {
    if (r.status.ok() && r.iteration_us.size() != iterations &&
        out.reason.empty()) {
      out.reason = "ranks reported different numbers of iterations";
    }
  }
  if (!out.reason.empty() || iterations == 0) {
    if (out.reason.empty()) out.reason = "no timed iterations";
    out.stats = ComputeStats({});
    return out;
  }
  std::vector<double> per_iteration(iterations, 0.0);
  for (const RankOutcome& r : ranks) {
    for (size_t i = 0; i < iterations; ++i) {
      per_iteration[i] = std::max(per_iteration[i], r.iteration_us[i]);
    }
    out.rank_mean_us.push_back(
        std::accumulate(r.iteration_us.begin(), r.iteration_us.end(), 0.0) /
        iterations);
  }
  out.ok = true;
  out.iterations = static_cast<int>(iterations);
  out.stats = ComputeStats(std::move(per_iteration));
  return out;
}

std::vector<CandidateOutcome> Rank(std::vector<CandidateOutcome> outcomes) {
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const CandidateOutcome& a, const CandidateOutcome& b) {
                     if (a.ok != b.ok) return a.ok;
                     if (a.ok && a.stats.median_us != b.stats.median_us) {
                       return a.stats.median_us < b.stats.median_us;
                     }
                     return a.index < b.index;
                   });
  return outcomes;
}

std::vector<CandidateOutcome> Engine::Measure(
    const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
    const EngineOptions& options, const DeviceLease::Token* held) {
  std::vector<CandidateOutcome> outcomes;
  outcomes.reserve(candidates.size());
  absl::StatusOr<DeviceLease::Token> own = DeviceLease::Token();
  if (held == nullptr) own = lease_.Acquire(options.lease_deadline);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].client()) continue;
    const absl::Status supported =
        !own.ok() ? own.status()
                  : backend_->catalogue().Supports(problem, candidates[i].impl, "candidate");
    if (!supported.ok()) {
      CandidateOutcome out;
      out.index = static_cast<int>(i);
      out.candidate = candidates[i];
      out.reason = std::string(supported.message());
      out.stats = ComputeStats({});
      outcomes.push_back(std::move(out));
      continue;
    }
    const absl::Time deadline = absl::Now() + options.timeout;
    std::vector<RankOutcome> ranks = backend_->RunCandidate(
        problem, candidates[i], options.schedule, deadline);
    outcomes.push_back(Summarize(static_cast<int>(i), candidates[i], ranks));
  }
  return Rank(std::move(outcomes));
}

std::vector<CandidateOutcome> RankRanks(const std::vector<CandidateSpec>& candidates,
                                        const std::vector<std::vector<RankOutcome>>& ranks) {
  std::vector<CandidateOutcome> outcomes;
  for (size_t i = 0; i < candidates.size() && i < ranks.size(); ++i) {
    outcomes.push_back(Summarize(static_cast<int>(i), candidates[i], ranks[i]));
  }
  return Rank(std::move(outcomes));
}

std::vector<std::vector<RankOutcome>> Engine::MeasurePart(
    const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
    const EngineOptions& options, const std::vector<int>& local_ranks,
    const std::string& backend_token,
    const std::function<std::shared_ptr<RunTransport>(int candidate)>& transport) {
  std::vector<std::vector<RankOutcome>> out;
  out.reserve(candidates.size());
  absl::StatusOr<DeviceLease::Token> lease = lease_.Acquire(options.lease_deadline);
  for (size_t i = 0; i < candidates.size(); ++i) {
    PartialRun part;
    part.local_ranks = local_ranks;
    part.transport = transport(static_cast<int>(i));
    part.backend_token = backend_token;
    const absl::Status supported =
        !lease.ok() ? lease.status()
                    : backend_->catalogue().Supports(problem, candidates[i].impl, "candidate");
    if (!supported.ok()) {
      // As a backend refusing the run: the other daemons' ranks stop too.
      if (part.transport != nullptr) part.transport->Abort(supported);
      out.push_back(std::vector<RankOutcome>(std::max<size_t>(local_ranks.size(), 1),
                                             RankOutcome{supported, {}}));
      continue;
    }
    const absl::Time deadline = absl::Now() + options.timeout;
    out.push_back(
        backend_->RunPartial(problem, candidates[i], options.schedule, part, deadline));
  }
  return out;
}

}  // namespace autotuned
