// The client side of the peer service (proto/peer.proto): how a follower
// daemon reaches the leader of a group's round.
//
// Every call carries "authorization: Bearer <token>" (the node's shared peer
// token, when one is configured) and ends by its deadline. Only the
// operator's peers are dialed (see the constructor): an address from a
// request never receives the token. Channels are made once per address and
// kept, with the credentials given (mutual TLS, the leader's certificate
// checked against the CA and the dialed host: peer_tls.h; or plain TCP, as
// the peer port is configured: see peer_service.h); a call that fails
// UNAVAILABLE drops its channel and is tried once more on a fresh one (a
// daemon that restarted is reached at once, not after a reconnect backoff);
// a call that runs past its deadline drops its channel, so that the next
// call does not wait on a connection that a network cut left dead.
// Every peer call may be repeated safely.
//
// Status codes of Ready: OK with the leader's Decision (whatever its verdict:
// the leader's decision is the only one); otherwise the gRPC status of the
// call as absl::Status (daemon/common/grpc_status.h; UNAVAILABLE when the leader is down or unreachable,
// DEADLINE_EXCEEDED at the deadline, UNAUTHENTICATED on a token mismatch or
// when the leader does not take this daemon's certificate's names (a failed
// TLS handshake, another CA or an expired certificate, is UNAVAILABLE),
// UNIMPLEMENTED from a leader that predates the multi-daemon rendezvous).
//
// Exchange, ReduceTimings, RunOutcome and Ping (cross-daemon runs:
// daemon/coordinate/crossrun, daemon/coordinate/leadership) work the same
// way: `from_daemon` is set here; the status is the call's.
// Channels accept messages up to kMaxMessageBytes (exchanged buffers).
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <grpcpp/security/credentials.h>

#include "proto/peer.grpc.pb.h"

namespace autotuned {

class PeerClient {
 public:
  // `token`: the shared peer token ("": none sent, with TLS); `self`: this
  // daemon's peer_advertise name, sent as from_daemon; `peers`: the only
  // addresses it dials and sends the token to (config peers). A call to any
  // other address is PERMISSION_DENIED, naming it, before any connection is
  // made. `credentials`: the channels' (PeerChannelCredentials); null:
  // plain TCP.
  PeerClient(std::string token, std::string self, std::vector<std::string> peers,
             std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  const std::string& self() const { return self_; }

  // Reports arrivals to the leader at `address` ("host:port") and waits for
  // its decision until `deadline`. `request.from_daemon` is set here.
  // `gone` (null: never): whether the rank asking went away, asked every
  // kGonePoll while the call runs; once true the call is cancelled (the
  // leader sees its caller leave) and ends CANCELLED.
  absl::StatusOr<v1::Decision> Ready(const std::string& address, v1::ReadyRequest request,
                                     absl::Time deadline,
                                     const std::function<bool()>& gone = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::Decision> ReduceTimings(const std::string& address,
                                             v1::RankTimings request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::ExchangeReply> Exchange(const std::string& address,
                                             v1::ExchangeRequest request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::OutcomeReply> RunOutcome(const std::string& address,
                                              v1::OutcomeRequest request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK when the daemon at `address` answers a Ping by `deadline`.
  absl::Status Ping(const std::string& address, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr absl::Duration kGonePoll = absl::Milliseconds(100);

  // The largest message sent or received on the peer port (either side).
  static constexpr int kMaxMessageBytes = 512 << 20;

 private:
  std::shared_ptr<v1::Peer::Stub> Stub(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops `stub` as the channel to `address` (a fresh one is made next).
  void Forget(const std::string& address, const std::shared_ptr<v1::Peer::Stub>& stub)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One call; on UNAVAILABLE, once more on a fresh channel. `gone`: as
  // Ready's (no retry once it is true).
  template <typename Request, typename Reply, typename Method>
  absl::Status Call(const std::string& address, const Request& request, Reply* reply,
                    absl::Time deadline, Method method,
                    const std::function<bool()>& gone = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string token_;
  const std::string self_;
  const absl::flat_hash_set<std::string> peers_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Peer::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace autotuned
