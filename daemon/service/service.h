// The client-facing gRPC service (autotuned.v1.Autotune): validates requests
// (validate.h), answers from the cache where it can, runs the rest through the
// engine, stores what it measured, and translates results to the wire format.
// This is the only layer that speaks grpc::Status.
//
// A request is validated whole before anything runs: an invalid request gets
// INVALID_ARGUMENT naming the field and nothing is measured. Rounds on the
// backend are serialized by the engine; cache hits are answered without
// waiting for a round in progress.
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server
// calls them from its thread pool).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/backend/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/engine/engine.h"
#include "daemon/service/validate.h"
#include "proto/autotuned.grpc.pb.h"

namespace autotuned {

class AutotuneService final : public v1::Autotune::Service {
 public:
  // `backend` and `cache` (null: no cache) are not owned and outlive the
  // service.
  AutotuneService(Backend* backend, ResultCache* cache,
                  const config::DaemonConfig& config);

  grpc::Status Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                    v1::TuneResponse* response) override;
  grpc::Status Sweep(grpc::ServerContext* context,
                     const v1::SweepRequest* request,
                     grpc::ServerWriter<v1::SweepUpdate>* writer) override;
  grpc::Status ListImplementations(
      grpc::ServerContext* context, const v1::ListImplementationsRequest* request,
      v1::ListImplementationsResponse* response) override;
  grpc::Status NodeInfo(grpc::ServerContext* context,
                        const v1::NodeInfoRequest* request,
                        v1::NodeInfoResponse* response) override;
  grpc::Status ListCache(grpc::ServerContext* context,
                         const v1::ListCacheRequest* request,
                         v1::ListCacheResponse* response) override;
  grpc::Status ClearCache(grpc::ServerContext* context,
                          const v1::ClearCacheRequest* request,
                          v1::ClearCacheResponse* response) override;

  const std::string& fingerprint() const { return fingerprint_; }

 private:
  // One problem: from the cache, or measured (and then stored).
  v1::ProblemResult Solve(const ValidProblem& problem, const ValidRequest& request);
  // Runs every problem of `request`; logs one line for the round.
  v1::TuneResponse RunRound(const ValidRequest& request);

  // Constant after construction.
  Backend* const backend_;
  ResultCache* const cache_;
  const config::DaemonConfig config_;
  const ValidationContext validation_;
  const std::string fingerprint_;
  const absl::Time started_;

  Engine engine_;
  std::atomic<int64_t> rounds_{0};
};

// The wire form of one measured ranking.
v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked);

}  // namespace autotuned
