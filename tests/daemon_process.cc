#include "tests/daemon_process.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace autotuned::testing {
namespace {

bool Accepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for `pid` with a deadline; returns its exit code (128 + signal when
// killed by one), or -1 when it is still running at the deadline.
int WaitPid(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (r < 0 || absl::Now() > deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

pid_t SpawnWithFds(const std::vector<std::string>& args, int out_fd, int err_fd,
                   const std::vector<std::string>& env = {}) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    if (out_fd >= 0) dup2(out_fd, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

std::string FreshTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  RunCommand({"/bin/rm", "-rf", dir});
  RunCommand({"/bin/mkdir", "-p", dir});
  return dir;
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path);
}

// The ShortTempDir directories of this process, removed at its exit.
std::vector<std::string>& ShortTempDirs() {
  static auto* dirs = [] {
    auto* d = new std::vector<std::string>;
    atexit([] {
      for (const std::string& dir : ShortTempDirs()) {
        nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
      }
    });
    return d;
  }();
  return *dirs;
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

std::string ShortTempDir() {
  char tmpl[] = "/tmp/atd-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (dir == nullptr) return "/tmp";
  ShortTempDirs().push_back(dir);
  return dir;
}

DaemonNode MakeDaemonNode(const std::string& name, const std::string& config_text,
                          std::vector<std::string> extra) {
  DaemonNode n;
  n.dir = FreshTempDir(name);
  n.socket = ShortTempDir() + "/run/autotuned.sock";
  std::ofstream(n.dir + "/autotuned.conf") << config_text;
  n.args = {"--config=" + n.dir + "/autotuned.conf", "--socket=" + n.socket,
            "--cache_dir=" + n.dir + "/cache", "--sim_gpus=4"};
  n.args.insert(n.args.end(), extra.begin(), extra.end());
  return n;
}

std::string Runfile(const std::string& runfile) {
  const char* base = std::getenv("TEST_SRCDIR");
  return absl::StrCat(base ? base : ".", "/autotuned/", runfile);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Stop(SIGKILL, absl::Seconds(5));
}

pid_t DaemonProcess::Spawn(const std::vector<std::string>& args,
                           const std::string& log_path) {
  log_path_ = log_path;
  int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<std::string> full = {Runfile("daemon/autotuned")};
  full.insert(full.end(), args.begin(), args.end());
  pid_t pid = SpawnWithFds(full, log, log, env_);
  close(log);
  return pid;
}

absl::Status DaemonProcess::Start(const std::vector<std::string>& args,
                                  const std::string& socket,
                                  const std::string& log_path,
                                  absl::Duration timeout) {
  pid_ = Spawn(args, log_path);
  if (pid_ < 0) return absl::InternalError("fork failed");
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Accepts(socket)) return absl::OkStatus();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::FailedPreconditionError(
          absl::StrCat("the daemon exited before listening: ", Log()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the daemon did not listen on ", socket, ": ", Log()));
}

int DaemonProcess::WaitExit(absl::Duration timeout) {
  const int code = WaitPid(pid_, timeout);
  if (code >= 0) pid_ = -1;
  return code;
}

int DaemonProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int code = WaitExit(timeout);
  if (code < 0 && pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitExit(absl::Seconds(5));
  }
  return code;
}

int DaemonProcess::RunToExit(const std::vector<std::string>& args,
                             const std::string& log_path, absl::Duration timeout) {
  pid_ = Spawn(args, log_path);
  const int code = WaitExit(timeout);
  if (code < 0) Stop(SIGKILL, absl::Seconds(5));
  return code;
}

std::string DaemonProcess::Log() const { return ReadFile(log_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout) {
  const char* base = std::getenv("TEST_TMPDIR");
  static int seq = 0;
  const std::string stem =
      absl::StrCat(base ? base : "/tmp", "/cmd-", getpid(), "-", ++seq);
  int out = open((stem + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = open((stem + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = SpawnWithFds(argv, out, err);
  close(out);
  close(err);
  CommandResult r;
  r.exit_code = WaitPid(pid, timeout);
  if (r.exit_code < 0) {
    kill(pid, SIGKILL);
    WaitPid(pid, absl::Seconds(5));
  }
  r.out = ReadFile(stem + ".out");
  r.err = ReadFile(stem + ".err");
  return r;
}

}  // namespace autotuned::testing
