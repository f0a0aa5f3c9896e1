#include "client/cli/sweep_chart.h"

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "client/cli/test_util.h"

namespace autotuned::cli {
namespace {

using testing::ErrorOf;

v1::ProblemResult Size(int64_t count, std::vector<double> medians, int winner,
                       v1::DecisionStatus status = v1::TUNED) {
  v1::ProblemResult r;
  r.mutable_problem()->set_collective(v1::ALL_REDUCE);
  r.mutable_problem()->set_dtype(v1::FLOAT32);
  r.mutable_problem()->set_count(count);
  const char* impls[] = {"all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/ring"};
  for (size_t i = 0; i < medians.size(); ++i) {
    r.mutable_problem()->add_candidates()->set_impl(impls[i]);
    v1::CandidateResult* c = r.add_ranked();
    c->mutable_candidate()->set_impl(impls[i]);
    c->set_index(static_cast<int>(i));
    c->set_ok(std::isfinite(medians[i]));
    c->set_median_us(medians[i]);
    for (int rank = 0; rank < 4; ++rank) c->add_rank_mean_us(medians[i]);
  }
  r.set_status(status);
  if (winner >= 0) {
    r.set_winner_index(winner);
    r.set_winner(impls[winner]);
  }
  return r;
}

TEST_CASE("a sweep becomes one line per candidate and a winner per size") {
  const std::vector<v1::ProblemResult> sizes = {
      Size(256, {10, 20, 30}, 0), Size(1024, {40, INFINITY, 35}, 2),
      Size(4096, {90, 80, 70}, -1, v1::FAILED)};
  absl::StatusOr<plot::LatencyChart> chart = SweepChart(sizes);
  REQUIRE(chart.ok());
  CHECK(chart->title == "all_reduce float32, 4 ranks: median latency per size");
  CHECK(chart->series == std::vector<std::string>{"one_shot", "two_shot", "ring"});
  CHECK(chart->sizes_bytes == std::vector<double>{1024, 4096, 16384});
  CHECK(chart->latency_us[0] == std::vector<double>{10, 40, 90});
  CHECK(chart->latency_us[2] == std::vector<double>{30, 35, 70});
  CHECK(std::isnan(chart->latency_us[1][1]));  // ruled out: no point
  CHECK(chart->winner == std::vector<int>{0, 2, -1});
  CHECK(plot::DrawLatencyChart(*chart).ok());
  CHECK_THAT(ErrorOf(SweepChart({}).status()), Catch::Contains("no sizes"));
}

TEST_CASE("a saved sweep is read back line by line") {
  const std::string text =
      "{\"size_result\": {\"problem\": {\"collective\": \"ALL_REDUCE\", \"dtype\": \"FLOAT32\", "
      "\"count\": \"256\"}, \"status\": \"TUNED\", \"winner\": \"all_reduce/ring\"}, \"done\": 1, "
      "\"total\": 1}\n\n"
      "{\"table\": {\"ranges\": [{\"min_count\": \"256\", \"max_count\": \"256\", "
      "\"winner\": \"all_reduce/ring\"}]}}\n";
  absl::StatusOr<SavedSweep> saved = ParseSweepJsonLines(text);
  REQUIRE(saved.ok());
  REQUIRE(saved->sizes.size() == 1);
  CHECK(saved->sizes[0].problem().count() == 256);
  CHECK(saved->has_table);
  CHECK(saved->table.ranges(0).winner() == "all_reduce/ring");
  CHECK_THAT(ErrorOf(ParseSweepJsonLines("{\"done\": 1}\nnot json\n").status()),
             Catch::Contains("line 2: not a sweep update"));
  CHECK_THAT(ErrorOf(ParseSweepJsonLines("\n").status()), Catch::Contains("no size results"));
}

}  // namespace
}  // namespace autotuned::cli
