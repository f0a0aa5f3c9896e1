#include "client/plot/canvas.h"

#include <algorithm>
#include <cstdlib>

#include "client/plot/font.h"

namespace autotuned::plot {

Canvas::Canvas(int width, int height, Rgb background)
    : width_(std::clamp(width, 1, 8192)),
      height_(std::clamp(height, 1, 8192)),
      background_(background),
      rgb_(static_cast<size_t>(width_) * height_ * 3) {
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
}

Rgb Canvas::Get(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return background_;
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  return Rgb{rgb_[i], rgb_[i + 1], rgb_[i + 2]};
}

void Canvas::Set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t i = (static_cast<size_t>(y) * width_ + x) * 3;
  rgb_[i] = c.r;
  rgb_[i + 1] = c.g;
  rgb_[i + 2] = c.b;
}

void Canvas::FillRect(int x0, int y0, int x1, int y1, Rgb c) {
  if (x0 > x1) std::swap(x0, x1);
  if (y0 > y1) std::swap(y0, y1);
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, width_ - 1);
  y1 = std::min(y1, height_ - 1);
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) Set(x, y, c);
  }
}

namespace {

// Calls f(x, y, step) for every point of the Bresenham line, step counting
// from 0.
template <typename F>
void Walk(int x0, int y0, int x1, int y1, F f) {
  // Far-off endpoints would make the walk long; charts stay well inside.
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (int step = 0; step < 1 << 16; ++step) {
    f(x0, y0, step);
    if (x0 == x1 && y0 == y1) return;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

}  // namespace

void Canvas::Line(int x0, int y0, int x1, int y1, Rgb c, int thickness) {
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  Walk(x0, y0, x1, y1, [&](int x, int y, int) {
    for (int oy = lo; oy <= hi; ++oy) {
      for (int ox = lo; ox <= hi; ++ox) Set(x + ox, y + oy, c);
    }
  });
}

void Canvas::DashedLine(int x0, int y0, int x1, int y1, Rgb c, int on, int off) {
  const int period = std::max(1, on + off);
  Walk(x0, y0, x1, y1, [&](int x, int y, int step) {
    if (step % period < on) Set(x, y, c);
  });
}

void Canvas::Disc(int cx, int cy, int radius, Rgb c) {
  for (int y = -radius; y <= radius; ++y) {
    for (int x = -radius; x <= radius; ++x) {
      if (x * x + y * y <= radius * radius + radius) Set(cx + x, cy + y, c);
    }
  }
}

void Canvas::Text(int x, int y, const std::string& text, Rgb c, int scale) {
  for (size_t i = 0; i < text.size(); ++i) {
    const int left = x + static_cast<int>(i) * kCellWidth * scale;
    for (int gy = 0; gy < kGlyphHeight; ++gy) {
      for (int gx = 0; gx < kGlyphWidth; ++gx) {
        if (!GlyphPixel(text[i], gx, gy)) continue;
        FillRect(left + gx * scale, y + gy * scale, left + gx * scale + scale - 1,
                 y + gy * scale + scale - 1, c);
      }
    }
  }
}

void Canvas::TextUp(int x, int y, const std::string& text, Rgb c) {
  for (size_t i = 0; i < text.size(); ++i) {
    const int bottom = y - static_cast<int>(i) * kCellWidth;
    for (int gy = 0; gy < kGlyphHeight; ++gy) {
      for (int gx = 0; gx < kGlyphWidth; ++gx) {
        if (GlyphPixel(text[i], gx, gy)) Set(x + gy, bottom - gx, c);
      }
    }
  }
}

int Canvas::TextWidth(const std::string& text, int scale) {
  return static_cast<int>(text.size()) * kCellWidth * scale;
}

}  // namespace autotuned::plot
