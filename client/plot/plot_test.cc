#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include "client/plot/canvas.h"
#include "client/plot/chart.h"
#include "client/plot/font.h"
#include "client/plot/png.h"

namespace autotuned::plot {
namespace {

uint32_t U32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

// A minimal PNG reader for what EncodePng writes (8-bit RGB, filters 0 and
// 2): checks the signature and every CRC and returns the pixels.
std::vector<uint8_t> Decode(const std::string& png, int* width, int* height) {
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  size_t at = 8;
  std::string idat;
  bool ended = false;
  while (at < png.size()) {
    const uint32_t len = U32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, len);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(png.data() + at + 4), len + 4);
    REQUIRE(U32(png, at + 8 + len) == static_cast<uint32_t>(crc));
    if (type == "IHDR") {
      *width = static_cast<int>(U32(data, 0));
      *height = static_cast<int>(U32(data, 4));
      REQUIRE(data.substr(8) == std::string("\x08\x02\x00\x00\x00", 5));
    } else if (type == "IDAT") {
      idat += data;
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + len;
  }
  REQUIRE(ended);
  const size_t stride = static_cast<size_t>(*width) * 3;
  std::vector<uint8_t> raw((stride + 1) * *height);
  uLongf raw_size = raw.size();
  REQUIRE(uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) == Z_OK);
  REQUIRE(raw_size == raw.size());
  std::vector<uint8_t> px(stride * *height);
  for (int y = 0; y < *height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    REQUIRE((filter == 0 || filter == 2));
    for (size_t i = 0; i < stride; ++i) {
      uint8_t v = raw[y * (stride + 1) + 1 + i];
      if (filter == 2 && y > 0) v = static_cast<uint8_t>(v + px[(y - 1) * stride + i]);
      px[y * stride + i] = v;
    }
  }
  return px;
}

TEST_CASE("EncodePng round-trips every pixel through a decoder") {
  Canvas c(37, 23, {255, 255, 255});
  for (int y = 0; y < 23; ++y) {
    for (int x = 0; x < 37; ++x) {
      if ((x * 7 + y * 3) % 5 == 0) c.Set(x, y, {static_cast<uint8_t>(x * 6), static_cast<uint8_t>(y * 11), 200});
    }
  }
  c.FillRect(0, 10, 36, 12, {1, 2, 3});  // rows equal to the row above: the "Up" filter
  absl::StatusOr<std::string> png = EncodePng(c);
  REQUIRE(png.ok());
  int w = 0, h = 0;
  const std::vector<uint8_t> px = Decode(*png, &w, &h);
  CHECK(w == 37);
  CHECK(h == 23);
  CHECK(px == c.pixels());
}

TEST_CASE("the font has a distinct glyph for every printable character") {
  std::vector<std::string> seen;
  for (char ch = '!'; ch <= '~'; ++ch) {
    std::string bits;
    for (int y = 0; y < kGlyphHeight; ++y) {
      for (int x = 0; x < kGlyphWidth; ++x) bits += GlyphPixel(ch, x, y) ? '#' : '.';
    }
    INFO("character " << ch);
    CHECK(bits.find('#') != std::string::npos);
    for (const std::string& other : seen) CHECK(other != bits);
    seen.push_back(bits);
  }
  for (int y = 0; y < kGlyphHeight; ++y) {
    for (int x = 0; x < kGlyphWidth; ++x) CHECK_FALSE(GlyphPixel(' ', x, y));
  }
  // Outside the printable range: drawn as '?'.
  CHECK(GlyphPixel('\x01', 1, 0) == GlyphPixel('?', 1, 0));
}

TEST_CASE("Canvas clips, draws lines end to end and text in the font") {
  Canvas c(20, 10, {0, 0, 0});
  c.Set(-1, 0, {9, 9, 9});
  c.Set(20, 5, {9, 9, 9});
  c.Line(0, 0, 19, 9, {255, 0, 0});
  CHECK(c.Get(0, 0) == Rgb{255, 0, 0});
  CHECK(c.Get(19, 9) == Rgb{255, 0, 0});
  c.FillRect(-5, -5, 100, 100, {0, 0, 0});
  c.Text(1, 1, "1", {0, 255, 0});
  for (int y = 0; y < kGlyphHeight; ++y) {
    for (int x = 0; x < kGlyphWidth; ++x) {
      CHECK((c.Get(1 + x, 1 + y) == Rgb{0, 255, 0}) == GlyphPixel('1', x, y));
    }
  }
  CHECK(Canvas::TextWidth("abc") == 3 * kCellWidth);
}

LatencyChart Sample() {
  LatencyChart chart;
  chart.title = "all_reduce float32, 4 ranks";
  chart.sizes_bytes = {1024, 4096, 16384, 65536};
  chart.series = {"one_shot", "two_shot", "ring"};
  chart.latency_us = {{10, 20, 80, NAN}, {15, 18, 40, 90}, {30, 40, 50, 60}};
  chart.winner = {0, 1, 1, 2};
  return chart;
}

int CountColour(const Canvas& c, Rgb colour, int y0, int y1) {
  int n = 0;
  for (int y = y0; y <= y1; ++y) {
    for (int x = 0; x < c.width(); ++x) n += c.Get(x, y) == colour;
  }
  return n;
}

TEST_CASE("DrawLatencyChart draws every series and marks each size's winner") {
  absl::StatusOr<Canvas> c = DrawLatencyChart(Sample());
  REQUIRE(c.ok());
  CHECK(c->width() == kChartWidth);
  for (int s = 0; s < 3; ++s) {
    INFO("series " << s);
    CHECK(CountColour(*c, SeriesColour(s), 0, kChartHeight - 1) > 100);
  }
  // The winner strip is under the plot: one, two and one sizes' worth.
  const int strip_y = kChartHeight - 96 + 35;
  const int one = CountColour(*c, SeriesColour(0), strip_y, strip_y);
  const int two = CountColour(*c, SeriesColour(1), strip_y, strip_y);
  const int ring = CountColour(*c, SeriesColour(2), strip_y, strip_y);
  CHECK(one > 0);
  CHECK(ring > 0);
  CHECK(two > one);
  // A chart where the third series never wins has none of its colour there.
  LatencyChart chart = Sample();
  chart.winner = {0, 0, 1, 1};
  absl::StatusOr<Canvas> other = DrawLatencyChart(chart);
  REQUIRE(other.ok());
  CHECK(CountColour(*other, SeriesColour(2), strip_y, strip_y) == 0);
  REQUIRE(EncodePng(*other).ok());
}

TEST_CASE("DrawLatencyChart rejects charts whose shapes disagree") {
  LatencyChart chart = Sample();
  chart.winner = {0};
  CHECK(DrawLatencyChart(chart).status().code() == absl::StatusCode::kInvalidArgument);
  chart = Sample();
  chart.latency_us.pop_back();
  CHECK(DrawLatencyChart(chart).status().code() == absl::StatusCode::kInvalidArgument);
  chart = Sample();
  chart.sizes_bytes = {1024, 1024, 2048, 4096};
  CHECK(DrawLatencyChart(chart).status().code() == absl::StatusCode::kInvalidArgument);
  chart = Sample();
  chart.winner = {0, 1, 3, 0};
  CHECK(DrawLatencyChart(chart).status().code() == absl::StatusCode::kInvalidArgument);
  chart = Sample();
  for (auto& row : chart.latency_us) row.assign(4, INFINITY);
  CHECK(DrawLatencyChart(chart).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(DrawLatencyChart(LatencyChart{}).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("ShortBytes labels sizes in binary units") {
  CHECK(ShortBytes(512) == "512B");
  CHECK(ShortBytes(1024) == "1K");
  CHECK(ShortBytes(256 * 1024) == "256K");
  CHECK(ShortBytes(1536 * 1024) == "1.5M");
  CHECK(ShortBytes(256.0 * 1024 * 1024) == "256M");
  CHECK(ShortBytes(2.0 * 1024 * 1024 * 1024) == "2G");
}

}  // namespace
}  // namespace autotuned::plot
