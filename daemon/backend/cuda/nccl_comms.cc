#include "daemon/backend/cuda/nccl_comms.h"

#include <numeric>
#include <utility>

#include "daemon/backend/cuda/cuda_handles.h"
#include "daemon/backend/cuda/cuda_status.h"

namespace autotuned::cuda {

absl::StatusOr<NcclComms> NcclComms::Create(int world) {
  std::vector<int> devices(world);
  std::iota(devices.begin(), devices.end(), 0);
  NcclComms c;
  c.comms_.assign(world, nullptr);
  ScopedDevice restore(0);  // ncclCommInitAll changes the current device
  const ncclResult_t r = ncclCommInitAll(c.comms_.data(), world, devices.data());
  if (r != ncclSuccess) {
    c.comms_.clear();  // ncclCommInitAll leaves nothing to destroy on failure
    return NcclToStatus(r, "ncclCommInitAll");
  }
  return c;
}

NcclComms::NcclComms(NcclComms&& other) noexcept
    : comms_(std::exchange(other.comms_, {})) {}

NcclComms& NcclComms::operator=(NcclComms&& other) noexcept {
  if (this != &other) {
    Release();
    comms_ = std::exchange(other.comms_, {});
  }
  return *this;
}

void NcclComms::Release() {
  if (comms_.empty()) return;
  // Several communicators finalized from one thread: one group (NCCL's rule).
  ncclGroupStart();
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommFinalize(c);
  }
  ncclGroupEnd();
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommDestroy(c);
  }
  comms_.clear();
}

}  // namespace autotuned::cuda
