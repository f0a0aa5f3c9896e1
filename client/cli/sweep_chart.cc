#include "client/cli/sweep_chart.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/cli/enums.h"
#include "client/cli/format.h"
#include "client/plot/png.h"

namespace autotuned {
namespace cli {

absl::StatusOr<plot::LatencyChart> SweepChart(const std::vector<v1::ProblemResult>& sizes) {
  if (sizes.empty()) return absl::InvalidArgumentError("--plot: no sizes measured");
  const std::vector<std::string> names = SweepCandidateNames(sizes);
  plot::LatencyChart chart;
  chart.series = names;
  chart.latency_us.assign(names.size(), {});
  const v1::Problem& first = sizes[0].problem();
  int world = 0;
  for (const v1::ProblemResult& r : sizes) {
    for (const v1::CandidateResult& c : r.ranked()) world = std::max(world, c.rank_mean_us_size());
  }
  chart.title = absl::StrCat(CollectiveName(first.collective()), " ", DTypeName(first.dtype()),
                             world > 0 ? absl::StrCat(", ", world, " ranks") : "",
                             ": median latency per size");
  for (const v1::ProblemResult& r : sizes) {
    const double bytes =
        static_cast<double>(r.problem().count()) * DTypeSize(r.problem().dtype());
    if (!(bytes > 0) || (!chart.sizes_bytes.empty() && bytes <= chart.sizes_bytes.back())) continue;
    chart.sizes_bytes.push_back(bytes);
    for (std::vector<double>& line : chart.latency_us) line.push_back(NAN);
    for (const v1::CandidateResult& c : r.ranked()) {
      if (c.ok() && c.index() >= 0 && static_cast<size_t>(c.index()) < names.size()) {
        chart.latency_us[c.index()].back() = c.median_us();
      }
    }
    const int w = r.winner_index();
    const bool won = r.status() != v1::FAILED && !r.winner().empty() && w >= 0 &&
                     static_cast<size_t>(w) < names.size();
    chart.winner.push_back(won ? w : -1);
  }
  return chart;
}

absl::Status WriteSweepPlot(const std::vector<v1::ProblemResult>& sizes, const std::string& path) {
  absl::StatusOr<plot::LatencyChart> chart = SweepChart(sizes);
  if (!chart.ok()) return chart.status();
  absl::StatusOr<plot::Canvas> canvas = plot::DrawLatencyChart(*chart);
  if (!canvas.ok()) return absl::InvalidArgumentError(absl::StrCat("--plot: ", canvas.status().message()));
  return plot::WritePng(*canvas, path);
}

absl::StatusOr<SavedSweep> ParseSweepJsonLines(const std::string& text) {
  SavedSweep saved;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    v1::SweepUpdate update;
    const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(line), &update);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--input: line ", number,
                                                     ": not a sweep update: ", parsed.ToString()));
    }
    if (update.has_size_result()) saved.sizes.push_back(update.size_result());
    if (update.has_table()) {
      saved.has_table = true;
      saved.table = update.table();
    }
  }
  if (saved.sizes.empty()) return absl::InvalidArgumentError("--input: no size results in the file");
  return saved;
}

}  // namespace cli
}  // namespace autotuned
