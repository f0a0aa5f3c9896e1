#include "daemon/coordinate/peer/peer_client.h"

#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/common/escape.h"
#include "daemon/common/grpc_status.h"

namespace autotuned {

PeerClient::PeerClient(std::string token, std::string self, std::vector<std::string> peers,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : token_(std::move(token)),
      self_(std::move(self)),
      peers_(peers.begin(), peers.end()),
      credentials_(credentials != nullptr ? std::move(credentials)
                                          : grpc::InsecureChannelCredentials()) {}

std::shared_ptr<v1::Peer::Stub> PeerClient::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<v1::Peer::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // A daemon that comes back is reached again within a second, not after
    // gRPC's default backoff of up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Despite its name, the shortest time gRPC gives one connection attempt
    // (TCP's and HTTP/2's handshakes, two round trips, more under loss); at
    // 100 ms no connection completed over a link of 50 ms each way. Calls
    // end by their own deadlines whatever this is.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
    stub = v1::Peer::NewStub(grpc::CreateCustomChannel(
        address, credentials_, args));
  }
  return stub;
}

void PeerClient::Forget(const std::string& address,
                        const std::shared_ptr<v1::Peer::Stub>& stub) {
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(address);
  if (it != stubs_.end() && it->second == stub) stubs_.erase(it);
}

template <typename Request, typename Reply, typename Method>
absl::Status PeerClient::Call(const std::string& address, const Request& request,
                              Reply* reply, absl::Time deadline, Method method,
                              const std::function<bool()>& gone) {
  if (!peers_.contains(address)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "peer \"", LogEscaped(address), "\" is not one of this daemon's peers (configuration)"));
  }
  const absl::Status left = absl::CancelledError("the rank's caller went away");
  for (int attempt = 0;; ++attempt) {
    if (gone && gone()) return left;
    std::shared_ptr<v1::Peer::Stub> stub = Stub(address);
    grpc::ClientContext context;
    if (!token_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
    context.set_deadline(absl::ToChronoTime(deadline));
    // Cancels the call once its rank went away, so that the peer stops
    // waiting for it too.
    absl::Notification ended;
    std::thread watcher;
    if (gone) {
      watcher = std::thread([&gone, &ended, &context] {
        while (!ended.WaitForNotificationWithTimeout(kGonePoll)) {
          if (gone()) {
            context.TryCancel();
            return;
          }
        }
      });
    }
    const grpc::Status s = ((*stub).*method)(&context, request, reply);
    if (watcher.joinable()) {
      ended.Notify();
      watcher.join();
    }
    if (!s.ok() && gone && gone()) return left;
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      // The connection may be dead without a word: a peer cut off by the
      // network, whose side has since closed it, is reached again by the
      // next call only on a fresh one (the old one would wait for TCP's
      // retransmission backoff, tens of seconds after a long cut).
      Forget(address, stub);
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(s);
    // The channel may hold a connection to a daemon that has since
    // restarted, or wait out a reconnect backoff: try once more on a fresh
    // one (every peer call may be repeated: the leader counts a rank, a
    // daemon's timings and a barrier's data once).
    Forget(address, stub);
    if (attempt > 0 || absl::Now() >= deadline) return FromGrpcStatus(s);
  }
}

absl::StatusOr<v1::Decision> PeerClient::Ready(const std::string& address,
                                               v1::ReadyRequest request, absl::Time deadline,
                                               const std::function<bool()>& gone) {
  request.set_from_daemon(self_);
  v1::Decision decision;
  absl::Status s = Call(address, request, &decision, deadline, &v1::Peer::Stub::Ready, gone);
  if (!s.ok()) return s;
  return decision;
}

absl::StatusOr<v1::Decision> PeerClient::ReduceTimings(const std::string& address,
                                                       v1::RankTimings request,
                                                       absl::Time deadline) {
  request.set_from_daemon(self_);
  v1::Decision decision;
  absl::Status s =
      Call(address, request, &decision, deadline, &v1::Peer::Stub::ReduceTimings);
  if (!s.ok()) return s;
  return decision;
}

absl::StatusOr<v1::ExchangeReply> PeerClient::Exchange(const std::string& address,
                                                       v1::ExchangeRequest request,
                                                       absl::Time deadline) {
  request.set_from_daemon(self_);
  v1::ExchangeReply reply;
  absl::Status s = Call(address, request, &reply, deadline, &v1::Peer::Stub::Exchange);
  if (!s.ok()) return s;
  return reply;
}

absl::StatusOr<v1::OutcomeReply> PeerClient::RunOutcome(const std::string& address,
                                                        v1::OutcomeRequest request,
                                                        absl::Time deadline) {
  request.set_from_daemon(self_);
  v1::OutcomeReply reply;
  absl::Status s = Call(address, request, &reply, deadline, &v1::Peer::Stub::RunOutcome);
  if (!s.ok()) return s;
  return reply;
}

absl::Status PeerClient::Ping(const std::string& address, absl::Time deadline) {
  v1::PingRequest request;
  request.set_from_daemon(self_);
  v1::PingReply reply;
  return Call(address, request, &reply, deadline, &v1::Peer::Stub::Ping);
}

}  // namespace autotuned
