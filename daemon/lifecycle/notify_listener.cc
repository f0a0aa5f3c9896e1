#include "daemon/lifecycle/notify_listener.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace autotuned::testing {

absl::StatusOr<NotifyListener> NotifyListener::Create(bool abstract) {
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
  return NotifyListener(fd, address, dir);
}

NotifyListener::NotifyListener(NotifyListener&& other) noexcept
    : fd_(other.fd_), address_(std::move(other.address_)), dir_(std::move(other.dir_)) {
  other.fd_ = -1;
  other.dir_.clear();
}

NotifyListener::~NotifyListener() {
  if (fd_ >= 0) close(fd_);
  if (!dir_.empty()) {
    unlink(address_.c_str());
    rmdir(dir_.c_str());
  }
}

std::string NotifyListener::Next(absl::Duration timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return "";
  char buf[4096];
  const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::vector<std::string> NotifyListener::WaitFor(const std::string& line,
                                                 absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> seen;
  while (absl::Now() < deadline) {
    std::string d = Next(std::max(deadline - absl::Now(), absl::Milliseconds(1)));
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
