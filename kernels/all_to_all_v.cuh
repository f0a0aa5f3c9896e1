// The all-to-all with uneven splits (AT_ALGO_ALL_TO_ALL_V): its kernel and
// launch. Contract in autotuned_kernels.h; validation is
// at_p2p_check_all_to_all_v (all_to_all_v_args.cc). Included by
// p2p_kernels.cu, the one translation unit of the kernels.
//
// Rank d copies, for every rank s, the piece split[s][d] of s's input (at
// the sum of row s before column d) into its output (at the sum of column d
// before row s): loads over NVLink, local stores. Start barrier (every
// input is ready), copies, end barrier (no peer reads this rank's input
// any more once the launch is complete here). The split matrix travels in
// the kernel's arguments, by value, so a CUDA graph captures it and the
// kernel reads no placement from memory.
//
// A piece's copy unit: the largest power of two, at most 16 bytes, modulo
// which its source and destination addresses agree (every base pointer is
// 16-byte aligned, so that is 16 when the two offsets differ by a multiple
// of 16 bytes); elements up to the destination's first unit boundary (the
// head) and after its last whole unit (the tail) go one by one. Rank d
// takes the pieces from s = d + 1, d + 2, ... and its own last, so that
// the ranks do not all read the same peer at once. The grid's threads take
// a piece's units (then its scalars) round robin, each piece starting at
// the thread after the one that took the previous piece's last, so small
// pieces do not all land on the first threads.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_device.cuh"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {

struct AllToAllVKernelArgs {
  P2pKernelArgs p;  // count, chunk_elems, slot_elems, scratch and root unused
  int64_t splits[kMaxWorld * kMaxWorld];  // [s * world + d], world * world used
};

// Copies n elements src -> dst in units of U (src and dst agree modulo
// sizeof(U)); this thread is number `me` of `grid` in the piece's round
// robin. Returns the piece's work items (units, then head and tail
// elements), which every thread computes alike.
template <typename Raw, typename U>
__device__ __forceinline__ int64_t CopyPiece(const Raw* src, Raw* dst, int64_t n, int64_t me,
                                             int64_t grid) {
  constexpr int64_t E = static_cast<int64_t>(sizeof(U) / sizeof(Raw));  // elements a unit
  constexpr int kUnroll = 4;
  const int64_t mis =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) % sizeof(U)) / sizeof(Raw);
  const int64_t head = mis == 0 ? 0 : (E - mis < n ? E - mis : n);
  const int64_t units = (n - head) / E;
  const int64_t scalars = n - units * E;  // head and tail
  const U* s = reinterpret_cast<const U*>(src + head);
  U* d = reinterpret_cast<U*>(dst + head);
  int64_t j = me;
  for (; j + (kUnroll - 1) * grid < units; j += kUnroll * grid) {
    U v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcg(s + j + u * grid);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d[j + u * grid] = v[u];
  }
  for (; j < units; j += grid) d[j] = __ldcg(s + j);
  // Item units + k: head element k, then tail element k - head.
  for (int64_t k = j - units; k < scalars; k += grid) {
    const int64_t i = k < head ? k : units * E + k;
    dst[i] = __ldcg(src + i);
  }
  return units + scalars;
}

// CopyPiece in the largest unit src and dst agree in.
template <typename Raw>
__device__ __forceinline__ int64_t CopyPieceAligned(const Raw* src, Raw* dst, int64_t n,
                                                    int64_t me, int64_t grid) {
  const uintptr_t apart = reinterpret_cast<uintptr_t>(src) ^ reinterpret_cast<uintptr_t>(dst);
  if (apart % 16 == 0) return CopyPiece<Raw, uint4>(src, dst, n, me, grid);
  if (apart % 8 == 0) return CopyPiece<Raw, uint2>(src, dst, n, me, grid);
  if constexpr (sizeof(Raw) == 2) {
    if (apart % 4 != 0) return CopyPiece<Raw, Raw>(src, dst, n, me, grid);
  }
  return CopyPiece<Raw, unsigned int>(src, dst, n, me, grid);
}

// Raw: the element's bits (unsigned int for fp32, unsigned short for the
// 16-bit types): a copy needs no arithmetic.
template <typename Raw>
__global__ void __launch_bounds__(kMaxThreads, 1)
    AllToAllVKernel(const __grid_constant__ AllToAllVKernelArgs a) {
  const P2pKernelArgs& k = a.p;
  const uint32_t e = BeginEpoch(k);
  if (!Barrier(k, Flag(e, 1))) return;
  const int w = k.world, me = k.rank;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  int64_t first = 0;  // the thread that takes the next piece's first item
  for (int i = 1; i <= w; ++i) {
    const int s = (me + i) % w;
    const int64_t n = a.splits[s * w + me];
    if (n == 0) continue;
    int64_t in_off = 0, out_off = 0;
    for (int q = 0; q < me; ++q) in_off += a.splits[s * w + q];
    for (int q = 0; q < s; ++q) out_off += a.splits[q * w + me];
    const int64_t items =
        CopyPieceAligned(static_cast<const Raw*>(k.in[s]) + in_off,
                         static_cast<Raw*>(k.out) + out_off, n, (gid - first + grid) % grid, grid);
    first = (first + items) % grid;
  }
  if (!Barrier(k, Flag(e, 2))) return;
  EndEpoch(k, e);
}

// at_p2p_all_to_all_v.
inline int LaunchAllToAllV(const at_p2p_args* args, const int64_t* splits, cudaStream_t stream) {
  const int rc = at_p2p_check_all_to_all_v(args, splits, nullptr, 0);
  if (rc != AT_OK) return rc;
  const int w = args->world;
  AllToAllVKernelArgs k = {};
  int64_t total = 0;
  for (int i = 0; i < w * w; ++i) {
    k.splits[i] = splits[i];
    total += splits[i];
  }
  if (total == 0) return AT_OK;  // the same on every rank: nobody launches
  for (int p = 0; p < w; ++p) {
    k.p.in[p] = args->peer_inputs[p];
    k.p.sig[p] = static_cast<Signal*>(args->peer_signals[p]);
  }
  k.p.out = args->output;
  k.p.spin_limit = args->spin_limit;
  k.p.world = w;
  k.p.rank = args->rank;
  if (args->dtype == AT_DTYPE_FLOAT32) {
    AllToAllVKernel<unsigned int><<<args->blocks, args->threads, 0, stream>>>(k);
  } else {
    AllToAllVKernel<unsigned short><<<args->blocks, args->threads, 0, stream>>>(k);
  }
  return static_cast<int>(cudaGetLastError());
}

// Loads the kernels (at_p2p_preload_kernels).
inline cudaError_t PreloadAllToAllV() {
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, AllToAllVKernel<unsigned int>);
  if (e != cudaSuccess) return e;
  return cudaFuncGetAttributes(&attr, AllToAllVKernel<unsigned short>);
}

}  // namespace autotuned::kernels::p2p
