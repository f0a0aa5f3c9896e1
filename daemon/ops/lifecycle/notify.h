// The service manager's notification protocol (sd_notify(3)), written out
// rather than linked from libsystemd: one datagram per notification to the
// AF_UNIX socket named by $NOTIFY_SOCKET ("@name" is in the abstract
// namespace), holding newline-separated assignments such as "READY=1" or
// "STATUS=serving". With no socket every call does nothing, so the daemon
// runs the same outside systemd.
//
// The watchdog: when systemd sets $WATCHDOG_USEC (and $WATCHDOG_PID is unset
// or this process), WatchdogPinger sends "WATCHDOG=1" every half of it.
//
// Thread-safety: Notifier is immutable after construction and its methods
// may be called from any thread (each sends its own datagram).
// WatchdogPinger owns a thread; construct and destroy it from one thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace autotuned {

class Notifier {
 public:
  // `socket`: the value of $NOTIFY_SOCKET ("" = not under a service manager).
  explicit Notifier(std::string socket) : socket_(std::move(socket)) {}

  bool enabled() const { return !socket_.empty(); }

  // Sends `state` as one datagram, without waiting. OK when disabled.
  // INVALID_ARGUMENT for a socket name that is neither a path ("/...") nor
  // abstract ("@..."), or is too long; UNAVAILABLE (with errno) when the
  // datagram cannot be sent, e.g. because the manager's queue is full (the
  // datagram is then lost: a daemon never stalls on its manager).
  absl::Status Notify(const std::string& state) const;

  // The protocol's messages. STATUS lines carry `status` when not empty.
  absl::Status Ready(const std::string& status) const;
  // "RELOADING=1" with MONOTONIC_USEC (systemd >= 253 wants it; older ones
  // ignore it). Follow with Ready() once the reload is done.
  absl::Status Reloading(const std::string& status) const;
  absl::Status Stopping(const std::string& status) const;
  absl::Status Status(const std::string& status) const;
  absl::Status Watchdog() const;

 private:
  const std::string socket_;
};

// The watchdog period the service manager asks for: `watchdog_usec` and
// `watchdog_pid` are the values of $WATCHDOG_USEC and $WATCHDOG_PID (null
// when unset), `self` this process's id. Zero when there is no watchdog (no
// usec, or a pid naming another process). INVALID_ARGUMENT when usec is not
// a positive integer or pid not an integer.
absl::StatusOr<absl::Duration> WatchdogTimeout(const char* watchdog_usec,
                                               const char* watchdog_pid, pid_t self);

// Sends WATCHDOG=1 through `notifier` every `timeout / 2` on its own thread,
// from construction until destruction (a zero timeout starts nothing). It
// shows that the process is alive and scheduling and, once SetHealthy is
// called, that it can serve: a ping is skipped while `healthy` returns false
// (the service manager then restarts the daemon). Rounds are bounded by their
// own deadlines.
class WatchdogPinger {
 public:
  WatchdogPinger(const Notifier* notifier, absl::Duration timeout);
  ~WatchdogPinger();
  WatchdogPinger(const WatchdogPinger&) = delete;
  WatchdogPinger& operator=(const WatchdogPinger&) = delete;

  absl::Duration interval() const { return interval_; }

  // From now on pings only while `healthy()` is true (called on the pinger's
  // thread; must outlive the pinger or be replaced).
  void SetHealthy(std::function<bool()> healthy) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Healthy() ABSL_LOCKS_EXCLUDED(mu_);

  const Notifier* const notifier_;  // not owned
  const absl::Duration interval_;
  absl::Mutex mu_;
  std::function<bool()> healthy_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace autotuned
