// Test helper: the service manager's end of the notification protocol, a
// datagram socket the test owns, as systemd would hold it. A thread reads it
// all the time (as systemd does), so the daemon never finds it full.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace autotuned::testing {

class NotifyListener {
 public:
  // Binds a fresh datagram socket: `abstract` in the abstract namespace
  // (address "@..."), otherwise at a path under a new /tmp directory.
  static absl::StatusOr<std::unique_ptr<NotifyListener>> Create(bool abstract);
  // Create(false), or the test process ends at once with the reason.
  static std::unique_ptr<NotifyListener> MustCreate();
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // The value for $NOTIFY_SOCKET.
  const std::string& address() const { return address_; }

  // The next datagram not yet returned, or "" when none arrives within
  // `timeout`.
  std::string Next(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes datagrams until one holds the line `line` (e.g. "READY=1");
  // returns those taken, the matching one last, or an empty vector when
  // `timeout` passes first.
  std::vector<std::string> WaitFor(const std::string& line, absl::Duration timeout);

 private:
  NotifyListener(int fd, std::string address, std::string dir);
  void Read();

  const int fd_;
  const std::string address_;
  const std::string dir_;  // removed at destruction ("" for abstract)
  int stop_fd_[2] = {-1, -1};
  std::thread reader_;

  absl::Mutex mu_;
  std::deque<std::string> received_ ABSL_GUARDED_BY(mu_);
};

// True when `datagram` holds `line` as one of its newline-separated lines.
bool HasLine(const std::string& datagram, const std::string& line);

}  // namespace autotuned::testing
