// The rendezvous of the ranks of a group that one daemon serves: each rank
// asks for itself (Tune with members, not whole_group), and the RoundTable
// matches the asks of one round so that every rank gets the same decision.
//
// Rounds. A round is identified by its RoundKey (group id, digest of the
// member list and world size, digest of the canonical problem set) and a
// sequence number: the n-th ask of rank R for a key belongs to round n of
// that key, whatever the timing. A rank that is late for round n therefore
// joins round n (and gets its decision), never round n+1 of the ranks that
// have moved on; a program that asks the same problem set again starts the
// next round once its previous one is answered.
//
// Decision rules, decided once per round under the table's lock, then the
// same for every rank of the round, including ranks that ask later:
//   - ANSWERED: the opener (first rank to ask) brought `cached`, an answer
//     for the whole problem set from the cache: the round is decided at once
//     and no rank waits.
//   - GO: all world_size ranks asked before the pre-sync window closed (the
//     window runs from the first ask; the opener's `window` governs). The
//     last rank to ask gets Arrival::run: it measures and calls Publish; the
//     others wait for that result (MEASURED, or ERROR when the runner
//     publishes an error). If no result is published within the runner's
//     `run_bound`, the round is decided FALLBACK instead ("the measurement
//     did not finish ...") and a later Publish returns that decision.
//   - FALLBACK: the window closed first. The opener's `fallback` answer is
//     recorded, with the reason "not every rank arrived within the pre-sync
//     window (X of N after W us)" written into each of its results whose
//     status is FALLBACK. A rank that asks after the window closed gets the
//     same answer at once. The rank whose ask completes a round that fell
//     back at its window gets Arrival::measure_in_background (once per
//     round): every rank is there now, so measuring it would serve the next
//     ask from the cache.
//   - ERROR (INVALID_ARGUMENT, the same status for every rank of the round
//     and for later asks of it):
//       * a second caller claims a rank whose caller is still waiting in an
//         undecided round: "group.rank: rank R of group "G" already asked
//         for this round"; the round fails so that no rank proceeds on a
//         view that another caller of the same rank does not share. (When
//         that round is already decided or measuring, the second caller
//         alone gets that error, is not counted, and the round goes on.)
//       * ranks of one group id ask, while a round of the group is
//         undecided, with a different member list ("group.members: ...") or
//         problem set ("problems: ..."): both rounds fail with one message
//         naming the ranks on each side.
//   - GO across daemons: the runner may Announce the round's cross-daemon
//     run (proto/peer.proto CrossRun) before it Publishes. Callers that
//     asked with `return_on_go` (the leader's side of a follower's Ready)
//     then leave Arrive at once with Arrival::go set: their daemon takes
//     part in the run, and the final decision reaches them another way
//     (daemon/crossrun). Their ask stays counted; other callers wait for
//     the decision as before.
// Errors for one caller only, which never joined a round (absl::Status):
//   - INVALID_ARGUMENT: rank outside [0, world_size), world_size < 1.
//   - DEADLINE_EXCEEDED: the caller's own `deadline` passed first. While the
//     round is undecided the ask is withdrawn (the same rank may ask again
//     and rejoin the same round); once the round is measuring, the ask stays
//     counted and only this caller stops waiting.
//   - FAILED_PRECONDITION: the rank asks for a round the table has already
//     forgotten (see retention): its decision cannot be repeated.
//
// Retention. A decided round is dropped as soon as all of its ranks have
// asked. One that still misses ranks is kept until `decision_ttl` after its
// decision and while at most `max_rounds_kept` such rounds exist (oldest
// decision dropped first); after that a late rank of it gets
// FAILED_PRECONDITION. Keys whose ranks are all in step and that hold no
// rounds are dropped; keys that only remember forgotten rounds are dropped
// 2 x `decision_ttl` after their last ask (or sooner when more than
// 2 x max_rounds_kept + 64 keys exist), after which the sequence of that key
// starts again from 0: a rank later than that may be matched with the next
// asks of the others, so retention must exceed how late a rank can be.
//
// Waits. Every wait ends: at the window (undecided), at the run deadline
// (measuring), or at the caller's own deadline, whichever is first, on the
// injected clock.
//
// Thread-safety: every method may be called concurrently. The table calls
// nothing of its callers' (answers are shared, immutable responses) and
// never blocks on anything but its own condition variables. Destroy it only
// once no caller is in Arrive.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/rendezvous/clock.h"
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
  // Leave the wait when the runner announces a cross-daemon run (above).
  bool return_on_go = false;
};

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
  int64_t sequence = 0;  // the round's number within its key
  uint64_t round_id = 0;  // unique within this table
  std::shared_ptr<Round> round;  // opaque, for Publish
};

struct RoundTableOptions {
  absl::Duration decision_ttl = absl::Minutes(10);
  int max_rounds_kept = 4096;
};

class RoundTable {
 public:
  // `clock` is not owned and outlives the table.
  explicit RoundTable(Clock* clock, RoundTableOptions options = {});
  ~RoundTable();

  RoundTable(const RoundTable&) = delete;
  RoundTable& operator=(const RoundTable&) = delete;

  // Records the ask of `request.rank` and blocks until its round is decided
  // (or this caller must run it); see the header comment for what comes
  // back when.
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

  // Callers blocked in Arrive now.
  int blocked() const ABSL_LOCKS_EXCLUDED(mu_);
  // Decided rounds still missing ranks, kept for them.
  int rounds_kept() const ABSL_LOCKS_EXCLUDED(mu_);
  // Keys with any state (rounds or sequence counters).
  int keys() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct KeyState;

  KeyState& Key(const ArriveRequest& request, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides `round` and wakes its waiters; keeps or drops it.
  void Decide(Round* round, Decision decision, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideFallback(Round* round, const std::string& reason, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideError(Round* round, const absl::Status& error, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `round` from its key once decided with every rank counted.
  void DropIfComplete(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The mismatch error, when an undecided round of the group other than
  // `target` has another key.
  Round* Conflicting(const std::string& group_id, const Round* target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets what retention no longer covers.
  void Expire(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Arrival Answer(const std::shared_ptr<Round>& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Clock* const clock_;
  const RoundTableOptions options_;

  mutable absl::Mutex mu_;
  uint64_t next_round_id_ ABSL_GUARDED_BY(mu_) = 1;
  // By RoundKey::ToString().
  absl::flat_hash_map<std::string, std::unique_ptr<KeyState>> keys_ ABSL_GUARDED_BY(mu_);
  // Undecided rounds by group id.
  std::map<std::string, std::vector<std::shared_ptr<Round>>> open_ ABSL_GUARDED_BY(mu_);
  // Decided rounds that miss ranks, oldest decision first (entries of
  // rounds completed since are skipped when reached).
  std::deque<std::weak_ptr<Round>> kept_order_ ABSL_GUARDED_BY(mu_);
  int kept_ ABSL_GUARDED_BY(mu_) = 0;
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rendezvous
}  // namespace autotuned
