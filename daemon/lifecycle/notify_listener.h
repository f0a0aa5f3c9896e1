// Test helper: the service manager's end of the notification protocol, a
// datagram socket the test owns, as systemd would hold it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autotuned::testing {

class NotifyListener {
 public:
  // Binds a fresh datagram socket: `abstract` in the abstract namespace
  // (address "@..."), otherwise at a path under a new /tmp directory.
  static absl::StatusOr<NotifyListener> Create(bool abstract);
  NotifyListener(NotifyListener&& other) noexcept;
  NotifyListener& operator=(NotifyListener&&) = delete;
  ~NotifyListener();

  // The value for $NOTIFY_SOCKET.
  const std::string& address() const { return address_; }

  // The next datagram, or "" when none arrives within `timeout`.
  std::string Next(absl::Duration timeout);
  // Reads datagrams until one contains the line `line` (e.g. "READY=1");
  // returns every datagram read, the matching one last, or an empty vector
  // when `timeout` passes first.
  std::vector<std::string> WaitFor(const std::string& line, absl::Duration timeout);

 private:
  NotifyListener(int fd, std::string address, std::string dir)
      : fd_(fd), address_(std::move(address)), dir_(std::move(dir)) {}

  int fd_;
  std::string address_;
  std::string dir_;  // removed at destruction ("" for abstract)
};

// True when `datagram` holds `line` as one of its newline-separated lines.
bool HasLine(const std::string& datagram, const std::string& line);

}  // namespace autotuned::testing
