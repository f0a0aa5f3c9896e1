#include "daemon/common/escape.h"

#include <catch2/catch.hpp>
#include <string>

namespace autotuned {
namespace {

TEST_CASE("LogEscaped keeps printable ASCII and escapes everything else") {
  CHECK(LogEscaped("all_reduce/ring") == "all_reduce/ring");
  CHECK(LogEscaped("a\nINFO forged") == "a\\x0aINFO forged");
  CHECK(LogEscaped(std::string("\x1b[31m\0\xff", 7)) == "\\x1b[31m\\x00\\xff");
  CHECK(LogEscaped("back\\slash") == "back\\slash");
  CHECK(LogEscaped(LogEscaped("a\nb")) == "a\\x0ab");
}

TEST_CASE("LogEscaped bounds what it shows and says how long the string was") {
  const std::string big(1 << 20, 'x');
  const std::string shown = LogEscaped(big);
  CHECK(shown == std::string(kMaxLoggedBytes, 'x') + "...(1048576 bytes)");
  CHECK(LogEscaped("abcdef", 3) == "abc...(6 bytes)");
  CHECK(LogEscaped("abc", 3) == "abc");
}

TEST_CASE("RateLimitedLog allows a burst per period and counts the rest") {
  RateLimitedLog limit(2, absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t suppressed = -1;
  CHECK(limit.Allow(&suppressed, t0));
  CHECK(suppressed == 0);
  CHECK(limit.Allow(&suppressed, t0));
  for (int i = 0; i < 5; ++i) CHECK_FALSE(limit.Allow(&suppressed, t0 + absl::Milliseconds(100)));
  CHECK(limit.Allow(&suppressed, t0 + absl::Seconds(1)));
  CHECK(suppressed == 5);
  CHECK(limit.Allow(&suppressed, t0 + absl::Seconds(1)));
  CHECK(suppressed == 0);
}

}  // namespace
}  // namespace autotuned
