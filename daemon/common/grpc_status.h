// The daemon's one conversion between absl::Status (its errors, across every
// module) and grpc::Status (what its gRPC services return and its stubs
// receive), and of a status code carried as an integer in a message (e.g.
// Decision.error_code, RankResult.code, ExchangeRequest.abort_code in
// proto/peer.proto; Hello.code and RankReport.code between the daemon and
// its GPU worker, daemon/measure/backend/cuda/worker.proto). Nothing else in daemon/
// casts between status codes.
//
// Codes: absl::StatusCode and grpc::StatusCode share their values
// (google.rpc.Code, 0 to 16) and keep them. A code outside that range (from
// a newer or broken peer, or a corrupt message) never becomes an enum value:
// it is UNKNOWN, with a message that names the code received and keeps the
// original message.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace autotuned {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A status carried as (code, message) in a message: OK for code 0 (the
// message is dropped), UNKNOWN for a code outside 0..16 (see above).
absl::Status StatusFromWire(int64_t code, absl::string_view message);
// The code of `status` as such a message carries it.
int32_t StatusCodeToWire(const absl::Status& status);

}  // namespace autotuned
