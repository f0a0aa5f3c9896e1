// Whether a listener still accepts and answers: a thread of its own probes
// it every `interval` (deadline: the interval); the client listener with
// grpc.health.v1.Health/Check on a fresh channel to the daemon's own
// address. gRPC closes a listener
// for good when accept fails for a reason other than a retryable one (e.g.
// "Too many open files"), and the process would then stay up without
// serving; after `max_failures` failed probes in a row the probe calls
// `on_dead`, on its own thread, and again after each further failed probe
// until `on_dead` says it made the listener anew (true): the count then
// starts over. The daemon restarts its listener there, and exits with
// status 1 only after restarts that keep failing. Any answer, NOT_SERVING
// included, counts as alive.
//
// Thread-safety: serving() may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace autotuned {

class ListenerProbe {
 public:
  // One probe: whether the listener answers within the given time.
  using Alive = std::function<bool(absl::Duration)>;

  // `target`: a gRPC target of the client listener ("unix:/run/..."),
  // probed with Health/Check.
  ListenerProbe(std::string target, absl::Duration interval, int max_failures,
                std::function<bool()> on_dead);
  // Any listener: `name` in the log lines, `alive` the probe (e.g. the peer
  // port's, which answers nothing without credentials: TcpAccepting,
  // server.h).
  ListenerProbe(std::string name, Alive alive, absl::Duration interval, int max_failures,
                std::function<bool()> on_dead);
  // Stops probing (at most one probe's deadline later).
  ~ListenerProbe();
  ListenerProbe(const ListenerProbe&) = delete;
  ListenerProbe& operator=(const ListenerProbe&) = delete;

  // False after a failed probe, until one succeeds (for the watchdog).
  bool serving() const { return failures_.load() == 0; }

 private:
  const std::string target_;
  const Alive alive_;
  const absl::Duration interval_;
  std::atomic<int> failures_{0};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace autotuned
