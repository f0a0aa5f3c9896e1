#include "client/cli/size.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autotuned {
namespace cli {
namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMaxFractionDigits = 6;

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid size \"", text, "\": ", why,
                   " (examples: 4096, 4KiB, 1MiB, 1.5GiB, 1MB)"));
}

// 0 for an unknown unit.
int64_t UnitMultiplier(absl::string_view unit) {
  const std::string u = absl::AsciiStrToLower(unit);
  if (u.empty() || u == "b") return 1;
  const std::string prefixes = "kmgt";
  if (u.size() > 3) return 0;
  const size_t power = prefixes.find(u[0]);
  if (power == std::string::npos) return 0;
  int64_t binary = 1;
  int64_t decimal = 1;
  for (size_t i = 0; i <= power; ++i) {
    binary *= kKiB;
    decimal *= 1000;
  }
  const std::string rest = u.substr(1);
  if (rest.empty() || rest == "ib") return binary;
  if (rest == "b") return decimal;
  return 0;
}

}  // namespace

absl::StatusOr<int64_t> ParseSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return Bad(text, "empty");
  size_t i = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
  const absl::string_view whole = s.substr(0, i);
  absl::string_view fraction;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
    fraction = s.substr(start, i - start);
    if (fraction.empty()) return Bad(text, "no digits after '.'");
  }
  if (whole.empty()) {
    return Bad(text, s[0] == '-' ? "negative" : "no number");
  }
  const absl::string_view unit = absl::StripLeadingAsciiWhitespace(s.substr(i));
  const int64_t multiplier = UnitMultiplier(unit);
  if (multiplier == 0) {
    return Bad(text, absl::StrCat("unknown unit \"", unit, "\""));
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(whole, &value) ||
      __builtin_mul_overflow(value, multiplier, &value)) {
    return Bad(text, "too large");
  }
  if (!fraction.empty()) {
    if (static_cast<int64_t>(fraction.size()) > kMaxFractionDigits) {
      return Bad(text, "too many decimals");
    }
    int64_t numerator = 0;
    int64_t denominator = 1;
    for (char c : fraction) {
      numerator = numerator * 10 + (c - '0');
      denominator *= 10;
    }
    const int64_t scaled = numerator * multiplier;  // < 1e6 * 2^40: no overflow
    if (scaled % denominator != 0) {
      return Bad(text, "not a whole number of bytes");
    }
    if (__builtin_add_overflow(value, scaled / denominator, &value)) {
      return Bad(text, "too large");
    }
  }
  return value;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB",
                                           "PiB", "EiB"};
  if (bytes < 0) return absl::StrCat(bytes, " B");
  int unit = 0;
  int64_t scale = 1;
  while (unit + 1 < 7 && bytes / scale >= kKiB) {
    scale *= kKiB;
    ++unit;
  }
  if (bytes % scale == 0) return absl::StrCat(bytes / scale, " ", kUnits[unit]);
  return absl::StrFormat("%.1f %s", static_cast<double>(bytes) / scale,
                         kUnits[unit]);
}

}  // namespace cli
}  // namespace autotuned
