// The ring all-reduce (AT_ALGO_ALL_REDUCE_RING). Protocol and layout:
// p2p_layout.h ("The ring all-reduce"); contract: autotuned_kernels.h.
// Included by p2p_kernels.cu, which launches it.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/p2p_device.cuh"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {

// Vectors a thread loads before it stores any.
constexpr int kRingUnroll = 2;

// d0[i] (and d1[i] when not null) = x[i] OP y[i], or y[i] when x is null,
// for i in [0, n). Vector j belongs to global thread j % grid, the partial
// last vector to the thread owning its index, whatever n is, so that the
// same block of every rank handles the same elements of every shard (the
// shards differ in length only at the end). Loads are ld.global.cg: what
// the previous rank stored into this rank's scratch is in L2, never in a
// stale L1 line.
template <int DT, int OP>
__device__ __forceinline__ void RingPass(const typename Traits<DT>::Raw* x,
                                         const typename Traits<DT>::Raw* y,
                                         typename Traits<DT>::Raw* d0,
                                         typename Traits<DT>::Raw* d1, int64_t n) {
  using T = Traits<DT>;
  constexpr int V = kVec<DT>;
  constexpr int U = kRingUnroll;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const int64_t nvec = n / V;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* yv = reinterpret_cast<const uint4*>(y);
  auto combine = [&](Pack<DT> a, Pack<DT> b) {
    Pack<DT> c;
#pragma unroll
    for (int k = 0; k < V; ++k) c.e[k] = T::FromF(Apply<OP>(T::ToF(a.e[k]), T::ToF(b.e[k])));
    return c.u;
  };
  auto store = [&](int64_t j, uint4 v) {
    reinterpret_cast<uint4*>(d0)[j] = v;
    if (d1 != nullptr) reinterpret_cast<uint4*>(d1)[j] = v;
  };
  int64_t j = gid;
  for (; j + (U - 1) * grid < nvec; j += U * grid) {
    Pack<DT> a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      b[u].u = __ldcg(yv + j + u * grid);
      if (x != nullptr) a[u].u = __ldcg(xv + j + u * grid);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) store(j + u * grid, x != nullptr ? combine(a[u], b[u]) : b[u].u);
  }
  for (; j < nvec; j += grid) {
    Pack<DT> a, b;
    b.u = __ldcg(yv + j);
    if (x != nullptr) a.u = __ldcg(xv + j);
    store(j, x != nullptr ? combine(a, b) : b.u);
  }
  if (gid != nvec % grid) return;
  for (int64_t i = nvec * V; i < n; ++i) {
    const float v = x != nullptr ? Apply<OP>(T::ToF(__ldcg(x + i)), T::ToF(__ldcg(y + i)))
                                 : T::ToF(__ldcg(y + i));
    d0[i] = T::FromF(v);
    if (d1 != nullptr) d1[i] = T::FromF(v);
  }
}

// Message m of the ring (p2p_layout.h), per block: start barrier, then for
// m = 0 .. 2 (world - 1) - 1 and each part k of the shard (RingParts): wait
// for part k of message m - 1 from the previous rank, pass it on into the
// next rank's slot RingSlot(m), post (m, k); then wait for the last
// message's parts and copy them into the output. Every store over NVLink
// goes to the next rank only. With several parts, part k of message m
// travels while part k + 1 of message m - 1 is still on its way, so a
// step's wait for the previous rank overlaps the data of the next part.
//
// No end barrier: when a rank finishes, it has waited for every message
// the previous rank stores into its scratch, and nobody else writes there or
// reads its memory. The next launch writes a rank's scratch only after its
// start barrier, so after this launch has completed there.
//
// In place (output == own input): block b writes output elements of shard
// s only after it has loaded input elements of shard s (the reduce-scatter
// step that adds its own input to shard s comes first, and the one that
// completes shard r loads and stores each element on the same thread).
template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1) RingKernel(const __grid_constant__ P2pKernelArgs a) {
  using Raw = typename Traits<DT>::Raw;
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int n = a.world, r = a.rank;
  const int next = r + 1 == n ? 0 : r + 1, prev = r == 0 ? n - 1 : r - 1;
  const int64_t slice = a.slot_elems;
  const Raw* in = static_cast<const Raw*>(a.in[r]);
  Raw* out = static_cast<Raw*>(a.out);
  const Raw* own = static_cast<const Raw*>(a.scratch[r]);
  Raw* to = static_cast<Raw*>(a.scratch[next]);
  const RingParts parts = RingPartsOf(slice, a.chunk_elems);
  auto shard = [&](int s) { return (s % n + n) % n; };
  // Elements of part k of shard s, and the flag point of (m, k).
  auto len = [&](int s, int64_t k) {
    const int64_t left = SliceLen(a.count, slice, s) - k * parts.part;
    return left < 0 ? 0 : (left > parts.part ? parts.part : left);
  };
  auto point = [&](int m, int64_t k) { return Flag(e, static_cast<uint32_t>(m * parts.count + k + 1)); };
  for (int m = 0; m < 2 * n - 2; ++m) {
    for (int64_t k = 0; k < parts.count; ++k) {
      if (m > 0 && !WaitFrom(a, kReduced, prev, point(m - 1, k))) return;
      const int64_t off = k * parts.part;
      const Raw* got = m > 0 ? own + RingSlot(m - 1, n) * slice + off : nullptr;
      Raw* dst = to + RingSlot(m, n) * slice + off;
      if (m < n - 1) {  // reduce-scatter: own input (+ the partial received)
        const int s = shard(r - m - 1);
        RingPass<DT, OP>(got, in + s * slice + off, dst, nullptr, len(s, k));
      } else if (m == n - 1) {  // shard r completed: keep it, send it
        RingPass<DT, OP>(got, in + r * slice + off, out + r * slice + off, dst, len(r, k));
      } else {  // all-gather: keep and forward the shard received
        const int s = shard(r - (m - (n - 1)));
        RingPass<DT, OP>(nullptr, got, out + s * slice + off, dst, len(s, k));
      }
      PostTo(a, kReduced, next, point(m, k));
    }
  }
  const int s = shard(r + 1);
  for (int64_t k = 0; k < parts.count; ++k) {
    if (!WaitFrom(a, kReduced, prev, point(2 * n - 3, k))) return;
    const int64_t off = k * parts.part;
    RingPass<DT, OP>(nullptr, own + RingSlot(2 * n - 3, n) * slice + off, out + s * slice + off,
                     nullptr, len(s, k));
  }
  EndEpoch(a, e);
}

}  // namespace autotuned::kernels::p2p
