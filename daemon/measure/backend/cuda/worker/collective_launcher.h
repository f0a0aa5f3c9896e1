// What one GpuNode run launches on each rank: the catalogue entry resolved to
// an NCCL call (with the candidate's algorithm, protocol and channels forced
// through the tuner plugin, nccl_tuner_link.h) or a P2P kernel
// (kernels/autotuned_kernels.h; all_to_all/p2p on an uneven split matrix:
// at_p2p_all_to_all_v), with every argument fixed before any rank
// starts. The P2P kernels read their peers'
// inputs directly, so the launcher is made once all ranks' buffers exist and
// holds every rank's input pointer.
//
// Thread-safety: after Create, Launch(rank, ...) may be called from each
// rank's thread at once (each thread on its own rank).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/cuda/worker/nccl_comms.h"
#include "daemon/measure/backend/cuda/worker/nccl_tuner_link.h"
#include "daemon/measure/backend/cuda/worker/p2p_group.h"
#include "kernels/autotuned_kernels.h"

namespace autotuned::cuda {

// How a catalogue entry (cuda_catalogue.h) runs.
struct Method {
  // kHangTest: a P2P kernel on rank 0 alone that never finishes;
  // kNcclHangTest: an NCCL all-reduce on rank 0 alone, which waits for its
  // peers until its communicators are aborted (test faults).
  enum Kind { kNccl, kP2p, kHangTest, kNcclHangTest };
  Kind kind = kNccl;
  int algo = 0;  // AT_ALGO_* for kP2p and kHangTest

  bool nccl() const { return kind == kNccl || kind == kNcclHangTest; }
};

// INVALID_ARGUMENT for a name that is not in the catalogue (with
// `test_faults`: the test-faults catalogue) or not for problem.collective.
absl::StatusOr<Method> ResolveMethod(const std::string& impl, Collective collective,
                                     bool test_faults);

// The P2P scratch each rank needs for `candidate` (0 for the others, and for
// arguments the kernels reject: Create reports those); for the push
// one-shot, the bytes of its own buffer (P2pGroup::push_bytes).
int64_t P2pScratchBytes(const ProblemSpec& problem, const CandidateSpec& candidate,
                        Method method);

class CollectiveLauncher {
 public:
  struct Resources {
    const NcclComms* comms = nullptr;  // kNccl, kNcclHangTest: for problem.world_size
    P2pGroup* group = nullptr;         // kP2p, kHangTest: for problem.world_size
    std::vector<void*> inputs;         // [rank] device buffers of this run
    std::vector<void*> outputs;
    int64_t spin_limit = 0;            // P2P polls before giving up, 0 = never
    // Bounds the wait of an NCCL call that answers ncclInProgress.
    absl::Time deadline = absl::InfiniteFuture();
  };

  // P2P: checks every rank's arguments (at_p2p_check_args, or
  // at_p2p_check_all_to_all_v for an uneven all_to_all); INVALID_ARGUMENT
  // with the kernels' reason when any is rejected.
  static absl::StatusOr<std::unique_ptr<CollectiveLauncher>> Create(
      const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
      Resources resources);

  // Whether `rank` launches anything (the hang tests: rank 0 alone).
  bool Participates(int rank) const;
  // Whether the candidate runs in place (all_reduce/two_shot_in_place: the
  // result lands in each rank's input buffer), and where `rank`'s result
  // lands: its input buffer then, else its output buffer.
  bool InPlace() const;
  void* Output(int rank) const;
  // The collective on `rank`'s device (current) and stream, asynchronously.
  // NCCL: returns once the collective is enqueued (an ncclInProgress answer
  // is waited out until Resources::deadline).
  absl::Status Launch(int rank, cudaStream_t stream) const;
  // The P2P group, or nullptr for NCCL.
  P2pGroup* p2p_group() const;
  // The NCCL communicators, or nullptr for P2P.
  const NcclComms* nccl_comms() const;
  int64_t spin_limit() const { return resources_.spin_limit; }

 private:
  CollectiveLauncher(const ProblemSpec& problem, Method method, Resources resources);
  absl::Status LaunchNccl(int rank, cudaStream_t stream) const;

  const ProblemSpec problem_;
  const Method method_;
  const Resources resources_;
  NcclChoice nccl_choice_;  // NCCL: the candidate's algo, proto, channels
  std::vector<const void*> peer_inputs_;  // what p2p_args_[r].peer_inputs points to
  std::vector<at_p2p_args> p2p_args_;     // [rank]
  // An uneven all_to_all/p2p: the split matrix at_p2p_all_to_all_v takes;
  // empty for everything else.
  std::vector<int64_t> split_counts_;
};

}  // namespace autotuned::cuda
