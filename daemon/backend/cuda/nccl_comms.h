// The NCCL communicators of one process driving GPUs 0..world-1: rank r is
// GPU r. Made with ncclCommInitAll (blocking communicators).
//
// Future work: non-blocking communicators (ncclConfig_t.blocking = 0) with
// ncclCommAbort on a deadline. Until then a collective that never completes
// is contained by the supervisor, which kills the GPU worker process
// (cuda_backend.h): that kill is the watchdog.
//
// Thread-safety: one thread per rank may use comm(rank) at a time (NCCL's
// supported model for communicators on different devices); Create and the
// destructor run with no collective in flight.
#pragma once

#include <nccl.h>

#include <vector>

#include "absl/status/statusor.h"

namespace autotuned::cuda {

class NcclComms {
 public:
  static absl::StatusOr<NcclComms> Create(int world);
  NcclComms() = default;
  NcclComms(NcclComms&& other) noexcept;
  NcclComms& operator=(NcclComms&& other) noexcept;
  ~NcclComms() { Release(); }

  int world() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int rank) const { return comms_[rank]; }

 private:
  void Release();
  std::vector<ncclComm_t> comms_;
};

}  // namespace autotuned::cuda
