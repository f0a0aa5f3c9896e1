// The pure half of the engine: per-rank timings of candidates into a
// ranking, a verdict, and the plan of the next interleaved pass. Every
// function here depends only on the reduced timings (per iteration, the
// maximum over ranks), so every rank, and every daemon, that holds the same
// timings decides alike. docs/protocol.md ("How a decision is made") states
// the interval, the rules and the margin.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// Statistics over per-iteration times, in microseconds.
struct Stats {
  double mean_us = 0;
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  double spread = 0;  // (max - min) / median
  // A distribution-free interval for the true median (MedianInterval, widened
  // over the passes' medians: ComputeStats).
  double median_low_us = 0;
  double median_high_us = 0;
};

// A paired comparison of candidate a with candidate b over the passes both
// ran (Compare): per pass, a's median over b's. `pairs` such passes; the
// median of the ratios and a kDecisionLevel interval for it (MedianInterval
// at that level); all 0 below kMinPairs.
struct Ratio {
  int pairs = 0;
  double median = 0;
  double low = 0;
  double high = 0;
};

struct CandidateOutcome {
  int index = 0;               // position in the request
  CandidateSpec candidate;
  bool ok = false;
  std::string reason;          // why it was ruled out (when !ok)
  bool timed_out = false;      // some rank was cut off at the deadline
  Stats stats;                 // +inf everywhere when !ok
  std::vector<double> rank_mean_us;
  int iterations = 0;          // timed iterations, every pass together
  int passes = 0;              // schedules run (Engine::Measure; else 0)
  double measuring_us = 0;     // wall time of those runs (Engine::Measure)
  // Per pass id (Summarize), the median of that pass's samples; NaN for a
  // pass the candidate did not run. Empty with fewer than two passes.
  std::vector<double> pass_median_us;
  // This candidate against the winner (Rank sets it; the winner's own and a
  // ruled-out candidate's stay 0).
  Ratio vs_winner;
  // How the times were taken (v1::TimingMode; 0: not said) and, for
  // candidates the ranks run, the host's time per eager call (the largest
  // rank median; 0: not measured). Carried to CandidateResult as they are.
  int timed_by = 0;
  double host_us = 0;
};

// The level of a candidate's own interval (Stats), and of the paired
// comparisons that decide (Ratio, Rank): stricter, since an adaptive round
// looks again after every pass.
inline constexpr double kIntervalLevel = 0.95;
inline constexpr double kDecisionLevel = 0.99;
// The fewest paired passes a Ratio is taken over: below it (too few for an
// interval at kDecisionLevel), candidates are compared by their own
// intervals.
inline constexpr int kMinPairs = 8;

// For `sorted` samples x(1) <= ... <= x(n): [x(k), x(n+1-k)] with k the
// largest whole number such that P(B <= k-1) <= (1 - level) / 2 for
// B ~ Binomial(n, 1/2); it holds the true median with probability at least
// `level` whatever the distribution. When no k qualifies (at 0.95: below 6
// samples) it is [min, max] (probability 1 - 2^(1-n)). Empty: +inf.
void MedianInterval(const std::vector<double>& sorted, double* low, double* high,
                    double level = kIntervalLevel);

// Candidate a against candidate b, paired by pass id (pass_median_us).
Ratio Compare(const CandidateOutcome& a, const CandidateOutcome& b);

// Stats of `samples` (empty: all +inf). `pass_sizes`: how many of the
// samples, in order, each pass measured. With two passes or more whose sizes
// add up to the samples, the interval is the smallest that holds both
// MedianInterval over the samples and MedianInterval over the passes' medians
// (up to 8 passes: their [min, max]), since noise that comes in bursts is
// shared by the samples of a pass; the median stays the median of every
// sample.
Stats ComputeStats(std::vector<double> samples, const std::vector<int>& pass_sizes = {});

// One outcome from the per-rank reports of one candidate: per-iteration max
// across ranks when every rank succeeded; otherwise ruled out with the
// reason of the lowest rank whose failure is its own (not an abort caused by
// another rank), prefixed "rank R: ". `pass_sizes` as for ComputeStats
// (every rank's samples hold the passes in order); `pass_ids` names each of
// those passes in the round's numbering (empty: 0, 1, 2, ...), which pairs
// the passes of different candidates (Compare).
CandidateOutcome Summarize(int index, const CandidateSpec& candidate,
                           const std::vector<RankOutcome>& ranks,
                           const std::vector<int>& pass_sizes = {},
                           const std::vector<int>& pass_ids = {});

// How Rank picks the winner.
struct RankRule {
  // The margin over the default, a fraction: 0.02 = 2 %.
  double min_speedup = 0;
  // The fastest median wins, ties by request order: no interval, no margin
  // (the rule before intervals; config defaults.ranking "median").
  bool median_only = false;
};

// a is faster than b beyond the noise: with kMinPairs paired passes or
// more, Compare(a, b).high < 1; otherwise a's interval wholly below b's.
bool Beats(const CandidateOutcome& a, const CandidateOutcome& b);

// The point estimate of each outcome's time, in microseconds, in the order
// given (+inf for one not ok): all of them are measured against one
// reference, the working candidate run in the most passes (of those, the
// earliest in the request); the reference's is its median, and another's
// is the reference's median times its Compare(o, reference).median where
// they pair, else its own median. One scale for every candidate, so that
// ordering by it (ties by request position) is a total order, and one that
// uses the pairs where there are pairs. The outcomes' order does not matter.
std::vector<double> Estimates(const std::vector<CandidateOutcome>& outcomes);

// The ranking, best first: the working candidates by Estimates (ties by
// request position), then ruled-out candidates in request order. The
// winner is the best estimate, tied or not, unless it is less than
// rule.min_speedup faster than the default (the working candidate earliest
// in the request): then the default is kept, first, and the others follow
// in the same order. rule.median_only: by median (ties by request order),
// no margin. Each working candidate after the first gets vs_winner. The
// order of `outcomes` does not matter, only their contents.
std::vector<CandidateOutcome> Rank(std::vector<CandidateOutcome> outcomes, const RankRule& rule);

// Summarize (per candidate, `ranks[i]` the outcomes of every rank of the
// group for candidates[i], with `pass_sizes` as for ComputeStats) then Rank.
std::vector<CandidateOutcome> RankRanks(const std::vector<CandidateSpec>& candidates,
                                        const std::vector<std::vector<RankOutcome>>& ranks,
                                        const RankRule& rule,
                                        const std::vector<int>& pass_sizes = {});

// How sure a ranking (from Rank, interval rule) is of its winner:
// BELOW_MARGIN when the winner is the default and another working
// candidate has a better estimate (kept by the margin); else DECISIVE when
// the winner Beats every other working candidate; else WITHIN_NOISE (some
// candidate and the winner Beat neither the other: a tie, won by the
// better estimate).
struct Verdict {
  // CONFIDENCE_UNSPECIFIED when no candidate works.
  v1::Confidence confidence = v1::CONFIDENCE_UNSPECIFIED;
  // The runner-up's median over the winner's, minus 1 (0 without one).
  double speedup = 0;
};
Verdict Judge(const std::vector<CandidateOutcome>& ranked);

// Whose timings could still change the decision of `ranked` (from Rank with
// the same rule): the request positions, ascending, of the winner and of
// every working candidate that could still take its place at the end of
// the noise (paired: Compare(o, winner)'s low end; otherwise o's interval's
// low end against the winner's high end): a challenger of a winning
// default, at least min_speedup faster there; the default against a
// winning challenger, less than min_speedup slower there (it would be
// kept); any other candidate against a winning challenger, not slower
// there (the winner does not Beat it). Empty when there is none (the
// decision stands) or nothing works.
std::vector<int> Contenders(const std::vector<CandidateOutcome>& ranked, const RankRule& rule);

}  // namespace autotuned
