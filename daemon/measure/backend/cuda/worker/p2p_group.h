// The P2P kernels' group (kernels/autotuned_kernels.h, at_p2p_group_*) for
// a list of GPUs of this process (rank r on the r-th): peer access, a signal
// buffer and a scratch buffer per GPU, and the push one-shot's own buffer
// per GPU once a run needs it.
//
// After a launch that gave up (spin limit) or was left unfinished on some
// rank, the ranks' sequence numbers disagree and every later launch would
// hang or fail: MarkDirty() then, and the owner calls ResetIfDirty() before
// the group is used again, with no kernel running on any of its GPUs.
//
// Thread-safety: the rank threads of a run read args/Error concurrently;
// Create, ResetIfDirty and the destructor run with no rank thread active.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/autotuned_kernels.h"

namespace autotuned::cuda {

class P2pGroup {
 public:
  static absl::StatusOr<P2pGroup> Create(const std::vector<int>& devices,
                                         int64_t scratch_bytes);
  P2pGroup() = default;
  P2pGroup(P2pGroup&& other) noexcept;
  P2pGroup& operator=(P2pGroup&& other) noexcept;
  ~P2pGroup();

  int world() const;
  int64_t scratch_bytes() const;
  int64_t push_bytes() const;

  // Replaces the push one-shot's buffers by prepared ones of `bytes` on each
  // GPU (synchronizes the group's GPUs; no kernel of the group may run).
  absl::Status SetPushBytes(int64_t bytes);

  // world, rank, signals and the scratch `algo` uses (the push buffers for
  // the push one-shot) of `args` (at_p2p_group_init_algo_args).
  absl::Status InitArgs(int algo, int rank, at_p2p_args* args) const;

  // OK when `rank`'s signal buffer holds no error word; otherwise ABORTED,
  // decoding the word (which wait gave up on which peer in which block).
  // Marks the group dirty when it finds one.
  absl::Status CheckError(int rank, int64_t spin_limit);

  void MarkDirty() { dirty_.store(true); }
  // Zeroes every signal buffer and prepares the push buffers again
  // (synchronizing every GPU of the group) when the group is dirty.
  absl::Status ResetIfDirty();

 private:
  at_p2p_group* group_ = nullptr;
  std::atomic<bool> dirty_{false};
};

}  // namespace autotuned::cuda
