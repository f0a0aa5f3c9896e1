#include "daemon/coordinate/crossrun/transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"

namespace autotuned::crossrun {

absl::StatusOr<std::vector<std::string>> LeaderTransport::Exchange(int64_t generation,
                                                                   std::string data,
                                                                   absl::Time deadline) {
  return hub_->Exchange(run_id_, step_, generation, hub_->self(), std::move(data), deadline);
}

void LeaderTransport::Abort(const absl::Status& reason) {
  hub_->Abort(run_id_, step_, hub_->self(), reason);
}

absl::StatusOr<std::vector<std::string>> FollowerTransport::Exchange(int64_t generation,
                                                                     std::string data,
                                                                     absl::Time deadline) {
  v1::ExchangeRequest request;
  request.set_run_id(run_id_);
  request.set_step(step_);
  request.set_generation(generation);
  request.set_data(std::move(data));
  absl::StatusOr<v1::ExchangeReply> reply = client_->Exchange(leader_, request, deadline);
  if (!reply.ok()) {
    const absl::StatusCode code = reply.status().code();
    if (code == absl::StatusCode::kResourceExhausted) {
      // Too large to send: the hub never saw it; end the step everywhere.
      Abort(reply.status());
    }
    // The hub's own answers (an abort, the deadline, a lost daemon) pass as
    // they are; a call that did not reach the leader is the leader's loss.
    if (code == absl::StatusCode::kUnavailable &&
        reply.status().message().find("stopped answering") == absl::string_view::npos) {
      return absl::UnavailableError(absl::StrCat("leader ", leader_,
                                                 " unreachable during the run: ",
                                                 reply.status().message()));
    }
    return reply.status();
  }
  return std::vector<std::string>(reply->data().begin(), reply->data().end());
}

void FollowerTransport::Abort(const absl::Status& reason) {
  v1::ExchangeRequest request;
  request.set_run_id(run_id_);
  request.set_step(step_);
  // An OK reason still ends the step (as the hub takes it: ABORTED).
  request.set_abort_code(StatusCodeToWire(reason.ok() ? absl::AbortedError("") : reason));
  request.set_abort_message(std::string(reason.message()));
  (void)client_->Exchange(leader_, request, absl::Now() + kAbortWait);
}

}  // namespace autotuned::crossrun
