// Strings from outside the daemon (client requests, peers, file names) as
// they may appear in a log line or an error message: bounded and escaped, so
// that no caller can forge a log line (a newline), hide text (control bytes)
// or make one line huge. The limits that bound client strings in the first
// place are in daemon/coordinate/request/validate.h; this is the second line of defence
// wherever such a string is logged.
//
// Thread-safety: LogEscaped is a pure function; RateLimitedLog is safe to
// call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned {

// How many bytes of a foreign string a log line or error message shows.
inline constexpr size_t kMaxLoggedBytes = 256;

// `s` with printable ASCII (0x20 to 0x7e) kept and every other byte written
// "\xNN" (a backslash stays as is: what was escaped once, in an error message
// that is logged, is not escaped again). Past `max_bytes` input bytes, the rest is
// replaced by "...(N bytes)" with N the full size of `s`.
std::string LogEscaped(absl::string_view s, size_t max_bytes = kMaxLoggedBytes);

// A bound on how often one kind of log line is written (refused peer calls,
// unusable cache files): at most `burst` lines per `period`; the others are
// counted and the count is reported by the next line that is allowed.
class RateLimitedLog {
 public:
  RateLimitedLog(int burst, absl::Duration period) : burst_(burst), period_(period) {}

  // True when a line may be written now; then *suppressed is how many lines
  // were held back since the last one written.
  bool Allow(int64_t* suppressed, absl::Time now = absl::Now());

 private:
  const int burst_;
  const absl::Duration period_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace autotuned
