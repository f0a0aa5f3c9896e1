// Pure host part of the C ABI: version, limits, argument validation, scratch,
// group buffer and signal sizes. No CUDA call and no CUDA header, so that it runs (and is
// tested) anywhere.
#include <stdint.h>

#include <algorithm>

#include "kernels/args_reason.h"
#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_layout.h"
#include "kernels/types.h"

namespace autotuned::kernels::p2p {
namespace {

static_assert(AT_DTYPE_FLOAT32 == static_cast<int>(DType::kFloat32), "dtype");
static_assert(AT_DTYPE_BFLOAT16 == static_cast<int>(DType::kBFloat16), "dtype");
static_assert(AT_DTYPE_FLOAT16 == static_cast<int>(DType::kFloat16), "dtype");
static_assert(AT_OP_SUM == static_cast<int>(ReduceOp::kSum), "op");
static_assert(AT_OP_MAX == static_cast<int>(ReduceOp::kMax), "op");
static_assert(AT_OP_MIN == static_cast<int>(ReduceOp::kMin), "op");
static_assert(AT_P2P_MIN_WORLD == kMinWorld && AT_P2P_MAX_WORLD == kMaxWorld &&
                  AT_P2P_MAX_BLOCKS == kMaxBlocks &&
                  AT_P2P_MAX_THREADS == kMaxThreads &&
                  AT_P2P_ALIGNMENT == kVecBytes &&
                  AT_P2P_SIGNAL_ALIGNMENT == kSignalAlignment &&
                  AT_P2P_PIPELINE_DEPTH == kPipelineDepth,
              "limits");

// Counts beyond this are rejected (keeps every byte offset far from overflow).
constexpr int64_t kMaxCount = int64_t{1} << 44;
// Flag points hold a chunk index in 32 bits.
constexpr int64_t kMaxChunks = int64_t{1} << 30;

bool ValidAlgo(int algo) { return at_p2p_algo_name(algo) != nullptr; }
bool ValidDtype(int dtype) {
  return dtype == AT_DTYPE_FLOAT32 || dtype == AT_DTYPE_BFLOAT16 ||
         dtype == AT_DTYPE_FLOAT16;
}
// The copies: no reduction, no scratch, a copy unit of 2 to 16 bytes.
bool IsCopy(int algo) {
  return algo == AT_ALGO_ALL_GATHER || algo == AT_ALGO_ALL_TO_ALL || algo == AT_ALGO_BROADCAST;
}
bool IsBroadcast(int algo) {
  return algo == AT_ALGO_BROADCAST || algo == AT_ALGO_BROADCAST_PUSH_PIPELINED;
}
bool IsReduction(int algo) { return !IsCopy(algo) && !IsBroadcast(algo); }
// The pipelined push algos (PipeLayout in p2p_layout.h).
bool IsPipelined(int algo) {
  return algo == AT_ALGO_ALL_REDUCE_PUSH_PIPELINED || algo == AT_ALGO_BROADCAST_PUSH_PIPELINED;
}
// The in-place push two-shot: no scratch; the output must be the own input.
bool IsInPlaceOnly(int algo) { return algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE; }
bool IsTwoShot(int algo) {
  return algo == AT_ALGO_ALL_REDUCE_TWO_SHOT ||
         algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED ||
         algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH;
}
bool IsOneShotPush(int algo) { return algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH; }
bool IsRing(int algo) { return algo == AT_ALGO_ALL_REDUCE_RING; }
// The copy engine, alone or beside the ring (its checks apply to both).
bool IsCeRing(int algo) { return algo == AT_ALGO_ALL_REDUCE_CE_RING; }
bool IsCopyEngine(int algo) { return algo == AT_ALGO_ALL_REDUCE_COPY_ENGINE || IsCeRing(algo); }
bool UsesScratch(int algo) {
  return IsTwoShot(algo) || IsOneShotPush(algo) || IsCopyEngine(algo) || IsPipelined(algo) ||
         IsRing(algo);
}
// Whether the launch on `a.rank` reads rank p's input: the push one-shot,
// the copy engine, the ring and the pipelined push all-reduce read their own only,
// broadcast the root's only (the pipelined one: the root alone, its own).
bool ReadsInput(int algo, const at_p2p_args& a, int p) {
  if (IsOneShotPush(algo) || IsCopyEngine(algo) || IsRing(algo) ||
      algo == AT_ALGO_ALL_REDUCE_PUSH_PIPELINED) {
    return p == a.rank;
  }
  if (algo == AT_ALGO_BROADCAST) return p == a.root;
  if (algo == AT_ALGO_BROADCAST_PUSH_PIPELINED) return p == a.root && p == a.rank;
  return true;
}

// Element counts of one rank's input and output.
void Extents(int algo, int world, int64_t count, int64_t* in, int64_t* out) {
  const bool world_in = algo == AT_ALGO_REDUCE_SCATTER || algo == AT_ALGO_ALL_TO_ALL;
  const bool world_out = algo == AT_ALGO_ALL_GATHER || algo == AT_ALGO_ALL_TO_ALL;
  *in = world_in ? world * count : count;
  *out = world_out ? world * count : count;
}

}  // namespace

int64_t ScratchBytes(int algo, int dtype, int world, int64_t count,
                     int64_t chunk_elems) {
  if (IsOneShotPush(algo)) return PushBufferBytes(count, world, dtype);
  if (IsCeRing(algo)) return CeRingScratchElems(count, world, dtype) * ElemBytes(dtype);
  if (IsCopyEngine(algo)) return world * CeSlotElems(count, dtype) * ElemBytes(dtype);
  if (IsPipelined(algo)) {
    const int parts = algo == AT_ALGO_BROADCAST_PUSH_PIPELINED ? world - 1 : world;
    return PipeScratchElems(PipeLayout(count, parts, dtype, chunk_elems)) * ElemBytes(dtype);
  }
  if (IsRing(algo)) return RingScratchElems(count, world, dtype) * ElemBytes(dtype);
  if (!IsTwoShot(algo)) return 0;
  const TwoShotGeometry g = TwoShotLayout(
      count, world, dtype,
      algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED ? chunk_elems : 0);
  // Push: slot s holds slice s, pushed by rank s (own slot unused).
  const int64_t slots = algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH ? world : g.slots;
  return slots * g.slot_elems * ElemBytes(dtype);
}

}  // namespace autotuned::kernels::p2p

using namespace autotuned::kernels::p2p;  // NOLINT: C ABI definitions below

extern "C" {

int at_kernels_version(void) { return AT_KERNELS_VERSION; }

void at_p2p_get_limits(at_p2p_limits* out) {
  if (out == nullptr) return;
  out->min_world = kMinWorld;
  out->max_world = kMaxWorld;
  out->max_blocks = kMaxBlocks;
  out->max_threads = kMaxThreads;
  out->alignment = kVecBytes;
  out->signal_alignment = kSignalAlignment;
  out->pipeline_depth = kPipelineDepth;
  out->signal_bytes = static_cast<int64_t>(sizeof(Signal));
}

const char* at_p2p_algo_name(int algo) {
  switch (algo) {
    case AT_ALGO_ALL_REDUCE_ONE_SHOT: return "all_reduce_one_shot";
    case AT_ALGO_ALL_REDUCE_TWO_SHOT: return "all_reduce_two_shot";
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED: return "all_reduce_two_shot_chunked";
    case AT_ALGO_ALL_GATHER: return "all_gather";
    case AT_ALGO_REDUCE_SCATTER: return "reduce_scatter";
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH: return "all_reduce_two_shot_push";
    case AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH: return "all_reduce_one_shot_push";
    case AT_ALGO_ALL_REDUCE_COPY_ENGINE: return "all_reduce_copy_engine";
    case AT_ALGO_ALL_TO_ALL: return "all_to_all";
    case AT_ALGO_BROADCAST: return "broadcast";
    case AT_ALGO_ALL_REDUCE_PUSH_PIPELINED: return "all_reduce_push_pipelined";
    case AT_ALGO_BROADCAST_PUSH_PIPELINED: return "broadcast_push_pipelined";
    case AT_ALGO_ALL_TO_ALL_V: return "all_to_all_v";
    case AT_ALGO_ALL_REDUCE_RING: return "all_reduce_ring";
    case AT_ALGO_ALL_REDUCE_CE_RING: return "all_reduce_ce_ring";
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE: return "all_reduce_two_shot_in_place";
    default: return nullptr;
  }
}

size_t at_p2p_args_size(void) { return sizeof(at_p2p_args); }

int64_t at_p2p_signal_bytes(void) { return static_cast<int64_t>(sizeof(Signal)); }

int64_t at_p2p_scratch_bytes(int algo, int dtype, int world, int64_t count,
                             int64_t chunk_elems) {
  if (!ValidAlgo(algo) || !ValidDtype(dtype) || world < kMinWorld ||
      world > kMaxWorld || count < 0 || count > kMaxCount) {
    return -1;
  }
  if ((algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED || IsPipelined(algo)) &&
      (chunk_elems <= 0 || chunk_elems % VecElems(dtype) != 0)) {
    return -1;
  }
  return ScratchBytes(algo, dtype, world, count, chunk_elems);
}

int at_p2p_group_sizes_for(int world, int64_t max_bytes, int64_t chunk_bytes,
                           int64_t ce_max_bytes, int64_t push_max_bytes,
                           at_p2p_group_sizes* out) {
  if (out == nullptr || world < kMinWorld || world > kMaxWorld || max_bytes < 0 ||
      chunk_bytes < 0 || ce_max_bytes < 0 || push_max_bytes < 0) {
    return AT_ERR_INVALID_VALUE;
  }
  const auto align = [](int64_t n) { return (n + 255) / 256 * 256; };
  int64_t scratch = 0;
  for (int dtype : {AT_DTYPE_FLOAT32, AT_DTYPE_BFLOAT16}) {
    const int64_t count = std::min(max_bytes / ElemBytes(dtype), kMaxCount);
    for (int algo : {AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH}) {
      scratch = std::max(scratch, ScratchBytes(algo, dtype, world, count, 0));
    }
    if (chunk_bytes > 0) {
      const int64_t vec = VecElems(dtype);
      const int64_t chunk = std::max(vec, chunk_bytes / ElemBytes(dtype) / vec * vec);
      for (int algo : {AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_ALGO_ALL_REDUCE_PUSH_PIPELINED,
                       AT_ALGO_BROADCAST_PUSH_PIPELINED}) {
        scratch = std::max(scratch, ScratchBytes(algo, dtype, world, count, chunk));
      }
    }
  }
  if (ce_max_bytes > 0) {
    for (int algo : {AT_ALGO_ALL_REDUCE_COPY_ENGINE, AT_ALGO_ALL_REDUCE_CE_RING}) {
      scratch = std::max(scratch, ScratchBytes(algo, AT_DTYPE_BFLOAT16, world,
                                               std::min(ce_max_bytes / 2, kMaxCount), 0));
    }
  }
  out->scratch_bytes = align(scratch);
  out->push_bytes =
      push_max_bytes > 0
          ? align(ScratchBytes(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, AT_DTYPE_BFLOAT16, world,
                               std::min(push_max_bytes / 2, kMaxCount), 0))
          : 0;
  return AT_OK;
}

int at_p2p_check_args(int algo, const at_p2p_args* a, char* reason,
                      size_t reason_len) {
  if (reason != nullptr && reason_len > 0) reason[0] = '\0';
  char* r = reason;
  const size_t n = reason_len;
  if (!ValidAlgo(algo)) return Fail(r, n, "unknown algo %d", algo);
  if (algo == AT_ALGO_ALL_TO_ALL_V) {
    return Fail(r, n, "all_to_all_v takes a split matrix: check it with "
                "at_p2p_check_all_to_all_v, launch it with at_p2p_all_to_all_v");
  }
  if (a == nullptr) return Fail(r, n, "args is NULL");
  if (a->world < kMinWorld || a->world > kMaxWorld) {
    return Fail(r, n, "world %d outside [%d, %d]", a->world, kMinWorld, kMaxWorld);
  }
  if (a->rank < 0 || a->rank >= a->world) {
    return Fail(r, n, "rank %d outside [0, %d)", a->rank, a->world);
  }
  if (!ValidDtype(a->dtype)) return Fail(r, n, "unknown dtype %d", a->dtype);
  if (IsOneShotPush(algo) && a->dtype == AT_DTYPE_FLOAT32) {
    return Fail(r, n, "one_shot_push takes bfloat16 and float16 only (its empty "
                "marker is the 16-bit -0.0)");
  }
  if (IsReduction(algo) && (a->op < AT_OP_SUM || a->op > AT_OP_MIN)) {
    return Fail(r, n, "unknown reduce op %d", a->op);
  }
  if (IsBroadcast(algo) && (a->root < 0 || a->root >= a->world)) {
    return Fail(r, n, "root %d outside [0, %d)", a->root, a->world);
  }
  if (a->count < 0 || a->count > kMaxCount) {
    return Fail(r, n, "count %lld outside [0, 2^44]", static_cast<long long>(a->count));
  }
  if (a->blocks < 1 || a->blocks > kMaxBlocks) {
    return Fail(r, n, "blocks %d outside [1, %d]", a->blocks, kMaxBlocks);
  }
  if (a->threads < 32 || a->threads > kMaxThreads || a->threads % 32 != 0) {
    return Fail(r, n, "threads %d not a multiple of 32 in [32, %d]", a->threads,
                kMaxThreads);
  }
  if (a->spin_limit < 0) return Fail(r, n, "spin_limit must be >= 0");
  if (IsCeRing(algo) && a->blocks > kMaxBlocks - 1) {
    return Fail(r, n, "blocks %d: ce_ring's ring takes at most %d (signal row 0 is the copy "
                "engine's)", a->blocks, kMaxBlocks - 1);
  }
  const int64_t vec = VecElems(a->dtype);
  if (algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED || IsCopyEngine(algo) || IsPipelined(algo)) {
    if (a->chunk_elems <= 0 || a->chunk_elems % vec != 0) {
      return Fail(r, n, "chunk_elems %lld must be a positive multiple of %lld "
                  "elements (16 bytes)",
                  static_cast<long long>(a->chunk_elems), static_cast<long long>(vec));
    }
    const int64_t most = IsCopyEngine(algo) ? kMaxCeChunks : kMaxChunks;
    if ((a->count + a->chunk_elems - 1) / a->chunk_elems > most) {
      return Fail(r, n, "more than %lld chunks: chunk_elems too small",
                  static_cast<long long>(most));
    }
  }
  if (IsRing(algo) && a->chunk_elems != 0) {
    if (a->chunk_elems < 0 || a->chunk_elems % vec != 0) {
      return Fail(r, n, "chunk_elems %lld must be 0 (whole shards) or a positive multiple of "
                  "%lld elements (16 bytes)",
                  static_cast<long long>(a->chunk_elems), static_cast<long long>(vec));
    }
    // Flag points m x parts + k + 1 stay below 2^31.
    const RingParts p = RingPartsOf(SliceElems(a->count, a->world, vec), a->chunk_elems);
    if (p.count > (int64_t{1} << 31) / (2 * a->world)) {
      return Fail(r, n, "more than %lld parts a shard: chunk_elems too small",
                  static_cast<long long>((int64_t{1} << 31) / (2 * a->world)));
    }
  }
  if (a->peer_signals == nullptr) return Fail(r, n, "peer_signals is NULL");
  for (int p = 0; p < a->world; ++p) {
    if (a->peer_signals[p] == nullptr) return Fail(r, n, "peer_signals[%d] is NULL", p);
    if (!Aligned(a->peer_signals[p], kSignalAlignment)) {
      return Fail(r, n, "peer_signals[%d] not %d-byte aligned", p, kSignalAlignment);
    }
  }
  if (a->count == 0) return AT_OK;  // a no-op: data pointers are not used

  const int64_t esize = ElemBytes(a->dtype);
  if (a->peer_inputs == nullptr) return Fail(r, n, "peer_inputs is NULL");
  for (int p = 0; p < a->world; ++p) {
    if (!ReadsInput(algo, *a, p)) continue;
    if (a->peer_inputs[p] == nullptr) return Fail(r, n, "peer_inputs[%d] is NULL", p);
    if (!Aligned(a->peer_inputs[p], kVecBytes)) {
      return Fail(r, n, "peer_inputs[%d] not %d-byte aligned", p, kVecBytes);
    }
  }
  if (a->output == nullptr) return Fail(r, n, "output is NULL");
  if (!Aligned(a->output, kVecBytes)) {
    return Fail(r, n, "output not %d-byte aligned", kVecBytes);
  }
  int64_t in_elems = 0, out_elems = 0;
  Extents(algo, a->world, a->count, &in_elems, &out_elems);
  // A rank that does not read its own input (a broadcast's other ranks)
  // may pass none, and its output may be anywhere.
  if (!ReadsInput(algo, *a, a->rank)) in_elems = 0;
  const void* in = a->peer_inputs[a->rank];
  const int64_t in_bytes = in_elems * esize, out_bytes = out_elems * esize;
  const char* out_c = static_cast<const char*>(a->output);
  const char* in_c = static_cast<const char*>(in);
  bool in_place_ok = false;
  switch (algo) {
    case AT_ALGO_ALL_REDUCE_TWO_SHOT:
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED:
    // Push: peers load only their own slice of this input, before the
    // barrier after which this rank overwrites it (p2p_kernels.cu).
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH:
    // One-shot push: each element of the input is loaded before the same
    // thread stores that element of the output; peers never read it.
    case AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH:
    // Pipelined push: see its kernel (p2p_kernels.cu); peers never read it.
    case AT_ALGO_ALL_REDUCE_PUSH_PIPELINED:
    // Ring: see its kernel (p2p_kernels.cu); peers never read it.
    case AT_ALGO_ALL_REDUCE_RING:
    // In place only: checked below.
    case AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE:
      in_place_ok = in == a->output;
      break;
    case AT_ALGO_ALL_GATHER:
      in_place_ok = in_c == out_c + a->rank * a->count * esize;
      break;
    // Broadcast: the root reads and writes each element once, in place or
    // not; peers read the root's input before its end barrier (the
    // pipelined one: nobody else reads it).
    case AT_ALGO_BROADCAST:
    case AT_ALGO_BROADCAST_PUSH_PIPELINED:
      in_place_ok = in == a->output;
      break;
    case AT_ALGO_REDUCE_SCATTER:
      in_place_ok = out_c == in_c + a->rank * a->count * esize;
      break;
    default: break;
  }
  if (IsInPlaceOnly(algo) && !in_place_ok) {
    return Fail(r, n, "two_shot_in_place runs in place only: output must be peer_inputs[%d] "
                "(the peers store the reduced slices into every rank's input)", a->rank);
  }
  if (!in_place_ok && Overlap(in, in_bytes, a->output, out_bytes)) {
    return Fail(r, n, "output overlaps this rank's input (%s)",
                algo == AT_ALGO_ALL_REDUCE_ONE_SHOT   ? "one_shot cannot run in place"
                : IsCopyEngine(algo) ? "copy_engine cannot run in place"
                : algo == AT_ALGO_ALL_TO_ALL ? "all_to_all cannot run in place"
                                     : "only the exact in-place layout is allowed");
  }
  if (UsesScratch(algo)) {
    const int64_t need = ScratchBytes(algo, a->dtype, a->world, a->count, a->chunk_elems);
    if (a->scratch_bytes < need) {
      return Fail(r, n, "scratch_bytes %lld < %lld needed",
                  static_cast<long long>(a->scratch_bytes), static_cast<long long>(need));
    }
    if (a->peer_scratch == nullptr) return Fail(r, n, "peer_scratch is NULL");
    for (int p = 0; p < a->world; ++p) {
      if (a->peer_scratch[p] == nullptr) return Fail(r, n, "peer_scratch[%d] is NULL", p);
      if (!Aligned(a->peer_scratch[p], kVecBytes)) {
        return Fail(r, n, "peer_scratch[%d] not %d-byte aligned", p, kVecBytes);
      }
    }
    const void* scratch = a->peer_scratch[a->rank];
    if (Overlap(scratch, need, in, in_bytes) || Overlap(scratch, need, a->output, out_bytes)) {
      return Fail(r, n, "scratch overlaps this rank's input or output");
    }
  }
  return AT_OK;
}

int at_p2p_is_vectorized(int algo, const at_p2p_args* a) {
  if (at_p2p_check_args(algo, a, nullptr, 0) != AT_OK) return -1;
  const int64_t vec = VecElems(a->dtype);
  // The copies' unit: the largest power of 2 <= 16 bytes dividing a
  // rank's (segment's) bytes.
  if (IsCopy(algo) || algo == AT_ALGO_REDUCE_SCATTER) return a->count % vec == 0 ? 1 : 0;
  return 1;
}

}  // extern "C"
