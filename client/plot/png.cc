#include "client/plot/png.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace autotuned::plot {
namespace {

void PutU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

void Chunk(std::string* out, const char type[4], const std::string& data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out->size();
  out->append(type, 4);
  out->append(data);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(out->data() + start),
              static_cast<uInt>(out->size() - start));
  PutU32(out, static_cast<uint32_t>(crc));
}

}  // namespace

absl::StatusOr<std::string> EncodePng(const Canvas& canvas) {
  const int w = canvas.width(), h = canvas.height();
  const size_t stride = static_cast<size_t>(w) * 3;
  const std::vector<uint8_t>& px = canvas.pixels();
  // Each row: a filter byte, then the row. "Up" (2) when it leaves more
  // zeros than no filter (0): chart rows repeat a lot.
  std::vector<uint8_t> raw;
  raw.reserve((stride + 1) * h);
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = px.data() + y * stride;
    const uint8_t* prev = y > 0 ? row - stride : nullptr;
    size_t zeros_none = 0, zeros_up = 0;
    for (size_t i = 0; i < stride; ++i) {
      zeros_none += row[i] == 0;
      zeros_up += prev == nullptr || row[i] == prev[i];
    }
    const bool up = prev != nullptr && zeros_up > zeros_none;
    raw.push_back(up ? 2 : 0);
    for (size_t i = 0; i < stride; ++i) {
      raw.push_back(up ? static_cast<uint8_t>(row[i] - prev[i]) : row[i]);
    }
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size, raw.data(),
                static_cast<uLong>(raw.size()), 9) != Z_OK) {
    return absl::InternalError("png: zlib compress2 failed");
  }
  packed.resize(packed_size);

  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutU32(&ihdr, static_cast<uint32_t>(w));
  PutU32(&ihdr, static_cast<uint32_t>(h));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter 0, no interlace
  Chunk(&out, "IHDR", ihdr);
  Chunk(&out, "IDAT", packed);
  Chunk(&out, "IEND", "");
  return out;
}

absl::Status WritePng(const Canvas& canvas, const std::string& path) {
  absl::StatusOr<std::string> png = EncodePng(canvas);
  if (!png.ok()) return png.status();
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat("--plot: cannot write ", tmp, ": ", strerror(errno)));
  }
  const bool written = fwrite(png->data(), 1, png->size(), f) == png->size();
  const int saved = errno;
  if (fclose(f) != 0 || !written) {
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("--plot: cannot write ", tmp, ": ", strerror(written ? errno : saved)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("--plot: cannot rename ", tmp, " to ", path, ": ", strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace autotuned::plot
