// A C++ client of the autotuned daemon (service autotuned.v1.Autotune in
// proto/autotuned.proto): one connection, one blocking method per RPC.
//
//   auto client = autotuned::Client::Connect(autotuned::DefaultTarget(),
//                                            absl::Seconds(5));
//   if (!client.ok()) return client.status();
//   absl::StatusOr<v1::TuneResponse> answer = (*client)->Tune(request);
//
// Errors: every method returns the daemon's status unchanged (same code, same
// message, see client/cpp/status.h), or the transport's (UNAVAILABLE when the
// daemon went away, DEADLINE_EXCEEDED when the per-call deadline passed).
//
// Deadlines: every call gets one, counted from the moment it is made.
// Measuring calls (Tune, Sweep) default to kDefaultMeasureTimeout, the others
// to kDefaultQueryTimeout; both can be changed per client.
//
// Thread-safety: the RPC methods may be called from several threads at once.
// The timeout setters must not race with calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// Where the daemon listens unless configured otherwise.
inline constexpr char kDefaultSocket[] = "/run/autotuned/autotuned.sock";

// The environment variable that overrides the default target: a socket path
// ("/path/to.sock") or any target Connect accepts ("unix:/path", "host:port").
inline constexpr char kSocketEnvVar[] = "AUTOTUNED_SOCKET";

// "unix:" + kDefaultSocket, or the value of $AUTOTUNED_SOCKET when it is set
// and not empty (a bare path gets "unix:" prepended).
std::string DefaultTarget();

// The gRPC target for a user-given one: "unix:/path" (and every other
// "scheme:..." form gRPC knows, e.g. "unix-abstract:name", "dns:host:port")
// and "host:port" are kept as they are; a bare path starting with '/' becomes
// "unix:/path". INVALID_ARGUMENT for an empty target and for a unix socket
// path too long for sockaddr_un (more than 107 bytes).
absl::StatusOr<std::string> NormalizeTarget(const std::string& target);

inline constexpr absl::Duration kDefaultMeasureTimeout = absl::Minutes(10);
inline constexpr absl::Duration kDefaultQueryTimeout = absl::Seconds(30);

class Client {
 public:
  // Opens an insecure channel to `target` (see NormalizeTarget) and waits up
  // to `timeout` for it to connect. UNAVAILABLE naming the target when it did
  // not; INVALID_ARGUMENT for a malformed target.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& target, absl::Duration timeout);

  // A client over an existing channel, connected or not (nothing is waited
  // for). `target` is only used in messages.
  static std::unique_ptr<Client> FromChannel(
      std::shared_ptr<grpc::Channel> channel, std::string target);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The normalized target this client talks to.
  const std::string& target() const { return target_; }

  // Per-call deadlines of Tune and Sweep, and of every other call.
  void set_measure_timeout(absl::Duration d) { measure_timeout_ = d; }
  void set_query_timeout(absl::Duration d) { query_timeout_ = d; }
  absl::Duration measure_timeout() const { return measure_timeout_; }
  absl::Duration query_timeout() const { return query_timeout_; }

  absl::StatusOr<v1::TuneResponse> Tune(const v1::TuneRequest& request);

  // Runs a sweep. `on_update` (may be empty) is called on the calling thread
  // for every message of the stream as it arrives, the final one carrying
  // the table included. Returns the dispatch table of the last message;
  // INTERNAL when the stream ended OK without one.
  absl::StatusOr<v1::DispatchTable> Sweep(
      const v1::SweepRequest& request,
      std::function<void(const v1::SweepUpdate&)> on_update);

  absl::StatusOr<v1::ListImplementationsResponse> ListImplementations(
      const v1::ListImplementationsRequest& request);
  absl::StatusOr<v1::NodeInfoResponse> NodeInfo(
      const v1::NodeInfoRequest& request = {});
  absl::StatusOr<v1::ListCacheResponse> ListCache(
      const v1::ListCacheRequest& request = {});
  absl::StatusOr<v1::ClearCacheResponse> ClearCache(
      const v1::ClearCacheRequest& request = {});

 private:
  Client(std::shared_ptr<grpc::Channel> channel, std::string target);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Autotune::Stub> stub_;
  std::string target_;
  absl::Duration measure_timeout_ = kDefaultMeasureTimeout;
  absl::Duration query_timeout_ = kDefaultQueryTimeout;
};

}  // namespace autotuned
