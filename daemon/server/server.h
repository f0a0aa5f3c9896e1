// Starts the gRPC servers of the daemon: the client server (the Unix domain
// socket, the default way in for local clients, optionally a TCP address,
// server reflection; the caller passes the health service among `services`)
// and, when configured, the peer server (a TCP port for other daemons,
// carrying the Peer service alone).
// Both refuse messages over limits.max_request_bytes with RESOURCE_EXHAUSTED;
// on the client server a message that does not parse is INVALID_ARGUMENT
// saying so (parse_errors.h).
#pragma once

#include <sys/types.h>

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
  // The socket file this daemon made (RemoveOwnSocket compares them).
  dev_t socket_dev = 0;
  ino_t socket_ino = 0;
};

// One daemon per socket path: takes "<config.unix_socket>.lock" (creating
// the socket's directory as StartServer does), an exclusive flock held for
// the life of the process (the fd is never closed; children do not inherit
// it). Call it before anything else the daemon sets up (the cache, the
// backend), so that of two daemons started at once on one path exactly one
// goes on. -1 when the configuration has no Unix socket; FAILED_PRECONDITION
// naming the lock (and its holder's pid) when another daemon holds it.
absl::StatusOr<int> LockSocketPath(const config::DaemonConfig& config);

// Listens where `config` says and serves `services` (not owned; they outlive
// the server). The Unix socket's directory is created when missing (mode
// 0750, group config.unix_socket_group when set), a stale
// socket file left by a dead daemon is replaced, and the socket gets
// config.unix_socket_mode and config.unix_socket_group before it appears at
// its path (it is bound as "<path>.new" and renamed into place), so no client
// ever reaches it with other permissions. FAILED_PRECONDITION when another
// live daemon already answers on the socket (one that does not hold the
// lock, LockSocketPath); UNAVAILABLE when a listener cannot be opened.
absl::StatusOr<Listening> StartServer(const config::DaemonConfig& config,
                                      const std::vector<grpc::Service*>& services);

// Removes the Unix socket of `listening` only when the file at its path is
// still the one StartServer made (same device and inode): a socket another
// daemon put there since is left alone (logged). True when it was removed.
bool RemoveOwnSocket(const Listening& listening);

struct PeerListening {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // config.peer_listen with the bound port
};

// Listens on config.peer_listen (which must not be empty) and serves
// `peer` (not owned; it outlives the server) alone: no health checking, no
// reflection, so that nothing on the port answers without the peer token
// (PeerService checks it). UNAVAILABLE when the port cannot be opened.
absl::StatusOr<PeerListening> StartPeerServer(const config::DaemonConfig& config,
                                              grpc::Service* peer);

}  // namespace autotuned
