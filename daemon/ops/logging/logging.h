// The daemon's log: one line per event on stderr, spdlog's default pattern.
// Under systemd, when stderr is connected to the journal ($JOURNAL_STREAM
// names stderr's device and inode, see systemd.exec(5)), each line starts
// with its syslog priority as sd-daemon(3) describes ("<3>" error, "<4>"
// warning, "<6>" info, "<7>" debug; "<2>" critical), so that journald files
// it at that priority (`journalctl -p err` shows the errors). Elsewhere the
// lines carry no prefix. docs/operations.md, "Logs".
#pragma once

#include <spdlog/common.h>

namespace autotuned {

// Whether `fd` is the stream $JOURNAL_STREAM names: `journal_stream` is
// "<device>:<inode>" in decimal (null or malformed: false).
bool IsJournalStream(int fd, const char* journal_stream);

// The prefix journald reads for `level`, e.g. "<3>" for err.
const char* SyslogPrefix(spdlog::level::level_enum level);

// Makes the default logger write to stderr at `level`, with the priority
// prefix when IsJournalStream(stderr, $JOURNAL_STREAM). Call once, before
// any thread logs.
void SetUpLogging(spdlog::level::level_enum level);

}  // namespace autotuned
