// Retention of the RoundTable's decided rounds that still miss ranks, for
// those ranks: which rounds are kept, what their decisions hold, and when
// they, and the keys that remember nothing but forgotten rounds, are
// forgotten. The rules are the protocol's (docs/protocol.md, "Retention"):
//  - A kept round is forgotten `decision_ttl` after its decision, or
//    sooner, oldest decision first, while more than `max_rounds_kept`
//    rounds or more than `max_kept_bytes` bytes of decisions are kept. The
//    bounds hold at every moment: Keep enforces them at once.
//  - Forgetting a round removes it from its key's rounds (Round::dropped);
//    the key's sequence counters stay, so that a rank late for it is told
//    so (the table's FAILED_PRECONDITION).
//  - A key with no rounds left is forgotten at once when its ranks are in
//    step; otherwise 2 x decision_ttl after its last ask, or at once while
//    the table holds more than 2 x max_rounds_kept + 64 keys.
//
// Thread-safety: none of its own. The RoundTable owns it and calls it with
// its mutex held, with the table's keys (round.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace autotuned {
namespace rendezvous {

struct Round;
struct KeyState;

// The table's keys, by RoundKey::ToString().
using KeyStates = absl::flat_hash_map<std::string, std::unique_ptr<KeyState>>;

// Config rendezvous.decision_ttl_ms, max_rounds_kept and max_kept_bytes
// (RoundTableOptions).
struct RetentionLimits {
  absl::Duration decision_ttl = absl::Minutes(10);
  int max_rounds_kept = 4096;
  int64_t max_kept_bytes = int64_t{256} << 20;
};

class Retention {
 public:
  explicit Retention(const RetentionLimits& limits);

  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // Keeps `round`, just decided (Round::decided_at) while it misses ranks
  // and listed in its key's rounds in `keys`; then forgets what the bounds
  // no longer cover (`round` itself included).
  void Keep(std::shared_ptr<Round> round, KeyStates& keys, absl::Time now);
  // No longer counts `round` as kept, if it was: every rank has asked for
  // it, or skips it. The caller takes it out of its key.
  void Release(Round* round);
  // Forgets the kept rounds the bounds no longer cover at `now`, then the
  // keys that hold no rounds and are due.
  void Expire(KeyStates& keys, absl::Time now);

  // Rounds kept now, and what their decisions hold in bytes (about).
  int rounds() const { return rounds_; }
  int64_t bytes() const { return bytes_; }

 private:
  void ForgetKept(KeyStates& keys, absl::Time now);
  void DropIdleKeys(KeyStates& keys, absl::Time now);

  const RetentionLimits limits_;
  // Kept rounds, oldest decision first (entries of rounds released since
  // are skipped when reached, and swept out when they pile up).
  std::deque<std::weak_ptr<Round>> order_;
  int rounds_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace rendezvous
}  // namespace autotuned
