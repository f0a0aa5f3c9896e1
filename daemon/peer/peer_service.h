// The daemon-to-daemon service (autotuned.v1.Peer, proto/peer.proto) as this
// version serves it on the peer port (config peer_listen): Ping answers, the
// round calls (Ready, ReduceTimings) return UNIMPLEMENTED because the
// multi-daemon rendezvous is not built yet.
//
// Authentication: every call must carry the metadata
//   authorization: Bearer <token>
// with the node's shared peer token (config peer_token or peer_token_file);
// any other call is refused with UNAUTHENTICATED before anything else
// happens, and logged with the caller's address. The token is compared in
// constant time. There is no TLS (the static build links grpc_unsecure): the
// token keeps strangers out; it does not hide the traffic, so keep the peer
// network private.
//
// Thread-safety: immutable after construction; gRPC may call it from any
// number of threads.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include "proto/peer.grpc.pb.h"

namespace autotuned {

class PeerService final : public v1::Peer::Service {
 public:
  // `daemon` names this daemon in Ping replies (the daemon uses its host name);
  // `fingerprint` is the node fingerprint (service.h). `token` must not be
  // empty.
  PeerService(std::string token, std::string daemon, std::string fingerprint);

  grpc::Status Ping(grpc::ServerContext* context, const v1::PingRequest* request,
                    v1::PingReply* reply) override;
  grpc::Status Ready(grpc::ServerContext* context, const v1::ReadyRequest* request,
                     v1::Decision* reply) override;
  grpc::Status ReduceTimings(grpc::ServerContext* context,
                             const v1::RankTimings* request,
                             v1::Decision* reply) override;

 private:
  // OK, or UNAUTHENTICATED saying what was wrong (never the token).
  grpc::Status Authenticate(const grpc::ServerContext& context) const;

  const std::string token_;
  const std::string daemon_;
  const std::string fingerprint_;
};

// The peer token the configuration names: peer_token, or the contents of
// peer_token_file with surrounding whitespace removed. "" when neither is
// set. INVALID_ARGUMENT when the file holds fewer than 16 characters or
// several lines; the file's read error (naming it) when it cannot be read.
absl::StatusOr<std::string> LoadPeerToken(const config::DaemonConfig& config);

}  // namespace autotuned
