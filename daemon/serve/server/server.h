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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

// The client server of StartServer, made anew in place when its listener is
// lost (the listener probe, listener_probe.h): Restart shuts the old server
// down (the calls in flight get up to a second), removes its socket if it is
// still the one it made, and starts another with the same configuration and
// services (the same socket path; a configured TCP port again).
//
// Thread-safety: every method from any thread.
class ClientListener {
 public:
  static absl::StatusOr<std::unique_ptr<ClientListener>> Start(
      const config::DaemonConfig& config, std::vector<grpc::Service*> services);
  ~ClientListener();

  // UNAVAILABLE when fewer than 64 file descriptors are free (the old server
  // is then left as it is: gRPC aborts the process when a server it builds
  // finds none), or (and no server until a later Restart succeeds) when the
  // new listener cannot be opened.
  absl::Status Restart();
  // Shuts the server down by `deadline` and removes its socket (as
  // RemoveOwnSocket); Restart does nothing after it.
  void Stop(absl::Time deadline);
  // Restarts that succeeded.
  int restarts() const;

  const std::string& unix_socket() const { return unix_socket_; }
  int tcp_port() const { return tcp_port_; }

 private:
  ClientListener(const config::DaemonConfig& config, std::vector<grpc::Service*> services,
                 Listening listening);

  const config::DaemonConfig config_;
  const std::vector<grpc::Service*> services_;
  const std::string unix_socket_;
  const int tcp_port_;
  mutable absl::Mutex mu_;
  Listening listening_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
};

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
// reflection, so that nothing on the port answers without the peer's
// credentials (PeerService checks the token and the certificate's names).
// `credentials`: the port's (PeerServerCredentials, daemon/coordinate/peer/peer_tls.h:
// mutual TLS); null: plain TCP. UNAVAILABLE when the port cannot be opened.
absl::StatusOr<PeerListening> StartPeerServer(
    const config::DaemonConfig& config, grpc::Service* peer,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);

// The peer server of StartPeerServer, made anew in place when its listener
// is lost, as ClientListener's: Restart shuts the old server down (the calls
// in flight get up to a second) and starts another on the same port with
// the same service and credentials.
//
// Thread-safety: every method from any thread.
class PeerListener {
 public:
  static absl::StatusOr<std::unique_ptr<PeerListener>> Start(
      const config::DaemonConfig& config, grpc::Service* peer,
      std::shared_ptr<grpc::ServerCredentials> credentials);
  ~PeerListener();

  // As ClientListener::Restart.
  absl::Status Restart();
  // Shuts the server down by `deadline`; Restart does nothing after it.
  void Stop(absl::Time deadline);
  // Restarts that succeeded.
  int restarts() const;

  // config.peer_listen with the bound port.
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  PeerListener(const config::DaemonConfig& config, grpc::Service* peer,
               std::shared_ptr<grpc::ServerCredentials> credentials, PeerListening listening);

  config::DaemonConfig config_;  // peer_listen with the bound port
  grpc::Service* const peer_;
  const std::shared_ptr<grpc::ServerCredentials> credentials_;
  const std::string address_;
  const int port_;
  mutable absl::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
};

// Whether a TCP socket of this network namespace listens on `port` (IPv4
// or IPv6) with no connection waiting in its accept queue, read from
// /proc/net/tcp and /proc/net/tcp6 (a listening socket's rx_queue is its
// accept queue): a server that stopped accepting (gRPC after "Failed
// accept4: Too many open files") keeps its socket open while connections
// pile up there. No connection is made, so a port that takes TLS logs no
// refused handshake. False when neither file can be read.
bool TcpAccepting(int port);

}  // namespace autotuned
