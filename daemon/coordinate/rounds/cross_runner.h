// The seam between the per-rank rounds and the leader's cross-daemon runs:
// a GO round whose ranks live on several daemons is measured by a
// CrossRunner (leadership::CrossRuns) instead of here. See docs/protocol.md
// ("Groups over several daemons") for the protocol.
//
// Thread-safety: implementations are called concurrently, for different
// rounds.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "daemon/coordinate/rendezvous/round_table.h"
#include "daemon/coordinate/request/valid_request.h"
#include "proto/autotuned.pb.h"
#include "proto/peer.pb.h"

namespace autotuned::rounds {

class CrossRunner {
 public:
  // The run of a GO round, and the cached answers of the problems it does
  // not measure (per problem of the request; none for those it measures).
  struct Plan {
    std::shared_ptr<const v1::CrossRun> run;
    std::vector<std::optional<v1::ProblemResult>> cached;
  };
  // Hands the measured response to the round's ranks (RoundTable::Publish)
  // and returns the round's decision.
  using PublishFn = std::function<rendezvous::Decision(v1::TuneResponse measured)>;

  virtual ~CrossRunner() = default;

  // The run of `arrival`'s GO round (its runner is on this daemon, which
  // leads the group), ready for the other daemons to join; none when every
  // problem is cached (the round is then answered here, from the cache).
  virtual std::optional<Plan> PlanRun(const ValidRequest& request,
                                      const rendezvous::Arrival& arrival) = 0;

  // Measures the planned run with the other daemons, publishes the response
  // through `publish`, hands the decision to the other daemons, and returns
  // the decision. Returns about RoundRunBound(request) after `start` at the
  // latest.
  virtual rendezvous::Decision Run(const ValidRequest& request,
                                   const rendezvous::Arrival& arrival, const Plan& plan,
                                   absl::Time start, const PublishFn& publish) = 0;
};

}  // namespace autotuned::rounds
