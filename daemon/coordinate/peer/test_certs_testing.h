// Certificates for tests, made with OpenSSL in the test itself: a CA per
// test that needs one, and certificates it signs, for given names and
// validity, written as PEM files (the files peer_tls names).
//
// Thread-safety: a TestCa is used from one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace autotuned {

struct TestCertFiles {
  std::string ca_file;    // the issuing CA's certificate
  std::string cert_file;  // the certificate
  std::string key_file;   // its private key
};

class TestCa {
 public:
  // A self-signed CA (EC P-256) named `name`, its certificate written to
  // "<dir>/<name>-ca.pem". Aborts the test program on an OpenSSL failure.
  TestCa(std::string dir, std::string name);
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  const std::string& ca_file() const { return ca_file_; }

  // A certificate for `names` (subject alternative names, "IP:127.0.0.1",
  // "DNS:node-a") signed by this CA, usable by a TLS server and a TLS
  // client, valid from now + `not_before` to now + `not_after`; written to
  // "<dir>/<name>.pem" and "<dir>/<name>.key".
  TestCertFiles Issue(const std::string& name, const std::vector<std::string>& names,
                      absl::Duration not_before = absl::Hours(-1),
                      absl::Duration not_after = absl::Hours(24)) const;

 private:
  struct Impl;
  const std::string dir_;
  const std::string ca_file_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace autotuned
