// The peer messages (proto/peer.proto) of a round's decision and of a rank's
// outcome, as the leader and the followers convert them. Status codes go
// through daemon/common/grpc_status.h (range-checked from the wire).
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"
#include "daemon/backend/backend.h"
#include "daemon/rendezvous/round_table.h"
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

}  // namespace autotuned::leadership
