// Starts the gRPC server that carries the daemon's services: the Unix domain
// socket (the default way in for local clients), optionally a TCP address,
// gRPC health checking and server reflection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include <grpcpp/grpcpp.h>

namespace autotuned {

struct Listening {
  std::unique_ptr<grpc::Server> server;
  std::string unix_socket;  // "" when off
  int tcp_port = 0;         // 0 when off
};

// Listens where `config` says and serves `services` (not owned; they outlive
// the server). The Unix socket's directory is created when missing, a stale
// socket file left by a dead daemon is replaced, and the socket gets
// config.unix_socket_mode and config.unix_socket_group. FAILED_PRECONDITION
// when another live daemon already answers on the socket; UNAVAILABLE when a
// listener cannot be opened.
absl::StatusOr<Listening> StartServer(const config::DaemonConfig& config,
                                      const std::vector<grpc::Service*>& services);

}  // namespace autotuned
