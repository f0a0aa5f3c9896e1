// The peer messages (proto/peer.proto) of a round's decision and of a rank's
// outcome, as the leader and the followers convert them. Status codes go
// through daemon/common/grpc_status.h (range-checked from the wire).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/coordinate/rendezvous/round_table.h"
#include "proto/peer.pb.h"

namespace autotuned::leadership {

// ERROR: REJECTED with the error; otherwise ANSWERED with the response.
v1::Decision DecisionToWire(const rendezvous::Decision& decision, const v1::RoundKey& round);

// REJECTED with `error` (not OK).
v1::Decision Rejected(const v1::RoundKey& round, const absl::Status& error);

// The error of a REJECTED decision; UNKNOWN naming the code when it is not
// a known one, or 0.
absl::Status RejectedStatus(const v1::Decision& decision);

// A rank's outcome as a follower reports it, and back.
void RankOutcomeToWire(int rank, const RankOutcome& outcome, v1::RankResult* out);
RankOutcome RankOutcomeFromWire(const v1::RankResult& result);

// The candidates of every problem of `run` together: the `total` with which
// every daemon numbers the run's steps (crossrun::CrossStep).
// INVALID_ARGUMENT for a problem index outside `request`.
absl::StatusOr<int64_t> RunCandidates(const ValidRequest& request, const v1::CrossRun& run);

}  // namespace autotuned::leadership
