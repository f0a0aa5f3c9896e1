// A 5x7 bitmap font covering printable ASCII (' ' to '~'); anything else is
// drawn as '?'. Glyphs sit in a 6x9 cell (one column and two rows of spacing).
#pragma once

namespace autotuned::plot {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kCellWidth = 6;
inline constexpr int kCellHeight = 9;

// Whether pixel (x, y) of character `c`'s glyph is set; (0, 0) is top left.
// False outside the 5x7 glyph.
bool GlyphPixel(char c, int x, int y);

}  // namespace autotuned::plot
