#include "daemon/coordinate/leadership/leader.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/coordinate/leadership/wire.h"

namespace autotuned::leadership {

Leader::Leader(rounds::RankRounds* rounds, Admission* admission)
    : rounds_(rounds), admission_(admission) {}

absl::StatusOr<v1::Decision> Leader::Ready(const v1::ReadyRequest& ready,
                                           ValidationContext context, absl::Time deadline,
                                           std::function<bool()> gone) {
  if (admission_->draining()) return Admission::DrainingError();
  context.asking_daemon = ready.from_daemon();
  if (context.asking_daemon.empty() || context.asking_daemon == context.self_daemon) {
    return Rejected(ready.round(),
                    absl::InvalidArgumentError("from_daemon: must name the follower"));
  }
  absl::StatusOr<ValidRequest> valid = ValidateTune(ready.request(), context);
  if (!valid.ok()) return Rejected(ready.round(), valid.status());
  if (!valid->per_rank || !valid->leader.empty()) {
    return Rejected(ready.round(),
                    absl::FailedPreconditionError(absl::StrCat(
                        "this daemon (\"", context.self_daemon, "\") does not lead group \"",
                        valid->group_id, "\": its rank 0 is ",
                        valid->per_rank ? absl::StrCat("on \"", valid->leader, "\"")
                                        : "not given")));
  }
  if (ready.ranks_size() != 1 || ready.ranks(0) != valid->rank) {
    return Rejected(ready.round(),
                    absl::InvalidArgumentError(
                        "ranks: one rank per Ready, the request's group.rank"));
  }
  // A waiting slot, only when the ask waits or measures (not when it is
  // answered from the cache or a decided round).
  std::optional<Admission::Ticket> ticket;
  absl::Status refused;
  rounds::Caller caller;
  caller.deadline = deadline;
  caller.gone = std::move(gone);
  caller.admit = [this, &ticket, &refused]() -> absl::Status {
    absl::StatusOr<Admission::Ticket> admitted = admission_->Admit(Admission::Slot::kWaiting);
    if (!admitted.ok()) {
      refused = admitted.status();
      return refused;
    }
    ticket.emplace(*std::move(admitted));
    return absl::OkStatus();
  };
  std::shared_ptr<const v1::CrossRun> go;
  absl::StatusOr<v1::TuneResponse> answer = rounds_->Round(*valid, caller, &go);
  if (!refused.ok()) return refused;
  if (!answer.ok()) return Rejected(ready.round(), answer.status());
  v1::Decision out;
  *out.mutable_round() = ready.round();
  if (go != nullptr) {
    out.set_verdict(v1::GO);
    *out.mutable_go() = *go;
    return out;
  }
  out.set_verdict(v1::ANSWERED);
  *out.mutable_response() = *std::move(answer);
  return out;
}

}  // namespace autotuned::leadership
