#include "client/plot/chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/plot/font.h"

namespace autotuned::plot {
namespace {

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kAxis{60, 60, 60};
constexpr Rgb kGrid{225, 225, 225};
constexpr Rgb kMinorGrid{242, 242, 242};

// The plot area.
constexpr int kLeft = 86, kTop = 44, kRight = kChartWidth - 250, kBottom = kChartHeight - 96;
constexpr int kStripTop = kBottom + 30, kStripBottom = kStripTop + 10;

bool Usable(double v) { return std::isfinite(v) && v > 0; }

std::string LatencyLabel(double us) {
  if (us >= 1e6) return absl::StrCat(us / 1e6, " s");
  if (us >= 1e3) return absl::StrCat(us / 1e3, " ms");
  return absl::StrCat(us, " us");
}

}  // namespace

Rgb SeriesColour(int i) {
  static constexpr Rgb kPalette[] = {
      {31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
      {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return kPalette[((i % 10) + 10) % 10];
}

std::string ShortBytes(double bytes) {
  static const char* kUnits[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  const std::string n = bytes == std::floor(bytes) ? absl::StrFormat("%.0f", bytes)
                                                    : absl::StrFormat("%.3g", bytes);
  return absl::StrCat(n, kUnits[u], u == 0 ? "B" : "");
}

absl::StatusOr<Canvas> DrawLatencyChart(const LatencyChart& chart) {
  const size_t points = chart.sizes_bytes.size();
  if (points == 0) return absl::InvalidArgumentError("chart: no sizes");
  for (size_t i = 0; i < points; ++i) {
    if (!Usable(chart.sizes_bytes[i]) || (i > 0 && chart.sizes_bytes[i] <= chart.sizes_bytes[i - 1])) {
      return absl::InvalidArgumentError("chart: sizes must be positive and ascending");
    }
  }
  if (chart.latency_us.size() != chart.series.size()) {
    return absl::InvalidArgumentError("chart: one latency row per series");
  }
  double lo = INFINITY, hi = 0;
  for (const std::vector<double>& row : chart.latency_us) {
    if (row.size() != points) return absl::InvalidArgumentError("chart: one latency per size");
    for (double v : row) {
      if (!Usable(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (hi == 0) return absl::InvalidArgumentError("chart: no latency to draw");
  if (chart.winner.size() != points) return absl::InvalidArgumentError("chart: one winner per size");
  for (int w : chart.winner) {
    if (w < -1 || w >= static_cast<int>(chart.series.size())) {
      return absl::InvalidArgumentError("chart: a winner names no series");
    }
  }

  Canvas c(kChartWidth, kChartHeight, kWhite);
  // Axes ranges: log2 of bytes, whole decades of microseconds.
  double x0 = std::log2(chart.sizes_bytes.front()), x1 = std::log2(chart.sizes_bytes.back());
  if (x1 - x0 < 1e-9) {
    x0 -= 1;
    x1 += 1;
  }
  int d0 = static_cast<int>(std::floor(std::log10(lo)));
  int d1 = static_cast<int>(std::ceil(std::log10(hi)));
  if (d1 == d0) ++d1;
  auto px = [&](double bytes) {
    return kLeft + static_cast<int>(std::lround((std::log2(bytes) - x0) / (x1 - x0) * (kRight - kLeft)));
  };
  auto py = [&](double us) {
    return kBottom - static_cast<int>(std::lround((std::log10(us) - d0) / (d1 - d0) * (kBottom - kTop)));
  };

  // Grid and y labels: decades, with 2x and 5x as minor lines.
  for (int d = d0; d <= d1; ++d) {
    const double v = std::pow(10.0, d);
    for (double m : {2.0, 5.0}) {
      if (d < d1) c.Line(kLeft, py(v * m), kRight, py(v * m), kMinorGrid);
    }
    c.Line(kLeft, py(v), kRight, py(v), kGrid);
    const std::string label = LatencyLabel(v);
    c.Text(kLeft - 8 - Canvas::TextWidth(label), py(v) - 3, label, kAxis);
  }
  // x ticks at every size, labels as many as fit.
  int last_label_end = -1000;
  for (size_t i = 0; i < points; ++i) {
    const int x = px(chart.sizes_bytes[i]);
    c.Line(x, kTop, x, kBottom, kMinorGrid);
    c.Line(x, kBottom, x, kBottom + 4, kAxis);
    const std::string label = ShortBytes(chart.sizes_bytes[i]);
    const int w = Canvas::TextWidth(label);
    if (x - w / 2 > last_label_end + 4) {
      c.Text(x - w / 2, kBottom + 9, label, kAxis);
      last_label_end = x + w / 2;
    }
  }
  // Axes.
  c.Line(kLeft, kTop, kLeft, kBottom, kAxis);
  c.Line(kLeft, kBottom, kRight, kBottom, kAxis);
  const std::string xlabel = "size per rank (log scale)";
  c.Text((kLeft + kRight - Canvas::TextWidth(xlabel)) / 2, kStripBottom + 14, xlabel, kAxis);
  const std::string ylabel = "median latency (log scale)";
  c.TextUp(16, (kTop + kBottom + Canvas::TextWidth(ylabel)) / 2, ylabel, kAxis);

  // Lines and markers.
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const Rgb colour = SeriesColour(static_cast<int>(s));
    int prev_x = 0, prev_y = 0;
    bool have_prev = false;
    for (size_t i = 0; i < points; ++i) {
      const double v = chart.latency_us[s][i];
      if (!Usable(v)) {
        have_prev = false;
        continue;
      }
      const int x = px(chart.sizes_bytes[i]), y = py(v);
      if (have_prev) c.Line(prev_x, prev_y, x, y, colour, 2);
      c.FillRect(x - 2, y - 2, x + 2, y + 2, colour);
      prev_x = x;
      prev_y = y;
      have_prev = true;
    }
  }
  // Winners: a ring around the winning point, and the strip.
  c.Text(kLeft - 8 - Canvas::TextWidth("winner"), kStripTop + 1, "winner", kAxis);
  for (size_t i = 0; i < points; ++i) {
    const int w = chart.winner[i];
    const int x = px(chart.sizes_bytes[i]);
    const int left = i == 0 ? kLeft : (px(chart.sizes_bytes[i - 1]) + x) / 2;
    const int right = i + 1 == points ? kRight : (x + px(chart.sizes_bytes[i + 1])) / 2;
    if (w < 0) {
      c.DashedLine(left, kStripTop + 5, right, kStripTop + 5, kAxis, 2, 2);
      continue;
    }
    c.FillRect(left, kStripTop, right, kStripBottom, SeriesColour(w));
    const double v = chart.latency_us[w][i];
    if (!Usable(v)) continue;
    const int y = py(v);
    c.Disc(x, y, 7, kBlack);
    c.Disc(x, y, 5, kWhite);
    c.Disc(x, y, 3, SeriesColour(w));
  }

  // Title and legend.
  const int title_scale = Canvas::TextWidth(chart.title, 2) <= kChartWidth - kLeft - 10 ? 2 : 1;
  c.Text(kLeft, 12, chart.title, kBlack, title_scale);
  int ly = kTop + 4;
  const int lx = kRight + 22;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const Rgb colour = SeriesColour(static_cast<int>(s));
    c.Line(lx, ly + 3, lx + 22, ly + 3, colour, 2);
    c.FillRect(lx + 9, ly + 1, lx + 13, ly + 5, colour);
    std::string name = chart.series[s];
    const size_t fit = static_cast<size_t>((kChartWidth - lx - 34) / kCellWidth);
    if (name.size() > fit) name = name.substr(0, fit - 1) + "~";
    c.Text(lx + 30, ly, name, kBlack);
    ly += 16;
  }
  ly += 8;
  c.Disc(lx + 11, ly + 3, 7, kBlack);
  c.Disc(lx + 11, ly + 3, 5, kWhite);
  c.Disc(lx + 11, ly + 3, 3, kAxis);
  c.Text(lx + 30, ly, "winner at that size", kBlack);
  return c;
}

}  // namespace autotuned::plot
