#include "daemon/ops/lifecycle/notify_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace autotuned::testing {

std::unique_ptr<NotifyListener> NotifyListener::MustCreate() {
  absl::StatusOr<std::unique_ptr<NotifyListener>> l = Create(false);
  if (!l.ok()) {
    std::fprintf(stderr, "NotifyListener: %s\n", l.status().ToString().c_str());
    std::abort();
  }
  return std::move(*l);
}

absl::StatusOr<std::unique_ptr<NotifyListener>> NotifyListener::Create(bool abstract) {
  static std::atomic<int> seq{0};
  std::string address, dir;
  if (abstract) {
    address = absl::StrCat("@autotuned-test-", getpid(), "-", seq++);
  } else {
    char tmpl[] = "/tmp/atn-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
    dir = tmpl;
    address = dir + "/notify";
  }
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, address.data(), address.size());
  if (abstract) addr.sun_path[0] = '\0';
  const socklen_t len = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + address.size() + (abstract ? 0 : 1));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("bind ", address, ": ", strerror(err)));
  }
  return std::unique_ptr<NotifyListener>(new NotifyListener(fd, address, dir));
}

NotifyListener::NotifyListener(int fd, std::string address, std::string dir)
    : fd_(fd), address_(std::move(address)), dir_(std::move(dir)) {
  if (pipe2(stop_fd_, O_CLOEXEC) != 0) abort();
  reader_ = std::thread([this] { Read(); });
}

NotifyListener::~NotifyListener() {
  (void)!write(stop_fd_[1], "x", 1);
  reader_.join();
  close(stop_fd_[0]);
  close(stop_fd_[1]);
  close(fd_);
  if (!dir_.empty()) {
    unlink(address_.c_str());
    rmdir(dir_.c_str());
  }
}

void NotifyListener::Read() {
  char buf[4096];
  while (true) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {stop_fd_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) continue;
    absl::MutexLock lock(&mu_);
    received_.emplace_back(buf, static_cast<size_t>(n));
  }
}

std::string NotifyListener::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !received_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&some), timeout)) return "";
  std::string d = std::move(received_.front());
  received_.pop_front();
  return d;
}

std::vector<std::string> NotifyListener::WaitFor(const std::string& line,
                                                 absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> seen;
  while (absl::Now() < deadline) {
    std::string d = Next(deadline - absl::Now());
    if (d.empty()) continue;
    seen.push_back(d);
    if (HasLine(d, line)) return seen;
  }
  return {};
}

bool HasLine(const std::string& datagram, const std::string& line) {
  for (absl::string_view l : absl::StrSplit(datagram, '\n')) {
    if (l == line) return true;
  }
  return false;
}

}  // namespace autotuned::testing
