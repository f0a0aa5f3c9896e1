// The rounds of ranks that ask one by one (Tune or Sweep with group.members,
// whole_group false) in groups this daemon leads: each rank's ask goes
// through the rendezvous (daemon/coordinate/rendezvous/round_table.h); the rank that
// completes a GO round in time measures it, here or (ranks on several
// daemons) through the CrossRunner; each rank gets its copy of the round's
// one answer; a round that fell back is measured in the background once
// every rank has asked. A GO round whose cache misses include candidates
// the ranks run opens a run of them (daemon/coordinate/clientrun) instead: every rank
// gets the run's schedule, and the run's decision comes with each rank's
// Report. See docs/protocol.md ("Rounds of ranks that ask one
// by one") for the protocol.
//
// Ownership: `solver`, `cross` (null: no cross-daemon runs), `runs` (null:
// no runs of client candidates) and `metrics` are not owned and outlive the
// rounds.
//
// Thread-safety: every method may be called concurrently (one call per
// asking rank).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/clientrun/client_runs.h"
#include "daemon/coordinate/rendezvous/round_table.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/rounds/background.h"
#include "daemon/coordinate/rounds/cross_runner.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "proto/autotuned.pb.h"
#include "proto/peer.pb.h"

namespace autotuned::rounds {

// The rendezvous key of `request`'s rounds: its group id, the digest of its
// member list and world size, and the digest of its canonical problem set
// (labels aside) with its timing mode.
rendezvous::RoundKey RoundKeyOf(const ValidRequest& request);

struct RankRoundsOptions {
  rendezvous::RoundTableOptions table;
  // Whether a round that fell back is measured once every rank has asked
  // (config rendezvous.measure_after_fallback); only for groups on this
  // daemon that fit on this node.
  bool measure_after_fallback = true;
  int max_world_size = 1;
};

// The call a rank asks by, besides its request.
struct Caller {
  // The caller's own deadline.
  absl::Time deadline = absl::InfiniteFuture();
  // Whether the caller went away (its call cancelled); null: never. Asked
  // often, on the caller's thread, some of the time under the rendezvous's
  // lock: must be cheap (grpc::ServerContext::IsCancelled).
  std::function<bool()> gone;
  // Takes the caller's admission slot (daemon/coordinate/admission), once, when its
  // ask will wait or measure: not when its round is answered at once (from
  // the cache, or decided already). An error refuses the ask, uncounted.
  // Must not block. Null: nothing to take.
  std::function<absl::Status()> admit;
};

class RankRounds {
 public:
  RankRounds(Solver* solver, CrossRunner* cross, clientrun::ClientRuns* runs,
             metrics::DaemonMetrics* metrics, const RankRoundsOptions& options);
  // Stops the background measurement (waits for the problem it measures),
  // then waits for the cross-daemon runs started for followers (each ends by
  // its run bound).
  ~RankRounds();

  RankRounds(const RankRounds&) = delete;
  RankRounds& operator=(const RankRounds&) = delete;

  // Rank request.rank asking for itself (request.per_rank; request.leader
  // empty: this daemon leads): its copy of its round's answer, its own
  // labels restored.
  //
  // Abandoned work: a caller that goes away stops waiting within
  // rendezvous::kGonePoll (CANCELLED). The rank that measures a round on
  // this daemon stops once its own caller went away and no other rank's
  // caller waits for the round (RoundTable::Abandoned): at the next
  // candidate's run, or within DeviceLease::kGonePoll while it waits for
  // the lease; nothing is stored, and every rank of the round (all gone)
  // would get CANCELLED. A round other callers still wait for is measured
  // to its end, the same answer for all of them; a cross-daemon run is
  // never stopped so.
  //
  // `go` (the leader serving a follower's forwarded ask): when the round
  // becomes a cross-daemon run, the run is put there, the response is
  // empty, and the run goes on in the background.
  //
  // Status codes: the round's error, the same for every rank of the round
  // (INVALID_ARGUMENT for inconsistent asks, or the runner's error); this
  // caller's own, as RoundTable::Arrive returns them (INVALID_ARGUMENT,
  // DEADLINE_EXCEEDED, CANCELLED, FAILED_PRECONDITION, and caller.admit's
  // refusal).
  absl::StatusOr<v1::TuneResponse> Round(const ValidRequest& request, const Caller& caller,
                                         std::shared_ptr<const v1::CrossRun>* go = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Round with a deadline alone.
  absl::StatusOr<v1::TuneResponse> Round(const ValidRequest& request, absl::Time deadline,
                                         std::shared_ptr<const v1::CrossRun>* go = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_) {
    return Round(request, Caller{deadline, nullptr, nullptr}, go);
  }

  // Measures no more rounds in the background (at the drain).
  void StopBackground() { background_.Stop(); }

  // Ranks waiting in the rendezvous now.
  int waiting() const { return table_.blocked(); }

 private:
  // Opens or joins the round: this rank's cache snapshot, its ask.
  absl::StatusOr<rendezvous::Arrival> Arrive(const ValidRequest& request,
                                             const std::string& round_id,
                                             const Caller& caller, bool return_on_go);
  // The runner of a GO round on this daemon: measures, publishes, logs;
  // stops early once the round is abandoned (see Round).
  rendezvous::Decision MeasureHere(const ValidRequest& request,
                                   const rendezvous::Arrival& arrival,
                                   const std::string& round_id, absl::Time start,
                                   const Caller& caller);
  // The runner of a GO round over several daemons.
  rendezvous::Decision MeasureAcross(const ValidRequest& request,
                                     const rendezvous::Arrival& arrival,
                                     const CrossRunner::Plan& plan, absl::Time start);
  // MeasureAcross on a thread of its own (counted in runs_).
  void StartAcross(const ValidRequest& request, const rendezvous::Arrival& arrival,
                   const CrossRunner::Plan& plan, absl::Time start) ABSL_LOCKS_EXCLUDED(mu_);
  // Logs a decision this caller was the first to be handed.
  void LogDecided(const ValidRequest& request, const rendezvous::Arrival& arrival,
                  const rendezvous::Decision& decision, const std::string& round_id) const;
  // This rank's copy of the decided answer, counted in the figures.
  v1::TuneResponse RankAnswer(const ValidRequest& request,
                              const rendezvous::Decision& decision, absl::Time start);

  // Constant after construction.
  Solver* const solver_;
  CrossRunner* const cross_;
  clientrun::ClientRuns* const client_runs_;
  metrics::DaemonMetrics* const metrics_;
  const RankRoundsOptions options_;

  rendezvous::RoundTable table_;
  BackgroundMeasurer background_;

  absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;  // StartAcross threads not yet done
};

}  // namespace autotuned::rounds
