#include "daemon/serve/service/dispatch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace autotuned {
namespace {

// Bytes of one rank's `count` elements (the size a caller dispatches on).
int64_t CountBytes(const v1::ProblemResult& r) {
  return r.problem().count() * (r.problem().dtype() == v1::FLOAT32 ? 4 : 2);
}

// A candidate's time over its size's winner's: an interval and a point.
struct Standing {
  double low = 0;
  double point = 0;
  double high = 0;
};

// Each working candidate's Standing by request position; empty without a
// measured winner.
std::map<int, Standing> Standings(const v1::ProblemResult& r) {
  std::map<int, Standing> out;
  if (r.status() != v1::TUNED && r.status() != v1::CACHED) return out;
  std::map<int, const v1::CandidateResult*> ok;
  for (const v1::CandidateResult& c : r.ranked()) {
    if (c.ok() && std::isfinite(c.median_us()) && c.median_us() > 0) ok[c.index()] = &c;
  }
  const auto found = ok.find(r.winner_index());
  if (found == ok.end()) return out;
  const v1::CandidateResult& w = *found->second;
  for (const auto& [i, cp] : ok) {
    const v1::CandidateResult& c = *cp;
    const double point = c.median_us() / w.median_us();
    if (i == w.index()) {
      out[i] = {1, 1, 1};
    } else if (c.paired() > 0 && 0 < c.vs_winner_low() && c.vs_winner_low() <= c.vs_winner_high()) {
      out[i] = {c.vs_winner_low(), c.vs_winner() != 0 ? c.vs_winner() : point, c.vs_winner_high()};
    } else if (0 < w.median_low_us() && w.median_low_us() <= w.median_high_us() &&
               0 < c.median_low_us() && c.median_low_us() <= c.median_high_us()) {
      out[i] = {c.median_low_us() / w.median_high_us(), point,
                c.median_high_us() / w.median_low_us()};
    } else {
      out[i] = {point, point, point};
    }
  }
  return out;
}

std::set<int> Allowed(const std::map<int, Standing>& stand) {
  std::set<int> out;
  if (stand.empty()) return out;
  double ceiling = INFINITY;
  for (const auto& [i, s] : stand) ceiling = std::min(ceiling, s.high);
  for (const auto& [i, s] : stand) {
    if (s.low <= ceiling) out.insert(i);
  }
  return out;
}

double Cost(const std::map<int, Standing>& stand, int i) {
  if (stand.empty()) return 0;
  double best = INFINITY;
  for (const auto& [j, s] : stand) best = std::min(best, s.point);
  const double point = stand.at(i).point;
  return best > 0 && point > 0 ? std::log(point / best) : 0.0;
}

// (ranges, cost, picks) of an assignment; ordered as compared.
using Path = std::tuple<int, double, std::vector<int>>;

// The assignment of sizes [begin, end) (each with a choice) with the fewest
// changes of candidate, then the least cost, then the smallest picks.
std::vector<int> FewestRanges(const std::vector<std::map<int, Standing>>& stands,
                              const std::vector<std::set<int>>& ok, const std::set<int>& pool,
                              size_t begin, size_t end) {
  std::map<int, Path> best;  // by the last size's pick
  for (size_t k = begin; k < end; ++k) {
    std::set<int> choices;
    std::set_intersection(ok[k].begin(), ok[k].end(), pool.begin(), pool.end(),
                          std::inserter(choices, choices.begin()));
    if (choices.empty()) choices = ok[k];
    std::map<int, Path> next;
    for (int i : choices) {
      const double here = Cost(stands[k], i);
      if (k == begin) {
        next[i] = Path{1, here, {i}};
        continue;
      }
      bool first = true;
      Path option;
      for (const auto& [p, path] : best) {
        Path o{std::get<0>(path) + (p != i ? 1 : 0), std::get<1>(path) + here, std::get<2>(path)};
        if (first || o < option) option = std::move(o);
        first = false;
      }
      std::get<2>(option).push_back(i);
      next[i] = std::move(option);
    }
    best = std::move(next);
  }
  const Path* min = nullptr;
  for (const auto& [p, path] : best) {
    if (min == nullptr || path < *min) min = &path;
  }
  return std::get<2>(*min);
}

// The name a range shows for candidate `i`: the answer's winner where it
// won, else its name in the ranking.
std::string NameOf(const v1::ProblemResult& r, int i) {
  if (r.winner_index() == i) return r.winner();
  for (const v1::CandidateResult& c : r.ranked()) {
    if (c.index() != i) continue;
    return c.candidate().has_client() ? c.candidate().client().name() : c.candidate().impl();
  }
  return "";
}

}  // namespace

std::vector<int> AllowedAt(const v1::ProblemResult& result) {
  const std::set<int> allowed = Allowed(Standings(result));
  return std::vector<int>(allowed.begin(), allowed.end());
}

std::vector<int> TablePicks(const std::vector<v1::ProblemResult>& sizes) {
  const size_t n = sizes.size();
  std::vector<std::map<int, Standing>> stands;
  std::vector<int> fixed;
  std::vector<std::set<int>> ok;
  for (const v1::ProblemResult& r : sizes) {
    stands.push_back(Standings(r));
    fixed.push_back(!r.winner().empty() && r.status() != v1::FAILED ? r.winner_index() : -1);
    if (!stands.back().empty()) {
      ok.push_back(Allowed(stands.back()));
    } else {
      ok.push_back(fixed.back() >= 0 ? std::set<int>{fixed.back()} : std::set<int>{});
    }
  }
  // The candidates a table prefers: the sizes' winners where allowed, and
  // the best estimate where a size's winner is not.
  std::set<int> pool;
  for (size_t k = 0; k < n; ++k) {
    if (ok[k].count(fixed[k]) > 0) {
      pool.insert(fixed[k]);
    } else if (!stands[k].empty()) {
      int best = *ok[k].begin();
      for (int i : ok[k]) {
        if (stands[k].at(i).point < stands[k].at(best).point) best = i;
      }
      pool.insert(best);
    }
  }
  std::vector<int> picks(n, -1);
  size_t k = 0;
  while (k < n) {
    if (ok[k].empty()) {
      ++k;
      continue;
    }
    size_t end = k;
    while (end < n && !ok[end].empty()) ++end;
    const std::vector<int> run = FewestRanges(stands, ok, pool, k, end);
    std::copy(run.begin(), run.end(), picks.begin() + k);
    k = end;
  }
  return picks;
}

v1::DispatchTable BuildDispatchTable(const std::vector<v1::ProblemResult>& sizes) {
  const std::vector<int> picks = TablePicks(sizes);
  v1::DispatchTable table;
  v1::SizeRange* open = nullptr;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const v1::ProblemResult& r = sizes[k];
    if (open != nullptr && picks[k] >= 0 && open->winner_index() == picks[k] &&
        open->winner() == NameOf(r, picks[k])) {
      open->set_max_count(r.problem().count());
      open->set_max_bytes(CountBytes(r));
      continue;
    }
    open = table.add_ranges();
    open->set_min_count(r.problem().count());
    open->set_max_count(r.problem().count());
    open->set_min_bytes(CountBytes(r));
    open->set_max_bytes(CountBytes(r));
    open->set_winner(picks[k] >= 0 ? NameOf(r, picks[k]) : "");
    open->set_winner_index(picks[k] >= 0 ? picks[k] : r.winner_index());
    if (picks[k] < 0) open = nullptr;
  }
  return table;
}

}  // namespace autotuned
