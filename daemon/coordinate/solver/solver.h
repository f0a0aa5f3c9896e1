// The whole-group path, and what every round needs from this node: a
// validated request's problems answered from the cache where it can, the
// rest measured through the engine and the TUNED results stored; the cache
// key text of a problem on this node; the rounds' ids and figures.
//
// The fleet cache (daemon/state/fleetcache), when there is one, is the second tier:
// asked after a local miss by the lookups that decide a round (Tiers), and
// given every TUNED result this daemon measures and stores. Only the daemon
// that decides a round calls these (a follower never does), so every rank
// of a group gets what that one lookup found: docs/protocol.md ("The fleet
// cache").
//
// Ownership: `backend`, `cache` (null: no cache), `engine`, `metrics` and
// `fleet` (null: none) are not owned and outlive the solver.
//
// Thread-safety: every method may be called concurrently; the engine
// serializes measurements on the backend, and a cache hit never waits for
// one.
//
// Errors: none as statuses. A candidate that fails or is cut off is ruled
// out in its result, a problem with no working candidate is FAILED, and a
// result the cache cannot store is logged and answered all the same.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/engine.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/state/cache/cache.h"
#include "daemon/state/fleetcache/fleet_cache.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// What bounds the work of one whole-group call: its caller's deadline, and
// whether its caller went away.
struct CallBounds {
  absl::Time deadline = absl::InfiniteFuture();
  // Whether the caller went away (its call cancelled); null: never. Asked
  // on the calling thread, often: must be cheap.
  std::function<bool()> gone;
};

class Solver {
 public:
  Solver(Backend* backend, ResultCache* cache, Engine* engine,
         metrics::DaemonMetrics* metrics, fleetcache::FleetCache* fleet = nullptr);

  // Which caches a lookup asks: the local one alone (a rank's snapshot taken
  // before it knows whether its ask decides the round), or the fleet cache
  // too after a local miss (the lookup of the one caller that decides).
  enum class Tiers { kLocal, kLocalAndFleet };

  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // NodeFingerprint of the backend's node and catalogue.
  const std::string& fingerprint() const { return fingerprint_; }

  // "<pid>-<n>", n counting the round ids handed out (rounds_served()).
  std::string NextRoundId();
  int64_t rounds_served() const { return rounds_.load(); }
  // An empty response of round `round_id` from this node (its backend and
  // fingerprint set).
  v1::TuneResponse NewResponse(const std::string& round_id) const;

  // The cache key text of `problem` of `request` on this node: its shape,
  // timing mode and the links between its ranks' GPUs (PlacementText).
  // The one computed at validation (ValidProblem::key_text) when there is
  // one, else ProblemKeyText's.
  std::string KeyText(const ValidProblem& problem, const ValidRequest& request) const;
  // The cached answer, CACHED (without labels: the cache keeps none), or none:
  // no cache, request.refresh, or a miss in every tier asked. Counts the
  // lookups. A fleet hit is stored in the local cache too.
  std::optional<v1::ProblemResult> Cached(const ValidProblem& problem,
                                          const ValidRequest& request,
                                          Tiers tiers = Tiers::kLocalAndFleet);
  // One problem: its cached answer with its own label, or measured now (and
  // stored). `rendezvous`: how long its round waited for its ranks
  // (observed for a measured problem). The measurement waits for the
  // devices' lease at most RoundRunBound(request), unless the caller holds
  // it (`held`). `abandoned` (null: never): EngineOptions::abandoned; a
  // measurement stopped by it is not stored (its result is for no one).
  v1::ProblemResult Solve(const ValidProblem& problem, const ValidRequest& request,
                          absl::Duration rendezvous = absl::ZeroDuration(),
                          const DeviceLease::Token* held = nullptr,
                          const std::function<bool()>& abandoned = nullptr);
  // The wire result of a measured ranking under its cache key; stored in the
  // cache and published to the fleet cache when TUNED and `may_store`.
  v1::ProblemResult Measured(const ValidProblem& problem, const ValidRequest& request,
                             const std::vector<CandidateOutcome>& ranked, bool may_store);
  // A whole-group round: a new round id, every problem Solved in order, one
  // log line, the round and its results counted. Each measured problem
  // waits for the devices' lease until RoundRunBound(request) (then it is
  // FAILED, saying so) or, when that is later, until `call.deadline` less
  // what its measurement and the problems after it will take (kAnswerMargin
  // plus twice Engine::RecentMeasureTime per problem left).
  //
  // Status codes: RESOURCE_EXHAUSTED when the lease did not come by then
  // (the devices are busy with the rounds queued before this one: an
  // overloaded daemon answers before the caller's deadline, and the
  // problems measured so far are stored); CANCELLED once `call.gone` (asked
  // while waiting for the lease and before each candidate's run): what was
  // not measured yet is not, and nothing partial is stored.
  absl::StatusOr<v1::TuneResponse> RunRound(const ValidRequest& request,
                                            const CallBounds& call = {});
  // What RunRound keeps free before a caller's deadline besides the
  // measurements' own time.
  static constexpr absl::Duration kAnswerMargin = absl::Milliseconds(100);
  // RunRound when every problem is in the local cache (a whole-group call
  // that neither waits nor measures); none otherwise (nothing counted then;
  // RunRound asks the fleet cache).
  std::optional<v1::TuneResponse> CachedRound(const ValidRequest& request);
  // The cache's figures (entries, evictions) into the metrics.
  void SyncCacheFigures();
  // Counts the results of an answered round by status (metrics), and
  // returns the counts, indexed by v1::DecisionStatus.
  std::array<int64_t, 5> CountResults(const v1::TuneResponse& response);

 private:
  // The devices' lease for a problem of a whole-group round with `left`
  // measured problems to go (RunRound).
  absl::StatusOr<DeviceLease::Token> TurnFor(const ValidRequest& request,
                                             const CallBounds& call, int left);
  // Solve's measurement (no cache lookup), the lease waited for until
  // `lease_deadline` unless `held`.
  v1::ProblemResult MeasureNow(const ValidProblem& problem, const ValidRequest& request,
                               absl::Duration rendezvous, const DeviceLease::Token* held,
                               const std::function<bool()>& abandoned,
                               absl::Time lease_deadline);
  // A round of `results` (one per problem, in order): logged and counted.
  v1::TuneResponse Finish(const ValidRequest& request, absl::Time start,
                          std::vector<v1::ProblemResult> results);

  // Constant after construction.
  Backend* const backend_;
  ResultCache* const cache_;
  Engine* const engine_;
  metrics::DaemonMetrics* const metrics_;
  fleetcache::FleetCache* const fleet_;
  const std::string fingerprint_;

  std::atomic<int64_t> rounds_{0};
  std::atomic<int64_t> evictions_seen_{0};  // counted in cache_evictions
};

// How long a round's runner may take: every problem's MeasureBound
// (daemon/measure/engine), twice (the engine serializes rounds), plus 10 s.
absl::Duration RoundRunBound(const ValidRequest& request);

}  // namespace autotuned
