#include "daemon/coordinate/leadership/wire.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"

namespace autotuned::leadership {

v1::Decision DecisionToWire(const rendezvous::Decision& decision, const v1::RoundKey& round) {
  if (decision.verdict == rendezvous::Verdict::kError) return Rejected(round, decision.error);
  v1::Decision out;
  *out.mutable_round() = round;
  out.set_verdict(v1::ANSWERED);
  if (decision.response != nullptr) *out.mutable_response() = *decision.response;
  return out;
}

v1::Decision Rejected(const v1::RoundKey& round, const absl::Status& error) {
  v1::Decision out;
  *out.mutable_round() = round;
  out.set_verdict(v1::REJECTED);
  out.set_error_code(StatusCodeToWire(error));
  out.set_error_message(std::string(error.message()));
  return out;
}

absl::Status RejectedStatus(const v1::Decision& decision) {
  absl::Status error = StatusFromWire(decision.error_code(), decision.error_message());
  if (!error.ok()) return error;
  return absl::UnknownError(absl::StrCat("the leader rejected the round with status code 0: ",
                                         decision.error_message()));
}

void RankOutcomeToWire(int rank, const RankOutcome& outcome, v1::RankResult* out) {
  out->set_rank(rank);
  out->set_code(StatusCodeToWire(outcome.status));
  out->set_message(std::string(outcome.status.message()));
  for (double us : outcome.iteration_us) out->add_iteration_us(us);
}

RankOutcome RankOutcomeFromWire(const v1::RankResult& result) {
  RankOutcome out;
  out.status = StatusFromWire(result.code(), result.message());
  if (out.status.ok()) {
    out.iteration_us.assign(result.iteration_us().begin(), result.iteration_us().end());
  }
  return out;
}

absl::StatusOr<int64_t> RunCandidates(const ValidRequest& request, const v1::CrossRun& run) {
  int64_t total = 0;
  for (int index : run.problems()) {
    if (index < 0 || index >= static_cast<int>(request.problems.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "go.problems: index ", index, " outside the ", request.problems.size(),
          " problems of the request"));
    }
    total += static_cast<int64_t>(request.problems[index].candidates.size());
  }
  return total;
}

}  // namespace autotuned::leadership
