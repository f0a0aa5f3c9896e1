#include "daemon/measure/backend/cuda/worker/p2p_group.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"

namespace autotuned::cuda {
namespace {

const char* AwaitedFlag(uint32_t kind) {
  switch (kind) {
    case 1: return "the barrier";
    case 2: return "a reduced chunk";
    case 3: return "a gathered chunk";
    case 4: return "the push one-shot's data";
    default: return "an unknown flag";
  }
}

}  // namespace

absl::StatusOr<P2pGroup> P2pGroup::Create(const std::vector<int>& devices,
                                          int64_t scratch_bytes) {
  P2pGroup g;
  AT_CUDA_RETURN_IF_ERROR(at_p2p_group_create(static_cast<int>(devices.size()), devices.data(),
                                              scratch_bytes, &g.group_));
  return g;
}

P2pGroup::P2pGroup(P2pGroup&& other) noexcept
    : group_(std::exchange(other.group_, nullptr)), dirty_(other.dirty_.load()) {}

P2pGroup& P2pGroup::operator=(P2pGroup&& other) noexcept {
  if (this != &other) {
    at_p2p_group_destroy(group_);
    group_ = std::exchange(other.group_, nullptr);
    dirty_.store(other.dirty_.load());
  }
  return *this;
}

P2pGroup::~P2pGroup() { at_p2p_group_destroy(group_); }

int P2pGroup::world() const { return at_p2p_group_world(group_); }

int64_t P2pGroup::scratch_bytes() const { return at_p2p_group_scratch_bytes(group_); }

int64_t P2pGroup::push_bytes() const { return at_p2p_group_push_bytes(group_); }

absl::Status P2pGroup::SetPushBytes(int64_t bytes) {
  return CudaToStatus(at_p2p_group_set_push_bytes(group_, bytes),
                      "at_p2p_group_set_push_bytes");
}

absl::Status P2pGroup::InitArgs(int algo, int rank, at_p2p_args* args) const {
  return CudaToStatus(at_p2p_group_init_algo_args(group_, algo, rank, args),
                      "at_p2p_group_init_algo_args");
}

absl::Status P2pGroup::CheckError(int rank, int64_t spin_limit) {
  uint32_t word = 0;
  AT_CUDA_RETURN_IF_ERROR(at_p2p_group_error(group_, rank, &word));
  if (word == 0) return absl::OkStatus();
  MarkDirty();
  if ((word & 0xffu) != AT_SIGNAL_ERR_TIMEOUT) {
    return absl::AbortedError(absl::StrCat("P2P kernel error word 0x", absl::Hex(word)));
  }
  return absl::AbortedError(absl::StrCat(
      "P2P kernel gave up after ", spin_limit, " polls (spin limit) waiting for ",
      AwaitedFlag((word >> 8) & 0xffu), " of rank ", (word >> 16) & 0xffu,
      " in block ", (word >> 24) & 0xffu));
}

absl::Status P2pGroup::ResetIfDirty() {
  if (!dirty_.load()) return absl::OkStatus();
  AT_CUDA_RETURN_IF_ERROR(at_p2p_group_reset(group_));
  dirty_.store(false);
  return absl::OkStatus();
}

}  // namespace autotuned::cuda
