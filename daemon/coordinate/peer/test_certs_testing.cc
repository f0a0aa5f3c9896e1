#include "daemon/coordinate/peer/test_certs_testing.h"

#include <fcntl.h>

#include <cstdio>
#include <cstdlib>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_join.h"

namespace autotuned {
namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test certificates: %s failed\n", what);
    std::abort();
  }
}

EVP_PKEY* NewKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  Require(key != nullptr, "EVP_EC_gen");
  return key;
}

void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  Require(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// An unsigned certificate for `key` named `cn`, issued by `issuer` (itself
// when null).
X509* NewCert(EVP_PKEY* key, const std::string& cn, X509* issuer, absl::Duration not_before,
              absl::Duration not_after) {
  static long serial = 1;
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert), absl::ToInt64Seconds(not_before));
  X509_gmtime_adj(X509_getm_notAfter(cert), absl::ToInt64Seconds(not_after));
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  return cert;
}

void Sign(X509* cert, EVP_PKEY* key) {
  Require(X509_sign(cert, key, EVP_sha256()) > 0, "X509_sign");
}

void WriteCert(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  Require(f != nullptr && PEM_write_X509(f, cert) == 1, "writing a certificate");
  std::fclose(f);
}

void WriteKey(const std::string& path, EVP_PKEY* key) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FILE* f = fd < 0 ? nullptr : fdopen(fd, "w");
  Require(f != nullptr &&
              PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
          "writing a key");
  std::fclose(f);
}

}  // namespace

struct TestCa::Impl {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  ~Impl() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

TestCa::TestCa(std::string dir, std::string name)
    : dir_(std::move(dir)), ca_file_(dir_ + "/" + name + "-ca.pem"), impl_(new Impl) {
  impl_->key = NewKey();
  impl_->cert = NewCert(impl_->key, name, nullptr, absl::Hours(-1), absl::Hours(24 * 30));
  AddExtension(impl_->cert, impl_->cert, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(impl_->cert, impl_->cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(impl_->cert, impl_->cert, NID_subject_key_identifier, "hash");
  Sign(impl_->cert, impl_->key);
  WriteCert(ca_file_, impl_->cert);
}

TestCa::~TestCa() = default;

TestCertFiles TestCa::Issue(const std::string& name, const std::vector<std::string>& names,
                            absl::Duration not_before, absl::Duration not_after) const {
  EVP_PKEY* key = NewKey();
  X509* cert = NewCert(key, name, impl_->cert, not_before, not_after);
  AddExtension(cert, impl_->cert, NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(cert, impl_->cert, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  AddExtension(cert, impl_->cert, NID_ext_key_usage, "serverAuth,clientAuth");
  if (!names.empty()) {
    AddExtension(cert, impl_->cert, NID_subject_alt_name, absl::StrJoin(names, ","));
  }
  Sign(cert, impl_->key);
  TestCertFiles out{ca_file_, dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key"};
  WriteCert(out.cert_file, cert);
  WriteKey(out.key_file, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace autotuned
