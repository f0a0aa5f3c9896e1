// What a candidate of the cuda backend needs on each GPU, counted as the GPU
// worker allocates it (worker/cuda_gpu_node.cc): the memory cap's measure
// (Backend::MemoryNeed). Pure host code, the same in the daemon and in the
// worker, so that what the daemon checks is what the worker allocates.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/common/problem.h"

namespace autotuned::cuda {

// A P2P group's scratch (and the push one-shot's buffers) grow to the next
// power of two of what a run needs, at least kMinScratchBytes, so that a
// sweep of sizes recreates them only a few times.
inline constexpr int64_t kMinScratchBytes = int64_t{4} << 20;
int64_t ScratchCapacity(int64_t needed);

// The AT_ALGO_* of a P2P implementation of cuda_catalogue.cc, or 0 for the
// NCCL ones and names it does not know.
int P2pAlgo(const std::string& impl);

// The AT_ALGO_* that runs `impl` on `problem`: P2pAlgo's, but for
// "all_to_all/p2p" on an uneven split matrix (entries that differ),
// AT_ALGO_ALL_TO_ALL_V (at_p2p_all_to_all_v). Even splits, given as a
// count or as a matrix of equal entries, keep AT_ALGO_ALL_TO_ALL.
int P2pAlgoFor(const ProblemSpec& problem, const std::string& impl);

// chunk_kib of the chunked algos as elements: a whole number of 16-byte
// vectors, at least one; 0 when chunk_kib is 0 or absent (the ring's whole
// shards; the algos without chunks ignore it).
int64_t ChunkElems(const ProblemSpec& problem, const CandidateSpec& candidate);

// The most bytes any one rank of `problem` allocates on its own GPU to run
// `candidate`: its input and output, the check's and the cross-daemon
// barrier's 16-byte counters, and for a P2P implementation the group's
// signal buffer, its scratch and the push one-shot's buffers at their
// allocated capacity (ScratchCapacity). NCCL's own buffers are not counted
// (the cap's fraction of free memory leaves room for them).
int64_t CudaMemoryNeed(const ProblemSpec& problem, const CandidateSpec& candidate);

}  // namespace autotuned::cuda
