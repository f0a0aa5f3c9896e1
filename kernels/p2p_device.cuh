// Device-side building blocks shared by the P2P kernels (p2p_kernels.cu,
// one_shot_push.cuh): the kernels' argument block, element types with fp32
// arithmetic, the reduction, signal loads and stores, grid geometry. CUDA
// only; included by p2p_kernels.cu, the one translation unit of the kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {

// Everything a kernel needs, by value: a CUDA graph captures the pointer
// arrays themselves, and the kernel never dereferences host memory.
struct P2pKernelArgs {
  const void* in[kMaxWorld];
  void* scratch[kMaxWorld];
  Signal* sig[kMaxWorld];
  void* out;
  int64_t count;        // elements (all-gather: copy units per rank)
  int64_t chunk_elems;  // two-shot: chunk length in elements
  int64_t slot_elems;   // two-shot: elements of one scratch slot; push
                        // one-shot: of one slot of its buffer; copy engine:
                        // of one peer's slot (the message, whole vectors)
  int64_t spin_limit;
  int world;
  int rank;
  int root;      // broadcast
  int row_base;  // block b's signal row and epoch: row_base + b (0 but for
                 // the ring beside the copy engine, p2p_layout.h)
};

// ---- Element types: raw bits in registers, arithmetic in fp32 -------------

template <int DT> struct Traits;
template <> struct Traits<AT_DTYPE_FLOAT32> {
  using Raw = unsigned int;
  static __device__ __forceinline__ float ToF(Raw v) { return __uint_as_float(v); }
  static __device__ __forceinline__ Raw FromF(float v) { return __float_as_uint(v); }
};
template <> struct Traits<AT_DTYPE_BFLOAT16> {
  using Raw = unsigned short;
  static __device__ __forceinline__ float ToF(Raw v) {
    return __uint_as_float(static_cast<unsigned int>(v) << 16);
  }
  static __device__ __forceinline__ Raw FromF(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
template <> struct Traits<AT_DTYPE_FLOAT16> {
  using Raw = unsigned short;
  static __device__ __forceinline__ float ToF(Raw v) { return __half2float(__ushort_as_half(v)); }
  static __device__ __forceinline__ Raw FromF(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

template <int DT> constexpr int kVec = kVecBytes / static_cast<int>(sizeof(typename Traits<DT>::Raw));

template <int DT> union Pack {
  uint4 u;
  typename Traits<DT>::Raw e[kVec<DT>];
};

template <int OP> __device__ __forceinline__ float Apply(float a, float b) {
  if (OP == AT_OP_MAX) return fmaxf(a, b);
  if (OP == AT_OP_MIN) return fminf(a, b);
  return a + b;
}

// ---- Signals ---------------------------------------------------------------

__device__ __forceinline__ void StoreRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t LoadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Records the first error of this rank: a wait for `kind` (FlagKind, 4 for
// the push one-shot's data, 5 for a copy-engine chunk) on `peer` gave up.
__device__ __forceinline__ void RecordTimeout(const P2pKernelArgs& a, unsigned int kind,
                                              unsigned int peer) {
  const unsigned int code = AT_SIGNAL_ERR_TIMEOUT | (kind << 8) | (peer << 16) |
                            (static_cast<unsigned int>(a.row_base + blockIdx.x) << 24);
  atomicCAS_system(&a.sig[a.rank]->error, 0u, code);
}

// The flag protocol of p2p_layout.h: block b's row, epochs, posts and waits.

// This block's signal row and epoch index.
__device__ __forceinline__ int BlockRow(const P2pKernelArgs& a) {
  return a.row_base + static_cast<int>(blockIdx.x);
}

__device__ __forceinline__ FlagRow* Row(const P2pKernelArgs& a, Signal* s, int kind) {
  FlagRow* rows = kind == kArrive ? s->arrive : (kind == kReduced ? s->reduced : s->gathered);
  return &rows[BlockRow(a)];
}

__device__ __forceinline__ uint64_t* Slot(const P2pKernelArgs& a, Signal* s, int kind, int from) {
  return &Row(a, s, kind)->from[from];
}

// The first thing every P2P kernel does. Launched as a programmatic
// dependent (at_p2p_launch), a kernel may be scheduled before the kernel
// ahead of it on the stream has finished: wait here until that one has
// finished and its memory operations are visible, then let the kernel
// behind this one be scheduled (it waits here in turn). Without that launch
// attribute both are no-ops.
__device__ __forceinline__ void AfterPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t BeginEpoch(const P2pKernelArgs& a) {
  AfterPriorGrid();
  return a.sig[a.rank]->epoch[BlockRow(a)] + 1;
}

// At the successful end of the kernel: once every thread is past its last
// use of the epoch, store it for the next launch (same device, so the kernel
// boundary orders it before the next launch's read).
__device__ __forceinline__ void EndEpoch(const P2pKernelArgs& a, uint32_t e) {
  __syncthreads();
  if (threadIdx.x == 0) a.sig[a.rank]->epoch[BlockRow(a)] = e;
}

// Publishes `value` to every rank's slot for (this block, this rank), after
// all of this block's prior loads and stores.
__device__ __forceinline__ void Post(const P2pKernelArgs& a, int kind, uint64_t value) {
  __syncthreads();
  if (threadIdx.x < a.world) StoreRelease(Slot(a, a.sig[threadIdx.x], kind, a.rank), value);
}

// One thread's wait: until *slot >= value (wrap-safe). False, with error
// `kind` on `peer` recorded, when the spin limit ran out.
__device__ __forceinline__ bool SpinUntil(const P2pKernelArgs& a, const uint64_t* slot,
                                          uint64_t value, unsigned int kind, unsigned int peer) {
  int64_t spins = 0;
  while (static_cast<int64_t>(LoadAcquire(slot) - value) < 0) {
    if (a.spin_limit > 0 && ++spins >= a.spin_limit) {
      RecordTimeout(a, kind, peer);
      return false;
    }
  }
  return true;
}

// Waits until row->from[p] >= value for every rank p (this rank's own too
// when `self`). False (error `kind` recorded, whole block agrees) when a
// spin limit ran out.
__device__ __forceinline__ bool WaitRow(const P2pKernelArgs& a, const FlagRow* row,
                                        uint64_t value, unsigned int kind, bool self) {
  int failed = 0;
  if (threadIdx.x < a.world && (self || threadIdx.x != a.rank)) {
    failed = !SpinUntil(a, &row->from[threadIdx.x], value, kind, threadIdx.x);
  }
  return __syncthreads_or(failed) == 0;
}

// Waits until every rank posted >= value for this block.
__device__ __forceinline__ bool WaitAll(const P2pKernelArgs& a, int kind, uint64_t value) {
  return WaitRow(a, Row(a, a.sig[a.rank], kind), value, static_cast<unsigned int>(kind), true);
}

// Post and wait between two ranks only (the ring): `value` into rank
// `peer`'s slot for (this block, this rank); until this rank's slot for
// (this block, `peer`) is >= value.
__device__ __forceinline__ void PostTo(const P2pKernelArgs& a, int kind, int peer, uint64_t value) {
  __syncthreads();
  if (threadIdx.x == 0) StoreRelease(Slot(a, a.sig[peer], kind, a.rank), value);
}

__device__ __forceinline__ bool WaitFrom(const P2pKernelArgs& a, int kind, int peer,
                                         uint64_t value) {
  int failed = 0;
  if (threadIdx.x == 0) {
    failed = !SpinUntil(a, Slot(a, a.sig[a.rank], kind, peer), value,
                        static_cast<unsigned int>(kind), static_cast<unsigned int>(peer));
  }
  return __syncthreads_or(failed) == 0;
}

__device__ __forceinline__ bool Barrier(const P2pKernelArgs& a, uint64_t value) {
  Post(a, kArrive, value);
  return WaitAll(a, kArrive, value);
}

__device__ __forceinline__ int64_t GlobalThread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---- Reduction -------------------------------------------------------------

// Where a reduction (ReduceRange in p2p_kernels.cu) stores vector j / element i of its range: dst0 (and dst1
// when not null), both local.
struct LocalDst {
  void* dst0;
  void* dst1;
  template <typename Raw>
  __device__ __forceinline__ void Vec(int64_t j, uint4 v) const {
    reinterpret_cast<uint4*>(dst0)[j] = v;
    if (dst1 != nullptr) reinterpret_cast<uint4*>(dst1)[j] = v;
  }
  template <typename Raw>
  __device__ __forceinline__ void Elem(int64_t i, Raw v) const {
    static_cast<Raw*>(dst0)[i] = v;
    if (dst1 != nullptr) static_cast<Raw*>(dst1)[i] = v;
  }
};

// Vector j of every rank's input reduced into dst (vector j).
template <int W, int DT, int OP, typename Dst>
__device__ __forceinline__ void ReduceVector(const Pack<DT> (&in)[W], int world, int64_t j,
                                             const Dst& dst) {
  using T = Traits<DT>;
  constexpr int V = kVec<DT>;
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = T::ToF(in[0].e[k]);
#pragma unroll
  for (int p = 1; p < W; ++p) {
    if (p < world) {
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = Apply<OP>(acc[k], T::ToF(in[p].e[k]));
    }
  }
  Pack<DT> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.e[k] = T::FromF(acc[k]);
  dst.template Vec<typename T::Raw>(j, out.u);
}

}  // namespace autotuned::kernels::p2p
