// The PEM files a config::TlsConfig names (config peer_tls, fleet_cache.tls),
// read and checked with OpenSSL, and the names a certificate carries.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.pb.h"

namespace autotuned {

// The text of the files.
struct TlsFiles {
  std::string ca_pem;    // one or more CA certificates
  std::string cert_pem;  // this side's certificate, a chain may follow; "" when none
  std::string key_pem;   // its private key; "" when none
};

// What this side's certificate is used for.
enum class TlsRole {
  kServerAndClient,  // a daemon on the peer port: both
  kClient,           // a client of Redis
};

// Reads and checks the files of `config`, named `field` in errors ("peer_tls"
// gives "peer_tls.cert_file: ..."). ca_file must be set; cert_file and
// key_file both or neither. INVALID_ARGUMENT naming the field when a file
// holds no PEM certificate (key), the key needs a passphrase or is not the
// certificate's, or the certificate does not verify against ca_file now
// (expired, not yet valid, another CA: OpenSSL's reason) for `role` (its
// extendedKeyUsage); the file's read error (naming the field and the file)
// when one cannot be read; PERMISSION_DENIED when key_file is open to
// others (it must be a regular file, mode o-rwx).
absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& field, const config::TlsConfig& config,
                                      TlsRole role);

// Whether the first certificate in `cert_pem` names one of `hosts` in its
// subject alternative names (a DNS name, wildcards only as a whole left-most
// label, or an IP address); the subject's common name is not used. False
// when it does not parse.
bool CertificateNamesOneOf(const std::string& cert_pem, const std::vector<std::string>& hosts);

// What the first certificate in `cert_pem` names, as "it ...": "names DNS:a,
// IP:10.0.0.1", "has no subject alternative name" or "does not parse".
std::string DescribeCertificate(const std::string& cert_pem);

}  // namespace autotuned
