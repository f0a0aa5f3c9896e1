// The client-facing gRPC service (autotuned.v1.Autotune), and the peer calls
// of the groups this daemon leads: a thin adapter. Each call is admitted
// (daemon/admission), validated against the live settings
// (daemon/request/validate.h), handed to the part that serves it, and its
// status converted for the wire (daemon/common/grpc_status.h):
//   - a whole group asked at once: Solver (daemon/solver);
//   - ranks asking one by one in a group this daemon leads:
//     rounds::RankRounds (daemon/rounds);
//   - the barriers and reports of runs of candidates the ranks run:
//     clientrun::ClientRuns (daemon/clientrun);
//   - ranks of a group led by another daemon: leadership::Follower;
//     followers' peer calls: leadership::Leader and leadership::CrossRuns
//     (daemon/leadership).
// See docs/protocol.md for the protocol.
//
// Status codes: INVALID_ARGUMENT naming the field for an invalid request,
// UNIMPLEMENTED for a group shape this daemon does not serve (nothing is
// measured for either); RESOURCE_EXHAUSTED when the call's admission pool is
// full (limits.max_concurrent_rounds whole-group calls that measure,
// limits.max_waiting_ranks per-rank calls that wait or measure; a call
// answered wholly from the cache takes no slot: daemon/admission), or when a
// whole-group call's turn on the devices would come too late for its
// deadline (Solver::RunRound: the answer comes before the deadline);
// UNAVAILABLE "draining: ..." after BeginDrain (calls in progress run to
// their answer); CANCELLED for a call whose client cancelled or went away
// (its work stops: Solver::RunRound, rounds::RankRounds::Round);
// FAILED_PRECONDITION from ListCache
// and ClearCache when the cache is disabled; a per-rank round's own (see
// rounds/rank_rounds.h and leadership/follower.h); a run's own for RunStep
// and Report (clientrun/client_runs.h). RunStep and Report are not admitted
// (they are cheap bounded waits, served while draining too): each waits at
// most its run's bounds and the caller's deadline.
//
// Live settings: limits and defaults may be replaced while serving
// (UpdateSettings, on SIGHUP); each call validates against the settings it
// started with.
//
// Metrics: every round, result, rejection, cache lookup and cut-off candidate
// is counted in metrics::DaemonMetrics; NodeInfo reports the same figures.
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server
// calls them from its thread pool).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/admission/admission.h"
#include "daemon/backend/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/clientrun/client_runs.h"
#include "daemon/engine/engine.h"
#include "daemon/leadership/cross_runs.h"
#include "daemon/leadership/follower.h"
#include "daemon/leadership/leader.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/peer/peer_client.h"
#include "daemon/request/validate.h"
#include "daemon/rounds/rank_rounds.h"
#include "daemon/solver/solver.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/peer.pb.h"

namespace autotuned {

struct ServiceOptions {
  // Where the figures go (not owned; outlives the service). Null: the
  // service keeps its own, still reported by NodeInfo.
  metrics::DaemonMetrics* metrics = nullptr;
  // Reported by NodeInfo: the bound metrics and peer addresses ("" = off).
  std::string metrics_address;
  std::string peer_address;
  // How this daemon reaches the leaders of multi-daemon groups (not owned;
  // outlives the service). Null, or config peer_advertise empty: members on
  // other daemons are UNIMPLEMENTED.
  PeerClient* peer_client = nullptr;
  // The fleet cache, the second tier behind `cache` (not owned; outlives
  // the service). Null: none. Give it the same `metrics`.
  fleetcache::FleetCache* fleet = nullptr;
};

class AutotuneService final : public v1::Autotune::Service {
 public:
  // `backend` and `cache` (null: no cache) are not owned and outlive the
  // service.
  AutotuneService(Backend* backend, ResultCache* cache,
                  const config::DaemonConfig& config,
                  const ServiceOptions& options = {});
  // Stops the background measurement (waits for the problem it is
  // measuring) and the cross-daemon runs started for followers.
  ~AutotuneService() override = default;

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
  grpc::Status RunStep(grpc::ServerContext* context, const v1::StepRequest* request,
                       v1::StepReply* response) override;
  grpc::Status Report(grpc::ServerContext* context, const v1::RunReport* request,
                      v1::TuneResponse* response) override;

  const std::string& fingerprint() const { return solver_.fingerprint(); }

  // The peer handlers (PeerService::SetReadyHandler, SetRunHandlers,
  // SetOutcomeHandler): leadership::Leader::Ready against this daemon's live
  // settings, leadership::CrossRuns::Reduce and Exchange, and
  // leadership::Follower::Outcome; their statuses as those say.
  absl::StatusOr<v1::Decision> LeadReady(const v1::ReadyRequest& request,
                                         absl::Time deadline,
                                         std::function<bool()> gone = nullptr);
  absl::StatusOr<v1::Decision> LeadReduce(const v1::RankTimings& timings,
                                          absl::Time deadline);
  absl::StatusOr<v1::ExchangeReply> LeadExchange(const v1::ExchangeRequest& request,
                                                 absl::Time deadline);
  absl::StatusOr<v1::OutcomeReply> FollowOutcome(const v1::OutcomeRequest& request,
                                                 absl::Time deadline);

  // Replaces the limits and defaults that later calls validate against
  // (limits.max_request_bytes is the gRPC server's and is ignored here).
  void UpdateSettings(const config::Limits& limits, const config::Defaults& defaults)
      ABSL_LOCKS_EXCLUDED(settings_mu_);

  // Refuses every later Tune and Sweep with UNAVAILABLE "draining: ..." and
  // measures no more rounds in the background.
  void BeginDrain();
  // True once no Tune or Sweep is in progress; false at `deadline`.
  bool WaitForRounds(absl::Time deadline) { return admission_.WaitIdle(deadline); }
  // True after BeginDrain.
  bool draining() const { return admission_.draining(); }

 private:
  struct Settings {
    config::Limits limits;
    config::Defaults defaults;
  };

  std::shared_ptr<const Settings> settings() const ABSL_LOCKS_EXCLUDED(settings_mu_);
  ValidationContext Validation(const Settings& settings) const;
  // The memory cap under `limits` on this backend (backend.h, MemoryCap).
  int64_t MemoryCap(const config::Limits& limits) const;
  // A sweep size left out (ValidRequest::skipped): FAILED, skipped, with
  // the reason, measured and cached nothing.
  v1::TuneResponse SkippedSize(const ValidRequest& size);
  // Counts a refused call and returns its status for the wire.
  grpc::Status Reject(const absl::Status& status, const char* what);
  // `*ticket` of `slot`'s pool, unless taken already.
  absl::Status AdmitOnce(Admission::Slot slot, std::optional<Admission::Ticket>* ticket);
  // A rank asking for itself: through this daemon's rendezvous (a waiting
  // slot taken into `*ticket` when the ask waits or measures), or its
  // group's leader (the slot taken first). Bounded by `context`'s deadline
  // and cancellation.
  absl::StatusOr<v1::TuneResponse> RankRound(const ValidRequest& request,
                                             grpc::ServerContext* context,
                                             std::optional<Admission::Ticket>* ticket);
  // A whole-group call: from the cache without a slot, else measured with
  // a devices slot taken into `*ticket` (Solver::RunRound, bounded by
  // `context`'s deadline and cancellation).
  absl::StatusOr<v1::TuneResponse> WholeRound(const ValidRequest& request,
                                              grpc::ServerContext* context,
                                              std::optional<Admission::Ticket>* ticket);
  // A Tune or Sweep error for the wire; refusals (INVALID_ARGUMENT,
  // RESOURCE_EXHAUSTED, draining) counted as Reject does.
  grpc::Status Answer(const absl::Status& status, const char* what);

  // Constant after construction.
  Backend* const backend_;
  ResultCache* const cache_;
  const config::DaemonConfig config_;
  const ServiceOptions options_;
  const absl::Time started_;
  std::unique_ptr<metrics::Registry> own_registry_;  // when options.metrics is null
  std::unique_ptr<metrics::DaemonMetrics> own_metrics_;
  metrics::DaemonMetrics* const metrics_;

  Admission admission_;
  mutable absl::Mutex settings_mu_;
  std::shared_ptr<const Settings> settings_ ABSL_GUARDED_BY(settings_mu_);

  // The parts, each using those declared before it (and destroyed first).
  Engine engine_;
  Solver solver_;
  leadership::CrossRuns cross_runs_;
  clientrun::ClientRuns client_runs_;
  rounds::RankRounds rounds_;
  leadership::Leader leader_;
  leadership::Follower follower_;
};

}  // namespace autotuned
