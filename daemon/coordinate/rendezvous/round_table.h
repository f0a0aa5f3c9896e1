// The rendezvous of the ranks of a group on the daemon that leads it: each
// rank asks for itself, and the RoundTable matches the asks of one round so
// that every rank gets the same decision. How asks make rounds, when a round
// is ANSWERED, GO, FALLBACK or ERROR, the cross-daemon GO and retention are
// the protocol's rules: see docs/protocol.md ("Rounds of ranks that ask one
// by one"). The table owns its retention (retention.h: which decided rounds
// are kept for late ranks, and when they and idle keys are forgotten).
//
// Contract:
//  - Arrive returns the decision of the caller's round (Arrival::decision):
//    the same for every rank of the round, including ranks that ask later
//    (unless the key was re-synced since: a rank behind skips the decided
//    rounds before the key's oldest undecided one; RoundTableOptions).
//    Exactly one caller of a GO round gets Arrival::run instead and must
//    call Publish once; a caller that asked with return_on_go leaves with
//    Arrival::go once that runner Announces a cross-daemon run.
//  - A round's own error (inconsistent asks, the runner's error) is a
//    decision (Verdict::kError): the same status for every rank of it.
//  - Errors for one caller only, which never joined a round (absl::Status):
//      INVALID_ARGUMENT: world_size < 1, rank outside [0, world_size), or no
//        fallback answer.
//      DEADLINE_EXCEEDED: the caller's own `deadline` passed first. While
//        the round is undecided the ask is withdrawn (the same rank may ask
//        again and rejoin the same round); once the round is measuring, the
//        ask stays counted and only this caller stops waiting.
//      CANCELLED: the caller went away (ArriveRequest::gone) while it
//        waited; as DEADLINE_EXCEEDED otherwise.
//      The status of ArriveRequest::admit, when it refuses: the ask is not
//        counted.
//      FAILED_PRECONDITION: the rank asks for a round the table has already
//        forgotten (RoundTableOptions): its decision cannot be repeated.
//  - Every wait ends: at the window (undecided), at the run deadline
//    (measuring), or at the caller's own deadline, whichever is first, on
//    the injected clock; and within kGonePoll of the caller going away.
//  - A measuring round whose every caller has stopped waiting (each went
//    away or passed its deadline) is Abandoned: no one will ever be handed
//    its decision, so its runner may stop measuring.
//
// Thread-safety: every method may be called concurrently. The table calls
// nothing of its callers' but the caller's own ArriveRequest::gone and
// ::admit (answers are shared, immutable responses) and never blocks on
// anything but its own condition variables. Destroy it only once no caller
// is in Arrive.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/rendezvous/clock.h"
#include "daemon/coordinate/rendezvous/retention.h"
#include "proto/autotuned.pb.h"
#include "proto/peer.pb.h"

namespace autotuned {
namespace rendezvous {

struct RoundKey {
  std::string group_id;
  // Stable digests (e.g. CacheKeyDigest) of canonical texts: the world size
  // and member list, and the problem set with its timing mode.
  std::string members_digest;
  std::string problems_digest;

  std::string ToString() const;
};

enum class Verdict {
  kMeasured,  // GO: every rank asked in time; the runner's result
  kAnswered,  // decided at once from the opener's cached answer
  kFallback,  // the window closed first, or the runner overran its bound
  kError,     // inconsistent asks: the same status for every rank
};

const char* VerdictName(Verdict v);

struct Decision {
  Verdict verdict = Verdict::kFallback;
  absl::Status error;  // kError only
  // The answer for every rank (all but kError): the same object for all.
  std::shared_ptr<const v1::TuneResponse> response;
  int ranks_in_time = 0;  // asks before the window closed
  int world_size = 0;
  // From the first ask to the decision (GO: to the last ask).
  absl::Duration waited;
};

struct ArriveRequest {
  RoundKey key;
  int rank = 0;
  int world_size = 1;
  // The pre-sync window; the opener's governs the round.
  absl::Duration window = absl::Milliseconds(5);
  // How long the runner may take to Publish; the runner's governs.
  absl::Duration run_bound = absl::Minutes(10);
  // This caller gives up at this time (its RPC deadline).
  absl::Time deadline = absl::InfiniteFuture();
  // Opener only (ignored otherwise). `cached`: the whole answer from the
  // cache, or null. `fallback`: the answer if the round falls back, its
  // FALLBACK results' reasons filled in by the table; required.
  std::shared_ptr<const v1::TuneResponse> cached;
  std::shared_ptr<const v1::TuneResponse> fallback;
  // Leave the wait when the runner announces a cross-daemon run (Announce).
  bool return_on_go = false;
  // Whether the caller went away (its call cancelled); null: never. Asked
  // while it waits, at least every kGonePoll, with the table's lock held:
  // must be cheap and call nothing of the table's.
  std::function<bool()> gone;
  // Called once, before the ask is counted, when this caller will wait or
  // measure (not when its round is decided already or is decided at once
  // from `cached`, nor for errors of its own); a status other than OK
  // refuses the ask with that status, uncounted. Called with the table's
  // lock held: must not block or call the table. Null: always admitted.
  std::function<absl::Status()> admit;
};

// How often a waiting caller's ArriveRequest::gone is asked.
inline constexpr absl::Duration kGonePoll = absl::Milliseconds(100);

struct Round;

struct Arrival {
  // True for exactly one caller of a GO round: measure, then Publish.
  bool run = false;
  // Set (and nothing else but the ids) for a caller with return_on_go when
  // the runner announced the round's cross-daemon run.
  std::shared_ptr<const v1::CrossRun> go;
  // The decision (when `run`: only `waited`, from the first ask to this one).
  Decision decision;
  // True for the first caller handed this decision (to log a round once);
  // a measured round is the runner's to report (Publish).
  bool decided_here = false;
  // True for the caller whose ask completed a round that fell back at its
  // window (once per round).
  bool measure_in_background = false;
  // True when this ask re-synced its key's ranks first (RoundTableOptions::
  // resync_after_missed_rounds).
  bool resynced = false;
  int64_t sequence = 0;  // the round's number within its key
  uint64_t round_id = 0;  // unique within this table
  std::shared_ptr<Round> round;  // opaque, for Publish
};

// Retention of decided rounds that still miss ranks, for those ranks
// (config rendezvous.decision_ttl_ms, max_rounds_kept and max_kept_bytes;
// the rules are in docs/protocol.md, "Retention", kept by retention.h).
struct RoundTableOptions {
  absl::Duration decision_ttl = absl::Minutes(10);
  int max_rounds_kept = 4096;
  // At most this many bytes of decisions kept (config
  // rendezvous.max_kept_bytes; the oldest decision is forgotten first).
  int64_t max_kept_bytes = int64_t{256} << 20;
  // After this many rounds of a key in a row decided without every rank in
  // time (config rendezvous.resync_after_missed_rounds), the key's ranks are
  // taken to be out of step and the next ask re-syncs them (docs/protocol.md,
  // "Out of step").
  int resync_after_missed_rounds = 4;
};

class RoundTable {
 public:
  // `clock` is not owned and outlives the table.
  explicit RoundTable(Clock* clock, RoundTableOptions options = {});
  ~RoundTable();

  RoundTable(const RoundTable&) = delete;
  RoundTable& operator=(const RoundTable&) = delete;

  // Records the ask of `request.rank` and blocks until its round is decided
  // (or this caller must run it, or leaves on GO); see the contract above.
  absl::StatusOr<Arrival> Arrive(const ArriveRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // The runner's result (a response, or an error for every rank). Returns
  // the round's decision: this result, or the FALLBACK decided when the
  // runner overran its bound. Call exactly once per Arrival with `run`.
  Decision Publish(const Arrival& arrival,
                   absl::StatusOr<v1::TuneResponse> result) ABSL_LOCKS_EXCLUDED(mu_);

  // The runner's cross-daemon run (before Publish): wakes the callers that
  // asked with return_on_go. No effect once the round is decided.
  void Announce(const Arrival& arrival, std::shared_ptr<const v1::CrossRun> go)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Whether no caller waits for the round of `arrival` (a run) any more:
  // it is still measuring and every other rank's caller stopped waiting
  // (went away or passed its deadline). The runner answers for itself.
  bool Abandoned(const Arrival& arrival) const ABSL_LOCKS_EXCLUDED(mu_);

  // Callers blocked in Arrive now.
  int blocked() const ABSL_LOCKS_EXCLUDED(mu_);
  // Decided rounds still missing ranks, kept for them.
  int rounds_kept() const ABSL_LOCKS_EXCLUDED(mu_);
  // What the kept rounds' decisions hold, in bytes (about).
  int64_t kept_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Keys with any state (rounds or sequence counters).
  int keys() const ABSL_LOCKS_EXCLUDED(mu_);
  // Re-syncs of out-of-step keys so far.
  int64_t resyncs() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  KeyState& Key(const ArriveRequest& request, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The round whose caller of `rank` is still waiting in it, if any.
  std::shared_ptr<Round> StillWaiting(const KeyState& ks, int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round this ask belongs to (the rank's next sequence number), opened
  // when new (`opened`); FAILED_PRECONDITION when it was forgotten.
  absl::StatusOr<std::shared_ptr<Round>> RoundFor(KeyState& ks, const ArriveRequest& request,
                                                  absl::Time now, bool* opened)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountAsk(KeyState& ks, Round* round, int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts this ask in `round` (opened by it when `opened`) and waits for
  // its decision: the rest of Arrive.
  absl::StatusOr<Arrival> Join(KeyState& ks, const std::shared_ptr<Round>& round,
                               const ArriveRequest& request, bool opened, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Out of step: every rank behind the key's oldest round still waiting for
  // ranks (or, with none, its next round) moves up to it, and the decided
  // rounds before it are forgotten.
  void Resync(KeyState& ks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails both undecided rounds of a group that disagree; `round`'s answer.
  Arrival FailMismatch(Round* other, const std::shared_ptr<Round>& round, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round is GO: this caller runs it.
  Arrival StartRun(const std::shared_ptr<Round>& round, const ArriveRequest& request,
                   absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until `round` is decided (deciding it when its window or run
  // bound passes) or, with return_on_go, announced; DEADLINE_EXCEEDED at
  // the caller's deadline.
  absl::Status Wait(const std::shared_ptr<Round>& round, const ArriveRequest& request,
                    absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the ask of `request` in `ks` will wait or measure (Arrive asks
  // ArriveRequest::admit then): not when its round is decided, is decided
  // at once from `cached`, or was forgotten.
  bool WillWait(const KeyState& ks, const ArriveRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes back the ask of `rank` from an undecided round; a round nobody
  // asks for any more is dropped, its sequence number reused.
  void Withdraw(Round* round, int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Decides `round` and wakes its waiters; keeps or drops it.
  void Decide(Round* round, Decision decision, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideFallback(Round* round, const std::string& reason, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideError(Round* round, const absl::Status& error, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FALLBACK for a round whose window (open) or run bound (running) passed.
  void DecideOverdue(Round* round, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `round` from the undecided rounds of its group.
  void Unlist(const Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `round` from its key once decided with every rank counted.
  void DropIfComplete(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An undecided round of the group, other than `target`, whose key differs
  // (their ranks disagree); null when none.
  Round* Conflicting(const std::string& group_id, const Round* target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the rounds whose window closed with nobody awake to notice.
  void SettleClosedWindows(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round's decision for this caller (decided_here for the first).
  Arrival Answer(const std::shared_ptr<Round>& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An Arrival naming `round` (ids and handle), nothing decided.
  static Arrival Handle(const std::shared_ptr<Round>& round);

  // Constant after construction.
  Clock* const clock_;
  const RoundTableOptions options_;

  mutable absl::Mutex mu_;
  uint64_t next_round_id_ ABSL_GUARDED_BY(mu_) = 1;
  KeyStates keys_ ABSL_GUARDED_BY(mu_);
  // Undecided rounds by group id.
  std::map<std::string, std::vector<std::shared_ptr<Round>>> open_ ABSL_GUARDED_BY(mu_);
  // Decided rounds that miss ranks, kept for them; forgets rounds and keys.
  Retention retention_ ABSL_GUARDED_BY(mu_);
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t resyncs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rendezvous
}  // namespace autotuned
