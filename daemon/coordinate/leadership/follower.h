// A follower's side of a group whose leader (the daemon of rank 0) is
// another daemon: each local rank's ask is forwarded to the leader
// (Peer.Ready) and the leader's answer or error handed to that rank as is;
// when the leader says GO, this daemon measures its own ranks' part of the
// run once for all of them and sends the timings to the leader, then runs
// each continuation the leader answers them with (one more pass of the
// candidates it names) and sends its timings the same way. A follower
// never decides: when a call to the leader fails (the leader lost), it looks
// for the leader's decision of that run or round among what its own ranks
// received and what the other followers received (Peer.RunOutcome, served
// by Outcome), and hands it out if one of them has it, so that the
// followers of a leader lost while it answered them still agree. See docs/protocol.md
// ("Groups over several daemons") for the protocol.
//
// Ownership: `client`, `engine` and `backend` are not owned and outlive the
// follower.
//
// Thread-safety: every method may be called concurrently (one call per
// asking rank).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/engine.h"
#include "proto/autotuned.pb.h"
#include "proto/peer.pb.h"

namespace autotuned::leadership {

// What every rank of a follower gets when its group's leader cannot be
// reached or is lost after GO: UNAVAILABLE "leader <addr> unreachable
// (...)", the same text whatever failed first (the cause is logged), so
// that every follower's ranks answer alike.
absl::Status LeaderUnreachable(const std::string& leader);

class Follower {
 public:
  // `self`: this daemon's peer_advertise name.
  Follower(PeerClient* client, Engine* engine, const Backend* backend, std::string self);

  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Rank request.rank of a group led by request.leader: the leader's answer,
  // this rank's labels restored. `deadline`: the caller's own; `gone` (null:
  // never): whether the caller went away, which cancels this rank's ask to
  // the leader within PeerClient::kGonePoll (the leader then counts the
  // rank as gone, as it does its own callers) and ends it CANCELLED.
  //
  // Status codes: the leader's REJECTED error as it sent it (an unknown code
  // is UNKNOWN, naming it); LeaderUnreachable when a call to the leader
  // fails; DEADLINE_EXCEEDED when this rank's deadline passed first;
  // CANCELLED when the caller went away while the leader was asked;
  // UNAVAILABLE when the leader answers a verdict this version does not
  // serve.
  absl::StatusOr<v1::TuneResponse> Round(const ValidRequest& request, absl::Time deadline,
                                         const std::function<bool()>& gone = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Peer.RunOutcome from another follower. Of run request.run_id: once this
  // daemon's own ReduceTimings of the run has ended, whether it brought the
  // leader's decision, and the decision. Of round (round_key, sequence),
  // without run_id: once one of this daemon's ranks' Ready of the round
  // brought an ANSWERED decision (that decision), or none is in flight
  // (none). decided false for a run or round this daemon has no part in
  // (never asked or told GO, or forgotten: each is kept kForgetRunsAfter,
  // at most kMaxKeptRuns runs and as many rounds).
  //
  // Status codes: INVALID_ARGUMENT "run_id: required" (neither run_id nor
  // round_key); PERMISSION_DENIED when from_daemon has no rank in the run or
  // round; DEADLINE_EXCEEDED when this daemon's calls have not ended by
  // `deadline`.
  absl::StatusOr<v1::OutcomeReply> Outcome(const v1::OutcomeRequest& request,
                                           absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // A run this daemon's ranks have all joined is no longer joined, but its
  // outcome is kept for Outcome: this long after it started, at most
  // kMaxKeptRuns runs (the oldest dropped first); the same for rounds and
  // for the ask counts of keys (from a key's last ask).
  static constexpr absl::Duration kForgetRunsAfter = absl::Minutes(30);
  static constexpr size_t kMaxKeptRuns = 1024;

 private:
  // One round (a key's n-th asks) as this daemon's ranks ask it.
  struct Asked {
    absl::Time started;
    std::set<std::string> daemons;  // with ranks in the round
    int in_flight = 0;              // Ready calls not ended
    std::optional<v1::Decision> answered;  // the first ANSWERED reply
  };
  // This daemon's part of one run, shared by its local ranks.
  struct Run {
    absl::Time started;
    // The daemons with ranks in the run (the leader's included).
    std::set<std::string> daemons;
    int joined = 0;
    // This daemon's ReduceTimings ended; `from_leader`: the decision it
    // brought.
    bool called = false;
    std::optional<v1::Decision> from_leader;
    // What every local rank gets: from_leader, else another follower's.
    bool done = false;
    absl::StatusOr<v1::Decision> result = absl::UnknownError("not run");
  };

  // A rank given GO: joins the run (the first to join runs this daemon's
  // part), then the leader's final decision.
  absl::StatusOr<v1::TuneResponse> Cross(const ValidRequest& request, const v1::CrossRun& go,
                                         absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The run of `go` for this caller; `runner`: it is this caller's to run.
  std::shared_ptr<Run> Join(const ValidRequest& request, const v1::CrossRun& go,
                            bool* runner) ABSL_LOCKS_EXCLUDED(mu_);
  // The round `key` (RoundKey text) asked the `*sequence`-th time by
  // request.rank, counted in flight.
  std::shared_ptr<Asked> StartAsk(const ValidRequest& request, const std::string& key,
                                  int64_t* sequence) ABSL_LOCKS_EXCLUDED(mu_);
  // After this daemon's own call failed with `failed`: the leader's decision
  // as the first of the other followers that received it answers `ask` (a
  // run's or a round's), by `deadline`; else `failed`.
  absl::StatusOr<v1::Decision> FromOtherFollowers(const ValidRequest& request,
                                                  const v1::OutcomeRequest& ask,
                                                  absl::Status failed, absl::Time deadline);
  // Outcome of a round.
  absl::StatusOr<v1::OutcomeReply> RoundOutcome(const v1::OutcomeRequest& request,
                                                absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This daemon's ranks measured, their timings sent to the leader by
  // `*timings_deadline` (set here), and each continuation the leader hands
  // out run and sent by the same deadline: its final decision.
  absl::StatusOr<v1::Decision> RunPart(const ValidRequest& request, const v1::CrossRun& go,
                                       absl::Time* timings_deadline);
  absl::StatusOr<v1::RankTimings> MeasurePart(const ValidRequest& request,
                                              const v1::CrossRun& go);
  // This daemon's ranks' part of the continuation `next` of run `go`
  // (next.next(): a pass after `*last`, which it sets), as its timings.
  // A continuation that CheckCrossPass refuses fails every candidate on
  // this daemon's ranks with that status (and aborts the steps it names).
  v1::RankTimings MeasureContinuation(const ValidRequest& request, const v1::CrossRun& go,
                                      const v1::CrossRun& next, int* last);

  // Constant after construction.
  PeerClient* const client_;
  Engine* const engine_;
  const Backend* const backend_;
  const std::string self_;

  absl::Mutex mu_;
  // By run id: the runs some local rank has yet to join, and every run kept
  // for Outcome.
  std::map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Run>> kept_ ABSL_GUARDED_BY(mu_);
  // Per "key|rank": the next ask's sequence and when it was last asked;
  // per "key#sequence": the round.
  std::map<std::string, std::pair<int64_t, absl::Time>> sequences_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Asked>> asked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autotuned::leadership
