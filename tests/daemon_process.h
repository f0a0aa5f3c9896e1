// Test helper: runs the real daemon binary (//daemon:autotuned) as a child
// process, the way an operator would, and the CLI (//client/cli:autotunectl)
// as a command. Every wait has a deadline; a daemon still running when its
// DaemonProcess is destroyed is killed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace autotuned::testing {

// A path under the test's private temporary directory ($TEST_TMPDIR); the
// directory `name` is created fresh (emptied when it exists).
std::string FreshTempDir(const std::string& name);

// A fresh directory with a short path under /tmp, for Unix sockets (whose
// paths may not exceed 107 bytes, which $TEST_TMPDIR often does); removed
// with its contents when the test process exits.
std::string ShortTempDir();

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read
// back, closed), for a daemon's peer_listen; 0 when no socket could be had.
int FreeLoopbackPort();

// A daemon's files for a test: its directory (FreshTempDir(name)) holding
// autotuned.conf (`config_text`) and the cache, its socket in a directory
// "run" the daemon creates under a ShortTempDir, and the arguments that
// start it on them with 4 sim GPUs, then `extra`.
struct DaemonNode {
  std::string dir;
  std::string socket;
  std::vector<std::string> args;
};
DaemonNode MakeDaemonNode(const std::string& name, const std::string& config_text,
                          std::vector<std::string> extra = {});

// A file `runfile` of the workspace (e.g. "daemon/autotuned") in the test's
// runfiles.
std::string Runfile(const std::string& runfile);

class DaemonProcess {
 public:
  DaemonProcess() = default;
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Extra "NAME=value" environment entries for the processes started after
  // this call (e.g. NOTIFY_SOCKET, as systemd would set it).
  void SetEnv(std::vector<std::string> env) { env_ = std::move(env); }

  // Starts the daemon with `args` and waits until its socket `socket` accepts
  // connections (or the process exits, or `timeout`). Its stderr goes to
  // `log_path` (read it with Log()).
  absl::Status Start(const std::vector<std::string>& args,
                     const std::string& socket, const std::string& log_path,
                     absl::Duration timeout = absl::Seconds(20));
  // Sends `signal` and waits for the exit status (-1 on timeout, after which
  // the process is SIGKILLed).
  int Stop(int signal, absl::Duration timeout = absl::Seconds(20));
  // Waits for the daemon to exit on its own: its exit status, or -1 at the
  // timeout (the daemon is left running; the destructor kills it).
  int Wait(absl::Duration timeout) { return WaitExit(timeout); }
  // Runs the daemon to completion (for configurations it must refuse):
  // returns its exit status, or -1 on timeout.
  int RunToExit(const std::vector<std::string>& args, const std::string& log_path,
                absl::Duration timeout = absl::Seconds(20));

  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path);
  int WaitExit(absl::Duration timeout);

  pid_t pid_ = -1;
  std::string log_path_;
  std::vector<std::string> env_;
};

struct CommandResult {
  int exit_code = -1;  // -1: did not finish in time
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs `argv` (argv[0] a path) with a deadline, capturing both streams.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(120));

}  // namespace autotuned::testing
