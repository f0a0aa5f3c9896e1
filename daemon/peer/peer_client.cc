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
    stub = v1::Peer::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
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

}  // namespace autotuned
