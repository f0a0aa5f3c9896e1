// grpc.health.v1.Health on the client listeners: SERVING while the daemon
// accepts rounds, NOT_SERVING once it drains. Known service names: "" (the
// whole server) and "autotuned.v1.Autotune"; Check on another name answers
// NOT_FOUND, Watch on one streams SERVICE_UNKNOWN (the protocol's rules).
//
// A synchronous service, like the daemon's others: gRPC's built-in health
// service runs on its callback machinery, whose extra polling threads cost
// every call on the socket (about a third more CPU per cache hit).
//
// Watch sends the status at once and again whenever it changes; it holds one
// server thread while open, so at most kMaxWatchers are open at a time (one
// more gets RESOURCE_EXHAUSTED), and each ends when the client cancels, when
// the server shuts down (its calls are cancelled) or at Stop().
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/serve/server/health.grpc.pb.h"

namespace autotuned {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  static constexpr int kMaxWatchers = 16;

  // `serving` tells whether the daemon accepts rounds now (not draining).
  explicit HealthService(std::function<bool()> serving);

  // Wakes watchers so that they see a status change at once (call it when
  // the daemon starts to drain).
  void Changed();
  // Ends every open and later Watch.
  void Stop();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  grpc::health::v1::HealthCheckResponse::ServingStatus Status(const std::string& service) const;

  const std::function<bool()> serving_;
  absl::Mutex mu_;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace autotuned
