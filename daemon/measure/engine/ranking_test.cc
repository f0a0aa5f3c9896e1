#include "daemon/measure/engine/ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

// A working candidate (ok) with median `median` and the interval
// [median - noise, median + noise], or a ruled-out one.
CandidateOutcome make(int index, bool ok, double median, double noise = 0) {
  CandidateOutcome o;
  o.index = index;
  o.ok = ok;
  o.stats.median_us = median;
  o.stats.median_low_us = median - noise;
  o.stats.median_high_us = median + noise;
  return o;
}

RankRule Margin(double min_speedup) {
  RankRule rule;
  rule.min_speedup = min_speedup;
  return rule;
}

std::vector<int> Order(const std::vector<CandidateOutcome>& ranked) {
  std::vector<int> order;
  for (const auto& o : ranked) order.push_back(o.index);
  return order;
}

std::vector<double> Iota(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST_CASE("the median's interval: order statistics of the binomial at 95 %") {
  double low = 0, high = 0;
  // n = 20: P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6) = 0.0577, so x(6)..x(15).
  MedianInterval(Iota(20), &low, &high);
  CHECK(low == 6);
  CHECK(high == 15);
  // n = 6: P(B <= 0) = 1/64 = 0.0156: x(1)..x(6); n = 9: P(B <= 1) = 0.0195.
  MedianInterval(Iota(6), &low, &high);
  CHECK((low == 1 && high == 6));
  MedianInterval(Iota(9), &low, &high);
  CHECK((low == 2 && high == 8));
  // n = 100: x(40)..x(61), the textbook interval.
  MedianInterval(Iota(100), &low, &high);
  CHECK((low == 40 && high == 61));
  // Below 6 samples: the whole range.
  MedianInterval(Iota(3), &low, &high);
  CHECK((low == 1 && high == 3));
  // Thousands of samples: the sums stay finite (n = 10000: x(4902)..x(5099)).
  MedianInterval(Iota(10000), &low, &high);
  CHECK((low == 4902 && high == 5099));
  MedianInterval({}, &low, &high);
  CHECK((std::isinf(low) && std::isinf(high)));
  Stats s = ComputeStats({5, 1, 4, 2, 3, 9, 8, 7, 6});
  CHECK((s.median_low_us == 2 && s.median_high_us == 8));
}

TEST_CASE("a tie within noise goes to the better estimate, not the earlier candidate") {
  // 1 is faster by median; its interval overlaps the default's: a tie,
  // which the better estimate wins (the margin 0 keeps nothing).
  std::vector<CandidateOutcome> ranked = Rank({make(0, true, 10, 1), make(1, true, 9.5, 1)}, Margin(0));
  CHECK(Order(ranked) == std::vector<int>{1, 0});
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
  CHECK(Judge(ranked).speedup == Approx(10 / 9.5 - 1));
  // Within the 1 % margin of the default 0.5 % faster is not enough: kept.
  ranked = Rank({make(0, true, 10, 1), make(1, true, 9.95, 1)}, Margin(0.01));
  CHECK(Order(ranked) == std::vector<int>{0, 1});
  CHECK(Judge(ranked).confidence == v1::BELOW_MARGIN);
  // Between challengers that are both far ahead of the default, no margin:
  // the better estimate, 3, over 2, which it ties.
  ranked = Rank({make(0, true, 20, 1), make(1, true, 15, 1), make(2, true, 10, 1),
                 make(3, true, 9.5, 1)}, Margin(0.02));
  CHECK(Order(ranked) == std::vector<int>{3, 2, 1, 0});
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
}

TEST_CASE("the margin: faster beyond noise but by less than min_speedup keeps the default") {
  const std::vector<CandidateOutcome> in = {make(0, true, 10.3, 0.1), make(1, true, 10, 0.1)};
  std::vector<CandidateOutcome> ranked = Rank(in, Margin(0.05));  // 3 % < 5 %
  CHECK(Order(ranked) == std::vector<int>{0, 1});
  CHECK(Judge(ranked).confidence == v1::BELOW_MARGIN);
  ranked = Rank(in, Margin(0.02));  // 3 % >= 2 %
  CHECK(Order(ranked) == std::vector<int>{1, 0});
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  CHECK(Judge(ranked).speedup == Approx(0.03));
  // The margin protects the default only: 2 beats 1 beyond the noise by
  // 1 %, under the 2 % margin, and wins, decisively.
  ranked = Rank({make(0, true, 20, 0.01), make(1, true, 10.1, 0.01), make(2, true, 10, 0.01)},
                Margin(0.02));
  CHECK(Order(ranked) == std::vector<int>{2, 1, 0});
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  // A ruled-out first candidate makes the next one the default.
  ranked = Rank({make(0, false, 0), make(1, true, 10.3, 0.1), make(2, true, 10, 0.1)}, Margin(0.05));
  CHECK(Order(ranked) == std::vector<int>{1, 2, 0});
  CHECK(Judge(ranked).confidence == v1::BELOW_MARGIN);
}

TEST_CASE("decisive: the winner's interval overlaps no other") {
  std::vector<CandidateOutcome> ranked =
      Rank({make(0, true, 30, 1), make(1, true, 10, 1), make(2, true, 20, 1)}, Margin(0.01));
  CHECK(Order(ranked) == std::vector<int>{1, 2, 0});
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  CHECK(Judge(ranked).speedup == Approx(1.0));
  ranked = Rank({make(0, true, 10, 1)}, Margin(0.01));
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  CHECK(Judge(ranked).speedup == 0);
  CHECK(Judge(Rank({make(0, false, 0)}, Margin(0))).confidence == v1::CONFIDENCE_UNSPECIFIED);
}

TEST_CASE("the rule before intervals: the fastest median, whatever the noise") {
  RankRule median;
  median.median_only = true;
  const std::vector<CandidateOutcome> ranked =
      Rank({make(0, true, 10, 1), make(1, true, 9.9, 1), make(2, true, 9.9, 1)}, median);
  CHECK(Order(ranked) == std::vector<int>{1, 2, 0});
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
}

TEST_CASE("contenders: the winner and whoever overlaps it, the same for the same timings") {
  const std::vector<CandidateOutcome> in = {make(0, true, 10, 1), make(1, true, 10.5, 1),
                                            make(2, true, 30, 1), make(3, false, 0)};
  const std::vector<int> next = Contenders(Rank(in, Margin(0)), Margin(0));
  CHECK(next == std::vector<int>{0, 1});
  CHECK(Contenders(Rank(in, Margin(0)), Margin(0)) == next);
  // Nothing overlaps: the decision stands.
  CHECK(Contenders(Rank({make(0, true, 10, 1), make(1, true, 30, 1)}, Margin(0)), Margin(0)).empty());
  // A later challenger that could not reach the margin even at the
  // intervals' ends (10.1 / 9.9 - 1 = 2 % < 5 %) no longer contends...

  CHECK(Contenders(Rank({make(0, true, 10, 0.1), make(1, true, 10, 0.1)}, Margin(0.05)), Margin(0.05)).empty());
  // ... while one faster beyond the noise, by less than the margin so far,
  // still could (9.6 x 1.05 <= 10.1).
  CHECK(Contenders(Rank({make(0, true, 10, 0.1), make(1, true, 9.7, 0.1)}, Margin(0.05)),
                   Margin(0.05)) == std::vector<int>{0, 1});
  // A challenger that overlaps a winning challenger still contends (1
  // against 2); the default, 2 faster than it beyond the noise, does not.
  const std::vector<CandidateOutcome> three =
      Rank({make(0, true, 10, 0.5), make(1, true, 9.6, 0.3), make(2, true, 9, 0.4)}, Margin(0));
  CHECK(Order(three) == std::vector<int>{2, 1, 0});
  CHECK(Contenders(three, Margin(0)) == std::vector<int>{1, 2});
  CHECK(Contenders(Rank({make(0, false, 0)}, Margin(0)), Margin(0)).empty());
}

TEST_CASE("statistics over iterations") {
  Stats s = ComputeStats({4, 1, 3, 2});
  CHECK(s.min_us == 1);
  CHECK(s.max_us == 4);
  CHECK(s.mean_us == Approx(2.5));
  CHECK(s.median_us == Approx(2.5));
  CHECK(s.spread == Approx(3 / 2.5));
  CHECK(ComputeStats({7}).median_us == 7);
  CHECK(std::isinf(ComputeStats({}).mean_us));
}

TEST_CASE("an iteration's time is the slowest rank's") {
  std::vector<RankOutcome> ranks(2);
  ranks[0].iteration_us = {1, 5, 1};
  ranks[1].iteration_us = {2, 2, 2};
  CandidateOutcome o = Summarize(0, {"x", {}}, ranks);
  REQUIRE(o.ok);
  CHECK(o.stats.max_us == 5);
  CHECK(o.stats.min_us == 2);
  CHECK(o.stats.median_us == 2);
  CHECK(o.rank_mean_us == std::vector<double>{7.0 / 3, 2.0});
}

TEST_CASE("a burst in one pass widens the interval to the passes' medians") {
  // Three passes of 10 on one rank: a at 100-102 us throughout; b at 95-97
  // us except 6 iterations of its last pass at 110 us (a burst of load).
  std::vector<RankOutcome> a(1), b(1);
  for (int i = 0; i < 30; ++i) {
    a[0].iteration_us.push_back(100 + i % 3);
    b[0].iteration_us.push_back(i >= 20 && i % 10 < 6 ? 110 : 95 + i % 3);
  }
  const std::vector<int> passes = {10, 10, 10};
  // Over the samples alone b is faster beyond the noise: x(10)..x(21) of
  // its 30 samples are 96..97, below a's 100..102.
  std::vector<CandidateOutcome> ranked =
      Rank({Summarize(0, {"a", {}}, a), Summarize(1, {"b", {}}, b)}, Margin(0));
  CHECK(ranked[0].index == 1);
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  // Over the passes: b's medians are 96, 96 and 110, its interval 96..110
  // overlaps a's: a tie, which b, the better estimate, still wins. b's
  // median is the same.
  const CandidateOutcome b_passes = Summarize(1, {"b", {}}, b, passes);
  CHECK((b_passes.stats.median_low_us == 96 && b_passes.stats.median_high_us == 110));
  CHECK(b_passes.stats.median_us == ranked[0].stats.median_us);
  ranked = Rank({Summarize(0, {"a", {}}, a, passes), b_passes}, Margin(0));
  CHECK(ranked[0].index == 1);
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
  // One pass, or sizes that do not cover the samples: the samples' interval.
  for (const std::vector<int>& sizes : {std::vector<int>{30}, std::vector<int>{10, 10}}) {
    const Stats s = Summarize(1, {"b", {}}, b, sizes).stats;
    CHECK((s.median_low_us == 96 && s.median_high_us == 97));
  }
}

// A working candidate with these pass medians (NaN: not run in that pass)
// and a wide own interval, so that only the pairs can decide.
CandidateOutcome Passes(int index, std::vector<double> medians) {
  CandidateOutcome o = make(index, true, medians[0], 1000);
  o.pass_median_us = std::move(medians);
  return o;
}

TEST_CASE("paired passes: the ratios' median and its interval at 99 %") {
  const double nan = std::nan("");
  // 8 pairs: at 99 % no k > 1 qualifies (P(B <= 0) = 1/256), so [min, max].
  CandidateOutcome a = Passes(1, {90, 99, 95, 97, 94, 96, 98, 93});
  const CandidateOutcome b = Passes(0, {100, 100, 100, 100, 100, 100, 100, 100});
  Ratio r = Compare(a, b);
  CHECK(r.pairs == 8);
  CHECK(r.median == Approx(0.955));
  CHECK((r.low == Approx(0.90) && r.high == Approx(0.99)));
  CHECK(Beats(a, b));
  CHECK_FALSE(Beats(b, a));
  // One pass of the eight on the other side: no longer beyond the noise.
  a.pass_median_us[3] = 101;
  CHECK_FALSE(Beats(a, b));
  CHECK_FALSE(Beats(b, a));
  // Passes that only one of them ran do not pair: 7 pairs fall back to the
  // candidates' own intervals (here wide, so a tie).
  a.pass_median_us = {90, 90, 90, nan, 90, 90, 90, 90, 90};
  CHECK(Compare(a, b).pairs == 0);
  CHECK_FALSE(Beats(a, b));
  // 16 pairs: x(3)..x(14) (P(B <= 2) = 0.0021 <= 0.005 < P(B <= 3)), so two
  // passes on the wrong side still leave a beyond the noise.
  a.pass_median_us.assign(16, 95);
  a.pass_median_us[2] = a.pass_median_us[9] = 105;
  const CandidateOutcome b16 = Passes(0, std::vector<double>(16, 100));
  r = Compare(a, b16);
  CHECK((r.pairs == 16 && r.low == Approx(0.95) && r.high == Approx(0.95)));
  CHECK(Beats(a, b16));
  a.pass_median_us[5] = 105;  // a third: x(14) is 1.05
  CHECK_FALSE(Beats(a, b16));
}

TEST_CASE("paired passes: a burst that falls on every candidate of a pass cancels out") {
  // a 100 us, b 95 us, except pass 5, where a burst adds 50 us to both.
  std::vector<RankOutcome> a(1), b(1);
  std::vector<int> sizes;
  for (int p = 0; p < 8; ++p) {
    for (int i = 0; i < 3; ++i) {
      a[0].iteration_us.push_back(100 + (p == 5 ? 50 : 0) + i);
      b[0].iteration_us.push_back(95 + (p == 5 ? 50 : 0) + i);
    }
    sizes.push_back(3);
  }
  std::vector<CandidateOutcome> ranked =
      Rank({Summarize(0, {"a", {}}, a, sizes), Summarize(1, {"b", {}}, b, sizes)}, Margin(0.01));
  REQUIRE(ranked[0].index == 1);
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  // The runner-up against the winner: a's time over b's, per pass.
  CHECK(ranked[1].vs_winner.pairs == 8);
  CHECK(ranked[1].vs_winner.median == Approx(101.0 / 96.0));
  CHECK(ranked[1].vs_winner.low > 1.0);
  CHECK(ranked[0].vs_winner.pairs == 0);  // the winner's own
  // Their own intervals, over the passes' medians, overlap: without the
  // pairs (one pass id each), the burst would have made a tie.
  CHECK(ranked[0].stats.median_high_us >= ranked[1].stats.median_low_us);
}

TEST_CASE("paired passes: pass ids place each pass's median; ids that do not fit give none") {
  std::vector<RankOutcome> r(1);
  r[0].iteration_us = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int> sizes = {2, 2, 2, 2};
  const CandidateOutcome o = Summarize(0, {"a", {}}, r, sizes, {0, 1, 4, 6});
  REQUIRE(o.pass_median_us.size() == 7);
  CHECK(o.pass_median_us[0] == 1.5);
  CHECK(o.pass_median_us[4] == 5.5);
  CHECK(o.pass_median_us[6] == 7.5);
  CHECK(std::isnan(o.pass_median_us[2]));
  CHECK(Summarize(0, {"a", {}}, r, sizes).pass_median_us.size() == 4);
  for (const std::vector<int>& ids :
       {std::vector<int>{0, 1, 1, 2}, std::vector<int>{0, 1, 2}, std::vector<int>{0, -1, 2, 3},
        std::vector<int>{0, 1, 2, 1 << 20}}) {
    CHECK(Summarize(0, {"a", {}}, r, sizes, ids).pass_median_us.empty());
  }
  CHECK(Summarize(0, {"a", {}}, r, {8}).pass_median_us.empty());  // one pass
}

TEST_CASE("paired passes: who contends") {
  const std::vector<double> base(8, 100);
  std::vector<double> same = base;
  same[0] = 99;
  same[1] = 101;
  std::vector<double> slower(8, 110);
  const RankRule rule = Margin(0.01);
  // The default and an identical later one: a tie, both contend; equal
  // estimates keep the default.
  std::vector<CandidateOutcome> ranked = Rank({Passes(0, base), Passes(1, same)}, rule);
  REQUIRE(ranked[0].index == 0);
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
  CHECK(Contenders(ranked, rule) == std::vector<int>{0, 1});
  // A later one slower in every pass cannot displace it: the decision stands.
  ranked = Rank({Passes(0, base), Passes(1, slower)}, rule);
  CHECK(Contenders(ranked, rule).empty());
  CHECK(Judge(ranked).confidence == v1::DECISIVE);
  // Faster in every pass, by less than the margin: kept, below the margin.
  std::vector<double> bit(8, 99.5);
  ranked = Rank({Passes(0, base), Passes(1, bit)}, rule);
  CHECK(ranked[0].index == 0);
  CHECK(Judge(ranked).confidence == v1::BELOW_MARGIN);
  // Faster in every pass by 10 %: displaces the default, which is beaten.
  ranked = Rank({Passes(0, slower), Passes(1, base)}, rule);
  CHECK(ranked[0].index == 1);
  CHECK(Contenders(ranked, rule).empty());
  // A later one faster by the medians of its pairs, though not in every
  // pass: it wins the tie, and the default contends until its lead is
  // beyond the margin at the end of the noise.
  std::vector<double> mostly = {95, 97, 101, 96, 102, 94, 97, 96};
  ranked = Rank({Passes(0, base), Passes(1, mostly)}, rule);
  REQUIRE(ranked[0].index == 1);
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
  CHECK(ranked[1].vs_winner.median > 1.0);
  CHECK(ranked[1].vs_winner.low < 1.0);
  CHECK(Contenders(ranked, rule) == std::vector<int>{0, 1});
  // Two challengers far ahead of the default, tied with each other: both
  // contend, the default does not.
  ranked = Rank({Passes(0, slower), Passes(1, mostly), Passes(2, same)}, rule);
  REQUIRE(ranked[0].index == 1);
  CHECK(Contenders(ranked, rule) == std::vector<int>{1, 2});
}

// One rank's samples over 8 passes of 3 iterations around `us`: each
// pass's median within 1 % of it, moving from pass to pass with `phase`.
std::vector<RankOutcome> CleanPasses(double us, int phase, std::vector<int>* sizes) {
  std::vector<RankOutcome> r(1);
  sizes->clear();
  for (int p = 0; p < 8; ++p) {
    const double pass = us * (1 + 0.005 * ((p * phase) % 5 - 2));
    for (int i = 0; i < 3; ++i) r[0].iteration_us.push_back(pass * (1 + 0.002 * (i - 1)));
    sizes->push_back(3);
  }
  return r;
}

TEST_CASE("a candidate 10 % faster over 8 clean passes wins decisively, wherever it is listed") {
  std::vector<int> sizes;
  const std::vector<RankOutcome> slow = CleanPasses(110, 2, &sizes);
  const std::vector<RankOutcome> fast = CleanPasses(100, 3, &sizes);
  for (bool fast_first : {false, true}) {
    const std::vector<CandidateOutcome> in =
        fast_first ? std::vector<CandidateOutcome>{Summarize(0, {"fast", {}}, fast, sizes),
                                                   Summarize(1, {"slow", {}}, slow, sizes)}
                   : std::vector<CandidateOutcome>{Summarize(0, {"slow", {}}, slow, sizes),
                                                   Summarize(1, {"fast", {}}, fast, sizes)};
    const std::vector<CandidateOutcome> ranked = Rank(in, Margin(0.01));
    CHECK(ranked[0].candidate.impl == "fast");
    CHECK(Judge(ranked).confidence == v1::DECISIVE);
    CHECK(ranked[1].vs_winner.pairs == 8);
    CHECK(ranked[1].vs_winner.median == Approx(1.1).epsilon(0.02));
    CHECK(ranked[1].vs_winner.low > 1.0);
    CHECK(Contenders(ranked, Margin(0.01)).empty());
  }
}

TEST_CASE("the estimates: paired against the candidate measured in the most passes") {
  const double nan = std::nan("");
  // The default ran the 8 fixed passes only; a and b contended for 8 more.
  // Against the default, in its passes, a looks faster (0.500 against
  // 0.505); over all 16 passes b is (its ratios to a: 1.01 eight times,
  // 0.95 eight times, median 0.98), and so are the estimates.
  std::vector<double> d(16, nan), a(16, 100), b(16, 95);
  for (int p = 0; p < 8; ++p) {
    d[p] = 200;
    b[p] = 101;
  }
  const std::vector<CandidateOutcome> in = {Passes(0, d), Passes(1, a), Passes(2, b)};
  const std::vector<double> e = Estimates(in);
  CHECK(e[1] == 100);  // the reference: its median
  CHECK(e[2] == Approx(98));
  CHECK(e[0] == 200);  // 8 pairs with a: 2.0 each
  const std::vector<CandidateOutcome> ranked = Rank(in, Margin(0.01));
  CHECK(Order(ranked) == std::vector<int>{2, 1, 0});
  CHECK(Judge(ranked).confidence == v1::WITHIN_NOISE);
  // Unpaired (fewer than 8 pairs with the reference): the medians.
  CHECK(Estimates({make(0, true, 7, 1), make(1, true, 5, 1), make(2, false, 0)}) ==
        std::vector<double>{7, 5, std::numeric_limits<double>::infinity()});
}

TEST_CASE("the same timings in any order give the same ranking, verdict and contenders") {
  // Two candidates with equal timings (1 and 3), a tie near them (2), a
  // clear loser and a ruled-out one; unpaired and paired.
  const std::vector<std::vector<CandidateOutcome>> inputs = {
      {make(0, true, 12, 1), make(1, true, 10, 1), make(2, true, 10.4, 1), make(3, true, 10, 1),
       make(4, false, 0)},
      {Passes(0, std::vector<double>(8, 120)), Passes(1, {100, 101, 99, 100, 102, 98, 100, 100}),
       Passes(2, {101, 100, 103, 99, 101, 100, 104, 101}),
       Passes(3, {100, 101, 99, 100, 102, 98, 100, 100}), make(4, false, 0)}};
  for (const std::vector<CandidateOutcome>& base : inputs) {
    for (double margin : {0.0, 0.01, 0.5}) {
      const std::vector<CandidateOutcome> first = Rank(base, Margin(margin));
      std::vector<size_t> perm = {0, 1, 2, 3, 4};
      int seen = 0;
      do {
        std::vector<CandidateOutcome> in;
        for (size_t i : perm) in.push_back(base[i]);
        const std::vector<CandidateOutcome> ranked = Rank(in, Margin(margin));
        CHECK(Order(ranked) == Order(first));
        CHECK(Judge(ranked).confidence == Judge(first).confidence);
        CHECK(Contenders(ranked, Margin(margin)) == Contenders(first, Margin(margin)));
        for (size_t i = 0; i < ranked.size(); ++i) {
          CHECK(ranked[i].vs_winner.median == first[i].vs_winner.median);
        }
        ++seen;
      } while (std::next_permutation(perm.begin(), perm.end()));
      CHECK(seen == 120);
      // Equal estimates are broken by request position, the one order every
      // rank shares: 1 before 3. A margin of 50 % keeps the default.
      CHECK(Order(first) == (margin < 0.5 ? std::vector<int>{1, 3, 2, 0, 4}
                                          : std::vector<int>{0, 1, 3, 2, 4}));
    }
  }
}

TEST_CASE("RankRanks: the outcomes of every daemon's ranks ranked as on one daemon") {
  std::vector<CandidateSpec> candidates = {{"a", {}}, {"b", {}}, {"c", {}}};
  std::vector<std::vector<RankOutcome>> ranks(3, std::vector<RankOutcome>(4));
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < 4; ++r) ranks[c][r].iteration_us = {10.0 * (c + 1), 10.0 * (c + 1)};
  }
  ranks[0][3].iteration_us = {90, 90};  // a is slow on one remote rank only
  ranks[2][2].status = absl::UnavailableError("daemon d:1 sent no timings");
  std::vector<CandidateOutcome> ranked = RankRanks(candidates, ranks, Margin(0.0));
  REQUIRE(ranked.size() == 3);
  CHECK(ranked[0].candidate.impl == "b");
  CHECK(ranked[1].candidate.impl == "a");
  CHECK(ranked[1].stats.median_us == 90);
  CHECK(ranked[1].rank_mean_us.size() == 4);
  CHECK_FALSE(ranked[2].ok);
  CHECK(ranked[2].reason == "rank 2: UNAVAILABLE: daemon d:1 sent no timings");
}

TEST_CASE("the reason is the rank that failed, not the ranks it aborted") {
  std::vector<RankOutcome> ranks(3);
  ranks[0].status = absl::AbortedError("peer gone");
  ranks[1].status = absl::DataLossError("index 3: got 1, want 2");
  ranks[2].status = absl::AbortedError("peer gone");
  CandidateOutcome o = Summarize(4, {"x", {}}, ranks);
  CHECK_FALSE(o.ok);
  CHECK(o.index == 4);
  CHECK(o.reason == "rank 1: DATA_LOSS: index 3: got 1, want 2");
  CHECK(std::isinf(o.stats.median_us));
}

TEST_CASE("without noise or margin: by median, ties by request order, failures last") {
  std::vector<CandidateOutcome> ranked =
      Rank({make(0, false, 0), make(1, true, 9), make(2, true, 3),
            make(3, true, 9), make(4, false, 0), make(5, true, 3)}, Margin(0.0));
  std::vector<int> order;
  for (const auto& o : ranked) order.push_back(o.index);
  CHECK(order == std::vector<int>{2, 5, 1, 3, 0, 4});
  // Pure: the same input gives the same output.
  std::vector<CandidateOutcome> again =
      Rank({make(0, false, 0), make(1, true, 9), make(2, true, 3),
            make(3, true, 9), make(4, false, 0), make(5, true, 3)}, Margin(0.0));
  for (size_t i = 0; i < ranked.size(); ++i) {
    CHECK(again[i].index == ranked[i].index);
  }
}

}  // namespace
}  // namespace autotuned
