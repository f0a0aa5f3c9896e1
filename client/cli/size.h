// Byte sizes as people type and read them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace autotuned {
namespace cli {

// "1024" -> 1024. Units, case-insensitive, optionally after a space:
//   B; KiB MiB GiB TiB (powers of 1024); KB MB GB TB (powers of 1000);
//   K M G T alone mean KiB MiB GiB TiB (as in nccl-tests' -b/-e).
// A fraction is allowed when the result is a whole number of bytes
// ("1.5KiB" = 1536). INVALID_ARGUMENT for anything else (empty, negative,
// unknown unit, overflow), quoting the text.
absl::StatusOr<int64_t> ParseSize(absl::string_view text);

// The largest binary unit that keeps the value >= 1: "512 B", "4 KiB",
// "1.5 MiB" (one decimal when not a whole number of that unit).
std::string FormatBytes(int64_t bytes);

}  // namespace cli
}  // namespace autotuned
