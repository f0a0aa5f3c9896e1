#include "daemon/coordinate/admission/admission.h"

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

int Index(Admission::Slot slot) { return slot == Admission::Slot::kDevices ? 0 : 1; }

}  // namespace

Admission::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->Release(slot_);
}

absl::Status Admission::DrainingError() {
  return absl::UnavailableError(
      "draining: the daemon is stopping and takes no new rounds; retry once it "
      "is back");
}

absl::StatusOr<Admission::Ticket> Admission::Admit(Slot slot) {
  absl::MutexLock lock(&mu_);
  if (draining_) return DrainingError();
  const int i = Index(slot);
  if (in_flight_[i] >= limit_[i]) {
    if (slot == Slot::kWaiting) {
      return absl::ResourceExhaustedError(absl::StrCat(
          in_flight_[i], " ranks asking one by one in progress, the most this daemon "
          "holds at once (limits.max_waiting_ranks = ", limit_[i], "); retry shortly"));
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        in_flight_[i], " rounds in progress, the most this daemon serves at once "
        "(limits.max_concurrent_rounds = ", limit_[i], "); retry shortly"));
  }
  ++in_flight_[i];
  if (gauge_ != nullptr) gauge_->Set(in_flight_[0] + in_flight_[1]);
  return Ticket(this, slot);
}

void Admission::Release(Slot slot) {
  absl::MutexLock lock(&mu_);
  const int i = Index(slot);
  --in_flight_[i];
  if (gauge_ != nullptr) gauge_->Set(in_flight_[0] + in_flight_[1]);
}

void Admission::SetLimits(int64_t max_in_flight, int64_t max_waiting) {
  absl::MutexLock lock(&mu_);
  limit_[0] = max_in_flight;
  limit_[1] = max_waiting;
}

void Admission::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool Admission::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_[0] == 0 && in_flight_[1] == 0;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

bool Admission::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

int64_t Admission::in_flight(Slot slot) const {
  absl::MutexLock lock(&mu_);
  return in_flight_[Index(slot)];
}

}  // namespace autotuned
