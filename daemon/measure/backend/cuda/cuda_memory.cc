#include "daemon/measure/backend/cuda/cuda_memory.h"

#include <algorithm>
#include <vector>

#include "kernels/autotuned_kernels.h"

namespace autotuned::cuda {

int64_t ScratchCapacity(int64_t needed) {
  int64_t c = kMinScratchBytes;
  while (c < needed) c *= 2;
  return c;
}

int P2pAlgo(const std::string& impl) {
  struct Entry {
    const char* impl;
    int algo;
  };
  static constexpr Entry kAlgos[] = {
      {"all_reduce/one_shot", AT_ALGO_ALL_REDUCE_ONE_SHOT},
      {"all_reduce/two_shot", AT_ALGO_ALL_REDUCE_TWO_SHOT},
      {"all_reduce/two_shot_push", AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH},
      {"all_reduce/one_shot_push", AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH},
      {"all_reduce/copy_engine", AT_ALGO_ALL_REDUCE_COPY_ENGINE},
      {"all_reduce/two_shot_chunked", AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED},
      {"all_reduce/push_pipelined", AT_ALGO_ALL_REDUCE_PUSH_PIPELINED},
      {"all_reduce/p2p_ring", AT_ALGO_ALL_REDUCE_RING},
      {"all_reduce/two_shot_in_place", AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE},
      {"all_reduce/ce_ring", AT_ALGO_ALL_REDUCE_CE_RING},
      {"all_gather/p2p", AT_ALGO_ALL_GATHER},
      {"reduce_scatter/p2p", AT_ALGO_REDUCE_SCATTER},
      {"all_to_all/p2p", AT_ALGO_ALL_TO_ALL},
      {"broadcast/p2p", AT_ALGO_BROADCAST},
      {"broadcast/push_pipelined", AT_ALGO_BROADCAST_PUSH_PIPELINED},
      {"all_reduce/hang_test", AT_ALGO_ALL_REDUCE_ONE_SHOT},
  };
  for (const Entry& e : kAlgos) {
    if (impl == e.impl) return e.algo;
  }
  return 0;
}

int P2pAlgoFor(const ProblemSpec& problem, const std::string& impl) {
  const int algo = P2pAlgo(impl);
  const std::vector<int64_t>& s = problem.split_counts;
  if (algo != AT_ALGO_ALL_TO_ALL || s.empty()) return algo;
  const bool even = std::all_of(s.begin(), s.end(), [&](int64_t c) { return c == s[0]; });
  return even ? algo : AT_ALGO_ALL_TO_ALL_V;
}

int64_t ChunkElems(const ProblemSpec& p, const CandidateSpec& c) {
  const int64_t vec = AT_P2P_ALIGNMENT / DTypeSize(p.dtype);
  const int64_t kib = c.Param("chunk_kib", 0);
  if (kib <= 0) return 0;  // no chunks (the ring: whole shards)
  const int64_t elems = kib * 1024 / DTypeSize(p.dtype);
  return std::max(vec, elems / vec * vec);
}

int64_t CudaMemoryNeed(const ProblemSpec& p, const CandidateSpec& c) {
  int64_t buffers = 0;
  for (int r = 0; r < p.world_size; ++r) {
    buffers = std::max(buffers, (p.InputCount(r) + p.OutputCount(r)) * DTypeSize(p.dtype));
  }
  buffers += 16 + 16;  // the check's counters, the cross-daemon barrier word
  const int algo = P2pAlgoFor(p, c.impl);
  if (algo == 0) return buffers;
  const int64_t scratch = std::max<int64_t>(
      at_p2p_scratch_bytes(algo, static_cast<int>(p.dtype), p.world_size, p.count,
                           ChunkElems(p, c)),
      0);
  // The push one-shot keeps the group's smallest scratch and its own
  // buffers; the others size the group's scratch.
  const bool push = algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH;
  return buffers + at_p2p_signal_bytes() + ScratchCapacity(push ? 0 : scratch) +
         (push ? ScratchCapacity(scratch) : 0);
}

}  // namespace autotuned::cuda
