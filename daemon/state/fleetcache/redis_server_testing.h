// Test helper: a real redis-server (Debian's, installed by deploy/setup.sh)
// started as a child process on a Unix socket in a fresh temporary
// directory, never a system service. Every wait has a deadline; the server
// is killed when the helper is destroyed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace autotuned::fleetcache {

class RedisServer {
 public:
  // A server to be started in a fresh directory under /tmp (Unix socket
  // paths are short), removed by the destructor.
  RedisServer();
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts redis-server (no persistence) with `extra` arguments (e.g.
  // {"--user", "fleet", "on", ">secret", "~*", "+@all"}) and waits until it
  // answers PING on its socket (with `ping_auth`, an AUTH argv, first).
  absl::Status Start(std::vector<std::string> extra = {},
                     std::vector<std::string> ping_auth = {},
                     absl::Duration timeout = absl::Seconds(20));
  // SIGKILLs it and waits for it to exit.
  void Kill();
  // Runs one command on the socket (as `ping_auth` when Start had one): the
  // reply as text ("(nil)" for none, "(error) ..." for an error reply).
  std::string Call(const std::vector<std::string>& argv) const;

  // "unix:/path", as fleet_cache.redis.
  std::string address() const { return "unix:" + socket_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_;
  std::string socket_;
  std::vector<std::string> auth_;
  pid_t pid_ = -1;
};

}  // namespace autotuned::fleetcache
