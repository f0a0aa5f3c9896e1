#include "daemon/serve/service/dispatch.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

const std::vector<std::string> kNames = {"all_reduce/a", "all_reduce/b", "all_reduce/c"};

// A candidate other than the winner at a size: its time over the winner's,
// paired over 8 passes, as an interval (the point in its middle).
struct Other {
  int index;
  double low;
  double high;
};

// A measured size `count` (bfloat16 elements) won by candidate `winner`.
v1::ProblemResult Size(int64_t count, int winner, const std::vector<Other>& others,
                       v1::Confidence confidence = v1::WITHIN_NOISE) {
  v1::ProblemResult r;
  r.mutable_problem()->set_count(count);
  r.mutable_problem()->set_dtype(v1::BFLOAT16);
  r.set_status(v1::TUNED);
  r.set_confidence(confidence);
  r.set_winner(kNames[winner]);
  r.set_winner_index(winner);
  auto add = [&r](int index, double median) {
    v1::CandidateResult* c = r.add_ranked();
    c->mutable_candidate()->set_impl(kNames[index]);
    c->set_index(index);
    c->set_ok(true);
    c->set_median_us(median);
    return c;
  };
  add(winner, 100);
  for (const Other& o : others) {
    const double point = (o.low + o.high) / 2;
    v1::CandidateResult* c = add(o.index, 100 * point);
    c->set_paired(8);
    c->set_vs_winner(point);
    c->set_vs_winner_low(o.low);
    c->set_vs_winner_high(o.high);
  }
  return r;
}

v1::ProblemResult Unmeasured(int64_t count, v1::DecisionStatus status, int winner) {
  v1::ProblemResult r;
  r.mutable_problem()->set_count(count);
  r.mutable_problem()->set_dtype(v1::BFLOAT16);
  r.set_status(status);
  r.set_winner(winner >= 0 ? kNames[winner] : "");
  r.set_winner_index(winner);
  return r;
}

// "winner:first..last" per range, counts.
std::vector<std::string> Ranges(const std::vector<v1::ProblemResult>& sizes) {
  std::vector<std::string> out;
  const v1::DispatchTable table = BuildDispatchTable(sizes);
  for (const v1::SizeRange& r : table.ranges()) {
    out.push_back(r.winner() + ":" + std::to_string(r.min_count()) + ".." +
                  std::to_string(r.max_count()));
  }
  return out;
}

using Names = std::vector<std::string>;

TEST_CASE("ties that flip between two candidates across sizes are one range") {
  // A B A B: at every size the other one is within the noise (1 % slower by
  // its point estimate).
  std::vector<v1::ProblemResult> sizes = {
      Size(1, 0, {{1, 0.97, 1.05}}), Size(2, 1, {{0, 0.97, 1.05}}),
      Size(4, 0, {{1, 0.97, 1.05}}), Size(8, 1, {{0, 0.97, 1.05}})};
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..8"});  // even: the earlier
  const v1::DispatchTable t = BuildDispatchTable(sizes);
  CHECK(t.ranges(0).winner_index() == 0);
  CHECK(t.ranges(0).max_bytes() == 16);
  // Where b's estimates are better overall, b takes the range.
  sizes.push_back(Size(16, 1, {{0, 0.99, 1.07}}));
  CHECK(Ranges(sizes) == Names{"all_reduce/b:1..16"});
  CHECK(TablePicks(sizes) == std::vector<int>{1, 1, 1, 1, 1});
}

TEST_CASE("a change of winner beyond the noise stays a change of range") {
  // a wins the small sizes and b the large ones, each beyond the noise (the
  // other's interval wholly above 1), with a tie at the crossing (size 8),
  // which goes to the better estimate there.
  std::vector<v1::ProblemResult> sizes = {
      Size(1, 0, {{1, 1.1, 1.3}}, v1::DECISIVE),   Size(2, 0, {{1, 1.05, 1.2}}, v1::DECISIVE),
      Size(4, 0, {{1, 1.02, 1.1}}, v1::DECISIVE),  Size(8, 1, {{0, 0.98, 1.04}}),
      Size(16, 1, {{0, 1.05, 1.2}}, v1::DECISIVE), Size(32, 1, {{0, 1.1, 1.3}}, v1::DECISIVE)};
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..4", "all_reduce/b:8..32"});
  // A size won within the noise by a third candidate among a's: a's.
  sizes[1] = Size(2, 2, {{0, 0.98, 1.04}, {1, 1.1, 1.2}});
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..4", "all_reduce/b:8..32"});
  // ... but not where a is slower than it beyond the noise.
  sizes[1] = Size(2, 2, {{0, 1.02, 1.1}, {1, 1.1, 1.2}}, v1::DECISIVE);
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..1", "all_reduce/c:2..2", "all_reduce/a:4..4",
                               "all_reduce/b:8..32"});
}

TEST_CASE("a default kept by the margin but measurably slower is not used") {
  // At size 1 the daemon kept a (the default: b is 1 to 3 % faster, under
  // the margin); b wins size 2 beyond the noise.
  const std::vector<v1::ProblemResult> sizes = {
      Size(1, 0, {{1, 0.97, 0.99}}, v1::BELOW_MARGIN), Size(2, 1, {{0, 1.1, 1.2}}, v1::DECISIVE)};
  CHECK(AllowedAt(sizes[0]) == std::vector<int>{1});
  CHECK(Ranges(sizes) == Names{"all_reduce/b:1..2"});
}

TEST_CASE("who may serve a size: not measurably slower than any other candidate") {
  // b and c tie the winner a.
  CHECK(AllowedAt(Size(1, 0, {{1, 0.9, 1.02}, {2, 0.99, 1.2}})) == std::vector<int>{0, 1, 2});
  // b is faster than a beyond the noise (kept by a margin), and than c,
  // which ties a.
  CHECK(AllowedAt(Size(1, 0, {{1, 0.9, 0.95}, {2, 0.99, 1.2}})) == std::vector<int>{1});
  // c's interval lies wholly above b's, though both overlap a's.
  CHECK(AllowedAt(Size(1, 0, {{1, 0.85, 1.0}, {2, 1.0, 1.2}})) == std::vector<int>{0, 1, 2});
  CHECK(AllowedAt(Size(1, 0, {{1, 0.85, 1.0}, {2, 1.01, 1.2}})) == std::vector<int>{0, 1});
  // Unpaired: the ratio's interval from the two median intervals.
  v1::ProblemResult unpaired = Size(1, 0, {{1, 1, 1}});
  unpaired.mutable_ranked(0)->set_median_low_us(98);
  unpaired.mutable_ranked(0)->set_median_high_us(102);
  v1::CandidateResult* b = unpaired.mutable_ranked(1);
  b->set_paired(0);
  b->set_median_us(104);
  b->set_median_low_us(101);
  b->set_median_high_us(107);
  CHECK(AllowedAt(unpaired) == std::vector<int>{0, 1});
  b->set_median_low_us(103);
  CHECK(AllowedAt(unpaired) == std::vector<int>{0});
  // No intervals at all (a daemon that predates them): the fastest median.
  b->set_median_low_us(0);
  b->set_median_high_us(0);
  b->set_median_us(99);
  unpaired.mutable_ranked(0)->set_median_low_us(0);
  CHECK(AllowedAt(unpaired) == std::vector<int>{1});
  // Not measured: nothing to say.
  CHECK(AllowedAt(Unmeasured(1, v1::FALLBACK, 0)).empty());
  CHECK(AllowedAt(Unmeasured(1, v1::FAILED, -1)).empty());
}

TEST_CASE("sizes not measured keep their answer's winner; sizes without one split the table") {
  std::vector<v1::ProblemResult> sizes = {Size(1, 1, {{0, 0.97, 1.05}}),
                                          Unmeasured(2, v1::FALLBACK, 0),
                                          Size(4, 1, {{0, 0.97, 1.05}})};
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..4"});
  sizes = {Size(1, 0, {{1, 0.97, 1.05}}), Size(2, 1, {{0, 0.97, 1.05}}),
           Unmeasured(4, v1::FAILED, -1), Size(8, 1, {{0, 0.97, 1.05}}),
           Size(16, 0, {{1, 0.97, 1.05}})};
  CHECK(Ranges(sizes) == Names{"all_reduce/a:1..2", ":4..4", "all_reduce/a:8..16"});
  CHECK(BuildDispatchTable(sizes).ranges(1).winner_index() == -1);
  CHECK(TablePicks(sizes) == std::vector<int>{0, 0, -1, 0, 0});
}

TEST_CASE("every range's candidate may serve each size inside it; the same sizes, the same "
          "table") {
  uint32_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<double>(seed >> 8) / (1u << 24);  // [0, 1)
  };
  for (int sweep = 0; sweep < 200; ++sweep) {
    std::vector<v1::ProblemResult> sizes;
    for (int k = 0; k < 8; ++k) {
      const int winner = static_cast<int>(next() * 3);
      std::vector<Other> others;
      for (int i = 0; i < 3; ++i) {
        if (i == winner) continue;
        const double low = 0.95 + 0.2 * next();
        others.push_back({i, low, low + 0.02 + 0.1 * next()});
      }
      sizes.push_back(Size(int64_t{1} << k, winner, others));
    }
    const std::vector<int> picks = TablePicks(sizes);
    for (size_t k = 0; k < sizes.size(); ++k) {
      const std::vector<int> allowed = AllowedAt(sizes[k]);
      CHECK(std::find(allowed.begin(), allowed.end(), picks[k]) != allowed.end());
    }
    CHECK(TablePicks(sizes) == picks);
    CHECK(BuildDispatchTable(sizes).SerializeAsString() ==
          BuildDispatchTable(sizes).SerializeAsString());
  }
}

}  // namespace
}  // namespace autotuned
