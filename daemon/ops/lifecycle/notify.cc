#include "daemon/ops/lifecycle/notify.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

std::string WithStatus(const std::string& first, const std::string& status) {
  return status.empty() ? first : absl::StrCat(first, "\nSTATUS=", status);
}

}  // namespace

absl::Status Notifier::Notify(const std::string& state) const {
  if (socket_.empty()) return absl::OkStatus();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((socket_[0] != '/' && socket_[0] != '@') || socket_.size() < 2 ||
      socket_.size() > sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NOTIFY_SOCKET: want an absolute path or @abstract name of at most ",
        sizeof(addr.sun_path), " bytes, got \"", socket_, "\""));
  }
  memcpy(addr.sun_path, socket_.data(), socket_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  // A path is NUL-terminated; an abstract name is exactly its bytes.
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size());
  if (socket_[0] == '/' && socket_.size() < sizeof(addr.sun_path)) ++len;

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("notify socket: ", strerror(errno)));
  }
  // Never waits: a manager that does not read (its queue is full) loses the
  // datagram rather than stalling the daemon.
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                              reinterpret_cast<sockaddr*>(&addr), len);
  const int err = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    return absl::UnavailableError(
        absl::StrCat("notify ", socket_, ": ", sent < 0 ? strerror(err) : "short send"));
  }
  return absl::OkStatus();
}

absl::Status Notifier::Ready(const std::string& status) const {
  return Notify(WithStatus("READY=1", status));
}

absl::Status Notifier::Reloading(const std::string& status) const {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t usec = int64_t{now.tv_sec} * 1000000 + now.tv_nsec / 1000;
  return Notify(WithStatus(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", usec), status));
}

absl::Status Notifier::Stopping(const std::string& status) const {
  return Notify(WithStatus("STOPPING=1", status));
}

absl::Status Notifier::Status(const std::string& status) const {
  return Notify(absl::StrCat("STATUS=", status));
}

absl::Status Notifier::Watchdog() const { return Notify("WATCHDOG=1"); }

absl::StatusOr<absl::Duration> WatchdogTimeout(const char* watchdog_usec,
                                               const char* watchdog_pid, pid_t self) {
  if (watchdog_usec == nullptr || *watchdog_usec == '\0') return absl::ZeroDuration();
  int64_t usec = 0;
  if (!absl::SimpleAtoi(watchdog_usec, &usec) || usec <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WATCHDOG_USEC: want a positive number of microseconds, got \"",
        watchdog_usec, "\""));
  }
  if (watchdog_pid != nullptr && *watchdog_pid != '\0') {
    int64_t pid = 0;
    if (!absl::SimpleAtoi(watchdog_pid, &pid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("WATCHDOG_PID: want a process id, got \"", watchdog_pid, "\""));
    }
    if (pid != self) return absl::ZeroDuration();
  }
  return absl::Microseconds(usec);
}

WatchdogPinger::WatchdogPinger(const Notifier* notifier, absl::Duration timeout)
    : notifier_(notifier), interval_(timeout / 2) {
  if (timeout <= absl::ZeroDuration() || !notifier_->enabled()) return;
  thread_ = std::thread([this] {
    do {
      // A lost ping is the manager's call.
      if (Healthy()) notifier_->Watchdog().IgnoreError();
    } while (!stop_.WaitForNotificationWithTimeout(interval_));
  });
}

void WatchdogPinger::SetHealthy(std::function<bool()> healthy) {
  absl::MutexLock lock(&mu_);
  healthy_ = std::move(healthy);
}

bool WatchdogPinger::Healthy() {
  std::function<bool()> healthy;
  {
    absl::MutexLock lock(&mu_);
    healthy = healthy_;
  }
  return !healthy || healthy();
}

WatchdogPinger::~WatchdogPinger() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace autotuned
