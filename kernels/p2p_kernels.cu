// P2P collective kernels (all-reduce one-shot / two-shot / chunked two-shot /
// push two-shot, in place or not, all-gather, reduce-scatter; the push one-shot is in
// one_shot_push.cuh, the ring all-reduce in ring.cuh, the copy-engine
// all-reduce in copy_engine.cuh, the all-to-all with uneven splits in
// all_to_all_v.cuh) and their launch functions. Contract and protocol: autotuned_kernels.h and
// p2p_layout.h. Kernels only: validation is at_p2p_check_args (p2p_args.cc),
// setup is p2p_group.cc.
#include <cuda_runtime.h>
#include <stdint.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/all_to_all_v.cuh"
#include "kernels/autotuned_kernels.h"
#include "kernels/copy_engine.cuh"
#include "kernels/one_shot_push.cuh"
#include "kernels/p2p_device.cuh"
#include "kernels/p2p_layout.h"
#include "kernels/ring.cuh"

namespace autotuned::kernels::p2p {
namespace {

// ---- Data movement ---------------------------------------------------------

// A reduced slice's destinations in the push algos: this rank's output at
// element offset `out_off` and every peer's scratch at `slot_off` (the push
// two-shot: the same offset, slice r of the output is slot r of a scratch).
// The peer stores are plain st.global over NVLink; the Post that follows
// them (__syncthreads, then st.release.sys) publishes them.
template <int W>
struct PushDst {
  const P2pKernelArgs& a;
  int64_t out_off;
  int64_t slot_off;
  template <typename Raw>
  __device__ __forceinline__ void Vec(int64_t j, uint4 v) const {
    reinterpret_cast<uint4*>(static_cast<Raw*>(a.out) + out_off)[j] = v;
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world && p != a.rank) {
        reinterpret_cast<uint4*>(static_cast<Raw*>(a.scratch[p]) + slot_off)[j] = v;
      }
    }
  }
  template <typename Raw>
  __device__ __forceinline__ void Elem(int64_t i, Raw v) const {
    static_cast<Raw*>(a.out)[out_off + i] = v;
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world && p != a.rank) static_cast<Raw*>(a.scratch[p])[slot_off + i] = v;
    }
  }
};

// Vectors a thread loads before it reduces any (all U x W loads in flight at
// once): NVLink latency times bandwidth is more than one 16-byte load per
// thread per rank covers at 64 blocks. U x W = 8 vectors, 32 registers; the
// two-shot kernel keeps U = 1 in blocks of more than kNarrowThreads threads
// (with more, it spills under the 64-register cap of 1024-thread blocks),
// and takes U = kUnroll in narrower blocks (128 registers a thread).
template <int W> constexpr int kUnroll = W >= 8 ? 1 : 8 / W;
constexpr int kNarrowThreads = kMaxThreads / 2;

// dst[i] (LocalDst: dst0[i], and dst1[i] when not null) = reduce over ranks
// p of in[p][src_off + i], i in [0, n) (`in`: the ranks' inputs, a.in, or
// for the pipelined push all-reduce this rank's own copies of them). Peer loads are ld.global.cg (L2,
// never a stale L1 line). Vector path: vector j (elements [j*V, j*V+V))
// belongs to global thread j % grid, which takes its vectors U at a time;
// the partial last vector belongs to the thread owning its index. The scalar
// path (vec == false, reduce-scatter with misaligned blocks) maps element i
// to thread i % grid.
template <int W, int DT, int OP, int U, typename Dst>
__device__ __forceinline__ void ReduceRangeTo(const P2pKernelArgs& a, const void* const* in_ptrs,
                                              int64_t src_off, int64_t n, const Dst& dst,
                                              bool vec) {
  using T = Traits<DT>;
  using Raw = typename T::Raw;
  constexpr int V = kVec<DT>;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const int64_t nvec = vec ? n / V : 0;
  int64_t j = gid;
  for (; j + (U - 1) * grid < nvec; j += U * grid) {
    Pack<DT> in[U][W];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int p = 0; p < W; ++p) {
        if (p < a.world) {
          in[u][p].u = __ldcg(reinterpret_cast<const uint4*>(static_cast<const Raw*>(in_ptrs[p]) +
                                                              src_off) +
                              j + u * grid);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) ReduceVector<W, DT, OP>(in[u], a.world, j + u * grid, dst);
  }
  for (; j < nvec; j += grid) {
    Pack<DT> in[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) {
        in[p].u = __ldcg(reinterpret_cast<const uint4*>(static_cast<const Raw*>(in_ptrs[p]) + src_off) + j);
      }
    }
    ReduceVector<W, DT, OP>(in, a.world, j, dst);
  }
  // Scalar elements: the vector path's partial last vector (one thread), or
  // everything (grid-stride).
  int64_t i = nvec * V + (vec ? 0 : gid);
  const int64_t step = vec ? 1 : grid;
  if (vec && gid != nvec % grid) i = n;
  for (; i < n; i += step) {
    Raw in[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) in[p] = __ldcg(static_cast<const Raw*>(in_ptrs[p]) + src_off + i);
    }
    float acc = T::ToF(in[0]);
#pragma unroll
    for (int p = 1; p < W; ++p) {
      if (p < a.world) acc = Apply<OP>(acc, T::ToF(in[p]));
    }
    dst.template Elem<Raw>(i, T::FromF(acc));
  }
}

template <int W, int DT, int OP, int U>
__device__ __forceinline__ void ReduceRange(const P2pKernelArgs& a, int64_t src_off, int64_t n,
                                            void* dst0, void* dst1, bool vec) {
  ReduceRangeTo<W, DT, OP, U>(a, a.in, src_off, n, LocalDst{dst0, dst1}, vec);
}

// ---- Kernels ---------------------------------------------------------------

template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1) OneShotKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  ReduceRange<W, DT, OP, kUnroll<W>>(a, 0, a.count, a.out, nullptr, true);
  if (!Barrier(a, Flag(e, 2))) return;  // peers are done reading our input
  EndEpoch(a, e);
}

template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1) ReduceScatterKernel(const __grid_constant__ P2pKernelArgs a) {
  constexpr int V = kVec<DT>;
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t off = a.rank * a.count;
  ReduceRange<W, DT, OP, kUnroll<W>>(a, off, a.count, a.out, nullptr, off % V == 0);
  if (!Barrier(a, Flag(e, 2))) return;
  EndEpoch(a, e);
}

// Copies the slices s != rank of chunk k from scratch into the output, with
// the vector-to-thread mapping of ReduceRange. kPushed false (pull two-shot):
// slice s is in slot k % D of rank s's scratch (a peer load). kPushed true
// (push two-shot, one chunk): rank s stored slice s into slot s of this
// rank's own scratch (a local load). Sources are taken G at a time (all loads
// of a group in flight, then the stores), which bounds the registers for
// W = 8.
template <int W, int DT, bool kPushed = false>
__device__ __forceinline__ void GatherChunk(const P2pKernelArgs& a, int64_t k) {
  using Raw = typename Traits<DT>::Raw;
  constexpr int V = kVec<DT>;
  constexpr int G = W > 4 ? 4 : W;
  const int64_t base = k * a.chunk_elems;
  const int64_t len = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
  const int64_t slice = SliceElems(len, a.world, V);
  const int64_t slot_off = (k % kPipelineDepth) * a.slot_elems;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  auto source = [&](int s) -> const Raw* {
    return kPushed ? static_cast<const Raw*>(a.scratch[a.rank]) + s * a.slot_elems
                   : static_cast<const Raw*>(a.scratch[s]) + slot_off;
  };
#pragma unroll
  for (int s0 = 0; s0 < W; s0 += G) {
    if (s0 >= a.world) break;
    for (int64_t j = gid; j * V < slice; j += grid) {
      uint4 v[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int s = s0 + g;
        if (s < a.world && s != a.rank && (j + 1) * V <= SliceLen(len, slice, s)) {
          v[g] = __ldcg(reinterpret_cast<const uint4*>(source(s)) + j);
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int s = s0 + g;
        if (s >= a.world || s == a.rank) continue;
        const int64_t ns = SliceLen(len, slice, s);
        Raw* out = static_cast<Raw*>(a.out) + base + s * slice;
        if ((j + 1) * V <= ns) {
          reinterpret_cast<uint4*>(out)[j] = v[g];
        } else {
          const Raw* src = source(s);
          for (int64_t i = j * V; i < ns; ++i) out[i] = __ldcg(src + i);
        }
      }
    }
  }
}

// Two-shot, pipelined over chunks (the plain two-shot is one chunk):
//   for k: [wait everyone gathered k-D: slot free] reduce own slice of chunk k
//          into scratch slot k%D and the output; post reduced k;
//          [wait everyone reduced k-1] gather chunk k-1; post gathered k-1.
template <int W, int DT, int OP, int U = 1>
__global__ void __launch_bounds__(U == 1 ? kMaxThreads : kNarrowThreads, 1)
    TwoShotKernel(const __grid_constant__ P2pKernelArgs a) {
  using Raw = typename Traits<DT>::Raw;
  constexpr int V = kVec<DT>;
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t chunks = (a.count + a.chunk_elems - 1) / a.chunk_elems;
  for (int64_t k = 0; k <= chunks; ++k) {
    if (k < chunks) {
      if (k >= kPipelineDepth &&
          !WaitAll(a, kGathered, Flag(e, static_cast<uint32_t>(k - kPipelineDepth + 1)))) {
        return;
      }
      const int64_t base = k * a.chunk_elems;
      const int64_t len = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
      const int64_t slice = SliceElems(len, a.world, V);
      const int64_t lo = base + a.rank * slice;
      Raw* slot = static_cast<Raw*>(a.scratch[a.rank]) + (k % kPipelineDepth) * a.slot_elems;
      ReduceRange<W, DT, OP, U>(a, lo, SliceLen(len, slice, a.rank), slot,
                                static_cast<Raw*>(a.out) + lo, true);
      Post(a, kReduced, Flag(e, static_cast<uint32_t>(k + 1)));
    }
    if (k >= 1) {
      if (!WaitAll(a, kReduced, Flag(e, static_cast<uint32_t>(k)))) return;
      GatherChunk<W, DT>(a, k - 1);
      Post(a, kGathered, Flag(e, static_cast<uint32_t>(k)));
    }
  }
  EndEpoch(a, e);
}

// Two-shot, push variant (one chunk, the whole message; slice = slot_elems):
//   1. start barrier: every input is ready, and every rank has completed
//      its previous launch (launches on a rank are serialized, and a block of
//      this launch arrives only once the previous one finished), whatever
//      algo and shape it had: nothing still reads the peers' scratch we are
//      about to write (neither the peer's own step 4 of a previous push nor
//      anyone's gather of a previous pull two-shot).
//   2. reduce own slice r (loads from every input) into output slice r AND
//      into slot r of every peer's scratch (remote stores).
//   3. barrier (per block): block b of every peer s has stored its share of
//      slice s into slot s of our scratch, and has finished loading its
//      share of slice s from our input.
//   4. copy slots s != r of our own scratch into output slices s.
// One load round trip fewer than TwoShotKernel (which, after "reduced",
// loads the slices from the peers' scratch over NVLink).
//
// Block b of every rank handles the same elements of a slice (ReduceRange's
// and GatherChunk's mapping, same grid on every rank), so the per-block
// barrier of step 3 orders everything that blocks b share: in step 4 block b
// reads only what block b of the peers stored in step 2.
//
// Ordering: the remote stores of step 2 are plain st.global; the Post of step
// 3 (__syncthreads, then st.release.sys by threads < world) releases every
// prior store of the block, and the waiter's ld.acquire.sys then
// __syncthreads_or orders its step 4 loads (ld.global.cg, from L2, where the
// NVLink stores land) after them.
//
// No end barrier: once step 3 is passed on every block, no peer reads our
// input any more (peers load it only in step 2) and no peer writes our
// scratch any more (peers store into it only in step 2); peers never touch
// our output. The next launch's writes into our scratch come after its start
// barrier, so after this launch (our step 4 reads) has completed here.
//
// In place (output == own input) is safe. Peers load only slice p (their
// own) of our input. Step 2 writes output slice r = input slice r, which no
// peer loads, and each element is loaded (all ranks) and stored by the same
// thread, load first. Step 4 writes output slices s != r = input slices s,
// which peer s loads in its step 2; the step 3 barrier orders those loads
// (block b's share) before our block b's stores of the same elements.
template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1) TwoShotPushKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t slice = a.slot_elems;
  const int64_t lo = a.rank * slice;
  ReduceRangeTo<W, DT, OP, 1>(a, a.in, lo, SliceLen(a.count, slice, a.rank), PushDst<W>{a, lo, lo},
                              true);
  if (!Barrier(a, Flag(e, 2))) return;
  GatherChunk<W, DT, true>(a, 0);
  EndEpoch(a, e);
}

// Two-shot, push, in place (no scratch; slice = slot_elems): as
// TwoShotPushKernel, but step 2 stores the reduced slice r into slice r of
// every rank's input (= its output: in place only), and step 4 is gone.
//   1. start barrier (as the push two-shot: every input ready, every
//      rank's previous launch complete).
//   2. reduce slice r (loads from every input) into slice r of every input.
//   3. barrier (per block): block b of every peer s has stored its share of
//      slice s into our buffer.
// Races: slice r of every buffer is touched by rank r alone in this launch
// (ReduceRangeTo's same thread loads an element from every input, then
// stores it to every input), so a store never meets another rank's load.
// The step 3 barrier (the stores released by the Post, acquired by the
// waiter) completes every peer's stores into our buffer, block by block,
// before this launch ends here; so the caller, and the next launch, see the
// whole result, and a peer that has passed step 3 no longer reads our buffer.
template <int W>
struct InPlaceDst {
  const P2pKernelArgs& a;
  int64_t off;
  template <typename Raw>
  __device__ __forceinline__ void Vec(int64_t j, uint4 v) const {
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) {
        reinterpret_cast<uint4*>(static_cast<Raw*>(const_cast<void*>(a.in[p])) + off)[j] = v;
      }
    }
  }
  template <typename Raw>
  __device__ __forceinline__ void Elem(int64_t i, Raw v) const {
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) static_cast<Raw*>(const_cast<void*>(a.in[p]))[off + i] = v;
    }
  }
};

template <int W, int DT, int OP>
__global__ void __launch_bounds__(kMaxThreads, 1)
    TwoShotInPlaceKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t lo = a.rank * a.slot_elems;
  ReduceRangeTo<W, DT, OP, 1>(a, a.in, lo, SliceLen(a.count, a.slot_elems, a.rank),
                              InPlaceDst<W>{a, lo}, true);
  if (!Barrier(a, Flag(e, 2))) return;
  EndEpoch(a, e);
}

// All-gather: copy units of U bytes (the largest power of two <= 16 dividing
// a rank's bytes, so every rank's place in the output stays aligned).
template <int W, typename U>
__global__ void __launch_bounds__(kMaxThreads, 1) AllGatherKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t units = a.count;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const bool in_place = a.in[a.rank] == static_cast<const U*>(a.out) + a.rank * units;
  for (int64_t j = gid; j < units; j += grid) {
    U v[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world && !(in_place && p == a.rank)) v[p] = __ldcg(static_cast<const U*>(a.in[p]) + j);
    }
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world && !(in_place && p == a.rank)) static_cast<U*>(a.out)[p * units + j] = v[p];
    }
  }
  if (!Barrier(a, Flag(e, 2))) return;
  EndEpoch(a, e);
}

// All-to-all, even splits: segment `rank` (count units) of every rank's
// input into segment p of the output, p the rank it came from.
template <int W, typename U>
__global__ void __launch_bounds__(kMaxThreads, 1) AllToAllKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const int64_t units = a.count;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  for (int64_t j = gid; j < units; j += grid) {
    U v[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) v[p] = __ldcg(static_cast<const U*>(a.in[p]) + a.rank * units + j);
    }
#pragma unroll
    for (int p = 0; p < W; ++p) {
      if (p < a.world) static_cast<U*>(a.out)[p * units + j] = v[p];
    }
  }
  if (!Barrier(a, Flag(e, 2))) return;
  EndEpoch(a, e);
}

// Broadcast: the root's input into every rank's output (the root's own
// unless in place). The end barrier keeps the root's input unchanged until
// every rank has read it.
template <typename U>
__global__ void __launch_bounds__(kMaxThreads, 1) BroadcastKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const U* src = static_cast<const U*>(a.in[a.root]);
  U* dst = static_cast<U*>(a.out);
  if (src != dst) {
    for (int64_t j = GlobalThread(), grid = GridThreads(); j < a.count; j += grid) {
      dst[j] = __ldcg(src + j);
    }
  }
  if (!Barrier(a, Flag(e, 2))) return;
  EndEpoch(a, e);
}

// ---- The pipelined push algos (protocol: p2p_layout.h, PipeLayout) ---------

// dst[d][i] = src[i] for i in [0, n), for every non-null dst[d] (W of them at
// most), with ReduceRange's vector-to-thread mapping (vector j: global thread
// j % grid; the partial last vector: the thread owning its index), so that
// the rank that stores a slice and the rank that reads it use the same block
// for the same elements. U vectors loaded before any is stored.
template <typename Raw, int W>
__device__ __forceinline__ void CopyRange(const Raw* src, Raw* const (&dst)[W], int64_t n) {
  constexpr int V = kVecBytes / static_cast<int>(sizeof(Raw));
  constexpr int U = 4;
  const int64_t gid = GlobalThread(), grid = GridThreads();
  const int64_t nvec = n / V;
  const uint4* s = reinterpret_cast<const uint4*>(src);
  int64_t j = gid;
  for (; j + (U - 1) * grid < nvec; j += U * grid) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcg(s + j + u * grid);
#pragma unroll
    for (int d = 0; d < W; ++d) {
      if (dst[d] == nullptr) continue;
#pragma unroll
      for (int u = 0; u < U; ++u) reinterpret_cast<uint4*>(dst[d])[j + u * grid] = v[u];
    }
  }
  for (; j < nvec; j += grid) {
    const uint4 v = __ldcg(s + j);
#pragma unroll
    for (int d = 0; d < W; ++d) {
      if (dst[d] != nullptr) reinterpret_cast<uint4*>(dst[d])[j] = v;
    }
  }
  if (gid != nvec % grid) return;
  for (int64_t i = nvec * V; i < n; ++i) {
    const Raw v = __ldcg(src + i);
#pragma unroll
    for (int d = 0; d < W; ++d) {
      if (dst[d] != nullptr) dst[d][i] = v;
    }
  }
}

// One destination.
template <typename Raw>
__device__ __forceinline__ void CopyRange1(const Raw* src, Raw* dst, int64_t n) {
  Raw* const d[1] = {dst};
  CopyRange<Raw, 1>(src, d, n);
}

// The chunk loop of the pipelined push algos: three stages, software
// pipelined (iteration t scatters chunk t, reduces chunk t - 1, gathers
// chunk t - 2), each followed by its post; `Stages` does the data movement
// of each (Scatter(k), Reduce(k), Gather(k)). The waits are the
// protocol of p2p_layout.h; every rank runs all of them whatever its role.
template <typename Stages>
__device__ __forceinline__ bool PipeLoop(const P2pKernelArgs& a, uint32_t e,
                                         const PipeGeometry& g, const Stages& st) {
  constexpr int64_t D = kPushPipeDepth;
  // Every rank has posted point `point` of `kind` in this launch (true at
  // once for a point below 1: nothing to wait for).
  auto ready = [&](int kind, int64_t point) {
    return point < 1 || WaitAll(a, kind, Flag(e, static_cast<uint32_t>(point)));
  };
  auto post = [&](int kind, int64_t point) { Post(a, kind, Flag(e, static_cast<uint32_t>(point))); };
  for (int64_t t = 0; t < g.chunks + 2; ++t) {
    const int64_t ka = t, kb = t - 1, kc = t - 2;
    if (ka < g.chunks) {
      if (!ready(kReduced, ka - D + 1)) return false;  // scatter slots of ka - D read
      st.Scatter(ka);
      post(kArrive, ka + 2);
    }
    if (kb >= 0 && kb < g.chunks) {
      if (!ready(kArrive, kb + 2)) return false;
      if (!ready(kGathered, kb - D + 1)) return false;  // gather slots of kb - D read
      st.Reduce(kb);
      post(kReduced, kb + 1);
    }
    if (kc >= 0 && kc < g.chunks) {
      if (!ready(kReduced, kc + 1)) return false;
      st.Gather(kc);
      post(kGathered, kc + 1);
    }
  }
  return true;
}

// The pipelined push all-reduce, per chunk k (slice s: SliceElems of the
// chunk over `world`):
//   scatter: store slice q of this rank's input into slice `rank` of the
//            scatter slot of every peer q;
//   reduce:  reduce slice `rank` over this rank's input and the scatter
//            slot's slices (all local), into the output and into slice
//            `rank` of the gather slot of every peer;
//   gather:  copy the gather slot's slices s != rank into the output.
// Reads only this rank's own input (never a peer's), so the input need not
// be peer-visible. No end barrier: when a rank finishes, every store of its
// peers into its scratch has been waited for, and no peer reads its memory.
// In place: the reduce writes output slice `rank` of chunk k (which only
// this rank reads, and the same thread loaded it first); the gather writes
// slices s != rank of chunk k, which this rank's scatter of chunk k read
// earlier, on the same thread (the same mapping).
// Elements of chunk k (the last one may be short).
__device__ __forceinline__ int64_t PipeChunkLen(const P2pKernelArgs& a, const PipeGeometry& g,
                                                int64_t k) {
  const int64_t base = k * g.chunk;
  return a.count - base < g.chunk ? a.count - base : g.chunk;
}

template <int W, int DT, int OP>
struct PushPipeStages {
  using Raw = typename Traits<DT>::Raw;
  const P2pKernelArgs& a;
  const PipeGeometry& g;
  __device__ __forceinline__ int64_t Len(int64_t k) const { return PipeChunkLen(a, g, k); }
  __device__ __forceinline__ void Scatter(int64_t k) const {
    const int64_t len = Len(k), slice = SliceElems(len, a.world, kVec<DT>);
    const Raw* in = static_cast<const Raw*>(a.in[a.rank]) + k * g.chunk;
#pragma unroll
    for (int q = 0; q < W; ++q) {
      if (q >= a.world || q == a.rank) continue;
      CopyRange1(in + q * slice, static_cast<Raw*>(a.scratch[q]) + PipeSlot(g, 0, k, a.rank),
                 SliceLen(len, slice, q));
    }
  }
  __device__ __forceinline__ void Reduce(int64_t k) const {
    const int64_t len = Len(k), slice = SliceElems(len, a.world, kVec<DT>);
    const int64_t lo = k * g.chunk + a.rank * slice;
    const Raw* own = static_cast<const Raw*>(a.scratch[a.rank]);
    const void* src[W];
#pragma unroll
    for (int p = 0; p < W; ++p) {
      src[p] = p == a.rank ? static_cast<const void*>(static_cast<const Raw*>(a.in[a.rank]) + lo)
                           : static_cast<const void*>(own + PipeSlot(g, 0, k, p));
    }
    ReduceRangeTo<W, DT, OP, 1>(a, src, 0, SliceLen(len, slice, a.rank),
                                PushDst<W>{a, lo, PipeSlot(g, 1, k, a.rank)}, true);
  }
  __device__ __forceinline__ void Gather(int64_t k) const {
    const int64_t len = Len(k), slice = SliceElems(len, a.world, kVec<DT>);
    const Raw* own = static_cast<const Raw*>(a.scratch[a.rank]);
    Raw* out = static_cast<Raw*>(a.out) + k * g.chunk;
#pragma unroll
    for (int s = 0; s < W; ++s) {
      if (s >= a.world || s == a.rank) continue;
      CopyRange1(own + PipeSlot(g, 1, k, s), out + s * slice, SliceLen(len, slice, s));
    }
  }
};

// kNarrow: launched with at most kNarrowThreads threads a block (twice the
// registers: at 1024 threads the stages' pointers spill).
template <int W, int DT, int OP, bool kNarrow>
__global__ void __launch_bounds__(kNarrow ? kNarrowThreads : kMaxThreads, 1)
    PushPipelinedKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const PipeGeometry g = PipeLayout(a.count, a.world, DT, a.chunk_elems);
  if (!PipeLoop(a, e, g, PushPipeStages<W, DT, OP>{a, g})) return;
  EndEpoch(a, e);
}

// The pipelined push broadcast: chunk k in world - 1 slices, slice i for the
// i-th rank after the root (rank (root + 1 + i) % world), which forwards it:
//   scatter: the root stores slice i of its input into the scatter slot
//            (slice 0) of rank i, and copies its input into its output
//            unless in place; the other ranks do nothing;
//   reduce:  a non-root rank i copies its scatter slot into its output slice
//            i and stores it into slice i of the gather slot of every other
//            non-root rank (nothing to reduce: the name is the loop's);
//   gather:  a non-root rank copies the gather slot's slices j != i into its
//            output.
// The root sends each byte once; only the root's input is read, by the root.
template <int W, int DT>
struct BroadcastPipeStages {
  using Raw = typename Traits<DT>::Raw;
  const P2pKernelArgs& a;
  const PipeGeometry& g;
  __device__ __forceinline__ int64_t Len(int64_t k) const { return PipeChunkLen(a, g, k); }
  __device__ __forceinline__ int Index() const {  // this rank's slice, if not the root
    return (a.rank - a.root - 1 + a.world) % a.world;
  }
  __device__ __forceinline__ int RankOf(int i) const { return (a.root + 1 + i) % a.world; }
  __device__ __forceinline__ void Scatter(int64_t k) const {
    if (a.rank != a.root) return;
    const int64_t len = Len(k), slice = SliceElems(len, g.parts, kVec<DT>);
    const Raw* in = static_cast<const Raw*>(a.in[a.rank]) + k * g.chunk;
#pragma unroll
    for (int i = 0; i < W - 1; ++i) {
      if (i >= g.parts) continue;
      CopyRange1(in + i * slice, static_cast<Raw*>(a.scratch[RankOf(i)]) + PipeSlot(g, 0, k, 0),
                 SliceLen(len, slice, i));
    }
    Raw* out = static_cast<Raw*>(a.out) + k * g.chunk;
    if (out != in) CopyRange1(in, out, len);
  }
  __device__ __forceinline__ void Reduce(int64_t k) const {
    if (a.rank == a.root) return;
    const int64_t len = Len(k), slice = SliceElems(len, g.parts, kVec<DT>);
    const int me = Index();
    Raw* dst[W];
    dst[0] = static_cast<Raw*>(a.out) + k * g.chunk + me * slice;
#pragma unroll
    for (int i = 0; i < W - 1; ++i) {
      dst[i + 1] = i < g.parts && i != me
                       ? static_cast<Raw*>(a.scratch[RankOf(i)]) + PipeSlot(g, 1, k, me)
                       : nullptr;
    }
    CopyRange<Raw, W>(static_cast<const Raw*>(a.scratch[a.rank]) + PipeSlot(g, 0, k, 0), dst,
                      SliceLen(len, slice, me));
  }
  __device__ __forceinline__ void Gather(int64_t k) const {
    if (a.rank == a.root) return;
    const int64_t len = Len(k), slice = SliceElems(len, g.parts, kVec<DT>);
    const int me = Index();
    const Raw* own = static_cast<const Raw*>(a.scratch[a.rank]);
    Raw* out = static_cast<Raw*>(a.out) + k * g.chunk;
#pragma unroll
    for (int i = 0; i < W - 1; ++i) {
      if (i >= g.parts || i == me) continue;
      CopyRange1(own + PipeSlot(g, 1, k, i), out + i * slice, SliceLen(len, slice, i));
    }
  }
};

template <int W, int DT, bool kNarrow>
__global__ void __launch_bounds__(kNarrow ? kNarrowThreads : kMaxThreads, 1)
    BroadcastPushKernel(const __grid_constant__ P2pKernelArgs a) {
  const uint32_t e = BeginEpoch(a);
  if (!Barrier(a, Flag(e, 1))) return;
  const PipeGeometry g = PipeLayout(a.count, a.world - 1, DT, a.chunk_elems);
  if (!PipeLoop(a, e, g, BroadcastPipeStages<W, DT>{a, g})) return;
  EndEpoch(a, e);
}

// ---- Launch ----------------------------------------------------------------

using KernelFn = void (*)(const P2pKernelArgs);

// W: the world size the code is unrolled for (2, 4 or 8); world <= W.
// nullptr for what the algo does not run (the push one-shot in fp32, which
// at_p2p_check_args rejects first).
// `narrow`: blocks of at most kNarrowThreads threads (the two-shot then
// unrolls its loads).
template <int W, int DT, int OP> KernelFn PickAlgo(int algo, bool narrow) {
  switch (algo) {
    case AT_ALGO_ALL_REDUCE_ONE_SHOT: return OneShotKernel<W, DT, OP>;
    case AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH:
      if constexpr (DT == AT_DTYPE_FLOAT32) {
        return nullptr;
      } else {
        return OneShotPushKernel<W, DT, OP>;
      }
    case AT_ALGO_ALL_REDUCE_COPY_ENGINE:
    case AT_ALGO_ALL_REDUCE_CE_RING:  // the copy engine's part (the ring's: launch)
      return CeReduceKernel<W, DT, OP>;
    case AT_ALGO_REDUCE_SCATTER: return ReduceScatterKernel<W, DT, OP>;
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH: return TwoShotPushKernel<W, DT, OP>;
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE: return TwoShotInPlaceKernel<W, DT, OP>;
    case AT_ALGO_ALL_REDUCE_RING: return RingKernel<W, DT, OP>;
    case AT_ALGO_ALL_REDUCE_PUSH_PIPELINED:
      return narrow ? PushPipelinedKernel<W, DT, OP, true> : PushPipelinedKernel<W, DT, OP, false>;
    default:
      return narrow ? TwoShotKernel<W, DT, OP, kUnroll<W>> : TwoShotKernel<W, DT, OP>;
  }
}

template <int W, int DT> KernelFn PickOp(int algo, int op, bool narrow) {
  switch (op) {
    case AT_OP_MAX: return PickAlgo<W, DT, AT_OP_MAX>(algo, narrow);
    case AT_OP_MIN: return PickAlgo<W, DT, AT_OP_MIN>(algo, narrow);
    default: return PickAlgo<W, DT, AT_OP_SUM>(algo, narrow);
  }
}

template <int W, typename U> KernelFn CopyKernel(int algo) {
  switch (algo) {
    case AT_ALGO_ALL_TO_ALL: return AllToAllKernel<W, U>;
    case AT_ALGO_BROADCAST: return BroadcastKernel<U>;
    default: return AllGatherKernel<W, U>;
  }
}

// The copies' unit (all_gather, all_to_all, broadcast): the largest power of
// two <= 16 dividing a rank's (segment's) bytes.
template <int W> KernelFn PickCopy(int algo, int dtype, int64_t* count_units) {
  const int64_t bytes = *count_units * ElemBytes(dtype);
  if (bytes % 16 == 0) { *count_units = bytes / 16; return CopyKernel<W, uint4>(algo); }
  if (bytes % 8 == 0) { *count_units = bytes / 8; return CopyKernel<W, uint2>(algo); }
  if (bytes % 4 == 0) { *count_units = bytes / 4; return CopyKernel<W, unsigned int>(algo); }
  *count_units = bytes / 2;
  return CopyKernel<W, unsigned short>(algo);
}

template <int W> KernelFn PickW(int algo, int dtype, int op, int64_t* count_units, bool narrow) {
  if (algo == AT_ALGO_BROADCAST_PUSH_PIPELINED) {
    switch (dtype) {
      case AT_DTYPE_BFLOAT16:
        return narrow ? BroadcastPushKernel<W, AT_DTYPE_BFLOAT16, true>
                      : BroadcastPushKernel<W, AT_DTYPE_BFLOAT16, false>;
      case AT_DTYPE_FLOAT16:
        return narrow ? BroadcastPushKernel<W, AT_DTYPE_FLOAT16, true>
                      : BroadcastPushKernel<W, AT_DTYPE_FLOAT16, false>;
      default:
        return narrow ? BroadcastPushKernel<W, AT_DTYPE_FLOAT32, true>
                      : BroadcastPushKernel<W, AT_DTYPE_FLOAT32, false>;
    }
  }
  if (algo == AT_ALGO_ALL_GATHER || algo == AT_ALGO_ALL_TO_ALL || algo == AT_ALGO_BROADCAST) {
    return PickCopy<W>(algo, dtype, count_units);
  }
  switch (dtype) {
    case AT_DTYPE_BFLOAT16: return PickOp<W, AT_DTYPE_BFLOAT16>(algo, op, narrow);
    case AT_DTYPE_FLOAT16: return PickOp<W, AT_DTYPE_FLOAT16>(algo, op, narrow);
    default: return PickOp<W, AT_DTYPE_FLOAT32>(algo, op, narrow);
  }
}

KernelFn Pick(int algo, int world, int dtype, int op, int64_t* count_units, int threads) {
  const bool narrow = threads <= kNarrowThreads;
  if (world <= 2) return PickW<2>(algo, dtype, op, count_units, narrow);
  if (world <= 4) return PickW<4>(algo, dtype, op, count_units, narrow);
  return PickW<kMaxWorld>(algo, dtype, op, count_units, narrow);
}

// at_p2p_launch's kernels are launched as programmatic dependents of the
// kernel ahead of them (AfterPriorGrid, p2p_device.cuh) unless AT_P2P_PDL=0.
bool ProgrammaticLaunch() {
  static const bool on = [] {
    const char* v = std::getenv("AT_P2P_PDL");
    return v == nullptr || v[0] != '0';
  }();
  return on;
}

// The copy-engine all-reduce's side stream and fork/join events, one set per
// (device, caller stream), made at the first launch there and kept for the
// life of the process (a caller uses few streams); `ring` and `ring_join`:
// the second side stream of the ring beside the copy engine.
struct Side {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr;
  cudaEvent_t join = nullptr;
  cudaStream_t ring = nullptr;
  cudaEvent_t ring_join = nullptr;
};

cudaError_t SideFor(cudaStream_t main, Side* out) {
  static std::mutex* mu = new std::mutex;
  static auto* sides = new std::map<std::pair<int, cudaStream_t>, Side>;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(*mu);
  auto it = sides->find({device, main});
  if (it == sides->end()) {
    Side s;
    e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s.ring, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s.ring_join, cudaEventDisableTiming);
    if (e != cudaSuccess) return e;
    it = sides->emplace(std::make_pair(device, main), s).first;
  }
  *out = it->second;
  return cudaSuccess;
}

// See copy_engine.cuh. `k` is complete; the copies use `args`' pointers,
// count and chunk_elems, the reduce kernel args.blocks and args.threads.
cudaError_t CopyEngineOn(const P2pKernelArgs& k, const at_p2p_args& args, KernelFn reduce,
                         cudaStream_t main, const Side& side) {
  CePrologueKernel<<<1, 32, 0, main>>>(k);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaEventRecord(side.fork, main);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side.stream, side.fork, 0);
  if (e != cudaSuccess) return e;
  const int64_t esize = ElemBytes(args.dtype);
  const char* in = static_cast<const char*>(args.peer_inputs[args.rank]);
  Signal* own = static_cast<Signal*>(args.peer_signals[args.rank]);
  const int64_t chunks = (args.count + args.chunk_elems - 1) / args.chunk_elems;
  for (int64_t c = 0; c < chunks && e == cudaSuccess; ++c) {
    const int64_t base = c * args.chunk_elems;
    const int64_t len = args.count - base < args.chunk_elems ? args.count - base : args.chunk_elems;
    for (int p = 0; p < args.world && e == cudaSuccess; ++p) {
      if (p == args.rank) continue;
      char* slot = static_cast<char*>(args.peer_scratch[p]) + (args.rank * k.slot_elems + base) * esize;
      e = cudaMemcpyAsync(slot, in + base * esize, len * esize, cudaMemcpyDefault, side.stream);
    }
    for (int p = 0; p < args.world && e == cudaSuccess; ++p) {
      if (p == args.rank) continue;
      Signal* peer = static_cast<Signal*>(args.peer_signals[p]);
      e = cudaMemcpyAsync(&peer->ce_arrived.from[args.rank], &own->ce_source[c], sizeof(uint64_t),
                          cudaMemcpyDefault, side.stream);
    }
  }
  // The join is recorded even after a failed copy, so that the caller's
  // stream (or its capture) is never left forked.
  const cudaError_t join = cudaEventRecord(side.join, side.stream);
  if (e == cudaSuccess) {
    reduce<<<args.blocks, args.threads, 0, main>>>(k);
    e = cudaGetLastError();
  }
  const cudaError_t wait = join == cudaSuccess ? cudaStreamWaitEvent(main, side.join, 0) : join;
  return e != cudaSuccess ? e : wait;
}

// The ring beside the copy engine (AT_ALGO_ALL_REDUCE_CE_RING): its kernel,
// arguments and launch shape.
struct Beside {
  KernelFn fn = nullptr;
  P2pKernelArgs k = {};
  int blocks = 0;
  int threads = 0;
};

// The copy-engine all-reduce of `k` / `args` (none when k.count is 0) and,
// with `beside`, the ring's kernel at the same time on a second side stream,
// forked from `main` first and joined back last (also after an error, so
// that the caller's stream or its capture is never left forked).
int LaunchCopyEngine(const P2pKernelArgs& k, const at_p2p_args& args, KernelFn reduce,
                     cudaStream_t main, const Beside* beside = nullptr) {
  Side side;
  cudaError_t e = SideFor(main, &side);
  if (e != cudaSuccess) return static_cast<int>(e);
  cudaError_t ring_join = cudaSuccess;
  if (beside != nullptr) {
    e = cudaEventRecord(side.fork, main);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(side.ring, side.fork, 0);
    if (e != cudaSuccess) return static_cast<int>(e);
    beside->fn<<<beside->blocks, beside->threads, 0, side.ring>>>(beside->k);
    e = cudaGetLastError();
    ring_join = cudaEventRecord(side.ring_join, side.ring);
  }
  if (e == cudaSuccess && k.count > 0) e = CopyEngineOn(k, args, reduce, main, side);
  if (beside != nullptr) {
    const cudaError_t wait =
        ring_join == cudaSuccess ? cudaStreamWaitEvent(main, side.ring_join, 0) : ring_join;
    if (e == cudaSuccess) e = wait;
  }
  return static_cast<int>(e);
}

}  // namespace
}  // namespace autotuned::kernels::p2p

extern "C" {

int at_p2p_launch(int algo, const at_p2p_args* args, void* stream) {
  namespace p2p = autotuned::kernels::p2p;
  const int rc = at_p2p_check_args(algo, args, nullptr, 0);
  if (rc != AT_OK) return rc;
  if (args->count == 0) return AT_OK;
  p2p::P2pKernelArgs k = {};
  for (int p = 0; p < args->world; ++p) {
    k.in[p] = args->peer_inputs[p];
    k.sig[p] = static_cast<p2p::Signal*>(args->peer_signals[p]);
    if (args->peer_scratch != nullptr) k.scratch[p] = args->peer_scratch[p];
  }
  k.out = args->output;
  k.count = args->count;
  k.spin_limit = args->spin_limit;
  k.world = args->world;
  k.rank = args->rank;
  k.root = args->root;
  if (algo == AT_ALGO_ALL_REDUCE_TWO_SHOT || algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED ||
      algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH || algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE) {
    // The push two-shots: one chunk; slot_elems is its slice (the push
    // two-shot's scratch slot s holds slice s).
    const p2p::TwoShotGeometry g = p2p::TwoShotLayout(
        args->count, args->world, args->dtype,
        algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED ? args->chunk_elems : 0);
    k.chunk_elems = g.chunk;
    k.slot_elems = g.slot_elems;
  }
  if (algo == AT_ALGO_ALL_REDUCE_RING) {
    k.slot_elems = p2p::SliceElems(args->count, args->world, p2p::VecElems(args->dtype));
    k.chunk_elems = args->chunk_elems;  // the kernel takes its RingParts from it
  }
  if (algo == AT_ALGO_ALL_REDUCE_PUSH_PIPELINED || algo == AT_ALGO_BROADCAST_PUSH_PIPELINED) {
    k.chunk_elems = args->chunk_elems;  // the kernel takes its PipeLayout from it
  }
  if (algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) {
    k.slot_elems = p2p::PushSlotBytes(args->scratch_bytes, args->world) / p2p::ElemBytes(args->dtype);
  }
  const p2p::KernelFn fn =
      p2p::Pick(algo, args->world, args->dtype, args->op, &k.count, args->threads);
  if (fn == nullptr) return AT_ERR_INVALID_VALUE;
  if (algo == AT_ALGO_ALL_REDUCE_COPY_ENGINE) {
    k.chunk_elems = args->chunk_elems;
    k.slot_elems = p2p::CeSlotElems(args->count, args->dtype);
    return p2p::LaunchCopyEngine(k, *args, fn, static_cast<cudaStream_t>(stream));
  }
  if (algo == AT_ALGO_ALL_REDUCE_CE_RING) {
    // The copy engine: the first `ce` elements, 16 reducing blocks, its
    // scratch first. The ring: the rest, the caller's shape, signal rows
    // from 1, its scratch after the copy engine's.
    const int64_t ce = p2p::CeRingSplit(args->count, args->dtype);
    const int64_t esize = p2p::ElemBytes(args->dtype);
    at_p2p_args ce_args = *args;
    ce_args.count = ce;
    ce_args.blocks = p2p::kCeRingCeBlocks;
    p2p::P2pKernelArgs kc = k;
    kc.count = ce;
    kc.chunk_elems = args->chunk_elems;
    kc.slot_elems = p2p::CeSlotElems(ce, args->dtype);
    p2p::Beside ring;
    ring.k = k;
    ring.k.count = args->count - ce;
    ring.k.row_base = 1;
    ring.k.chunk_elems = 0;  // whole shards
    ring.k.slot_elems = p2p::SliceElems(ring.k.count, args->world, p2p::VecElems(args->dtype));
    ring.k.out = static_cast<char*>(args->output) + ce * esize;
    for (int p = 0; p < args->world; ++p) {
      if (args->peer_inputs[p] != nullptr) {
        ring.k.in[p] = static_cast<const char*>(args->peer_inputs[p]) + ce * esize;
      }
      ring.k.scratch[p] = static_cast<char*>(args->peer_scratch[p]) +
                          args->world * kc.slot_elems * esize;
    }
    ring.blocks = args->blocks;
    ring.threads = args->threads;
    int64_t units = ring.k.count;
    ring.fn = p2p::Pick(AT_ALGO_ALL_REDUCE_RING, args->world, args->dtype, args->op, &units,
                        args->threads);
    if (ring.fn == nullptr) return AT_ERR_INVALID_VALUE;
    return p2p::LaunchCopyEngine(kc, ce_args, fn, static_cast<cudaStream_t>(stream), &ring);
  }
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(args->blocks));
  config.blockDim = dim3(static_cast<unsigned>(args->threads));
  config.stream = static_cast<cudaStream_t>(stream);
  config.attrs = &attribute;
  config.numAttrs = p2p::ProgrammaticLaunch() ? 1 : 0;  // 0: a plain launch
  return static_cast<int>(cudaLaunchKernelEx(&config, fn, k));
}

int at_p2p_all_reduce_one_shot(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_ONE_SHOT, args, stream);
}
int at_p2p_all_reduce_two_shot(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_TWO_SHOT, args, stream);
}
int at_p2p_all_reduce_two_shot_chunked(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, args, stream);
}
int at_p2p_all_reduce_two_shot_push(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, args, stream);
}
int at_p2p_all_reduce_one_shot_push(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, args, stream);
}
int at_p2p_all_reduce_copy_engine(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_COPY_ENGINE, args, stream);
}
int at_p2p_all_gather(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_GATHER, args, stream);
}
int at_p2p_reduce_scatter(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_REDUCE_SCATTER, args, stream);
}
int at_p2p_all_to_all(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_TO_ALL, args, stream);
}
int at_p2p_broadcast(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_BROADCAST, args, stream);
}
int at_p2p_all_reduce_push_pipelined(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_PUSH_PIPELINED, args, stream);
}
int at_p2p_broadcast_push_pipelined(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_BROADCAST_PUSH_PIPELINED, args, stream);
}
int at_p2p_all_reduce_ring(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_RING, args, stream);
}
int at_p2p_all_reduce_ce_ring(const at_p2p_args* args, void* stream) {
  return at_p2p_launch(AT_ALGO_ALL_REDUCE_CE_RING, args, stream);
}
int at_p2p_all_to_all_v(const at_p2p_args* args, const int64_t* split_counts, void* stream) {
  return autotuned::kernels::p2p::LaunchAllToAllV(args, split_counts,
                                                  static_cast<cudaStream_t>(stream));
}

int at_p2p_preload_kernels(void) {
  namespace p2p = autotuned::kernels::p2p;
  cudaFuncAttributes attr;
  for (int algo = AT_ALGO_ALL_REDUCE_ONE_SHOT; algo <= AT_ALGO_LAST; ++algo) {
    // The all-to-all with uneven splits has kernels of its own (below).
    if (algo == AT_ALGO_ALL_TO_ALL_V) continue;
    for (int world : {2, 4, p2p::kMaxWorld}) {
      for (int dtype : {AT_DTYPE_FLOAT32, AT_DTYPE_BFLOAT16, AT_DTYPE_FLOAT16}) {
        for (int op : {AT_OP_SUM, AT_OP_MAX, AT_OP_MIN}) {
          // The copies: counts of 1, 2, 4, 8 elements reach every copy unit
          // (and they have no op); the others have one kernel per dtype and op.
          const int64_t counts[] = {1, 2, 4, 8};
          const bool copy = algo == AT_ALGO_ALL_GATHER || algo == AT_ALGO_ALL_TO_ALL ||
                            algo == AT_ALGO_BROADCAST;
          // The pipelined broadcast: one kernel per dtype.
          const bool no_op = copy || algo == AT_ALGO_BROADCAST_PUSH_PIPELINED;
          const int n = copy ? (op == AT_OP_SUM ? 4 : 0) : (no_op && op != AT_OP_SUM ? 0 : 1);
          for (int c = 0; c < n; ++c) {
            for (int threads : {p2p::kMaxThreads, p2p::kNarrowThreads}) {
              int64_t units = counts[c];
              const p2p::KernelFn fn = p2p::Pick(algo, world, dtype, op, &units, threads);
              if (fn == nullptr) continue;
              const cudaError_t e = cudaFuncGetAttributes(&attr, fn);
              if (e != cudaSuccess) return static_cast<int>(e);
            }
          }
        }
      }
    }
  }
  cudaError_t e = cudaFuncGetAttributes(&attr, p2p::PushFillKernel);
  if (e == cudaSuccess) e = p2p::PreloadAllToAllV();
  if (e != cudaSuccess) return static_cast<int>(e);
  return static_cast<int>(cudaFuncGetAttributes(&attr, p2p::CePrologueKernel));
}

int at_p2p_scratch_init(int algo, void* scratch, int64_t scratch_bytes, void* stream) {
  namespace p2p = autotuned::kernels::p2p;
  if (at_p2p_algo_name(algo) == nullptr || scratch == nullptr ||
      reinterpret_cast<uintptr_t>(scratch) % p2p::kVecBytes != 0) {
    return AT_ERR_INVALID_VALUE;
  }
  if (algo != AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) return AT_OK;
  if (scratch_bytes < p2p::kPushHeaderBytes + p2p::kVecBytes) return AT_ERR_INVALID_VALUE;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaError_t e = cudaMemsetAsync(scratch, 0, p2p::kPushHeaderBytes, s);
  if (e != cudaSuccess) return static_cast<int>(e);
  const int64_t vecs = (scratch_bytes - p2p::kPushHeaderBytes) / p2p::kVecBytes;
  constexpr int kThreads = 512;
  const int64_t blocks = (vecs + kThreads - 1) / kThreads;
  p2p::PushFillKernel<<<static_cast<int>(blocks < 1024 ? blocks : 1024), kThreads, 0, s>>>(
      reinterpret_cast<uint4*>(static_cast<char*>(scratch) + p2p::kPushHeaderBytes), vecs);
  return static_cast<int>(cudaGetLastError());
}

}  // extern "C"
