// Mutual TLS between daemons (config peer_tls): the certificates, the gRPC
// credentials of the peer port and of the peer client, and the check of a
// calling peer's name.
//
// Both sides present a certificate signed by peer_tls.ca_file and verify the
// other's against it (gRPC's TLS over OpenSSL; a handshake that fails ends
// the connection before any call). Names: the daemon that dials checks that
// the certificate it gets names the host it dialed (gRPC's hostname
// verification); the peer port checks, per call, that the caller's
// certificate names the host of one of `peers` (PeerNamedIn) and the host of
// the daemon the request says it comes from (FromDaemonCertified). Names are
// the certificate's subject alternative names, DNS or IP; the subject's
// common name is not used.
//
// Thread-safety: free functions without shared state, except
// LogGrpcThroughSpdlog (process-wide, idempotent).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.pb.h"

namespace autotuned {

// The PEM text of peer_tls's files.
struct PeerTls {
  std::string ca_pem;
  std::string cert_pem;  // this daemon's certificate, a chain may follow
  std::string key_pem;
};

// Reads and checks peer_tls's files: none when peer_tls is not set.
// INVALID_ARGUMENT naming the field when a file holds no PEM certificate
// (key), the key is not the certificate's, the certificate does not verify
// against ca_file now (expired, not yet valid, another CA: OpenSSL's reason)
// or may not serve both as a TLS server's and a TLS client's (its
// extendedKeyUsage), or when it does not name the host of peer_advertise;
// the file's read error (naming the field and the file) when one cannot be
// read; PERMISSION_DENIED when key_file is open to others (as
// fleet_cache.password_file).
absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(const config::DaemonConfig& config);

// The peer port's credentials: TLS requiring a client certificate verified
// against the CA when `tls` is set, plain TCP otherwise.
std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(
    const std::optional<PeerTls>& tls);
// The peer client's credentials: TLS with this daemon's certificate, the
// server's verified against the CA and the dialed host, or plain TCP.
std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(
    const std::optional<PeerTls>& tls);

// The host parts of "host:port" addresses (brackets of IPv6 hosts removed).
std::vector<std::string> HostsOf(const std::vector<std::string>& addresses);

// OK when the TLS client of `auth` presented a certificate naming one of
// `hosts` (SAN, DNS or IP); otherwise UNAUTHENTICATED saying which names it
// has (or that it has none, or that the call is not over TLS).
absl::Status PeerNamedIn(const grpc::AuthContext& auth, const std::vector<std::string>& hosts);

// OK when the certificate of `auth`'s TLS client names the host of
// `from_daemon` (a request's "host:port" sender), so that a daemon holding a
// certificate of the fleet cannot speak for another; otherwise
// UNAUTHENTICATED naming from_daemon (escaped, bounded) and the names the
// certificate has.
absl::Status FromDaemonCertified(const grpc::AuthContext& auth, const std::string& from_daemon);

// Sends gRPC's own log lines (among them a refused TLS handshake: another
// CA, an expired certificate, plaintext on a TLS port) to the daemon's log
// (spdlog) instead of gRPC's stderr format, a handshake's refusal as
// "peer TLS: handshake refused: <reason>".
void LogGrpcThroughSpdlog();

}  // namespace autotuned
