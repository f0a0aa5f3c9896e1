// An RGB raster to draw charts on: pixels, lines, rectangles, discs and
// text in the 5x7 font (font.h). Drawing outside the canvas is clipped, so
// callers may pass any coordinates. (0, 0) is the top-left pixel.
//
// Not thread-safe; a Canvas is built and encoded by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autotuned::plot {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

class Canvas {
 public:
  // width and height are clamped to [1, 8192]; the canvas starts filled with
  // `background`.
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  // Row-major, 3 bytes a pixel.
  const std::vector<uint8_t>& pixels() const { return rgb_; }

  Rgb Get(int x, int y) const;  // the background colour outside the canvas
  void Set(int x, int y, Rgb c);
  // Filled, corners included.
  void FillRect(int x0, int y0, int x1, int y1, Rgb c);
  // A line `thickness` pixels wide (Bresenham, each point a square).
  void Line(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);
  // Dashed: `on` pixels drawn, `off` skipped, along the major axis.
  void DashedLine(int x0, int y0, int x1, int y1, Rgb c, int on, int off);
  void Disc(int cx, int cy, int radius, Rgb c);
  // Text with its top-left corner at (x, y), `scale` pixels a font pixel.
  void Text(int x, int y, const std::string& text, Rgb c, int scale = 1);
  // Text rotated a quarter turn anticlockwise (read bottom to top), its
  // bottom-left corner at (x, y).
  void TextUp(int x, int y, const std::string& text, Rgb c);

  static int TextWidth(const std::string& text, int scale = 1);

 private:
  int width_, height_;
  Rgb background_;
  std::vector<uint8_t> rgb_;
};

}  // namespace autotuned::plot
