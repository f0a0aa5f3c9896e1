#include "daemon/common/escape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autotuned {

std::string LogEscaped(absl::string_view s, size_t max_bytes) {
  const absl::string_view shown = s.substr(0, max_bytes);
  std::string out;
  out.reserve(shown.size() + 16);
  for (const char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u <= 0x7e) {
      out += c;
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    }
  }
  if (shown.size() < s.size()) absl::StrAppend(&out, "...(", s.size(), " bytes)");
  return out;
}

bool RateLimitedLog::Allow(int64_t* suppressed, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= period_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace autotuned
