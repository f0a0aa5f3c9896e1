// The push one-shot all-reduce (AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) and the
// preparation of its buffer. Protocol and layout: p2p_layout.h ("The push
// one-shot's buffer"); contract: autotuned_kernels.h. Included by
// p2p_kernels.cu, which launches them.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/p2p_device.cuh"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {

constexpr unsigned int kEmptyWord = 0x80008000u;  // two kPushEmpty
static_assert(kEmptyWord == (static_cast<unsigned int>(kPushEmpty) << 16 | kPushEmpty),
              "two 16-bit empty markers");

// Bytes in flight per rank before a thread reads what its peers sent: the
// data a round of the grid pushes is read `lag` rounds later, with lag
// rounds covering at least this much, about what NVLink carries in the time
// a store takes to land, so that a reader seldom waits.
constexpr int64_t kPushLagBytes = int64_t{512} << 10;

// Bit 15 of each 16-bit half of `w` that is kPushEmpty, else 0 (exact per
// half: no borrow crosses between them).
__device__ __forceinline__ unsigned int EmptyHalves(unsigned int w) {
  const unsigned int x = w ^ kEmptyWord;  // a half is 0 where w's was empty
  return ~(((x & 0x7fff7fffu) + 0x7fff7fffu) | x) & 0x80008000u;
}

__device__ __forceinline__ bool HasEmpty(uint4 v) {
  return (EmptyHalves(v.x) | EmptyHalves(v.y) | EmptyHalves(v.z) | EmptyHalves(v.w)) != 0;
}

// -0.0 (== kPushEmpty) sent as +0.0, so that sent data never looks empty.
__device__ __forceinline__ uint4 NoEmpty(uint4 v) {
  v.x &= ~EmptyHalves(v.x);
  v.y &= ~EmptyHalves(v.y);
  v.z &= ~EmptyHalves(v.z);
  v.w &= ~EmptyHalves(v.w);
  return v;
}

__device__ __forceinline__ unsigned short NoEmpty(unsigned short e) {
  return e == kPushEmpty ? 0 : e;
}

// Relaxed system-scope accesses (PTX .volatile on global memory): the data
// words themselves are the signal, so they must not be cached in L1 or
// merged by the compiler.
__device__ __forceinline__ uint4 LoadVolatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void StoreVolatile(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ unsigned short LoadVolatile(const unsigned short* p) {
  unsigned short v;
  asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreVolatile(unsigned short* p, unsigned short v) {
  asm volatile("st.volatile.global.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}

// Where the slots of the launch are: slot (phase, from) of `owner`'s buffer.
struct PushSlots {
  const P2pKernelArgs& a;
  template <typename Raw>
  __device__ __forceinline__ Raw* At(int owner, int phase, int from) const {
    char* body = static_cast<char*>(a.scratch[owner]) + kPushHeaderBytes;
    return reinterpret_cast<Raw*>(body) +
           (static_cast<int64_t>(phase) * a.world + from) * a.slot_elems;
  }
};

// Waits until `*src` holds no empty element and returns it in *v; false
// (error recorded for `peer`) once the spin limit runs out. `own`: src is
// this rank's input, there already, returned with -0.0 as +0.0 (one code
// path for every rank keeps the values in registers, not in an array
// indexed by the rank).
template <typename U>
__device__ __forceinline__ bool Arrived(const P2pKernelArgs& a, const U* src, int peer, bool own,
                                        U* v) {
  int64_t spins = 0;
  while (true) {
    *v = LoadVolatile(src);
    if (own) {
      *v = NoEmpty(*v);
      return true;
    }
    bool empty;
    if constexpr (sizeof(U) == 16) {
      empty = HasEmpty(*v);
    } else {
      empty = *v == kPushEmpty;
    }
    if (!empty) return true;
    if (a.spin_limit > 0 && ++spins >= a.spin_limit) {
      RecordTimeout(a, kPushDataWait, static_cast<unsigned int>(peer));
      return false;
    }
  }
}

// Launch n of a rank (n = header.launches[block], phase n % 3):
//   - the tail (count % V elements past the last whole vector), owned by one
//     thread, is pushed first so that it travels while the vectors do;
//   - round k of the grid: push vector j = gid + k * grid (own input, -0.0
//     as +0.0) into slot (phase, rank) of every peer; then take vector
//     j' = gid + (k - lag) * grid: wait for it in own slots (phase, p),
//     reduce in rank order (own input read again, locally) into the output,
//     and empty vector j' of the slots of phase (n + 2) % 3;
//   - the rest of phase (n + 2) % 3 is emptied, the tail waited for;
//   - block 0 records extent[phase] = count, and every block advances its
//     entries of header.launches (p2p_layout.h).
// In place: element j of the input is loaded (push, then reduce) before the
// same thread stores element j of the output, and nothing else reads it.
template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1)
    OneShotPushKernel(const __grid_constant__ P2pKernelArgs a) {
  using T = Traits<DT>;
  using Raw = typename T::Raw;
  static_assert(sizeof(Raw) == 2, "16-bit element types only");
  constexpr int V = kVec<DT>;
  AfterPriorGrid();
  PushHeader* hdr = static_cast<PushHeader*>(a.scratch[a.rank]);
  const uint32_t n = hdr->launches[blockIdx.x];
  const int phase = static_cast<int>(n % kPushPhases);
  const int stale = static_cast<int>((n + 2) % kPushPhases);
  const int64_t stale_vecs = (hdr->extent[stale] + V - 1) / V;
  const PushSlots slots{a};
  const Raw* in = static_cast<const Raw*>(a.in[a.rank]);
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const int64_t nvec = a.count / V;
  const int64_t rounds = (nvec + grid - 1) / grid;
  const int64_t round_bytes = grid * kVecBytes;
  const int64_t lag = (kPushLagBytes + round_bytes - 1) / round_bytes;
  const bool tail_owner = a.count % V != 0 && gid == nvec % grid;
  // Vector j of the slots the previous launch read, emptied for the next use.
  auto empty_stale = [&](int64_t j) {
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world && p != a.rank) {
        reinterpret_cast<uint4*>(slots.At<Raw>(a.rank, stale, p))[j] =
            make_uint4(kEmptyWord, kEmptyWord, kEmptyWord, kEmptyWord);
      }
    }
  };
  int failed = 0;

  if (tail_owner) {
    for (int64_t i = nvec * V; i < a.count; ++i) {
      const Raw v = NoEmpty(in[i]);
#pragma unroll
      for (int p = 0; p < W; ++p) {
        if (p < a.world && p != a.rank) StoreVolatile(slots.At<Raw>(p, phase, a.rank) + i, v);
      }
    }
  }
  for (int64_t k = 0; k < rounds + lag && !failed; ++k) {
    if (k < rounds) {
      const int64_t j = gid + k * grid;
      if (j < nvec) {
        const uint4 v = NoEmpty(reinterpret_cast<const uint4*>(in)[j]);
#pragma unroll
        for (int p = 0; p < W; ++p) {
          if (p < a.world && p != a.rank) {
            StoreVolatile(reinterpret_cast<uint4*>(slots.At<Raw>(p, phase, a.rank)) + j, v);
          }
        }
      }
    }
    if (k < lag) continue;
    const int64_t j = gid + (k - lag) * grid;
    if (j < nvec) {
      Pack<DT> v[W];
#pragma unroll
      for (int p = 0; p < W; ++p) {
        if (p >= a.world || failed) continue;
        const bool own = p == a.rank;
        const Raw* src = own ? in : slots.At<Raw>(a.rank, phase, p);
        failed = !Arrived(a, reinterpret_cast<const uint4*>(src) + j, p, own, &v[p].u);
      }
      if (failed) break;
      ReduceVector<W, DT, OP>(v, a.world, j, LocalDst{a.out, nullptr});
    }
    if (j < stale_vecs) empty_stale(j);
  }
  for (int64_t j = gid + rounds * grid; j < stale_vecs && !failed; j += grid) empty_stale(j);
  if (tail_owner && !failed) {
    for (int64_t i = nvec * V; i < a.count && !failed; ++i) {
      float acc = 0.f;
#pragma unroll
      for (int p = 0; p < W; ++p) {
        if (p >= a.world) continue;
        if (failed) continue;
        const bool own = p == a.rank;
        Raw e = 0;
        failed = !Arrived(a, (own ? in : slots.At<Raw>(a.rank, phase, p)) + i, p, own, &e);
        acc = p == 0 ? T::ToF(e) : Apply<OP>(acc, T::ToF(e));
      }
      if (!failed) static_cast<Raw*>(a.out)[i] = T::FromF(acc);
    }
  }
  if (__syncthreads_or(failed)) return;  // the caller resets the buffers
  // Read by the next launch on this rank only (the kernel boundary orders it).
  if (blockIdx.x == 0 && threadIdx.x == 0) hdr->extent[phase] = a.count;
  for (int64_t i = blockIdx.x + static_cast<int64_t>(threadIdx.x) * gridDim.x; i < kMaxBlocks;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    hdr->launches[i] = n + 1;
  }
}

// Fills `vecs` 16-byte vectors from `body` with empty markers.
__global__ void PushFillKernel(uint4* body, int64_t vecs) {
  const uint4 empty = make_uint4(kEmptyWord, kEmptyWord, kEmptyWord, kEmptyWord);
  for (int64_t j = GlobalThread(); j < vecs; j += GridThreads()) body[j] = empty;
}

}  // namespace autotuned::kernels::p2p
