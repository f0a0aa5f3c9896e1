// The copy-engine all-reduces (AT_ALGO_ALL_REDUCE_COPY_ENGINE and
// AT_ALGO_ALL_REDUCE_COPY_ENGINE_TWO_SHOT): their kernels. The launch (p2p_kernels.cu) is, on the caller's stream S and a
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
  // The two-shot's chunks (of a slice) are never more than the message's.
  const int64_t message_chunks = (a.count + a.chunk_elems - 1) / a.chunk_elems;
  const int64_t chunks = message_chunks < kMaxCeChunks ? message_chunks : kMaxCeChunks;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    own->ce_source[c] = Flag(e, static_cast<uint32_t>(c + 1));
  }
  EndEpoch(a, e);
}

// The copy-engine one-shot's reduce. Chunk by chunk: wait until every peer's chunk c is in this rank's scratch
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

// ---- The copy-engine two-shot ----------------------------------------------
// Slices of SliceElems(count, world) elements (slot_elems), each cut into
// chunks of chunk_elems. The launch (p2p_kernels.cu, LaunchCeTwoShot), on the
// caller's stream S and two side streams D1, D2 of its own:
//   S: CePrologueKernel (start barrier; the flag values)
//   S -> D1 (event)
//   D1: for each chunk c: copy chunk c of every slice q != rank of this
//       rank's input into slot `rank` of rank q's scratch; event E1[c]
//   S: for each chunk c: wait for E1[c]; CeTwoShotReduceKernel (block b:
//       barrier with block b of every peer, arrive[b] = Flag(e, c + 2): the
//       peers' copies of chunk c are done, as their reduce of it started
//       after them; then reduces chunk c of slice `rank` (own input and
//       scratch slots p) into the output and into scratch slot `rank`, posts
//       reduced[b] = Flag(e, c + 1) to every rank); CeReducedWaitKernel
//       (every peer's blocks reduced chunk c); event E2[c]
//   D2: for each chunk c: wait for E2[c], then copy chunk c of slice q from
//       slot q of rank q's scratch into the output, for every q != rank (the
//       copy engine reads over NVLink)
//   D1, D2 -> S (events): the launch ends when all three have.
// Every byte crosses NVLink once each way as a copy-engine transfer, and the
// gather of chunk c overlaps the scatter and reduce of the next chunks. Only
// kernels on S wait for peers, for work that each peer orders before its own
// wait of the same kind (its reduce of chunk c waits for its copies of chunk
// c, which need only its prologue), so no order in which a CUDA graph runs
// the three branches can deadlock. The signals are SM stores: the copy
// engines move data only.
// No end barrier: a peer reads slot `rank` of this rank's scratch until its
// D2 is done, and this rank writes that slot again only after the next
// launch's start barrier, which the peer passes only after its D2 has joined
// its S; the peers' copies into this rank's other slots come after that
// barrier too. In place is safe: D1 reads slice q != rank of the input
// before the flag that lets rank q reduce chunk c, and D2 writes chunk c of
// slice q only after rank q reduced it; the reduce reads and writes slice
// `rank`, each element by one thread.

// The elements of chunk c of slice q (0 past the slice's end).
__host__ __device__ __forceinline__ int64_t CeTwoShotChunkLen(int64_t count, int64_t slice,
                                                             int64_t chunk, int q, int64_t c) {
  const int64_t n = SliceLen(count, slice, q) - c * chunk;
  return n < 0 ? 0 : (n > chunk ? chunk : n);
}

// Chunk a.chunk_index of this rank's slice.
template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1)
    CeTwoShotReduceKernel(const __grid_constant__ P2pKernelArgs a) {
  using T = Traits<DT>;
  using Raw = typename T::Raw;
  constexpr int V = kVec<DT>;
  Signal* own = a.sig[a.rank];
  if (*reinterpret_cast<volatile uint32_t*>(&own->error) != 0) return;
  const uint32_t e = own->epoch[0];  // stored by the prologue, this launch's
  const int64_t c = a.chunk_index;
  // Point 1 of arrive[0] is the prologue's barrier.
  if (!Barrier(a, Flag(e, static_cast<uint32_t>(c + 2)))) return;
  const uint64_t flag = Flag(e, static_cast<uint32_t>(c + 1));
  const int64_t slice = a.slot_elems;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const int64_t base = a.rank * slice + c * a.chunk_elems;  // in the message
  const int64_t len = CeTwoShotChunkLen(a.count, slice, a.chunk_elems, a.rank, c);
  Raw* const slot = static_cast<Raw*>(a.scratch[a.rank]);
  const Raw* src[W];
#pragma unroll
  for (int p = 0; p < W; ++p) {
    src[p] = p == a.rank ? static_cast<const Raw*>(a.in[a.rank]) + base
                         : slot + p * slice + c * a.chunk_elems;
  }
  Raw* out = static_cast<Raw*>(a.out) + base;
  Raw* mine = slot + base;  // slot `rank`: where the peers pull it from
  const int64_t nvec = len / V;
  for (int64_t j = gid; j < nvec; j += grid) {
    Pack<DT> in[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) in[p].u = __ldcg(reinterpret_cast<const uint4*>(src[p]) + j);
    }
    ReduceVector<W, DT, OP>(in, a.world, j, LocalDst{out, mine});
  }
  // The last slice's elements past its last whole vector.
  for (int64_t i = nvec * V + gid; i < len; i += grid) {
    float acc = T::ToF(__ldcg(src[0] + i));
#pragma unroll
    for (int p = 1; p < W; ++p) {
      if (p < a.world) acc = Apply<OP>(acc, T::ToF(__ldcg(src[p] + i)));
    }
    out[i] = T::FromF(acc);
    mine[i] = T::FromF(acc);
  }
  // Every block posts, so that a peer's wait needs no count of the blocks
  // that had work.
  Post(a, kReduced, flag);
  EndEpoch(a, e);  // rows reduced[b] now carry epoch e: the next launch's are later
}

// One block: waits until every peer's `reduce_blocks` blocks posted
// reduced = Flag(e, a.chunk_index + 1) into this rank's signal buffer.
__global__ void __launch_bounds__(256)
    CeReducedWaitKernel(const __grid_constant__ P2pKernelArgs a, int reduce_blocks) {
  Signal* own = a.sig[a.rank];
  if (*reinterpret_cast<volatile uint32_t*>(&own->error) != 0) return;
  const uint64_t want = Flag(own->epoch[0], static_cast<uint32_t>(a.chunk_index + 1));
  for (int i = threadIdx.x; i < reduce_blocks * a.world; i += blockDim.x) {
    const int b = i / a.world, p = i % a.world;
    if (p == a.rank) continue;
    const uint64_t* flag = &own->reduced[b].from[p];
    int64_t spins = 0;
    while (static_cast<int64_t>(LoadAcquire(flag) - want) < 0) {
      if (a.spin_limit > 0 && ++spins >= a.spin_limit) {
        RecordTimeout(a, kReduced, static_cast<unsigned int>(p));
        break;
      }
    }
  }
}

}  // namespace autotuned::kernels::p2p
