// The copy-engine all-reduce (AT_ALGO_ALL_REDUCE_COPY_ENGINE): its two
// kernels. The launch (p2p_kernels.cu) is, on the caller's stream S and a
// side stream D of its own:
//   S: CePrologueKernel (start barrier; this launch's flag values)
//   S -> D (event)
//   D: for each chunk c: copy this rank's chunk c into slot `rank` of every
//      peer's scratch (cudaMemcpyAsync: the copy engine, not the SMs), then
//      copy ce_source[c] into every peer's ce_arrived.from[rank] (8 bytes,
//      after the data on the same stream, so it lands after it)
//   S: CeReduceKernel (waits for each chunk's flags, reduces it), running
//      while D copies the later chunks
//   D -> S (event): the launch ends when both have.
// The SMs only reduce; NVLink carries copy-engine writes, which move more
// than SM loads or stores (bench/nvlink_ceiling). No end barrier: peers
// never read this rank's memory, and write its scratch only after the next
// launch's start barrier, which this rank passes after its reduce is done.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/p2p_device.cuh"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {

// One block of 32 threads: the start barrier (every rank has finished its
// previous launch, so nobody reads the scratch the copies will write), then
// ce_source[c] = Flag(e, c + 1) for this launch's chunks.
__global__ void __launch_bounds__(32) CePrologueKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  Signal* own = a.sig[a.rank];
  const int64_t chunks = (a.count + a.chunk_elems - 1) / a.chunk_elems;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    own->ce_source[c] = Flag(e, static_cast<uint32_t>(c + 1));
  }
  EndEpoch(a, e);
}

// Chunk by chunk: wait until every peer's chunk c is in this rank's scratch
// (slot p of rank p), then reduce it in rank order with this rank's own input
// into the output. Loads from L2 (ld.global.cg): the copy engine wrote the
// scratch.
template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1)
    CeReduceKernel(const __grid_constant__ P2pKernelArgs a) {
  using T = Traits<DT>;
  using Raw = typename T::Raw;
  constexpr int V = kVec<DT>;
  Signal* own = a.sig[a.rank];
  // The prologue gave up: its flag values are stale, the copies' flags
  // would be too; the error word already says so.
  if (*reinterpret_cast<volatile uint32_t*>(&own->error) != 0) return;
  const uint32_t e = own->epoch[0];  // stored by the prologue, this launch's
  const int64_t chunks = (a.count + a.chunk_elems - 1) / a.chunk_elems;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  for (int64_t c = 0; c < chunks; ++c) {
    if (!WaitRow(a, &own->ce_arrived, Flag(e, static_cast<uint32_t>(c + 1)), kCeChunkWait,
                 false)) {
      return;
    }
    const int64_t base = c * a.chunk_elems;
    const int64_t len = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
    const Raw* src[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      src[p] = p == a.rank ? static_cast<const Raw*>(a.in[a.rank]) + base
                           : static_cast<const Raw*>(a.scratch[a.rank]) + p * a.slot_elems + base;
    }
    Raw* out = static_cast<Raw*>(a.out) + base;
    const int64_t nvec = len / V;
    for (int64_t j = gid; j < nvec; j += grid) {
      Pack<DT> in[W];
#pragma unroll
      for (int p = 0; p < W; ++p) {
        if (p < a.world) in[p].u = __ldcg(reinterpret_cast<const uint4*>(src[p]) + j);
      }
      ReduceVector<W, DT, OP>(in, a.world, j, LocalDst{out, nullptr});
    }
    // The last chunk's elements past its last whole vector.
    for (int64_t i = nvec * V + gid; i < len; i += grid) {
      float acc = T::ToF(__ldcg(src[0] + i));
#pragma unroll
      for (int p = 1; p < W; ++p) {
        if (p < a.world) acc = Apply<OP>(acc, T::ToF(__ldcg(src[p] + i)));
      }
      out[i] = T::FromF(acc);
    }
  }
}

}  // namespace autotuned::kernels::p2p
