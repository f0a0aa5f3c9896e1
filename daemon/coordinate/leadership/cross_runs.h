// The leader's cross-daemon runs: a GO round whose ranks live on several
// daemons, measured by every daemon for its own ranks in lockstep and ranked
// here (rounds::CrossRunner), and the peer calls the followers make during
// it (Peer.ReduceTimings, Peer.Exchange), served through the run's meeting
// point (daemon/coordinate/crossrun/hub.h). See docs/protocol.md ("Groups over several
// daemons") for the protocol.
//
// Ownership: `backend`, `engine`, `solver` and `peer_client` (null: every
// daemon counts as alive) are not owned and outlive the runs.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/coordinate/crossrun/hub.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/rounds/cross_runner.h"
#include "daemon/coordinate/solver/solver.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/engine.h"
#include "proto/peer.pb.h"

namespace autotuned::leadership {

class CrossRuns : public rounds::CrossRunner {
 public:
  // `self`: this daemon's peer_advertise name.
  CrossRuns(Backend* backend, Engine* engine, Solver* solver, PeerClient* peer_client,
            std::string self);

  CrossRuns(const CrossRuns&) = delete;
  CrossRuns& operator=(const CrossRuns&) = delete;

  // rounds::CrossRunner. PlanRun opens the run in the hub for every daemon
  // of the group. Run measures this daemon's ranks in the fixed passes,
  // then, while a pass is worth running (cross_passes.h NextCrossPass),
  // hands every follower the next one as the answer to its timings (a
  // continuation), runs it here too and joins every daemon's timings of
  // it; then decides. It stores TUNED results only when every daemon sent
  // its timings of every pass; a daemon lost or silent, in any pass, rules
  // its ranks' candidates out.
  std::optional<Plan> PlanRun(const ValidRequest& request,
                              const rendezvous::Arrival& arrival) override;
  rendezvous::Decision Run(const ValidRequest& request, const rendezvous::Arrival& arrival,
                           const Plan& plan, absl::Time start,
                           const PublishFn& publish) override;

  // Peer.ReduceTimings: a follower's timings of a pass (RankTimings.pass),
  // answered with the next continuation or the round's final decision by
  // `deadline`. Peer.Exchange: one barrier's all-gather,
  // or an abort (answered at once). INVALID_ARGUMENT "run_id: required";
  // otherwise the hub's statuses (NOT_FOUND, PERMISSION_DENIED,
  // DEADLINE_EXCEEDED, a step's abort reason).
  absl::StatusOr<v1::Decision> Reduce(const v1::RankTimings& timings, absl::Time deadline);
  absl::StatusOr<v1::ExchangeReply> Exchange(const v1::ExchangeRequest& request,
                                             absl::Time deadline);

  // Runs the hub knows now (tests).
  int runs() const { return hub_.runs(); }

 private:
  Backend* const backend_;
  Engine* const engine_;
  Solver* const solver_;
  const std::string self_;

  crossrun::Hub hub_;
};

}  // namespace autotuned::leadership
