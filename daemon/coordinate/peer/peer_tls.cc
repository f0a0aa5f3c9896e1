#include "daemon/coordinate/peer/peer_tls.h"

#include <grpc/grpc_security_constants.h>
#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/escape.h"
#include "daemon/ops/tls/tls_files.h"

namespace autotuned {

absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(const config::DaemonConfig& config) {
  const config::TlsConfig& c = config.peer_tls();
  if (c.ca_file().empty()) return std::optional<PeerTls>();
  absl::StatusOr<TlsFiles> files = LoadTlsFiles("peer_tls", c, TlsRole::kServerAndClient);
  if (!files.ok()) return files.status();
  if (files->cert_pem.empty()) {
    return absl::InvalidArgumentError("peer_tls.cert_file: must be set with peer_tls.ca_file");
  }
  if (!config.peer_advertise().empty()) {
    const std::string host = HostsOf({config.peer_advertise()})[0];
    if (!CertificateNamesOneOf(files->cert_pem, {host})) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer_tls.cert_file: the certificate in ", c.cert_file(), " does not name ", host,
          ", the host of peer_advertise (peers dial it and check the name); it ",
          DescribeCertificate(files->cert_pem)));
    }
  }
  return std::optional<PeerTls>(PeerTls{std::move(files->ca_pem), std::move(files->cert_pem),
                                        std::move(files->key_pem)});
}

std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(
    const std::optional<PeerTls>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->ca_pem;
  options.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(
    const std::optional<PeerTls>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_pem;
  options.pem_private_key = tls->key_pem;
  options.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(options);
}

std::vector<std::string> HostsOf(const std::vector<std::string>& addresses) {
  std::vector<std::string> out;
  for (const std::string& a : addresses) {
    std::string host = a.substr(0, a.rfind(':'));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    out.push_back(std::move(host));
  }
  return out;
}

absl::Status PeerNamedIn(const grpc::AuthContext& auth, const std::vector<std::string>& hosts) {
  const std::vector<grpc::string_ref> pem =
      auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (!auth.IsPeerAuthenticated() || pem.empty()) {
    return absl::UnauthenticatedError("no verified TLS client certificate");
  }
  const std::string cert(pem[0].data(), pem[0].size());
  if (CertificateNamesOneOf(cert, hosts)) return absl::OkStatus();
  return absl::UnauthenticatedError(absl::StrCat(
      "the TLS client certificate names none of this daemon's peers (configuration peers",
      hosts.empty() ? " is empty" : absl::StrCat(": ", absl::StrJoin(hosts, ", ")), "); it ",
      LogEscaped(DescribeCertificate(cert))));
}

absl::Status FromDaemonCertified(const grpc::AuthContext& auth, const std::string& from_daemon) {
  const std::vector<grpc::string_ref> pem =
      auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (!auth.IsPeerAuthenticated() || pem.empty()) {
    return absl::UnauthenticatedError("no verified TLS client certificate");
  }
  const std::string cert(pem[0].data(), pem[0].size());
  if (!from_daemon.empty() && CertificateNamesOneOf(cert, HostsOf({from_daemon}))) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "from_daemon \"", LogEscaped(from_daemon),
      "\": the TLS client certificate does not name its host; it ",
      LogEscaped(DescribeCertificate(cert))));
}

namespace {

// One bound on the log lines per kind of refused handshake (OpenSSL's
// reason, a small fixed set), so that a flood of one kind does not hide
// another.
bool AllowRefusedLine(const std::string& reason, int64_t* suppressed) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* limits = new absl::flat_hash_map<std::string, std::unique_ptr<RateLimitedLog>>;
  static RateLimitedLog* other = new RateLimitedLog(5, absl::Seconds(10));
  RateLimitedLog* limit = other;
  {
    absl::MutexLock lock(&mu);
    auto it = limits->find(reason);
    if (it != limits->end()) {
      limit = it->second.get();
    } else if (limits->size() < 32) {
      limit = (*limits)
                  .emplace(reason, std::make_unique<RateLimitedLog>(5, absl::Seconds(10)))
                  .first->second.get();
    }
  }
  return limit->Allow(suppressed);
}

void ToSpdlog(gpr_log_func_args* args) {
  const std::string message = args->message == nullptr ? "" : args->message;
  constexpr absl::string_view kRefused = "Handshake failed with fatal error ";
  if (absl::StartsWith(message, kRefused)) {
    // As many as strangers make connections: bounded as refused calls are.
    int64_t suppressed = 0;
    if (AllowRefusedLine(message.substr(kRefused.size()), &suppressed)) {
      spdlog::warn("peer TLS: handshake refused: {}{}", LogEscaped(message),
                   suppressed > 0
                       ? absl::StrCat(" (", suppressed, " more refused, not logged)")
                       : std::string());
    }
    return;
  }
  // gRPC's INFO lines are its chatter (connections, backoffs): debug here.
  const spdlog::level::level_enum level =
      args->severity == GPR_LOG_SEVERITY_ERROR ? spdlog::level::err : spdlog::level::debug;
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "grpc: {} ({}:{})", LogEscaped(message),
              args->file == nullptr ? "?" : args->file, args->line);
}

}  // namespace

void LogGrpcThroughSpdlog() {
  gpr_set_log_function(ToSpdlog);
  // A handshake refused for plaintext is one of gRPC's INFO lines.
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_INFO);
}

}  // namespace autotuned
