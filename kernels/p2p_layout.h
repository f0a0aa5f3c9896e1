// Layout shared by the P2P kernels (p2p_kernels.cu) and their host-side
// validation (p2p_args.cc): the signal buffer and the partition of a buffer
// into slices and chunks. Plain C++, host and device; no CUDA headers.
//
// Signal protocol (see also autotuned_kernels.h). Per block b:
//   - epoch[b] (this rank's own) counts the launches that had a block b; all
//     ranks launch the same sequence, so their epochs agree. A kernel reads
//     e = epoch[b] + 1 at its start and stores e at its successful end.
//   - flags are 64-bit: Flag(e, point) = e << 32 | point, monotonic over a
//     rank's launches (compared wrap-safe as a signed difference), so a wait
//     for ">= value" never confuses launches and never needs a reset.
//   - rank p posts into row[b].from[p] of every rank's buffer (st.release.sys,
//     after __syncthreads so the whole block's prior memory accesses are
//     released); thread t < world of block b waits on its own
//     row[b].from[t] (ld.acquire.sys) then __syncthreads.
//   - arrive: point 1 = launch started (peers' inputs ready; their previous
//     launch completed, as launches on a rank are serialized, so no block of
//     it still reads this rank's scratch); point 2 = end barrier (no peer
//     block reads this rank's input anymore; for the push two-shot, the
//     second and last barrier: also, the peer block's stores into this
//     rank's scratch are done).
//   - reduced / gathered (two-shot): point k + 1 = chunk k reduced into the
//     poster's scratch slot / gathered from everyone's slot.
// Block b of every rank handles the same elements of a slice (element j of a
// slice goes to the thread owning vector j / kVec, i.e. global thread
// (j / kVec) % (blocks * threads)), so per-block flags order everything that
// two ranks' blocks share.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define AT_P2P_HD __host__ __device__
#else
#define AT_P2P_HD
#endif

namespace autotuned::kernels::p2p {

constexpr int kMinWorld = 2;
constexpr int kMaxWorld = 8;
constexpr int kMaxBlocks = 132;  // H100/H200 SMs; signal rows per block
constexpr int kMaxThreads = 1024;
constexpr int kVecBytes = 16;
constexpr int kPipelineDepth = 2;
constexpr int kSignalAlignment = 128;
// The copy-engine all-reduce: at most this many chunks per launch.
constexpr int kMaxCeChunks = 1024;

enum FlagKind : int { kArrive = 1, kReduced = 2, kGathered = 3 };
// Error word kinds of the other waits: the push one-shot's data, a
// copy-engine chunk.
constexpr unsigned int kPushDataWait = 4;
constexpr unsigned int kCeChunkWait = 5;

// One block's flags, one per rank, on a 128-byte line of its own.
struct alignas(kSignalAlignment) FlagRow {
  uint64_t from[kMaxWorld];
};

struct alignas(kSignalAlignment) Signal {
  FlagRow arrive[kMaxBlocks];
  FlagRow reduced[kMaxBlocks];
  FlagRow gathered[kMaxBlocks];
  uint32_t epoch[kMaxBlocks];  // own use only, never written by peers
  alignas(kSignalAlignment) uint32_t error;  // first error, 0 = none
  // The copy-engine all-reduce (one row, not per block): from[p] =
  // Flag(e, c + 1) once rank p's chunk c of launch e is in this rank's
  // scratch, written by rank p's copy engine from its ce_source[c], which
  // holds that value from the start of launch e.
  alignas(kSignalAlignment) FlagRow ce_arrived;
  uint64_t ce_source[kMaxCeChunks];
};

static_assert(sizeof(FlagRow) == kSignalAlignment, "one line per row");

AT_P2P_HD constexpr uint64_t Flag(uint32_t epoch, uint32_t point) {
  return (static_cast<uint64_t>(epoch) << 32) | point;
}

AT_P2P_HD constexpr int64_t ElemBytes(int dtype) { return dtype == 1 ? 4 : 2; }
AT_P2P_HD constexpr int64_t VecElems(int dtype) {
  return kVecBytes / ElemBytes(dtype);
}

// Elements of each rank's slice of a `len`-element range: an equal share
// rounded up to whole vectors, so every slice starts on a vector boundary.
// The last slices may be short or empty.
AT_P2P_HD inline int64_t SliceElems(int64_t len, int world, int64_t vec) {
  const int64_t share = (len + world - 1) / world;
  return (share + vec - 1) / vec * vec;
}

// Elements of slice s (of SliceElems `slice`) of a `len`-element range.
AT_P2P_HD inline int64_t SliceLen(int64_t len, int64_t slice, int s) {
  const int64_t n = len - s * slice;
  return n < 0 ? 0 : (n > slice ? slice : n);
}

// The two-shot variants: chunk length (whole message for the plain and push
// two-shots, rounded up to a vector), scratch slot elements and slots (the
// pipeline's; the push two-shot has `world` slots of slot_elems instead).
struct TwoShotGeometry {
  int64_t chunk = 0;
  int64_t chunks = 0;
  int64_t slot_elems = 0;
  int64_t slots = 0;
};

AT_P2P_HD inline TwoShotGeometry TwoShotLayout(int64_t count, int world,
                                               int dtype, int64_t chunk_elems) {
  TwoShotGeometry g;
  const int64_t vec = VecElems(dtype);
  g.chunk = chunk_elems > 0 ? chunk_elems : (count + vec - 1) / vec * vec;
  if (count <= 0 || g.chunk <= 0) return g;
  g.chunks = (count + g.chunk - 1) / g.chunk;
  const int64_t longest = count < g.chunk ? count : g.chunk;
  g.slot_elems = SliceElems(longest, world, vec);
  g.slots = g.chunks < kPipelineDepth ? g.chunks : kPipelineDepth;
  return g;
}

// ---- The ring all-reduce (AT_ALGO_ALL_REDUCE_RING) ------------------------
// Shard s of the message: SliceElems(count, world) elements at s x that, the
// last ones short or empty. Messages m = 0 .. 2 (world - 1) - 1 go from each
// rank to the next; message m of launch e is in the receiver's scratch once
// reduced[b].from[sender] >= Flag(e, m + 1) (per block b). Rank r sends:
//   m = t < world - 1 (reduce-scatter): shard (r - t - 1) mod world, its own
//       input plus (t > 0) the partial it received as message t - 1, into
//       the next rank's slot t;
//   m = world - 1 + u (all-gather): u = 0, shard r, which it completed with
//       message world - 2 and keeps in its output, into slot world - 1; u > 0,
//       the shard it received as message world - 2 + u (shard r - u), into
//       slot u - 1.
// Slot u - 1 is free again for all-gather message u: the sender forwards
// then a shard whose completion needed the receiver's reduce-scatter
// message u, which it sent after reading slot u - 1 (same block, same
// elements). So the scratch holds `world` slots of one shard, and no slot
// is written twice before its reader is done with it.
AT_P2P_HD inline int RingSlot(int m, int world) {
  return m < world - 1 ? m : (m == world - 1 ? world - 1 : m - world);
}

// A shard goes in `count` parts of `part` elements (the last one short):
// chunk_elems of them, or the whole shard when chunk_elems is 0 or longer.
// Part k of message m is posted as point m x count + k + 1.
struct RingParts {
  int64_t part = 0;
  int64_t count = 1;
};

AT_P2P_HD inline RingParts RingPartsOf(int64_t slice, int64_t chunk_elems) {
  RingParts p;
  p.part = chunk_elems > 0 && chunk_elems < slice ? chunk_elems : slice;
  p.count = p.part > 0 ? (slice + p.part - 1) / p.part : 1;
  return p;
}

AT_P2P_HD inline int64_t RingScratchElems(int64_t count, int world, int dtype) {
  return count <= 0 ? 0 : world * SliceElems(count, world, VecElems(dtype));
}

// ---- The copy engine and the ring at once (AT_ALGO_ALL_REDUCE_CE_RING) ----
// The first CeRingSplit elements go through the copy-engine all-reduce (its
// reducing kernel has kCeRingCeBlocks blocks; signal row 0, as always), the
// rest through the ring, whose block b uses signal row 1 + b
// (P2pKernelArgs::row_base), so the two run at once on one signal buffer.
// Scratch: the copy engine's `world` slots of the first part, then the
// ring's slots of the rest.
constexpr int kCeRingCeBlocks = 16;

AT_P2P_HD inline int64_t CeRingSplit(int64_t count, int dtype) {
  const int64_t vec = VecElems(dtype);
  return count / 2 / vec * vec;
}

// ---- The pipelined push algos (AT_ALGO_ALL_REDUCE_PUSH_PIPELINED,
// AT_ALGO_BROADCAST_PUSH_PIPELINED) -------------------------------------------
// The message goes in chunks of `chunk` elements, each cut into `parts`
// slices of whole vectors (SliceElems): `world` slices for the all-reduce
// (slice r is reduced by rank r), `world - 1` for the broadcast (slice i is
// forwarded by the i-th rank after the root). Every byte crosses NVLink as a
// store into a peer's scratch, never as a load. A rank's scratch has two
// regions, scatter (0) and gather (1), each of kPushPipeDepth chunk slots of
// `parts` slices: chunk k uses slot k % kPushPipeDepth, and slice `from`
// of a slot is written by one peer only. Per block b, with e the launch's
// epoch (the arrive row carries the scatter points after the start barrier):
//   scatter: arrive[b].from[p] >= Flag(e, k + 2): rank p's stores of chunk k
//            into the scatter region are done;
//   reduced: reduced[b].from[p] >= Flag(e, k + 1): rank p has read its
//            scatter slot of chunk k and stored its slice into every peer's
//            gather region;
//   gathered: gathered[b].from[p] >= Flag(e, k + 1): rank p has read its
//            gather slot of chunk k.
// A slot is written for chunk k only once every rank has read it for chunk
// k - kPushPipeDepth (reduced, resp. gathered, of that chunk).
constexpr int kPushPipeDepth = 3;

struct PipeGeometry {
  int64_t chunk = 0;   // elements per chunk
  int64_t chunks = 0;
  int64_t slice = 0;   // slot stride: the longest chunk's slice
  int parts = 0;
};

AT_P2P_HD inline PipeGeometry PipeLayout(int64_t count, int parts, int dtype,
                                         int64_t chunk_elems) {
  PipeGeometry g;
  g.parts = parts;
  g.chunk = chunk_elems;
  if (count <= 0 || chunk_elems <= 0 || parts <= 0) return g;
  g.chunks = (count + chunk_elems - 1) / chunk_elems;
  g.slice = SliceElems(count < chunk_elems ? count : chunk_elems, parts, VecElems(dtype));
  return g;
}

// Element offset, in a rank's scratch, of slice `from` of `region`'s slot
// for chunk k.
AT_P2P_HD inline int64_t PipeSlot(const PipeGeometry& g, int region, int64_t k, int from) {
  return ((region * kPushPipeDepth + k % kPushPipeDepth) * g.parts + from) * g.slice;
}

AT_P2P_HD inline int64_t PipeScratchElems(const PipeGeometry& g) {
  return 2 * kPushPipeDepth * g.parts * g.slice;
}

// ---- The push one-shot's buffer (AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) ---------
// Data that carries its own arrival: a slot word nobody has written yet holds
// kPushEmpty (0x8000, -0.0 in bfloat16 and float16), and senders turn their
// -0.0 into +0.0, so a reader knows a 16-bit element has arrived when it is
// not kPushEmpty. No flags and no barrier.
//
// Rank r's buffer (used by this algo only): a PushHeader, then kPushPhases x
// world slots of PushSlotBytes each; slot (phase, p) receives rank p's input
// in the launches of that phase (launch n has phase n % 3). Launch n stores
// into slot (n % 3, r) of every peer, waits for its own slots (n % 3, p), and
// refills with kPushEmpty the slots of phase (n + 2) % 3 that launch n - 1
// read (header.extent says how many elements it wrote). A peer is at most one
// launch ahead (it cannot finish launch n + 1 without this rank's data of
// launch n + 1), so it writes only phase (n + 1) % 3, which launch n - 1 of
// this rank emptied before this rank sent anything of launch n.
constexpr int kPushPhases = 3;
constexpr uint16_t kPushEmpty = 0x8000;

// launches[i]: the launches completed on this rank, one copy per block
// index. Block b of a launch of G blocks reads launches[b] at its start and,
// at its end, advances every entry i with i % G == b, so every entry counts
// every launch whatever the grids were, and no block waits for another.
struct alignas(kSignalAlignment) PushHeader {
  uint32_t launches[kMaxBlocks];
  int64_t extent[kPushPhases];  // elements per slot written by the last
                                // launch of each phase
};
constexpr int64_t kPushHeaderBytes = sizeof(PushHeader);
static_assert(sizeof(PushHeader) % kSignalAlignment == 0, "whole lines");

// Bytes of one slot in a buffer of `buffer_bytes` (every rank must pass the
// same size): whole 16-byte vectors.
AT_P2P_HD inline int64_t PushSlotBytes(int64_t buffer_bytes, int world) {
  const int64_t body = buffer_bytes - kPushHeaderBytes;
  if (body <= 0 || world <= 0) return 0;
  return body / (kPushPhases * world) / kVecBytes * kVecBytes;
}

// Buffer bytes that hold slots of `count` elements.
AT_P2P_HD inline int64_t PushBufferBytes(int64_t count, int world, int dtype) {
  const int64_t slot = (count * ElemBytes(dtype) + kVecBytes - 1) / kVecBytes * kVecBytes;
  return kPushHeaderBytes + kPushPhases * world * slot;
}

// The copy-engine all-reduce's scratch: slot p (rank p's copy of the
// message) is CeSlotElems elements long; `world` slots (this rank's unused).
AT_P2P_HD inline int64_t CeSlotElems(int64_t count, int dtype) {
  const int64_t vec = VecElems(dtype);
  return (count + vec - 1) / vec * vec;
}

AT_P2P_HD inline int64_t CeRingScratchElems(int64_t count, int world, int dtype) {
  const int64_t ce = CeRingSplit(count, dtype);
  return world * CeSlotElems(ce, dtype) + RingScratchElems(count - ce, world, dtype);
}

}  // namespace autotuned::kernels::p2p
