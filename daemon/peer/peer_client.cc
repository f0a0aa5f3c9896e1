#include "daemon/peer/peer_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace autotuned {

PeerClient::PeerClient(std::string token, std::string self)
    : token_(std::move(token)), self_(std::move(self)) {}

v1::Peer::Stub* PeerClient::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<v1::Peer::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    stub = v1::Peer::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args));
  }
  return stub.get();
}

absl::StatusOr<v1::Decision> PeerClient::Ready(const std::string& address,
                                               v1::ReadyRequest request,
                                               absl::Time deadline) {
  request.set_from_daemon(self_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::Decision decision;
  const grpc::Status s = Stub(address)->Ready(&context, request, &decision);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return decision;
}

namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

absl::StatusOr<v1::Decision> PeerClient::ReduceTimings(const std::string& address,
                                                       v1::RankTimings request,
                                                       absl::Time deadline) {
  request.set_from_daemon(self_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::Decision decision;
  const grpc::Status s = Stub(address)->ReduceTimings(&context, request, &decision);
  if (!s.ok()) return FromGrpc(s);
  return decision;
}

absl::StatusOr<v1::ExchangeReply> PeerClient::Exchange(const std::string& address,
                                                       v1::ExchangeRequest request,
                                                       absl::Time deadline) {
  request.set_from_daemon(self_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::ExchangeReply reply;
  const grpc::Status s = Stub(address)->Exchange(&context, request, &reply);
  if (!s.ok()) return FromGrpc(s);
  return reply;
}

absl::Status PeerClient::Ping(const std::string& address, absl::Time deadline) {
  v1::PingRequest request;
  request.set_from_daemon(self_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::PingReply reply;
  return FromGrpc(Stub(address)->Ping(&context, request, &reply));
}

}  // namespace autotuned
