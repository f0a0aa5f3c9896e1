// A follower's side of a group whose leader (the daemon of rank 0) is
// another daemon: each local rank's ask is forwarded to the leader
// (Peer.Ready) and the leader's answer or error handed to that rank as is;
// when the leader says GO, this daemon measures its own ranks' part of the
// run once for all of them and sends the timings to the leader. A follower
// never decides. See docs/protocol.md ("Groups over several daemons") for
// the protocol.
//
// Ownership: `client`, `engine` and `backend` are not owned and outlive the
// follower.
//
// Thread-safety: every method may be called concurrently (one call per
// asking rank).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/engine/engine.h"
#include "daemon/peer/peer_client.h"
#include "daemon/request/valid_request.h"
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
  // this rank's labels restored. `deadline`: the caller's own.
  //
  // Status codes: the leader's REJECTED error as it sent it (an unknown code
  // is UNKNOWN, naming it); LeaderUnreachable when a call to the leader
  // fails; DEADLINE_EXCEEDED when this rank's deadline passed first;
  // UNAVAILABLE when the leader answers a verdict this version does not
  // serve.
  absl::StatusOr<v1::TuneResponse> Round(const ValidRequest& request, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // This daemon's part of one run, shared by its local ranks.
  struct Run {
    absl::Time started;
    int joined = 0;
    bool done = false;
    absl::StatusOr<v1::Decision> result = absl::UnknownError("not run");
  };

  // A rank given GO: joins the run (the first to join runs this daemon's
  // part), then the leader's final decision.
  absl::StatusOr<v1::TuneResponse> Cross(const ValidRequest& request, const v1::CrossRun& go,
                                         absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The run of `go` for this caller; `runner`: it is this caller's to run.
  std::shared_ptr<Run> Join(const v1::CrossRun& go, int local_ranks, bool* runner)
      ABSL_LOCKS_EXCLUDED(mu_);
  // This daemon's ranks measured, their timings sent to the leader: its
  // final decision.
  absl::StatusOr<v1::Decision> RunPart(const ValidRequest& request, const v1::CrossRun& go);
  absl::StatusOr<v1::RankTimings> MeasurePart(const ValidRequest& request,
                                              const v1::CrossRun& go);

  // Constant after construction.
  PeerClient* const client_;
  Engine* const engine_;
  const Backend* const backend_;
  const std::string self_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);  // by run id
};

}  // namespace autotuned::leadership
