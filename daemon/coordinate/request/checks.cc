#include "daemon/coordinate/request/checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/common/escape.h"

namespace autotuned::request_internal {
namespace {

bool PrintableAscii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckString(const std::string& field, const std::string& value, size_t max,
                         bool printable) {
  if (value.size() > max) {
    return Invalid(field, absl::StrCat("at most ", max, " bytes, got ", value.size()));
  }
  if (printable && !PrintableAscii(value)) {
    return Invalid(field, absl::StrCat("printable ASCII only, got \"", LogEscaped(value), "\""));
  }
  return absl::OkStatus();
}

int64_t CapOf(const ValidationContext& ctx) {
  return ctx.memory_cap_bytes > 0 ? ctx.memory_cap_bytes : ctx.limits->max_buffer_bytes();
}

std::string CapText(int64_t cap) {
  return absl::StrCat("the memory cap of ", cap,
                      " bytes per GPU (limits.max_buffer_bytes, limits.gpu_memory_fraction)");
}

}  // namespace autotuned::request_internal
