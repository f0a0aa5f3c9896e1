#include "daemon/admission/admission.h"

#include "absl/strings/str_cat.h"

namespace autotuned {

Admission::Ticket::~Ticket() {
  if (owner_ != nullptr) owner_->Release();
}

absl::Status Admission::DrainingError() {
  return absl::UnavailableError(
      "draining: the daemon is stopping and takes no new rounds; retry once it "
      "is back");
}

absl::StatusOr<Admission::Ticket> Admission::Admit() {
  absl::MutexLock lock(&mu_);
  if (draining_) return DrainingError();
  if (in_flight_ >= limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        in_flight_, " rounds in progress, the most this daemon serves at once "
        "(limits.max_concurrent_rounds = ", limit_, "); retry shortly"));
  }
  ++in_flight_;
  if (gauge_ != nullptr) gauge_->Set(in_flight_);
  return Ticket(this);
}

void Admission::Release() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
  if (gauge_ != nullptr) gauge_->Set(in_flight_);
}

void Admission::SetLimit(int64_t max_in_flight) {
  absl::MutexLock lock(&mu_);
  limit_ = max_in_flight;
}

void Admission::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool Admission::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

bool Admission::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

int64_t Admission::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace autotuned
