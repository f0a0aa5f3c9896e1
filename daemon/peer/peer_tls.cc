#include "daemon/peer/peer_tls.h"

#include <arpa/inet.h>
#include <errno.h>

#include <cstdio>

#include <grpc/grpc_security_constants.h>
#include <grpc/support/log.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/escape.h"

namespace autotuned {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Certs = std::unique_ptr<STACK_OF(X509), StackFree>;

absl::StatusOr<std::string> ReadPem(const std::string& field, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(field, ": cannot open ", path));
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && text.size() < (1 << 20)) {
    text.append(buf, n);
  }
  std::fclose(f);
  return text;
}

// Never asks for a passphrase (OpenSSL's default would read the terminal).
int NoPassphrase(char*, int, int, void*) { return -1; }

Certs ParseCerts(const std::string& pem) {
  Certs out(sk_X509_new_null());
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    sk_X509_push(out.get(), x);
  }
  ERR_clear_error();  // the end of the text reads as an error
  return out;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no reason given";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// The certificate's subject alternative names, "DNS:a", "IP:10.0.0.1".
std::vector<std::string> NamesOf(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      const ASN1_IA5STRING* s = n->d.dNSName;
      out.push_back(absl::StrCat(
          "DNS:", std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                              static_cast<size_t>(ASN1_STRING_length(s)))));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = n->d.iPAddress;
      const int length = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = {};
      if ((length == 4 || length == 16) &&
          inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                    sizeof(text)) != nullptr) {
        out.push_back(absl::StrCat("IP:", text));
      }
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

// Whether `cert` names `host` in its subject alternative names.
bool Names(X509* cert, const std::string& host) {
  if (X509_check_ip_asc(cert, host.c_str(), 0) == 1) return true;
  return X509_check_host(cert, host.data(), host.size(),
                         X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                             X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
                         nullptr) == 1;
}

std::string Described(X509* cert) {
  const std::vector<std::string> names = NamesOf(cert);
  return names.empty() ? "no subject alternative name"
                       : absl::StrCat("names ", absl::StrJoin(names, ", "));
}

// Verifies `cert` (with `chain`) against `ca` now, for `purpose`.
absl::Status Verify(X509_STORE* ca, X509* cert, STACK_OF(X509) * chain, int purpose) {
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (ctx == nullptr || X509_STORE_CTX_init(ctx.get(), ca, cert, chain) != 1) {
    return absl::ResourceExhaustedError("no memory to verify a certificate");
  }
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  if (X509_verify_cert(ctx.get()) == 1) return absl::OkStatus();
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  return absl::InvalidArgumentError(X509_verify_cert_error_string(err));
}

}  // namespace

absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(const config::DaemonConfig& config) {
  const config::TlsConfig& c = config.peer_tls();
  if (c.ca_file().empty()) return std::optional<PeerTls>();
  PeerTls tls;
  absl::StatusOr<std::string> ca = ReadPem("peer_tls.ca_file", c.ca_file());
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem("peer_tls.cert_file", c.cert_file());
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("peer_tls.key_file", c.key_file());
  if (!key.ok()) return key.status();
  tls.ca_pem = *std::move(ca);
  tls.cert_pem = *std::move(cert);
  tls.key_pem = *std::move(key);

  const Certs cas = ParseCerts(tls.ca_pem);
  if (sk_X509_num(cas.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer_tls.ca_file: ", c.ca_file(), " holds no PEM certificate"));
  }
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (int i = 0; i < sk_X509_num(cas.get()); ++i) {
    X509_STORE_add_cert(store.get(), sk_X509_value(cas.get(), i));
  }
  Certs chain = ParseCerts(tls.cert_pem);
  if (sk_X509_num(chain.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer_tls.cert_file: ", c.cert_file(), " holds no PEM certificate"));
  }
  const Cert leaf(sk_X509_shift(chain.get()));
  Bio key_bio(BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())));
  const Key pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_tls.key_file: ", c.key_file(),
        " holds no PEM private key (or one that needs a passphrase): ", OpenSslError()));
  }
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("peer_tls.key_file: the key in ", c.key_file(),
                     " is not the key of the certificate in ", c.cert_file()));
  }
  for (const auto& [purpose, role] : {std::pair<int, const char*>{X509_PURPOSE_SSL_SERVER,
                                                                  "a TLS server"},
                                      {X509_PURPOSE_SSL_CLIENT, "a TLS client"}}) {
    absl::Status verified = Verify(store.get(), leaf.get(), chain.get(), purpose);
    if (!verified.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer_tls.cert_file: the certificate in ", c.cert_file(), " does not verify as ",
          role, "'s against peer_tls.ca_file ", c.ca_file(), ": ", verified.message()));
    }
  }
  if (!config.peer_advertise().empty()) {
    const std::string host = HostsOf({config.peer_advertise()})[0];
    if (!Names(leaf.get(), host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer_tls.cert_file: the certificate in ", c.cert_file(), " does not name ",
          host, ", the host of peer_advertise (peers dial it and check the name); it ",
          Described(leaf.get())));
    }
  }
  return std::optional<PeerTls>(std::move(tls));
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
  const std::vector<grpc::string_ref> pem = auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (!auth.IsPeerAuthenticated() || pem.empty()) {
    return absl::UnauthenticatedError("no verified TLS client certificate");
  }
  Bio bio(BIO_new_mem_buf(pem[0].data(), static_cast<int>(pem[0].size())));
  const Cert cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::UnauthenticatedError("the TLS client certificate does not parse");
  }
  for (const std::string& host : hosts) {
    if (Names(cert.get(), host)) return absl::OkStatus();
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the TLS client certificate names none of this daemon's peers (configuration peers",
      hosts.empty() ? " is empty" : absl::StrCat(": ", absl::StrJoin(hosts, ", ")), "); it ",
      LogEscaped(Described(cert.get()))));
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
