#include "daemon/ops/tls/tls_files.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

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

// The text of the file at `path` (named `field` in errors); with `secret`,
// it must be a regular file that others cannot read or write.
absl::StatusOr<std::string> ReadPem(const std::string& field, const std::string& path,
                                    bool secret = false) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(field, ": cannot open ", path));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, " is not a regular file"));
  }
  if (secret && (st.st_mode & 0007) != 0) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: %s is open to others (mode %04o); allow the owner and group only "
        "(chmod o-rwx)",
        field, path, st.st_mode & 07777));
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 && text.size() < (1 << 20)) {
    text.append(buf, static_cast<size_t>(n));
  }
  const int read_errno = n < 0 ? errno : 0;
  close(fd);
  if (read_errno != 0) {
    return absl::ErrnoToStatus(read_errno, absl::StrCat(field, ": cannot read ", path));
  }
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

Cert FirstCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  return cert;
}

bool Names(X509* cert, const std::string& host) {
  if (X509_check_ip_asc(cert, host.c_str(), 0) == 1) return true;
  return X509_check_host(cert, host.data(), host.size(),
                         X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                             X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
                         nullptr) == 1;
}

}  // namespace

absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& field, const config::TlsConfig& c,
                                      TlsRole role) {
  const std::string ca_field = field + ".ca_file";
  const std::string cert_field = field + ".cert_file";
  const std::string key_field = field + ".key_file";
  TlsFiles tls;
  absl::StatusOr<std::string> ca = ReadPem(ca_field, c.ca_file());
  if (!ca.ok()) return ca.status();
  tls.ca_pem = *std::move(ca);
  const Certs cas = ParseCerts(tls.ca_pem);
  if (sk_X509_num(cas.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(ca_field, ": ", c.ca_file(), " holds no PEM certificate"));
  }
  if (c.cert_file().empty() && c.key_file().empty()) return tls;

  absl::StatusOr<std::string> cert = ReadPem(cert_field, c.cert_file());
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(key_field, c.key_file(), /*secret=*/true);
  if (!key.ok()) return key.status();
  tls.cert_pem = *std::move(cert);
  tls.key_pem = *std::move(key);
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  for (int i = 0; i < sk_X509_num(cas.get()); ++i) {
    X509_STORE_add_cert(store.get(), sk_X509_value(cas.get(), i));
  }
  Certs chain = ParseCerts(tls.cert_pem);
  if (sk_X509_num(chain.get()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_field, ": ", c.cert_file(), " holds no PEM certificate"));
  }
  const Cert leaf(sk_X509_shift(chain.get()));
  Bio key_bio(BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())));
  const Key pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr));
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_field, ": ", c.key_file(),
        " holds no PEM private key (or one that needs a passphrase): ", OpenSslError()));
  }
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(key_field, ": the key in ", c.key_file(),
                                                   " is not the key of the certificate in ",
                                                   c.cert_file()));
  }
  std::vector<std::pair<int, const char*>> uses = {{X509_PURPOSE_SSL_CLIENT, "a TLS client"}};
  if (role == TlsRole::kServerAndClient) {
    uses.insert(uses.begin(), {X509_PURPOSE_SSL_SERVER, "a TLS server"});
  }
  for (const auto& [purpose, use] : uses) {
    absl::Status verified = Verify(store.get(), leaf.get(), chain.get(), purpose);
    if (!verified.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          cert_field, ": the certificate in ", c.cert_file(), " does not verify as ", use,
          "'s against ", ca_field, " ", c.ca_file(), ": ", verified.message()));
    }
  }
  return tls;
}

bool CertificateNamesOneOf(const std::string& cert_pem, const std::vector<std::string>& hosts) {
  const Cert cert = FirstCert(cert_pem);
  if (cert == nullptr) return false;
  for (const std::string& host : hosts) {
    if (Names(cert.get(), host)) return true;
  }
  return false;
}

std::string DescribeCertificate(const std::string& cert_pem) {
  const Cert cert = FirstCert(cert_pem);
  if (cert == nullptr) return "does not parse";
  const std::vector<std::string> names = NamesOf(cert.get());
  return names.empty() ? "has no subject alternative name"
                       : absl::StrCat("names ", absl::StrJoin(names, ", "));
}

}  // namespace autotuned
