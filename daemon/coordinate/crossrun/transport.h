// The RunTransport (daemon/measure/backend/backend.h) of one step (one pass of one
// candidate of one problem) of a cross-daemon run, as each side sees it:
//  - LeaderTransport: the leader's own ranks, straight into its Hub.
//  - FollowerTransport: a follower's ranks, through Peer.Exchange to the
//    leader (PeerClient: the peer token, every call with the step's
//    deadline). A failed call (the leader gone or unreachable) is the step's
//    failure: UNAVAILABLE "leader L unreachable during the run: ...". A
//    barrier's data over PeerClient::kMaxMessageBytes fails the step with
//    RESOURCE_EXHAUSTED on every daemon (the follower aborts it).
// Abort goes to the hub (the follower's with a deadline of kAbortWait), so
// that every daemon's ranks stop at their next barrier.
//
// Thread-safety: as RunTransport.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/coordinate/crossrun/hub.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned::crossrun {

inline constexpr absl::Duration kAbortWait = absl::Seconds(1);

// The step of pass `pass` of candidate `candidate` of a problem whose
// candidates' steps start at `base` (the candidates of the run's earlier
// problems), in a run of `total` candidates over all its problems: base +
// candidate + pass x total, so pass 0 is numbered as a run of one pass.
// Every daemon numbers alike (proto/peer.proto CrossRun).
inline int64_t CrossStep(int64_t base, int candidate, int pass, int64_t total) {
  return base + candidate + pass * total;
}

class LeaderTransport : public RunTransport {
 public:
  // `hub` is not owned and outlives the transport.
  LeaderTransport(Hub* hub, std::string run_id, int64_t step)
      : hub_(hub), run_id_(std::move(run_id)), step_(step) {}

  absl::StatusOr<std::vector<std::string>> Exchange(int64_t generation, std::string data,
                                                    absl::Time deadline) override;
  void Abort(const absl::Status& reason) override;

 private:
  Hub* const hub_;
  const std::string run_id_;
  const int64_t step_;
};

class FollowerTransport : public RunTransport {
 public:
  // `client` is not owned and outlives the transport; `leader` its address.
  FollowerTransport(PeerClient* client, std::string leader, std::string run_id, int64_t step)
      : client_(client), leader_(std::move(leader)), run_id_(std::move(run_id)), step_(step) {}

  absl::StatusOr<std::vector<std::string>> Exchange(int64_t generation, std::string data,
                                                    absl::Time deadline) override;
  void Abort(const absl::Status& reason) override;

 private:
  PeerClient* const client_;
  const std::string leader_;
  const std::string run_id_;
  const int64_t step_;
};

}  // namespace autotuned::crossrun
