// A latency-against-size line chart: one line per candidate over message
// sizes (log2 axis) and latencies (log10 axis), the winner at each size
// circled in its colour and repeated in a strip under the plot, with a
// legend. Drawn on a Canvas (canvas.h), to be written as PNG (png.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/plot/canvas.h"

namespace autotuned::plot {

struct LatencyChart {
  std::string title;
  std::vector<double> sizes_bytes;            // ascending, > 0: the x points
  std::vector<std::string> series;            // one name per candidate
  // series x points, microseconds; NaN, infinity or <= 0 where the candidate
  // has no figure at that size (ruled out, not asked).
  std::vector<std::vector<double>> latency_us;
  std::vector<int> winner;                    // per point: a series index, or -1
};

inline constexpr int kChartWidth = 1040;
inline constexpr int kChartHeight = 620;

// The chart on a kChartWidth x kChartHeight canvas. INVALID_ARGUMENT when
// the shapes disagree (latency_us not series x points, winner not one per
// point or naming no series), sizes are not positive and ascending, or no
// latency at all is positive and finite.
absl::StatusOr<Canvas> DrawLatencyChart(const LatencyChart& chart);

// The colour of series `i` (a fixed palette, repeating after 10).
Rgb SeriesColour(int i);

// "1K", "256K", "1M", "1.5M", "2G": bytes in binary units, for axis labels.
std::string ShortBytes(double bytes);

}  // namespace autotuned::plot
