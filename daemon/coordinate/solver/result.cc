#include "daemon/coordinate/solver/result.h"

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
  out->set_median_low_us(o.stats.median_low_us);
  out->set_median_high_us(o.stats.median_high_us);
  out->set_passes(o.passes);
  out->set_vs_winner(o.vs_winner.median);
  out->set_vs_winner_low(o.vs_winner.low);
  out->set_vs_winner_high(o.vs_winner.high);
  out->set_paired(o.vs_winner.pairs);
  if (o.timed_by != 0) out->set_timed_by(static_cast<v1::TimingMode>(o.timed_by));
  out->set_host_us(o.host_us);
  if (o.ok && o.stats.median_us > 0) {
    // bytes / us = MB/s; / 1e3 = GB/s. Bandwidth of the median iteration.
    const double algbw = static_cast<double>(bytes) / o.stats.median_us / 1e3;
    out->set_algbw_gbps(algbw);
    out->set_busbw_gbps(algbw * bus_factor);
  }
}

const char* VerdictWords(v1::Confidence c) {
  switch (c) {
    case v1::DECISIVE: return "fastest beyond noise";
    case v1::WITHIN_NOISE: return "best estimate of a tie within noise";
    case v1::BELOW_MARGIN: return "kept, others faster by less than the margin";
    default: return "fastest median";
  }
}

}  // namespace

v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked,
                                  double min_speedup) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_bytes(problem.spec.MessageBytes());
  r.set_measured_unix_ms(absl::ToUnixMillis(absl::Now()));
  r.set_min_speedup(min_speedup);
  double measuring_us = 0;
  for (const CandidateOutcome& o : ranked) {
    FillCandidate(o, r.bytes(), problem.spec.BusBandwidthFactor(), r.add_ranked());
    r.set_measured_iterations(r.measured_iterations() + o.iterations);
    measuring_us += o.measuring_us;
  }
  r.set_measuring_us(static_cast<int64_t>(measuring_us));
  if (!ranked.empty() && ranked[0].ok) {
    const Verdict verdict = Judge(ranked);
    r.set_status(v1::TUNED);
    r.set_winner(ranked[0].candidate.name());
    r.set_winner_index(ranked[0].index);
    r.set_confidence(verdict.confidence);
    r.set_winner_speedup(verdict.speedup);
    int ruled_out = 0;
    for (const CandidateOutcome& o : ranked) ruled_out += o.ok ? 0 : 1;
    r.set_reason(absl::StrCat(VerdictWords(verdict.confidence), " of ",
                              ranked.size() - ruled_out, " working candidates",
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
