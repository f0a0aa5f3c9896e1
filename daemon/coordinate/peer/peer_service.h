// The daemon-to-daemon service (autotuned.v1.Peer, proto/peer.proto) as this
// version serves it on the peer port (config peer_listen): Ping answers;
// Ready, ReduceTimings and Exchange go to the handlers set with
// SetReadyHandler and SetRunHandlers (the daemon's core sets those of the
// groups it leads: daemon/coordinate/leadership, by Node::ServePeers in daemon/ops/node),
// RunOutcome to the one set with SetOutcomeHandler (a follower's side), and
// each is UNAVAILABLE until it is set. A handler's error status reaches the caller as is
// (daemon/common/grpc_status.h). See docs/protocol.md ("Groups over several
// daemons") for the protocol.
//
// Authentication, by mutual TLS (config peer_tls, daemon/coordinate/peer/peer_tls.h),
// a shared token, or both. With TLS, the server's credentials have verified
// the caller's certificate against the CA before any call, and every call
// must come with a certificate that names the host of one of the
// configured peers (PeerNamedIn). With a token (config peer_token or
// peer_token_file), every call must carry the metadata
//   authorization: Bearer <token>
// compared in constant time. A call that fails either check is refused with
// UNAUTHENTICATED from its certificate and metadata alone, before its
// message is read (every method is a streamed unary one: gRPC reads the body
// only when the handler asks, so a refused caller makes the daemon hold no
// more than the transport's flow-control window), and logged with the
// caller's address (at most kRefusedLogBurst lines per kRefusedLogPeriod,
// then a count). Without TLS the token keeps strangers out but does not
// hide the traffic: keep such a peer network private.
//
// Thread-safety: every method may be called concurrently; gRPC may call it
// from any number of threads.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/common/escape.h"
#include "proto/peer.grpc.pb.h"

namespace autotuned {

class PeerService final : public v1::Peer::StreamedUnaryService {
 public:
  // Answers an authenticated Ready by `deadline` (the caller's): the
  // leader's decision, or an error status passed to the caller as is.
  // `gone`: whether the caller went away (its call cancelled: the follower's
  // rank left); cheap, may be asked often.
  using ReadyHandler = std::function<absl::StatusOr<v1::Decision>(
      const v1::ReadyRequest& request, absl::Time deadline,
      const std::function<bool()>& gone)>;

  // ReduceTimings: the round's final decision, or an error status.
  using ReduceHandler = std::function<absl::StatusOr<v1::Decision>(
      const v1::RankTimings& request, absl::Time deadline)>;
  // Exchange: the other daemons' data, or the step's abort/deadline status.
  using ExchangeHandler = std::function<absl::StatusOr<v1::ExchangeReply>(
      const v1::ExchangeRequest& request, absl::Time deadline)>;
  // RunOutcome: what the leader answered this daemon's part of a run.
  using OutcomeHandler = std::function<absl::StatusOr<v1::OutcomeReply>(
      const v1::OutcomeRequest& request, absl::Time deadline)>;

  // `daemon` names this daemon in Ping replies (the daemon uses its host
  // name); `fingerprint` is the node fingerprint (NodeFingerprint,
  // daemon/state/cache/key.h). At most `max_calls`
  // authenticated calls are served at once (the daemon passes
  // limits.max_waiting_ranks, and SetMaxCalls on each reload): past them a
  // call is refused with RESOURCE_EXHAUSTED naming the limit, before its
  // message is read, so that a peer that holds the token still cannot hold
  // unbounded threads.
  // `tls_peer_hosts`: set when the peer port is served over mutual TLS, the
  // host names or addresses a caller's certificate must name one of (the
  // hosts of config peers). `token` "": no token is asked for, which is
  // allowed with TLS only (without either, every call is refused).
  PeerService(std::string token, std::string daemon, std::string fingerprint,
              int max_calls = 1024,
              std::optional<std::vector<std::string>> tls_peer_hosts = std::nullopt);

  // Serves Ready through `handler` from now on (set once, before peers
  // can know this daemon leads anything).
  void SetReadyHandler(ReadyHandler handler) ABSL_LOCKS_EXCLUDED(mu_);
  void SetRunHandlers(ReduceHandler reduce, ExchangeHandler exchange)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SetOutcomeHandler(OutcomeHandler handler) ABSL_LOCKS_EXCLUDED(mu_);

  // The limit on authenticated calls served at once, from now on (a reload
  // of limits.max_waiting_ranks). Calls already served go on; when more are
  // being served than the new limit, new ones are refused until they are
  // fewer. Any thread.
  void SetMaxCalls(int max_calls) { max_calls_.store(max_calls); }

  static constexpr int kRefusedLogBurst = 5;
  static constexpr absl::Duration kRefusedLogPeriod = absl::Seconds(10);

  grpc::Status StreamedPing(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::PingRequest, v1::PingReply>* stream) override;
  grpc::Status StreamedReady(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::ReadyRequest, v1::Decision>* stream) override;
  grpc::Status StreamedReduceTimings(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::RankTimings, v1::Decision>* stream) override;
  grpc::Status StreamedExchange(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::ExchangeRequest, v1::ExchangeReply>* stream) override;
  grpc::Status StreamedRunOutcome(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<v1::OutcomeRequest, v1::OutcomeReply>* stream) override;

 private:
  // OK, or UNAUTHENTICATED saying what was wrong (never the token): the
  // certificate's names first (with TLS), then the token (when one is set).
  grpc::Status Authenticate(const grpc::ServerContext& context) const;
  // UNAUTHENTICATED with `why`, logged (rate-limited) with the caller's address.
  grpc::Status Refuse(const grpc::ServerContext& context, const std::string& why) const;
  // Authenticates, then reads the request, checks (with TLS) that the
  // certificate names its from_daemon's host, answers it with `handle` and
  // writes the reply.
  template <typename Request, typename Reply, typename Handle>
  grpc::Status Serve(grpc::ServerContext* context,
                     grpc::ServerUnaryStreamer<Request, Reply>* stream, Handle handle);
  // Serve with the handler in `member` (NotServing(method) while unset).
  template <typename Request, typename Reply, typename Handler>
  grpc::Status ServeHandler(grpc::ServerContext* context,
                            grpc::ServerUnaryStreamer<Request, Reply>* stream,
                            Handler PeerService::*member, const char* method);

  const std::string token_;
  const std::optional<std::vector<std::string>> tls_peer_hosts_;
  const std::string daemon_;
  const std::string fingerprint_;
  std::atomic<int> max_calls_;
  std::atomic<int> calls_{0};  // authenticated calls being served
  mutable RateLimitedLog refused_log_{kRefusedLogBurst, kRefusedLogPeriod};

  mutable absl::Mutex mu_;
  ReadyHandler ready_ ABSL_GUARDED_BY(mu_);
  ReduceHandler reduce_ ABSL_GUARDED_BY(mu_);
  ExchangeHandler exchange_ ABSL_GUARDED_BY(mu_);
  OutcomeHandler outcome_ ABSL_GUARDED_BY(mu_);
};

// The peer token the configuration names: peer_token, or the contents of
// peer_token_file with surrounding whitespace removed. "" when neither is
// set. INVALID_ARGUMENT when the file holds fewer than 16 characters or
// several lines; the file's read error (naming it) when it cannot be read.
absl::StatusOr<std::string> LoadPeerToken(const config::DaemonConfig& config);

}  // namespace autotuned
