#include "daemon/measure/backend/sim/algorithms.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace autotuned::sim {
namespace {

constexpr int64_t kRingChunkKib = 256;
constexpr int64_t kPipelineChunkKib = 64;

// ---------------------------------------------------------------- helpers

int Mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A half-open range of element indices.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Slice i of `count` elements cut into n near-equal parts: sizes differ by at
// most one, and some are empty when count < n.
Range Slice(int64_t count, int n, int i) {
  return {count * i / n, count * (i + 1) / n};
}

// Piece k of `r` cut into pieces of `chunk` elements; empty past the end.
Range Piece(Range r, int64_t chunk, int64_t k) {
  const int64_t begin = std::min(r.end, r.begin + k * chunk);
  return {begin, std::min(r.end, begin + chunk)};
}

int64_t ChunkElements(const CandidateSpec& c, int64_t default_kib) {
  return c.Param("chunk_kib", default_kib) * 1024 /
         static_cast<int64_t>(sizeof(float));
}

void Copy(float* dst, const float* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

template <typename F>
void Apply(float* dst, const float* a, const float* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

// dst[i] = a[i] op b[i] for i < n; dst may alias a or b.
void Combine(ReduceOp op, float* dst, const float* a, const float* b,
             int64_t n) {
  switch (op) {
    case ReduceOp::kSum:
      return Apply(dst, a, b, n, [](float x, float y) { return x + y; });
    case ReduceOp::kMax:
      return Apply(dst, a, b, n, [](float x, float y) { return x > y ? x : y; });
    case ReduceOp::kMin:
      return Apply(dst, a, b, n, [](float x, float y) { return x < y ? x : y; });
  }
}

// dst[0, n) = the reduction over every rank of input[offset, offset + n).
void ReduceInputs(Group& g, float* dst, int64_t offset, int64_t n) {
  const ReduceOp op = g.problem().op;
  if (g.world_size() == 1) return Copy(dst, g.input(0) + offset, n);
  Combine(op, dst, g.input(0) + offset, g.input(1) + offset, n);
  for (int r = 2; r < g.world_size(); ++r) {
    Combine(op, dst, dst, g.input(r) + offset, n);
  }
}

// All-to-all: the segment `src` sends to `dst`, into dst's output.
void CopySegment(Group& g, int src, int dst) {
  const ProblemSpec& p = g.problem();
  Copy(g.output(dst) + p.OutputOffset(dst, src),
       g.input(src) + p.InputOffset(src, dst), p.SplitCount(src, dst));
}

// Broadcast: where the data is on the rank `v` places after the root (its
// input on the root, its output elsewhere).
const float* Holder(Group& g, int v) {
  const int r = (g.problem().root + v) % g.world_size();
  return v == 0 ? g.input(r) : g.output(r);
}

#define AT_BARRIER() AT_RETURN_IF_ERROR(g.Barrier())

// ------------------------------------------------------------- all_reduce

absl::Status AllReduceOneShot(Group& g, int rank, const CandidateSpec&) {
  AT_BARRIER();
  ReduceInputs(g, g.output(rank), 0, g.problem().count);
  return absl::OkStatus();
}

absl::Status AllReduceTwoShot(Group& g, int rank, const CandidateSpec&) {
  const int n = g.world_size();
  const int64_t count = g.problem().count;
  float* out = g.output(rank);
  AT_BARRIER();
  const Range mine = Slice(count, n, rank);
  ReduceInputs(g, out + mine.begin, mine.begin, mine.size());
  AT_BARRIER();
  for (int p = 0; p < n; ++p) {
    const Range s = Slice(count, n, p);
    if (p != rank) Copy(out + s.begin, g.output(p) + s.begin, s.size());
  }
  return absl::OkStatus();
}

absl::Status AllReduceRing(Group& g, int rank, const CandidateSpec& c) {
  const int n = g.world_size();
  const int64_t count = g.problem().count;
  const int left = Mod(rank - 1, n);
  const float* in = g.input(rank);
  float* out = g.output(rank);
  const int64_t chunk = ChunkElements(c, kRingChunkKib);
  AT_BARRIER();
  if (n == 1) {
    Copy(out, in, count);
    return absl::OkStatus();
  }
  const int64_t rounds = std::max<int64_t>(1, CeilDiv(CeilDiv(count, n), chunk));
  for (int64_t k = 0; k < rounds; ++k) {
    // Reduce-scatter: step s adds this rank's input to the left neighbour's
    // partial of slice rank-s-1 (its input at step 0); after n-1 steps slice
    // rank+1 is complete here.
    for (int s = 0; s < n - 1; ++s) {
      if (k > 0 || s > 0) AT_BARRIER();
      const Range p = Piece(Slice(count, n, Mod(rank - s - 1, n)), chunk, k);
      const float* partial = s == 0 ? g.input(left) : g.output(left);
      Combine(g.problem().op, out + p.begin, partial + p.begin, in + p.begin,
              p.size());
    }
    // All-gather: step s copies the complete slice rank-s from the left.
    for (int s = 0; s < n - 1; ++s) {
      AT_BARRIER();
      const Range p = Piece(Slice(count, n, Mod(rank - s, n)), chunk, k);
      Copy(out + p.begin, g.output(left) + p.begin, p.size());
    }
  }
  return absl::OkStatus();
}

absl::Status AllReduceGatherReduce(Group& g, int rank, const CandidateSpec& c) {
  const int root = static_cast<int>(c.Param("root", 0));
  const int64_t count = g.problem().count;
  AT_BARRIER();
  if (rank == root) ReduceInputs(g, g.output(rank), 0, count);
  AT_BARRIER();
  if (rank != root) Copy(g.output(rank), g.output(root), count);
  return absl::OkStatus();
}

absl::Status CheckRootParam(const ProblemSpec& p, const CandidateSpec& c) {
  const int64_t root = c.Param("root", 0);
  if (root >= 0 && root < p.world_size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("params[\"root\"]: ", root, " is not a rank of a ",
                   p.world_size, "-rank group"));
}

// ------------------------------------------------------------- all_gather

absl::Status AllGatherDirect(Group& g, int rank, const CandidateSpec&) {
  const int64_t count = g.problem().count;
  AT_BARRIER();
  for (int p = 0; p < g.world_size(); ++p) {
    Copy(g.output(rank) + p * count, g.input(p), count);
  }
  return absl::OkStatus();
}

absl::Status AllGatherRing(Group& g, int rank, const CandidateSpec&) {
  const int n = g.world_size();
  const int64_t count = g.problem().count;
  const int left = Mod(rank - 1, n);
  float* out = g.output(rank);
  AT_BARRIER();
  Copy(out + rank * count, g.input(rank), count);
  // Step s copies block rank-s-1, which the left neighbour got at step s-1.
  for (int s = 0; s < n - 1; ++s) {
    AT_BARRIER();
    const int64_t b = Mod(rank - s - 1, n) * count;
    Copy(out + b, g.output(left) + b, count);
  }
  return absl::OkStatus();
}

// --------------------------------------------------------- reduce_scatter

absl::Status ReduceScatterDirect(Group& g, int rank, const CandidateSpec&) {
  const int64_t count = g.problem().count;
  AT_BARRIER();
  ReduceInputs(g, g.output(rank), rank * count, count);
  return absl::OkStatus();
}

// Partial sums travel right through double-buffered scratch (2 * count): a
// rank writes one half while its right neighbour reads the other.
int64_t ReduceScatterRingScratch(const ProblemSpec& p) { return 2 * p.count; }

absl::Status ReduceScatterRing(Group& g, int rank, const CandidateSpec&) {
  const int n = g.world_size();
  const int64_t count = g.problem().count;
  const int left = Mod(rank - 1, n);
  const float* in = g.input(rank);
  AT_BARRIER();
  if (n == 1) {
    Copy(g.output(rank), in, count);
    return absl::OkStatus();
  }
  // Step s adds this rank's share to the partial of block rank-s-2; the last
  // step (block rank) lands in the output.
  for (int s = 0; s < n - 1; ++s) {
    if (s > 0) AT_BARRIER();
    const int64_t b = Mod(rank - s - 2, n) * count;
    const float* partial =
        s == 0 ? g.input(left) + b : g.scratch(left) + ((s - 1) % 2) * count;
    float* dst = s == n - 2 ? g.output(rank) : g.scratch(rank) + (s % 2) * count;
    Combine(g.problem().op, dst, partial, in + b, count);
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- all_to_all

absl::Status AllToAllDirect(Group& g, int rank, const CandidateSpec&) {
  AT_BARRIER();
  for (int src = 0; src < g.world_size(); ++src) CopySegment(g, src, rank);
  return absl::OkStatus();
}

absl::Status AllToAllPairwise(Group& g, int rank, const CandidateSpec&) {
  // Step 0 (after the entry barrier) is the rank's own segment; step k pulls
  // from rank+k (while rank-k pulls from this rank).
  for (int k = 0; k < g.world_size(); ++k) {
    AT_BARRIER();
    CopySegment(g, (rank + k) % g.world_size(), rank);
  }
  return absl::OkStatus();
}

// -------------------------------------------------------------- broadcast

absl::Status BroadcastDirect(Group& g, int rank, const CandidateSpec&) {
  AT_BARRIER();
  Copy(g.output(rank), g.input(g.problem().root), g.problem().count);
  return absl::OkStatus();
}

absl::Status BroadcastBinomialTree(Group& g, int rank, const CandidateSpec&) {
  const int n = g.world_size();
  const int v = Mod(rank - g.problem().root, n);  // place after the root
  const int64_t count = g.problem().count;
  AT_BARRIER();
  if (v == 0) Copy(g.output(rank), g.input(rank), count);
  // Step `mask`: places [mask, 2 * mask) copy from place v - mask.
  for (int mask = 1; mask < n; mask <<= 1) {
    if (mask > 1) AT_BARRIER();
    if (v >= mask && v < 2 * mask) Copy(g.output(rank), Holder(g, v - mask), count);
  }
  return absl::OkStatus();
}

absl::Status BroadcastPipeline(Group& g, int rank, const CandidateSpec& c) {
  const int n = g.world_size();
  const int v = Mod(rank - g.problem().root, n);  // place in the chain
  const int64_t count = g.problem().count;
  const int64_t chunk = ChunkElements(c, kPipelineChunkKib);
  const int64_t chunks = std::max<int64_t>(1, CeilDiv(count, chunk));
  AT_BARRIER();
  if (v == 0) Copy(g.output(rank), g.input(rank), count);
  // Step t: place v copies chunk t-(v-1) from place v-1, which got it at t-1.
  const int64_t steps = n == 1 ? 0 : chunks + n - 2;
  for (int64_t t = 0; t < steps; ++t) {
    if (t > 0) AT_BARRIER();
    const int64_t k = t - (v - 1);
    if (v == 0 || k < 0 || k >= chunks) continue;
    const Range p = Piece({0, count}, chunk, k);
    Copy(g.output(rank) + p.begin, Holder(g, v - 1) + p.begin, p.size());
  }
  return absl::OkStatus();
}

#undef AT_BARRIER

// ------------------------------------------------- NCCL's choices, modelled

// The sim's `<collective>/nccl`: NCCL's parameters (algo, proto, channels,
// as in the cuda catalogue: NCCL's numbering plus one, 0 = NCCL's choice)
// mapped onto the algorithms above, so that choosing among them (autotunectl
// tune-nccl, the tuner plugin's table) runs on the CPU: tree is the
// two-shot, ring the ring (all_reduce: in pieces of 8, 64 or 512 KiB for
// ll, ll128 and simple), broadcast's ring the pipeline (the same pieces);
// NCCL's own choice is the ring in 256 KiB pieces (broadcast: the binomial
// tree). The channel count changes nothing here. Any other algorithm is
// refused at run time, as NCCL refuses what it does not offer.
constexpr int64_t kNcclTree = 1, kNcclRing = 2;

int64_t NcclPieceKib(int64_t proto) {
  switch (proto) {
    case 1: return 8;
    case 2: return 64;
    default: return 512;
  }
}

absl::Status NcclRefused(Collective c, int64_t algo) {
  return absl::InvalidArgumentError(absl::StrCat(
      "NCCL does not offer algorithm ", algo, " for ", CollectiveName(c), " on this group"));
}

CandidateSpec WithChunk(const CandidateSpec& c, int64_t kib) {
  CandidateSpec out = c;
  out.params["chunk_kib"] = kib;
  return out;
}

absl::Status AllReduceNccl(Group& g, int rank, const CandidateSpec& c) {
  const int64_t algo = c.Param("algo", 0);
  if (algo == 0) return AllReduceRing(g, rank, WithChunk(c, kRingChunkKib));
  if (algo == kNcclTree) return AllReduceTwoShot(g, rank, c);
  if (algo == kNcclRing) return AllReduceRing(g, rank, WithChunk(c, NcclPieceKib(c.Param("proto", 0))));
  return NcclRefused(Collective::kAllReduce, algo);
}

absl::Status AllGatherNccl(Group& g, int rank, const CandidateSpec& c) {
  const int64_t algo = c.Param("algo", 0);
  if (algo == 0 || algo == kNcclRing) return AllGatherRing(g, rank, c);
  return NcclRefused(Collective::kAllGather, algo);
}

absl::Status ReduceScatterNccl(Group& g, int rank, const CandidateSpec& c) {
  const int64_t algo = c.Param("algo", 0);
  if (algo == 0 || algo == kNcclRing) return ReduceScatterRing(g, rank, c);
  return NcclRefused(Collective::kReduceScatter, algo);
}

absl::Status BroadcastNccl(Group& g, int rank, const CandidateSpec& c) {
  const int64_t algo = c.Param("algo", 0);
  if (algo == 0) return BroadcastBinomialTree(g, rank, c);
  if (algo == kNcclRing) {
    return BroadcastPipeline(g, rank, WithChunk(c, NcclPieceKib(c.Param("proto", 0))));
  }
  return NcclRefused(Collective::kBroadcast, algo);
}

// ---------------------------------------------------------------- catalogue

ImplInfo Info(const char* name, Collective collective, const char* description,
              std::vector<ParamInfo> params = {}) {
  ImplInfo info;
  info.name = name;
  info.collective = collective;
  info.description = description;
  info.params = std::move(params);
  info.dtypes = {DType::kFloat32};
  if (collective == Collective::kAllReduce ||
      collective == Collective::kReduceScatter) {
    info.ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  }
  info.min_world_size = 1;
  info.max_world_size = kMaxRanks;
  return info;
}

// The parameters of the cuda catalogue's NCCL entries
// (daemon/measure/backend/cuda/cuda_catalogue.cc), with the same ranges.
ImplInfo NcclInfo(const char* name, Collective collective, int64_t max_algo) {
  ImplInfo info = Info(name, collective,
                       "NCCL's algorithm, protocol and channels as the sim models them: "
                       "algo (1 tree, 2 ring) and proto (1 ll, 2 ll128, 3 simple) together; "
                       "channels no effect; 0: NCCL's choice",
                       {{"algo", 0, 0, max_algo, "0 NCCL's choice, 1 tree, 2 ring, ..."},
                        {"proto", 0, 0, 3, "0 NCCL's choice, 1 ll, 2 ll128, 3 simple"},
                        {"channels", 0, 0, 64, "0 NCCL's choice (no effect on the sim)"}});
  info.together = {"algo", "proto"};
  return info;
}

ParamInfo ChunkParam(int64_t default_kib) {
  return {"chunk_kib", default_kib, 1, 65536,
          "pipeline chunk in KiB: the data moves in pieces of this size, one "
          "barrier-separated step each"};
}

}  // namespace

std::vector<Algorithm> BuiltinAlgorithms() {
  using C = Collective;
  return {
      {Info("all_reduce/one_shot", C::kAllReduce,
            "every rank reads every peer's whole input and reduces it; one "
            "barrier"),
       AllReduceOneShot},
      {Info("all_reduce/two_shot", C::kAllReduce,
            "each rank reduces its 1/N slice from every peer, barrier, then "
            "copies the other slices from their owners"),
       AllReduceTwoShot},
      {Info("all_reduce/ring", C::kAllReduce,
            "ring reduce-scatter then ring all-gather, 2(N-1) barrier-"
            "separated steps per round of chunk_kib pieces",
            {ChunkParam(kRingChunkKib)}),
       AllReduceRing},
      {Info("all_reduce/gather_reduce", C::kAllReduce,
            "rank `root` reduces everything, then every rank copies from it",
            {{"root", 0, 0, kMaxRanks - 1,
              "the rank that reduces; must be below the world size"}}),
       AllReduceGatherReduce, nullptr, CheckRootParam},
      {Info("all_gather/direct", C::kAllGather,
            "every rank reads each peer's input into place; one barrier"),
       AllGatherDirect},
      {Info("all_gather/ring", C::kAllGather,
            "blocks travel around the ring, N-1 barrier-separated steps"),
       AllGatherRing},
      {Info("reduce_scatter/direct", C::kReduceScatter,
            "every rank reduces its block from every peer's input; one "
            "barrier"),
       ReduceScatterDirect},
      {Info("reduce_scatter/ring", C::kReduceScatter,
            "partial sums travel around the ring, N-1 barrier-separated "
            "steps"),
       ReduceScatterRing, ReduceScatterRingScratch},
      {Info("all_to_all/direct", C::kAllToAll,
            "every rank pulls its segment from every peer; one barrier"),
       AllToAllDirect},
      {Info("all_to_all/pairwise", C::kAllToAll,
            "N-1 barrier-separated steps; step k exchanges with rank+k and "
            "rank-k"),
       AllToAllPairwise},
      {Info("broadcast/direct", C::kBroadcast,
            "every rank reads the root's input; one barrier"),
       BroadcastDirect},
      {Info("broadcast/binomial_tree", C::kBroadcast,
            "binomial tree from the root, ceil(log2 N) barrier-separated "
            "steps"),
       BroadcastBinomialTree},
      {Info("broadcast/pipeline", C::kBroadcast,
            "chunked chain from the root: chunk_kib pieces flow one hop per "
            "barrier-separated step",
            {ChunkParam(kPipelineChunkKib)}),
       BroadcastPipeline},
      {NcclInfo("all_reduce/nccl", C::kAllReduce, 6), AllReduceNccl},
      {NcclInfo("all_gather/nccl", C::kAllGather, 7), AllGatherNccl},
      {NcclInfo("reduce_scatter/nccl", C::kReduceScatter, 7), ReduceScatterNccl,
       ReduceScatterRingScratch},
      {NcclInfo("broadcast/nccl", C::kBroadcast, 2), BroadcastNccl},
  };
}

}  // namespace autotuned::sim
