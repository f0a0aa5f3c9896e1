#include "daemon/measure/engine/ranking.h"

#include <algorithm>
#include <cmath>
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

// The order statistic k of MedianInterval (1-based, at least 1). The
// binomial probabilities are summed in log space (n may be thousands).
size_t IntervalRank(size_t n, double level) {
  const double tail = (1.0 - level) / 2.0;
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  double log_choose = 0;  // log C(n, i)
  double cdf = 0;         // P(B <= i)
  size_t k = 0;
  for (size_t i = 0; i <= n / 2; ++i) {
    if (i > 0) log_choose += std::log(static_cast<double>(n - i + 1) / static_cast<double>(i));
    cdf += std::exp(log_choose + log_half_n);
    if (cdf > tail) break;
    k = i + 1;
  }
  return std::max<size_t>(k, 1);
}

double MedianOfSorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

// The medians of the passes of `samples`, in measuring order; empty unless
// there are two passes or more that cover the samples exactly.
std::vector<double> PassMedians(const std::vector<double>& samples,
                                const std::vector<int>& pass_sizes) {
  std::vector<double> medians;
  size_t begin = 0;
  for (int size : pass_sizes) {
    if (size <= 0 || begin + size > samples.size()) return {};
    std::vector<double> pass(samples.begin() + begin, samples.begin() + begin + size);
    std::sort(pass.begin(), pass.end());
    medians.push_back(MedianOfSorted(pass));
    begin += size;
  }
  if (medians.size() < 2 || begin != samples.size()) return {};
  return medians;
}

// `medians` (in measuring order) placed at their pass ids (empty ids: 0, 1,
// ...), NaN between; empty when the ids do not fit (fewer or more than the
// medians, negative, repeated or beyond kMaxPassId).
std::vector<double> ByPassId(const std::vector<double>& medians, const std::vector<int>& ids) {
  constexpr int kMaxPassId = 1 << 16;
  if (ids.empty()) return medians;
  if (ids.size() != medians.size()) return {};
  std::vector<double> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= kMaxPassId) return {};
    if (static_cast<size_t>(ids[i]) >= out.size()) out.resize(ids[i] + 1, std::nan(""));
    if (!std::isnan(out[ids[i]])) return {};
    out[ids[i]] = medians[i];
  }
  return out;
}

}  // namespace

void MedianInterval(const std::vector<double>& sorted, double* low, double* high,
                    double level) {
  if (sorted.empty()) {
    *low = *high = kInf;
    return;
  }
  const size_t n = sorted.size();
  const size_t k = IntervalRank(n, level);
  *low = sorted[k - 1];
  *high = sorted[n - k];
}

Ratio Compare(const CandidateOutcome& a, const CandidateOutcome& b) {
  std::vector<double> ratios;
  const size_t n = std::min(a.pass_median_us.size(), b.pass_median_us.size());
  for (size_t p = 0; p < n; ++p) {
    const double x = a.pass_median_us[p], y = b.pass_median_us[p];
    if (!std::isnan(x) && !std::isnan(y) && y > 0) ratios.push_back(x / y);
  }
  Ratio r;
  if (static_cast<int>(ratios.size()) < kMinPairs) return r;
  std::sort(ratios.begin(), ratios.end());
  r.pairs = static_cast<int>(ratios.size());
  r.median = MedianOfSorted(ratios);
  MedianInterval(ratios, &r.low, &r.high, kDecisionLevel);
  return r;
}

bool Beats(const CandidateOutcome& a, const CandidateOutcome& b) {
  const Ratio r = Compare(a, b);
  return r.pairs > 0 ? r.high < 1.0 : a.stats.median_high_us < b.stats.median_low_us;
}

namespace {

// ComputeStats, given the passes' medians (PassMedians of the samples).
Stats StatsOf(std::vector<double> samples, std::vector<double> pass_medians) {
  Stats s;
  if (samples.empty()) {
    s.mean_us = s.median_us = s.min_us = s.max_us = s.spread = kInf;
    s.median_low_us = s.median_high_us = kInf;
    return s;
  }
  std::sort(pass_medians.begin(), pass_medians.end());
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.min_us = samples.front();
  s.max_us = samples.back();
  s.mean_us = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  s.median_us = MedianOfSorted(samples);
  s.spread = s.median_us > 0 ? (s.max_us - s.min_us) / s.median_us : 0.0;
  MedianInterval(samples, &s.median_low_us, &s.median_high_us);
  if (!pass_medians.empty()) {
    double low = 0, high = 0;
    MedianInterval(pass_medians, &low, &high);
    s.median_low_us = std::min(s.median_low_us, low);
    s.median_high_us = std::max(s.median_high_us, high);
  }
  return s;
}

}  // namespace

Stats ComputeStats(std::vector<double> samples, const std::vector<int>& pass_sizes) {
  std::vector<double> pass_medians = PassMedians(samples, pass_sizes);
  return StatsOf(std::move(samples), std::move(pass_medians));
}

CandidateOutcome Summarize(int index, const CandidateSpec& candidate,
                           const std::vector<RankOutcome>& ranks,
                           const std::vector<int>& pass_sizes, const std::vector<int>& pass_ids) {
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
  std::vector<double> pass_medians = PassMedians(per_iteration, pass_sizes);
  out.pass_median_us = ByPassId(pass_medians, pass_ids);
  out.stats = StatsOf(std::move(per_iteration), std::move(pass_medians));
  return out;
}

std::vector<double> Estimates(const std::vector<CandidateOutcome>& outcomes) {
  auto passes = [](const CandidateOutcome& o) {
    return std::count_if(o.pass_median_us.begin(), o.pass_median_us.end(),
                         [](double m) { return !std::isnan(m); });
  };
  const CandidateOutcome* reference = nullptr;
  for (const CandidateOutcome& o : outcomes) {
    if (!o.ok) continue;
    if (reference == nullptr || passes(o) > passes(*reference) ||
        (passes(o) == passes(*reference) && o.index < reference->index)) {
      reference = &o;
    }
  }
  std::vector<double> out;
  out.reserve(outcomes.size());
  for (const CandidateOutcome& o : outcomes) {
    if (!o.ok) {
      out.push_back(kInf);
      continue;
    }
    const Ratio r = &o == reference ? Ratio() : Compare(o, *reference);
    out.push_back(r.pairs > 0 ? r.median * reference->stats.median_us : o.stats.median_us);
  }
  return out;
}

namespace {

// Positions in `outcomes` of the working ones, best first by `key` (ties by
// request position), then of the others by request position.
std::vector<size_t> OrderBy(const std::vector<CandidateOutcome>& outcomes,
                            const std::vector<double>& key) {
  std::vector<size_t> order(outcomes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const CandidateOutcome& x = outcomes[a];
    const CandidateOutcome& y = outcomes[b];
    if (x.ok != y.ok) return x.ok;
    if (x.ok && key[a] != key[b]) return key[a] < key[b];
    return x.index != y.index ? x.index < y.index : a < b;
  });
  return order;
}

// The position in `outcomes` of the default: the working one earliest in
// the request; outcomes.size() when none works.
size_t DefaultOf(const std::vector<CandidateOutcome>& outcomes) {
  size_t d = outcomes.size();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].ok && (d == outcomes.size() || outcomes[i].index < outcomes[d].index)) d = i;
  }
  return d;
}

}  // namespace

std::vector<CandidateOutcome> Rank(std::vector<CandidateOutcome> outcomes, const RankRule& rule) {
  std::vector<double> key;
  if (rule.median_only) {
    for (const CandidateOutcome& o : outcomes) key.push_back(o.stats.median_us);
  } else {
    key = Estimates(outcomes);
  }
  std::vector<size_t> order = OrderBy(outcomes, key);
  const size_t fallback = DefaultOf(outcomes);
  if (fallback == outcomes.size()) {
    std::vector<CandidateOutcome> ranked;
    for (size_t i : order) ranked.push_back(std::move(outcomes[i]));
    return ranked;
  }
  // The margin protects the default: the best estimate must be at least
  // min_speedup faster than it to take its place.
  if (!rule.median_only && key[order[0]] * (1.0 + rule.min_speedup) > key[fallback]) {
    order.erase(std::find(order.begin(), order.end(), fallback));
    order.insert(order.begin(), fallback);
  }
  std::vector<CandidateOutcome> ranked;
  ranked.reserve(outcomes.size());
  for (size_t i : order) ranked.push_back(std::move(outcomes[i]));
  for (size_t i = 1; i < ranked.size() && ranked[i].ok; ++i) {
    ranked[i].vs_winner = Compare(ranked[i], ranked[0]);
  }
  return ranked;
}

std::vector<CandidateOutcome> RankRanks(const std::vector<CandidateSpec>& candidates,
                                        const std::vector<std::vector<RankOutcome>>& ranks,
                                        const RankRule& rule,
                                        const std::vector<int>& pass_sizes) {
  std::vector<CandidateOutcome> outcomes;
  for (size_t i = 0; i < candidates.size() && i < ranks.size(); ++i) {
    outcomes.push_back(Summarize(static_cast<int>(i), candidates[i], ranks[i], pass_sizes));
  }
  return Rank(std::move(outcomes), rule);
}

Verdict Judge(const std::vector<CandidateOutcome>& ranked) {
  Verdict v;
  if (ranked.empty() || !ranked[0].ok) return v;
  const CandidateOutcome& winner = ranked[0];
  const std::vector<double> estimates = Estimates(ranked);
  const size_t best = OrderBy(ranked, estimates)[0];
  bool beats_all = true;
  for (size_t i = 1; i < ranked.size() && ranked[i].ok; ++i) {
    beats_all &= Beats(winner, ranked[i]);
  }
  v.confidence = DefaultOf(ranked) == 0 && best != 0 ? v1::BELOW_MARGIN
                 : beats_all                         ? v1::DECISIVE
                                                     : v1::WITHIN_NOISE;
  if (ranked.size() > 1 && ranked[1].ok && winner.stats.median_us > 0) {
    v.speedup = ranked[1].stats.median_us / winner.stats.median_us - 1.0;
  }
  return v;
}

std::vector<int> Contenders(const std::vector<CandidateOutcome>& ranked, const RankRule& rule) {
  std::vector<int> out;
  if (ranked.empty() || !ranked[0].ok) return out;
  const CandidateOutcome& winner = ranked[0];
  const size_t fallback = DefaultOf(ranked);
  const double margin = 1.0 + rule.min_speedup;
  for (size_t i = 1; i < ranked.size() && ranked[i].ok; ++i) {
    const CandidateOutcome& o = ranked[i];
    // At the end of the noise in o's favour: o's time over the winner's.
    const Ratio r = Compare(o, winner);
    const double low = r.pairs > 0 ? r.low : o.stats.median_low_us;
    const double high = r.pairs > 0 ? 1.0 : winner.stats.median_high_us;
    const bool contends = fallback == 0 ? low * margin <= high  // displace the default
                          : i == fallback ? low <= high * margin  // be kept by the margin
                                          : low <= high;          // a better estimate
    if (contends) out.push_back(o.index);
  }
  if (!out.empty()) out.push_back(winner.index);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace autotuned
