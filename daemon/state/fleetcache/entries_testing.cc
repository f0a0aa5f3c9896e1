#include "daemon/state/fleetcache/entries_testing.h"

#include "daemon/state/cache/key.h"

namespace autotuned::fleetcache {

std::string TestKeyText(int64_t count, const std::string& fingerprint) {
  v1::Problem p;
  p.set_collective(v1::ALL_REDUCE);
  p.set_dtype(v1::FLOAT32);
  p.set_count(count);
  p.add_candidates()->set_impl("all_reduce/ring");
  return CacheKeyText(fingerprint, 4, 4, p, 1);
}

v1::ProblemResult TestRanking() {
  v1::ProblemResult r;
  r.set_status(v1::TUNED);
  r.mutable_problem()->add_candidates()->set_impl("all_reduce/ring");
  r.set_winner("all_reduce/ring");
  r.set_winner_index(0);
  v1::CandidateResult* first = r.add_ranked();
  first->mutable_candidate()->set_impl("all_reduce/ring");
  first->set_ok(true);
  first->set_mean_us(12.5);
  first->set_median_us(12);
  first->set_min_us(11);
  first->set_max_us(15);
  return r;
}

}  // namespace autotuned::fleetcache
