// The leader's side of Peer.Ready: a follower's forwarded ask of one of its
// ranks, counted in this daemon's rendezvous as an ask of that rank
// (rounds::RankRounds) and answered with the round's decision. See
// docs/protocol.md ("Groups over several daemons") for the protocol.
//
// Ownership: `rounds` and `admission` are not owned and outlive the leader.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/coordinate/admission/admission.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/coordinate/rounds/rank_rounds.h"
#include "proto/peer.pb.h"

namespace autotuned::leadership {

class Leader {
 public:
  Leader(rounds::RankRounds* rounds, Admission* admission);

  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  // The ask of rank ready.ranks(0) of daemon ready.from_daemon, validated
  // against `context` (this daemon's; its asking_daemon is set here), by
  // `deadline`: GO with the cross-daemon run, ANSWERED with the round's
  // response, or REJECTED with the error every rank of the round gets. A
  // request this daemon must not lead (its rank 0 is elsewhere) is REJECTED
  // FAILED_PRECONDITION; one whose rank is not on from_daemon, or an invalid
  // one, REJECTED INVALID_ARGUMENT (UNIMPLEMENTED as validation says).
  // Errors for this caller alone come back as statuses: UNAVAILABLE while
  // draining, RESOURCE_EXHAUSTED over the concurrency limit
  // (limits.max_waiting_ranks; an ask answered at once, from the cache or a
  // decided round, takes no slot).
  //
  // `gone` (null: never): whether the follower's call went away (its rank
  // left and the follower cancelled the call): the ask is then treated as a
  // local caller's that went away (rounds::RankRounds::Round, "Abandoned
  // work"): it leaves the rendezvous within rendezvous::kGonePoll, and its
  // slot is given back.
  absl::StatusOr<v1::Decision> Ready(const v1::ReadyRequest& ready, ValidationContext context,
                                     absl::Time deadline,
                                     std::function<bool()> gone = nullptr);

 private:
  rounds::RankRounds* const rounds_;
  Admission* const admission_;
};

}  // namespace autotuned::leadership
