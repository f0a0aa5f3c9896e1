#include "daemon/coordinate/peer/peer_service.h"

#include <errno.h>

#include <cstdio>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"
#include "daemon/coordinate/peer/peer_tls.h"

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

PeerService::PeerService(std::string token, std::string daemon, std::string fingerprint,
                         int max_calls, std::optional<std::vector<std::string>> tls_peer_hosts)
    : token_(std::move(token)),
      tls_peer_hosts_(std::move(tls_peer_hosts)),
      daemon_(std::move(daemon)),
      fingerprint_(std::move(fingerprint)),
      max_calls_(max_calls) {}

grpc::Status PeerService::Authenticate(const grpc::ServerContext& context) const {
  std::string why;
  if (tls_peer_hosts_) {
    const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    const absl::Status named = auth == nullptr
                                   ? absl::UnauthenticatedError("not a TLS call")
                                   : PeerNamedIn(*auth, *tls_peer_hosts_);
    if (!named.ok()) why = std::string(named.message());
  } else if (token_.empty()) {
    why = "this daemon has neither a peer token nor peer TLS configured";
  }
  if (why.empty() && !token_.empty()) {
    const auto& metadata = context.client_metadata();
    auto it = metadata.find("authorization");
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
  }
  if (why.empty()) return grpc::Status::OK;
  return Refuse(context, why);
}

grpc::Status PeerService::Refuse(const grpc::ServerContext& context,
                                 const std::string& why) const {
  int64_t suppressed = 0;
  if (refused_log_.Allow(&suppressed)) {
    spdlog::warn("peer: refused a call from {}: {}{}", LogEscaped(context.peer()), why,
                 suppressed > 0 ? absl::StrCat(" (", suppressed, " more refused, not logged)")
                                : std::string());
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}

template <typename Request, typename Reply, typename Handle>
grpc::Status PeerService::Serve(grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<Request, Reply>* stream,
                                Handle handle) {
  grpc::Status auth = Authenticate(*context);
  if (!auth.ok()) return auth;  // the message is never read
  struct Held {  // one of max_calls_ while the call is served
    std::atomic<int>* calls;
    ~Held() { calls->fetch_sub(1); }
  };
  const int max_calls = max_calls_.load();
  if (calls_.fetch_add(1) >= max_calls) {
    calls_.fetch_sub(1);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat(max_calls, " peer calls are being served "
                                     "(limits.max_waiting_ranks); try again later"));
  }
  const Held held{&calls_};
  Request request;
  if (!stream->Read(&request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "no request message, or one that does not parse");
  }
  if (tls_peer_hosts_) {  // Authenticate found the certificate
    const absl::Status sender = FromDaemonCertified(*context->auth_context(),
                                                    request.from_daemon());
    if (!sender.ok()) return Refuse(*context, std::string(sender.message()));
  }
  Reply reply;
  grpc::Status s = handle(request, absl::FromChrono(context->deadline()), &reply);
  if (!s.ok()) return s;
  if (!stream->Write(reply)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the caller went away");
  }
  return grpc::Status::OK;
}

// A handler's answer (or its error status) as the call's.
template <typename Handler, typename Request, typename Reply>
grpc::Status Answer(const Handler& handler, const char* method, const Request& request,
                    absl::Time deadline, Reply* reply) {
  if (!handler) return NotServing(method);
  auto out = handler(request, deadline);
  if (!out.ok()) return ToGrpcStatus(out.status());
  *reply = *std::move(out);
  return grpc::Status::OK;
}

template <typename Request, typename Reply, typename Handler>
grpc::Status PeerService::ServeHandler(grpc::ServerContext* context,
                                       grpc::ServerUnaryStreamer<Request, Reply>* stream,
                                       Handler PeerService::*member, const char* method) {
  return Serve(context, stream,
               [this, member, method](const Request& request, absl::Time deadline,
                                      Reply* reply) {
                 Handler handler;
                 {
                   absl::MutexLock lock(&mu_);
                   handler = this->*member;
                 }
                 return Answer(handler, method, request, deadline, reply);
               });
}

grpc::Status PeerService::StreamedPing(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::PingRequest, v1::PingReply>* stream) {
  return Serve(context, stream, [this](const v1::PingRequest&, absl::Time, v1::PingReply* reply) {
    reply->set_daemon(daemon_);
    reply->set_fingerprint(fingerprint_);
    return grpc::Status::OK;
  });
}

void PeerService::SetReadyHandler(ReadyHandler handler) {
  absl::MutexLock lock(&mu_);
  ready_ = std::move(handler);
}

grpc::Status PeerService::StreamedReady(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::ReadyRequest, v1::Decision>* stream) {
  return Serve(context, stream,
               [this, context](const v1::ReadyRequest& request, absl::Time deadline,
                               v1::Decision* reply) {
                 ReadyHandler handler;
                 {
                   absl::MutexLock lock(&mu_);
                   handler = ready_;
                 }
                 if (!handler) return NotServing("Ready");
                 absl::StatusOr<v1::Decision> out = handler(
                     request, deadline, [context] { return context->IsCancelled(); });
                 if (!out.ok()) return ToGrpcStatus(out.status());
                 *reply = *std::move(out);
                 return grpc::Status::OK;
               });
}

void PeerService::SetRunHandlers(ReduceHandler reduce, ExchangeHandler exchange) {
  absl::MutexLock lock(&mu_);
  reduce_ = std::move(reduce);
  exchange_ = std::move(exchange);
}

grpc::Status PeerService::StreamedReduceTimings(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::RankTimings, v1::Decision>* stream) {
  return ServeHandler(context, stream, &PeerService::reduce_, "ReduceTimings");
}

grpc::Status PeerService::StreamedExchange(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::ExchangeRequest, v1::ExchangeReply>* stream) {
  return ServeHandler(context, stream, &PeerService::exchange_, "Exchange");
}

void PeerService::SetOutcomeHandler(OutcomeHandler handler) {
  absl::MutexLock lock(&mu_);
  outcome_ = std::move(handler);
}

grpc::Status PeerService::StreamedRunOutcome(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<v1::OutcomeRequest, v1::OutcomeReply>* stream) {
  return ServeHandler(context, stream, &PeerService::outcome_, "RunOutcome");
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
