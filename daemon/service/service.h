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
// Admission (admission.h): at most limits.max_concurrent_rounds Tune and
// Sweep calls are served at once (one more gets RESOURCE_EXHAUSTED); after
// BeginDrain every new one gets UNAVAILABLE "draining: ..." while those in
// progress run to their answer.
//
// Live settings: limits and defaults may be replaced while serving
// (UpdateSettings, on SIGHUP); each call validates against the settings it
// started with.
//
// Metrics: every round, result, rejection, cache lookup and cut-off candidate
// is counted in metrics::DaemonMetrics; NodeInfo reports the same figures.
//
// Ranks asking one by one (group.members given, whole_group false): each
// rank's Tune (or each size of its Sweep)
// goes through the rendezvous (daemon/rendezvous/round_table.h), keyed by
// group id, member list and canonical problem set (labels aside, timing mode
// included). Every rank of a round gets the same answer, its own labels
// restored:
//   - the first rank's cache snapshot holds every problem: CACHED at once,
//     for it and for every later rank of the round;
//   - all ranks within the pre-sync window (the first rank's
//     options.presync_window_us, else defaults.presync_window_us, from its
//     ask): the last rank to ask measures (cache, then engine, as for a
//     whole-group call) and every rank gets that result;
//   - otherwise FALLBACK: per problem the first candidate as winner, reason
//     "not every rank arrived within the pre-sync window (X of N after W
//     us)", nothing ranked (problems the first rank found in the cache keep
//     their cached answer); a rank that asks later gets the same. Once every
//     rank has asked, the round is measured in the background (one worker,
//     at most 16 waiting; rendezvous.measure_after_fallback) so that the
//     next round is answered from the cache;
//   - a measurement that overruns its bound (10 s + 2 x candidates x
//     timeout) is FALLBACK for every rank too;
//   - inconsistent asks (two callers of one rank, members or problem sets
//     that differ between ranks of a group at the same time): the same
//     INVALID_ARGUMENT for every rank of the round.
// Members on several daemons (multi-daemon rendezvous; needs
// ServiceOptions::peer_client): the leader is the daemon of rank 0
// (members[rank 0].daemon, compared with this daemon's peer_advertise). The
// leader's decision is the only decision: a follower never decides. A
// follower forwards each local rank's ask to the leader (Peer.Ready, one
// rank per call, the canonical request, the peer token, a deadline of the
// rank's own deadline capped at window + run bound + 5 s) and hands the
// leader's answer or error to that rank as is; when the call fails it
// answers UNAVAILABLE "leader <addr> unreachable (...)" (LeaderUnreachable:
// the same for every rank it forwarded, and on every follower), or DEADLINE_EXCEEDED when the rank's
// own deadline passed. The leader (LeadReady) treats each Ready as an ask of
// that rank in its RoundTable, with all the rules above; cache lookups are
// the leader's. A GO round with problems missing from the leader's cache is
// measured across the daemons (cross_round.cc, daemon/crossrun):
//   - the leader opens a run in its Hub and announces it (GO with a
//     CrossRun: run id, the problems to measure, the candidate timeout);
//     every follower's Ready answers GO;
//   - every daemon runs the lockstep schedule (Engine::MeasurePart: verify,
//     barrier, warmup, timed iterations, candidates in request order) for
//     its own ranks only, the sim exchanging the ranks' buffers through the
//     leader at every barrier (Peer.Exchange), so the data crosses daemons;
//   - each follower sends its per-rank outcomes (Peer.ReduceTimings, once
//     per daemon); the leader max-reduces per iteration over all ranks and
//     ranks exactly as on one daemon (RankRanks), stores TUNED results in
//     its cache (the authoritative one; followers store nothing), and
//     publishes: its ranks get the answer from the RoundTable, the
//     followers' as the reply of ReduceTimings, all the same;
//   - a daemon that dies or stops answering mid-run: the leader's Hub finds
//     it lost (a Ping every 0.5 s while it is awaited), every step aborts
//     and the leader stops waiting for its timings; candidates come out
//     ruled out, naming that daemon, and the round is FAILED for every
//     surviving rank (nothing cached). Without one, the leader gives up on
//     timings at the run bound. The leader lost: every rank of a follower
//     gets UNAVAILABLE "leader <addr> unreachable during the measurement
//     ...", the same on every follower. Either way the next round is served
//     normally.
// Background measurement after a fallback is for groups on one daemon only.
// A rank's RPC deadline bounds its own wait (DEADLINE_EXCEEDED for it
// alone). Do not retry a per-rank Tune that was answered: the same rank's
// next ask of the same problem set is the group's next round.
//
// Thread-safety: all methods may be called concurrently (gRPC's sync server
// calls them from its thread pool).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/backend/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/crossrun/hub.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/peer/peer_client.h"
#include "daemon/rendezvous/round_table.h"
#include "daemon/service/admission.h"
#include "daemon/service/validate.h"
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
};

class AutotuneService final : public v1::Autotune::Service {
 public:
  // `backend` and `cache` (null: no cache) are not owned and outlive the
  // service.
  AutotuneService(Backend* backend, ResultCache* cache,
                  const config::DaemonConfig& config,
                  const ServiceOptions& options = {});
  // Stops the background worker (waits for the problem it is measuring).
  ~AutotuneService() override;

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

  // The leader's side of Peer.Ready (PeerService::SetReadyHandler): the
  // forwarded ask of one rank of `request.from_daemon`, answered with the
  // round's decision (ANSWERED with the response, or REJECTED with the
  // error every rank of the round gets). Errors for this caller alone
  // (DEADLINE_EXCEEDED, UNAVAILABLE while draining, RESOURCE_EXHAUSTED)
  // come back as statuses; a request this daemon must not lead (its rank 0
  // is elsewhere) or whose rank is not on from_daemon is REJECTED
  // FAILED_PRECONDITION / INVALID_ARGUMENT.
  absl::StatusOr<v1::Decision> LeadReady(const v1::ReadyRequest& request,
                                         absl::Time deadline);

  // The leader's side of Peer.ReduceTimings and Peer.Exchange for its
  // cross-daemon runs (PeerService::SetRunHandlers): a follower's timings,
  // answered with the round's final decision; one barrier's exchange (or an
  // abort, answered at once). Errors as crossrun::Hub reports them;
  // INVALID_ARGUMENT naming the field for a request without run_id.
  absl::StatusOr<v1::Decision> LeadReduce(const v1::RankTimings& timings,
                                          absl::Time deadline);
  absl::StatusOr<v1::ExchangeReply> LeadExchange(const v1::ExchangeRequest& request,
                                                 absl::Time deadline);

  // Replaces the limits and defaults that later calls validate against
  // (limits.max_request_bytes is the gRPC server's and is ignored here).
  void UpdateSettings(const config::Limits& limits, const config::Defaults& defaults)
      ABSL_LOCKS_EXCLUDED(settings_mu_);

  // Refuses every later Tune and Sweep with UNAVAILABLE "draining: ...".
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
  // Counts a refused call and returns its status for the wire.
  grpc::Status Reject(const absl::Status& status, const char* what);
  // One problem: from the cache, or measured (and then stored).
  // `rendezvous`: how long the round waited for its ranks (metrics).
  v1::ProblemResult Solve(const ValidProblem& problem, const ValidRequest& request,
                          absl::Duration rendezvous = absl::ZeroDuration());
  // A rank asking for itself: the rendezvous, then this rank's copy of the
  // round's answer (rank_round.cc). `deadline`: the caller's own.
  // `go` (the leader serving a follower's ask): when the round becomes a
  // cross-daemon run, the run is put there and the response is empty.
  absl::StatusOr<v1::TuneResponse> RankRound(
      const ValidRequest& request, absl::Time deadline,
      std::shared_ptr<const v1::CrossRun>* go = nullptr);
  // A rank whose group's leader is another daemon: the leader's answer.
  absl::StatusOr<v1::TuneResponse> FollowerRound(const ValidRequest& request,
                                                 absl::Time deadline);
  // The wire result of a measured problem; stored in the cache when TUNED
  // and `may_store`.
  v1::ProblemResult Measured(const ValidProblem& problem, const ValidRequest& request,
                             const std::vector<CandidateOutcome>& ranked, bool may_store);
  // Cross-daemon runs (cross_round.cc). The run of a GO round, with the
  // cached results of the problems it does not measure; null when every
  // problem is cached.
  struct CrossPlan {
    std::shared_ptr<const v1::CrossRun> run;
    std::vector<std::optional<v1::ProblemResult>> cached;  // per problem
  };
  std::optional<CrossPlan> PlanCrossRun(const ValidRequest& request,
                                        const rendezvous::Arrival& arrival);
  // The leader's run: its own ranks, the followers' timings, the ranking,
  // Publish, and the final decision to the followers.
  rendezvous::Decision LeadCrossRun(const ValidRequest& request,
                                    const rendezvous::Arrival& arrival,
                                    const CrossPlan& plan, absl::Time start);
  // A follower's rank given GO: this daemon's part, run once for all its
  // ranks, then the leader's final decision.
  absl::StatusOr<v1::TuneResponse> FollowerCross(const ValidRequest& request,
                                                 const v1::CrossRun& go,
                                                 absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(cross_mu_);
  absl::StatusOr<v1::Decision> RunFollowerPart(const ValidRequest& request,
                                               const v1::CrossRun& go);
  // The cache key text of one problem of `request` on this node: its shape,
  // timing mode and the links between its ranks' GPUs (PlacementText).
  std::string KeyText(const ValidProblem& problem, const ValidRequest& request) const;
  // The cached answer of one problem, or none (counts the lookup).
  std::optional<v1::ProblemResult> Cached(const ValidProblem& problem,
                                          const ValidRequest& request);
  // Queues `request` for the background worker; false when it is full or
  // stopped.
  bool MeasureInBackground(const ValidRequest& request)
      ABSL_LOCKS_EXCLUDED(background_mu_);
  void BackgroundLoop() ABSL_LOCKS_EXCLUDED(background_mu_);
  // Drops queued background work; `join`: also waits for the worker.
  void StopBackground(bool join) ABSL_LOCKS_EXCLUDED(background_mu_);
  // Runs every problem of `request`; logs one line for the round.
  v1::TuneResponse RunRound(const ValidRequest& request);
  void FillMetrics(v1::NodeMetrics* out) const;

  // Constant after construction.
  Backend* const backend_;
  ResultCache* const cache_;
  const config::DaemonConfig config_;
  const ServiceOptions options_;
  const std::string fingerprint_;
  const absl::Time started_;
  std::unique_ptr<metrics::Registry> own_registry_;  // when options.metrics is null
  std::unique_ptr<metrics::DaemonMetrics> own_metrics_;
  metrics::DaemonMetrics* const metrics_;

  Engine engine_;
  Admission admission_;
  std::atomic<int64_t> rounds_{0};

  mutable absl::Mutex settings_mu_;
  std::shared_ptr<const Settings> settings_ ABSL_GUARDED_BY(settings_mu_);

  rendezvous::RoundTable round_table_;
  absl::Mutex background_mu_;
  std::deque<ValidRequest> background_ ABSL_GUARDED_BY(background_mu_);
  bool background_stop_ ABSL_GUARDED_BY(background_mu_) = false;
  std::thread background_thread_ ABSL_GUARDED_BY(background_mu_);

  crossrun::Hub hub_;
  struct FollowerRun {
    absl::Time started;
    int joined = 0;
    bool done = false;
    absl::StatusOr<v1::Decision> result = absl::UnknownError("not run");
  };
  absl::Mutex cross_mu_;
  std::map<std::string, std::shared_ptr<FollowerRun>> follower_runs_
      ABSL_GUARDED_BY(cross_mu_);
  int cross_threads_ ABSL_GUARDED_BY(cross_mu_) = 0;  // leaders' runs started for a follower
};

// What every rank of a follower gets when its group's leader cannot be
// reached or is lost after GO: UNAVAILABLE "leader <addr> unreachable
// (...)", the same text whatever failed first (the cause is logged), so
// that every follower's ranks answer alike.
absl::Status LeaderUnreachable(const std::string& leader);

// How long a round's runner may take: every candidate of every problem at
// its timeout, twice (the engine serializes rounds), plus 10 s.
absl::Duration RoundRunBound(const ValidRequest& request);

// The wire form of one measured ranking.
v1::ProblemResult ToProblemResult(const ValidProblem& problem,
                                  const std::vector<CandidateOutcome>& ranked);

}  // namespace autotuned
