#include "daemon/solver/result.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace autotuned {
namespace {

void FillCandidate(const CandidateOutcome& o, int64_t bytes, double bus_factor,
                   v1::CandidateResult* out) {
  if (o.candidate.client()) {
    out->mutable_candidate()->mutable_client()->set_key(o.candidate.client_key);
    out->mutable_candidate()->mutable_client()->set_name(o.candidate.client_name);
  } else {
    out->mutable_candidate()->set_impl(o.candidate.impl);
    out->mutable_candidate()->mutable_params()->insert(o.candidate.params.begin(),
                                                       o.candidate.params.end());
  }
  out->set_index(o.index);
  out->set_ok(o.ok);
  out->set_reason(o.reason);
  out->set_mean_us(o.stats.mean_us);
  out->set_median_us(o.stats.median_us);
  out->set_min_us(o.stats.min_us);
  out->set_max_us(o.stats.max_us);
  out->set_spread(o.stats.spread);
  for (double t : o.rank_mean_us) out->add_rank_mean_us(t);
  out->set_iterations(o.iterations);
  if (o.ok && o.stats.median_us > 0) {
    // bytes / us = MB/s; / 1e3 = GB/s. Bandwidth of the median iteration.
    const double algbw = static_cast<double>(bytes) / o.stats.median_us / 1e3;
    out->set_algbw_gbps(algbw);
    out->set_busbw_gbps(algbw * bus_factor);
  }
}

}  // namespace

v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_bytes(problem.spec.MessageBytes());
  r.set_measured_unix_ms(absl::ToUnixMillis(absl::Now()));
  for (const CandidateOutcome& o : ranked) {
    FillCandidate(o, r.bytes(), problem.spec.BusBandwidthFactor(), r.add_ranked());
  }
  if (!ranked.empty() && ranked[0].ok) {
    r.set_status(v1::TUNED);
    r.set_winner(ranked[0].candidate.name());
    r.set_winner_index(ranked[0].index);
    int ruled_out = 0;
    for (const CandidateOutcome& o : ranked) ruled_out += o.ok ? 0 : 1;
    r.set_reason(absl::StrCat("fastest median of ", ranked.size() - ruled_out,
                              " working candidates",
                              ruled_out ? absl::StrCat(", ", ruled_out, " ruled out") : ""));
  } else {
    r.set_status(v1::FAILED);
    r.set_winner_index(-1);
    r.set_reason("every candidate was ruled out");
  }
  return r;
}

v1::ProblemResult FallbackResult(const ValidProblem& problem, const std::string& cache_key) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_status(v1::FALLBACK);
  r.set_winner(problem.candidates[0].name());
  r.set_winner_index(0);
  r.set_bytes(problem.spec.MessageBytes());
  r.set_cache_key(cache_key);
  return r;
}

}  // namespace autotuned
