// PNG encoding of a Canvas: 8-bit RGB, no interlace, zlib-compressed rows
// (filter 0 or "Up", whichever is smaller), with the IHDR, IDAT and IEND
// chunks and their CRCs, readable by any PNG decoder.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/plot/canvas.h"

namespace autotuned::plot {

// The PNG file's bytes. INTERNAL if zlib fails.
absl::StatusOr<std::string> EncodePng(const Canvas& canvas);

// EncodePng, then writes the file (replacing it through a temporary file in
// the same folder and a rename). The errno's message naming `path` on failure.
absl::Status WritePng(const Canvas& canvas, const std::string& path);

}  // namespace autotuned::plot
