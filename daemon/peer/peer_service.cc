#include "daemon/peer/peer_service.h"

#include <errno.h>

#include <cstdio>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"

namespace autotuned {
namespace {

constexpr char kBearer[] = "Bearer ";

// Compares without an early exit, so the time taken does not tell how much
// of a guess was right.
bool ConstantTimeEquals(const std::string& given, const std::string& secret) {
  unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(secret[i]);
  }
  return diff == 0;
}

grpc::Status NotServing(const char* method) {
  return ToGrpcStatus(absl::UnavailableError(
      absl::StrCat("Peer.", method, ": this daemon is not serving rounds yet")));
}

}  // namespace

PeerService::PeerService(std::string token, std::string daemon, std::string fingerprint)
    : token_(std::move(token)),
      daemon_(std::move(daemon)),
      fingerprint_(std::move(fingerprint)) {}

grpc::Status PeerService::Authenticate(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::string why;
  if (it == metadata.end()) {
    why = "no \"authorization\" metadata; send \"authorization: Bearer <peer token>\"";
  } else {
    const std::string value(it->second.data(), it->second.size());
    if (value.rfind(kBearer, 0) != 0) {
      why = "the \"authorization\" metadata is not \"Bearer <peer token>\"";
    } else if (!ConstantTimeEquals(value.substr(sizeof(kBearer) - 1), token_)) {
      why = "wrong peer token";
    }
  }
  if (why.empty()) return grpc::Status::OK;
  spdlog::warn("peer: refused a call from {}: {}", context.peer(), why);
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}

grpc::Status PeerService::Ping(grpc::ServerContext* context, const v1::PingRequest*,
                               v1::PingReply* reply) {
  grpc::Status auth = Authenticate(*context);
  if (!auth.ok()) return auth;
  reply->set_daemon(daemon_);
  reply->set_fingerprint(fingerprint_);
  return grpc::Status::OK;
}

void PeerService::SetReadyHandler(ReadyHandler handler) {
  absl::MutexLock lock(&mu_);
  ready_ = std::move(handler);
}

grpc::Status PeerService::Ready(grpc::ServerContext* context,
                                const v1::ReadyRequest* request, v1::Decision* reply) {
  grpc::Status auth = Authenticate(*context);
  if (!auth.ok()) return auth;
  ReadyHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = ready_;
  }
  if (!handler) return NotServing("Ready");
  absl::StatusOr<v1::Decision> decision =
      handler(*request, absl::FromChrono(context->deadline()));
  if (!decision.ok()) return ToGrpcStatus(decision.status());
  *reply = *std::move(decision);
  return grpc::Status::OK;
}

void PeerService::SetRunHandlers(ReduceHandler reduce, ExchangeHandler exchange) {
  absl::MutexLock lock(&mu_);
  reduce_ = std::move(reduce);
  exchange_ = std::move(exchange);
}

grpc::Status PeerService::ReduceTimings(grpc::ServerContext* context,
                                        const v1::RankTimings* request,
                                        v1::Decision* reply) {
  grpc::Status auth = Authenticate(*context);
  if (!auth.ok()) return auth;
  ReduceHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = reduce_;
  }
  if (!handler) return NotServing("ReduceTimings");
  absl::StatusOr<v1::Decision> decision =
      handler(*request, absl::FromChrono(context->deadline()));
  if (!decision.ok()) return ToGrpcStatus(decision.status());
  *reply = *std::move(decision);
  return grpc::Status::OK;
}

grpc::Status PeerService::Exchange(grpc::ServerContext* context,
                                   const v1::ExchangeRequest* request,
                                   v1::ExchangeReply* reply) {
  grpc::Status auth = Authenticate(*context);
  if (!auth.ok()) return auth;
  ExchangeHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = exchange_;
  }
  if (!handler) return NotServing("Exchange");
  absl::StatusOr<v1::ExchangeReply> out =
      handler(*request, absl::FromChrono(context->deadline()));
  if (!out.ok()) return ToGrpcStatus(out.status());
  *reply = *std::move(out);
  return grpc::Status::OK;
}

absl::StatusOr<std::string> LoadPeerToken(const config::DaemonConfig& config) {
  if (!config.peer_token().empty()) return config.peer_token();
  const std::string& path = config.peer_token_file();
  if (path.empty()) return std::string();
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("peer_token_file: cannot open ", path));
  }
  std::string text;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() < 4096) {
    text.append(buf, n);
  }
  std::fclose(f);
  const std::string token(absl::StripAsciiWhitespace(text));
  if (token.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_token_file: ", path, " must hold one line, the token"));
  }
  if (token.size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_token_file: the token in ", path, " must be at least 16 characters, got ",
        token.size()));
  }
  return token;
}

}  // namespace autotuned
