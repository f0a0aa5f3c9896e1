#include "daemon/ops/logging/logging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace autotuned {
namespace {

// The %* flag: the line's syslog priority prefix.
class PriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string prefix = SyslogPrefix(msg.level);
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

}  // namespace

bool IsJournalStream(int fd, const char* journal_stream) {
  if (journal_stream == nullptr) return false;
  std::pair<std::string, std::string> parts = absl::StrSplit(journal_stream, ':');
  uint64_t dev = 0;
  uint64_t ino = 0;
  if (!absl::SimpleAtoi(parts.first, &dev) || !absl::SimpleAtoi(parts.second, &ino)) {
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  return static_cast<uint64_t>(st.st_dev) == dev && static_cast<uint64_t>(st.st_ino) == ino;
}

const char* SyslogPrefix(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical: return "<2>";
    case spdlog::level::err: return "<3>";
    case spdlog::level::warn: return "<4>";
    case spdlog::level::info: return "<6>";
    default: return "<7>";  // debug, trace
  }
}

void SetUpLogging(spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (IsJournalStream(STDERR_FILENO, std::getenv("JOURNAL_STREAM"))) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<PriorityFlag>('*').set_pattern("%*%+");
    logger->set_formatter(std::move(formatter));
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
}

}  // namespace autotuned
