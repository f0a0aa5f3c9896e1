// The client-facing gRPC service (autotuned.v1.Autotune): a thin adapter
// over the parts of the daemon's core (daemon/ops/node) that serve its calls,
// which it holds by reference and does not make. Each call is admitted
// (daemon/coordinate/admission), validated against the live settings
// (daemon/coordinate/request/live_settings.h), handed to the part that serves it, and
// its status converted for the wire (daemon/common/grpc_status.h):
//   - a whole group asked at once: Solver (daemon/coordinate/solver);
//   - ranks asking one by one in a group this daemon leads:
//     rounds::RankRounds (daemon/coordinate/rounds);
//   - the barriers and reports of runs of candidates the ranks run:
//     clientrun::ClientRuns (daemon/coordinate/clientrun);
//   - ranks of a group led by another daemon: leadership::Follower
//     (daemon/coordinate/leadership).
// Followers' peer calls do not come here: the peer service
// (daemon/coordinate/peer/peer_service.h) hands them to the leader's parts
// (Node::ServePeers). See docs/protocol.md for the protocol.
//
// Status codes: INVALID_ARGUMENT naming the field for an invalid request,
// UNIMPLEMENTED for a group shape this daemon does not serve (nothing is
// measured for either); RESOURCE_EXHAUSTED when the call's admission pool is
// full (limits.max_concurrent_rounds whole-group calls that measure,
// limits.max_waiting_ranks per-rank calls that wait or measure; a call
// answered wholly from the cache takes no slot: daemon/coordinate/admission), or when a
// whole-group call's turn on the devices would come too late for its
// deadline (Solver::RunRound: the answer comes before the deadline);
// UNAVAILABLE "draining: ..." after Node::BeginDrain (calls in progress run to
// their answer); CANCELLED for a call whose client cancelled or went away
// (its work stops: Solver::RunRound, rounds::RankRounds::Round);
// FAILED_PRECONDITION from ListCache
// and ClearCache when the cache is disabled; a per-rank round's own (see
// daemon/coordinate/rounds/rank_rounds.h and
// daemon/coordinate/leadership/follower.h); a run's own for RunStep and
// Report (daemon/coordinate/clientrun/client_runs.h). RunStep and Report are not admitted
// (they are cheap bounded waits, served while draining too): each waits at
// most its run's bounds and the caller's deadline.
//
// Live settings: limits and defaults may be replaced while serving
// (Node::UpdateSettings, on SIGHUP); each call validates against the
// settings it started with. Draining: after Node::BeginDrain, Tune and
// Sweep are refused as above.
//
// Metrics: every round, result, rejection, cache lookup and cut-off candidate
// is counted in metrics::DaemonMetrics; NodeInfo reports the same figures.
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server
// calls them from its thread pool).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/coordinate/admission/admission.h"
#include "daemon/coordinate/clientrun/client_runs.h"
#include "daemon/coordinate/leadership/follower.h"
#include "daemon/coordinate/request/live_settings.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/rounds/rank_rounds.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/state/cache/cache.h"
#include "proto/autotuned.grpc.pb.h"

namespace autotuned {

class AutotuneService final : public v1::Autotune::Service {
 public:
  // The parts the service serves: not owned, each outlives the service
  // (the daemon's core owns them: daemon/ops/node/node.h). All non-null but
  // `cache` (null: no cache).
  struct Parts {
    Backend* backend = nullptr;
    ResultCache* cache = nullptr;
    metrics::DaemonMetrics* metrics = nullptr;
    Admission* admission = nullptr;
    const LiveSettings* settings = nullptr;
    Solver* solver = nullptr;
    rounds::RankRounds* rounds = nullptr;
    clientrun::ClientRuns* client_runs = nullptr;
    leadership::Follower* follower = nullptr;
  };
  // What NodeInfo reports besides the parts' figures.
  struct Options {
    // When the daemon started (Node::started): uptime_s.
    absl::Time started;
    // The bound metrics and peer addresses ("" = off).
    std::string metrics_address;
    std::string peer_address;
  };

  AutotuneService(const Parts& parts, Options options);

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

 private:
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
  const Parts parts_;
  const Options options_;
};

}  // namespace autotuned
