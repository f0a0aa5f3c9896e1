#include "client/cpp/client.h"

#include <sys/un.h>

#include <cstdlib>
#include <utility>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/status.h"

namespace autotuned {
namespace {

// Largest sweep answers (many sizes x many candidates x per-rank timings)
// exceed gRPC's default 4 MiB receive limit.
constexpr int kMaxReceiveBytes = 256 << 20;

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// One unary call with a deadline `timeout` from now. `call(context,
// response)` issues it and returns the grpc::Status.
template <typename Response, typename Call>
absl::StatusOr<Response> CallUnary(absl::Duration timeout, Call call) {
  grpc::ClientContext context;
  SetDeadline(context, timeout);
  Response response;
  absl::Status status = FromGrpcStatus(call(&context, &response));
  if (!status.ok()) return status;
  return response;
}

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE: return "IDLE";
    case GRPC_CHANNEL_CONNECTING: return "CONNECTING";
    case GRPC_CHANNEL_READY: return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN: return "SHUTDOWN";
  }
  return "UNKNOWN";
}

}  // namespace

std::string DefaultTarget() {
  const char* env = std::getenv(kSocketEnvVar);
  if (env == nullptr || *env == '\0') return absl::StrCat("unix:", kDefaultSocket);
  if (env[0] == '/') return absl::StrCat("unix:", env);
  return env;
}

absl::StatusOr<std::string> NormalizeTarget(const std::string& target) {
  if (target.empty()) {
    return absl::InvalidArgumentError("empty daemon target");
  }
  std::string normalized =
      target[0] == '/' ? absl::StrCat("unix:", target) : target;
  if (absl::StartsWith(normalized, "unix:")) {
    std::string path = normalized.substr(5);
    // "unix:///abs/path" is the URI form of "unix:/abs/path".
    if (absl::StartsWith(path, "//")) path = path.substr(2);
    constexpr size_t kMaxPath = sizeof(sockaddr_un{}.sun_path) - 1;
    if (path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no socket path in target \"", target, "\""));
    }
    if (path.size() > kMaxPath) {
      return absl::InvalidArgumentError(absl::StrCat(
          "socket path of target \"", target, "\" is ", path.size(),
          " bytes long; a unix socket path may have at most ", kMaxPath));
    }
  }
  return normalized;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const std::string& target, absl::Duration timeout) {
  absl::StatusOr<std::string> normalized = NormalizeTarget(target);
  if (!normalized.ok()) return normalized.status();

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  // A local daemon that is starting up is noticed quickly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      *normalized, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to autotuned at ", *normalized, " within ",
        absl::FormatDuration(timeout), " (channel ",
        StateName(channel->GetState(false)), ")"));
  }
  return FromChannel(std::move(channel), *std::move(normalized));
}

std::unique_ptr<Client> Client::FromChannel(
    std::shared_ptr<grpc::Channel> channel, std::string target) {
  return std::unique_ptr<Client>(
      new Client(std::move(channel), std::move(target)));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, std::string target)
    : channel_(std::move(channel)),
      stub_(v1::Autotune::NewStub(channel_)),
      target_(std::move(target)) {}

absl::StatusOr<v1::TuneResponse> Client::Tune(const v1::TuneRequest& request) {
  return CallUnary<v1::TuneResponse>(
      measure_timeout_, [&](grpc::ClientContext* c, v1::TuneResponse* r) {
        return stub_->Tune(c, request, r);
      });
}

absl::StatusOr<v1::DispatchTable> Client::Sweep(
    const v1::SweepRequest& request,
    std::function<void(const v1::SweepUpdate&)> on_update) {
  grpc::ClientContext context;
  SetDeadline(context, measure_timeout_);
  std::unique_ptr<grpc::ClientReader<v1::SweepUpdate>> reader =
      stub_->Sweep(&context, request);
  v1::SweepUpdate update;
  bool have_table = false;
  v1::DispatchTable table;
  while (reader->Read(&update)) {
    if (on_update) on_update(update);
    if (update.has_table()) {
      table = update.table();
      have_table = true;
    }
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  if (!have_table) {
    return absl::InternalError(
        "Sweep: the stream ended without a dispatch table");
  }
  return table;
}

absl::StatusOr<v1::ListImplementationsResponse> Client::ListImplementations(
    const v1::ListImplementationsRequest& request) {
  return CallUnary<v1::ListImplementationsResponse>(
      query_timeout_,
      [&](grpc::ClientContext* c, v1::ListImplementationsResponse* r) {
        return stub_->ListImplementations(c, request, r);
      });
}

absl::StatusOr<v1::NodeInfoResponse> Client::NodeInfo(
    const v1::NodeInfoRequest& request) {
  return CallUnary<v1::NodeInfoResponse>(
      query_timeout_, [&](grpc::ClientContext* c, v1::NodeInfoResponse* r) {
        return stub_->NodeInfo(c, request, r);
      });
}

absl::StatusOr<v1::ListCacheResponse> Client::ListCache(
    const v1::ListCacheRequest& request) {
  return CallUnary<v1::ListCacheResponse>(
      query_timeout_, [&](grpc::ClientContext* c, v1::ListCacheResponse* r) {
        return stub_->ListCache(c, request, r);
      });
}

absl::StatusOr<v1::ClearCacheResponse> Client::ClearCache(
    const v1::ClearCacheRequest& request) {
  return CallUnary<v1::ClearCacheResponse>(
      query_timeout_, [&](grpc::ClientContext* c, v1::ClearCacheResponse* r) {
        return stub_->ClearCache(c, request, r);
      });
}

}  // namespace autotuned
