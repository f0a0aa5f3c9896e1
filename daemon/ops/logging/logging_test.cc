#include "daemon/ops/logging/logging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

TEST_CASE("JOURNAL_STREAM matches only the stream it names") {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const int a = open((dir + "/a").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int b = open((dir + "/b").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(a >= 0);
  REQUIRE(b >= 0);
  struct stat st;
  REQUIRE(fstat(a, &st) == 0);
  const std::string named = absl::StrCat(st.st_dev, ":", st.st_ino);
  CHECK(IsJournalStream(a, named.c_str()));
  CHECK_FALSE(IsJournalStream(b, named.c_str()));
  CHECK_FALSE(IsJournalStream(a, nullptr));
  CHECK_FALSE(IsJournalStream(a, ""));
  CHECK_FALSE(IsJournalStream(a, absl::StrCat(st.st_dev).c_str()));
  CHECK_FALSE(IsJournalStream(a, absl::StrCat(st.st_dev, ":x").c_str()));
  close(a);
  close(b);
}

TEST_CASE("each level has the priority sd-daemon(3) gives it") {
  CHECK(std::string(SyslogPrefix(spdlog::level::critical)) == "<2>");
  CHECK(std::string(SyslogPrefix(spdlog::level::err)) == "<3>");
  CHECK(std::string(SyslogPrefix(spdlog::level::warn)) == "<4>");
  CHECK(std::string(SyslogPrefix(spdlog::level::info)) == "<6>");
  CHECK(std::string(SyslogPrefix(spdlog::level::debug)) == "<7>");
  CHECK(std::string(SyslogPrefix(spdlog::level::trace)) == "<7>");
}

}  // namespace
}  // namespace autotuned
