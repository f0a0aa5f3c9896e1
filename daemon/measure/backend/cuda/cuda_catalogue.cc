#include "daemon/measure/backend/cuda/cuda_catalogue.h"

#include <string>

namespace autotuned::cuda {
namespace {

const std::vector<DType> kAllDTypes = {DType::kFloat32, DType::kBFloat16,
                                       DType::kFloat16};
const std::vector<ReduceOp> kAllOps = {ReduceOp::kSum, ReduceOp::kMax,
                                       ReduceOp::kMin};

ImplInfo Nccl(Collective c, const char* name, const char* what) {
  ImplInfo i;
  i.name = name;
  i.collective = c;
  i.description = what;
  i.dtypes = kAllDTypes;
  if (c == Collective::kAllReduce || c == Collective::kReduceScatter) {
    i.ops = kAllOps;
  }
  i.min_world_size = 1;
  return i;
}

// NCCL's own algorithm, protocol and channel count as parameters (NCCL's
// numbering plus one; 0 = NCCL's choice), applied through the NCCL tuner
// plugin (daemon/measure/backend/cuda/worker/nccl_tuner_link.h). `max_algo`: the
// highest algorithm the collective has in NCCL.
ImplInfo NcclTuned(Collective c, const char* name, const char* what, int64_t max_algo) {
  ImplInfo i = Nccl(c, name, what);
  i.description = std::string(what) +
                  "; algo (1 tree, 2 ring, 3 collnet_direct, 4 collnet_chain, 5 nvls, "
                  "6 nvls_tree, 7 pat) and proto (1 ll, 2 ll128, 3 simple) together, "
                  "channels: forced through the NCCL tuner plugin; 0: NCCL's choice";
  i.params = {
      {"algo", 0, 0, max_algo,
       "NCCL's algorithm: 0 NCCL's choice, 1 tree, 2 ring, 3 collnet_direct, "
       "4 collnet_chain, 5 nvls, 6 nvls_tree, 7 pat (with proto)"},
      {"proto", 0, 0, 3, "NCCL's protocol: 0 NCCL's choice, 1 ll, 2 ll128, 3 simple (with algo)"},
      {"channels", 0, 0, 64, "NCCL channels (thread blocks): 0 NCCL's choice"},
  };
  i.together = {"algo", "proto"};
  return i;
}

ImplInfo P2p(Collective c, const char* name, const char* what,
             int64_t default_blocks, int64_t default_threads) {
  ImplInfo i = Nccl(c, name, what);
  i.min_world_size = 2;
  i.max_world_size = 8;
  i.needs_p2p = true;
  i.params = {
      {"blocks", default_blocks, 1, 132,  // AT_P2P_MAX_BLOCKS
       "thread blocks per GPU (all resident at once: at most the free SMs)"},
      {"threads", default_threads, 32, 1024,
       "threads per block (a multiple of 32)"},
  };
  return i;
}

// A P2P entry with a chunk_kib parameter (default, least value, what it is).
ImplInfo Chunked(Collective c, const char* name, const char* what, int64_t default_blocks,
                 int64_t default_threads, int64_t chunk_kib, int64_t least_kib,
                 const char* chunk_what) {
  ImplInfo i = P2p(c, name, what, default_blocks, default_threads);
  i.params.push_back({"chunk_kib", chunk_kib, least_kib, 1 << 20, chunk_what});
  return i;
}

// A pipelined push entry: P2P with 64 x 512 blocks (512 threads a block
// keep their registers: kernels/p2p_kernels.cu) and a pipeline chunk.
ImplInfo Pipelined(Collective c, const char* name, const char* what, const char* chunk_what) {
  return Chunked(c, name, what, 64, 512, 2048, 16, chunk_what);
}

}  // namespace

Catalogue CudaCatalogue(bool test_faults) {
  Catalogue c;
  c.Add(NcclTuned(Collective::kAllReduce, "all_reduce/nccl", "ncclAllReduce", 6));
  c.Add(P2p(Collective::kAllReduce, "all_reduce/one_shot",
            "every rank reads every peer's input over NVLink and reduces", 32,
            512));
  c.Add(P2p(Collective::kAllReduce, "all_reduce/two_shot",
            "reduce-scatter then all-gather over NVLink P2P", 32, 512));
  c.Add(P2p(Collective::kAllReduce, "all_reduce/two_shot_push",
            "two-shot that stores each reduced slice into every peer's scratch "
            "over NVLink (no load round trip for the gather)",
            32, 512));
  c.Add(P2p(Collective::kAllReduce, "all_reduce/two_shot_in_place",
            "the push two-shot in place: each reduced slice is stored into every rank's "
            "buffer, which is the output (no scratch, no copy); for callers whose tensor "
            "is in the group's peer-mapped buffer (timed in place on the daemon's)",
            32, 512));
  ImplInfo push = P2p(Collective::kAllReduce, "all_reduce/one_shot_push",
                      "one-shot with no barrier: every rank stores its input into "
                      "every peer's buffer over NVLink, the data marks its own "
                      "arrival (16-bit types: -0.0 is the empty marker, sent as +0.0)",
                      32, 512);
  push.dtypes = {DType::kBFloat16, DType::kFloat16};
  c.Add(push);
  c.Add(Chunked(Collective::kAllReduce, "all_reduce/two_shot_chunked",
                "two-shot pipelined in chunks", 64, 1024, 2048, 16,
                "pipeline chunk per rank, KiB"));
  c.Add(Chunked(Collective::kAllReduce, "all_reduce/copy_engine",
                "the copy engines move each rank's input into every peer's "
                "scratch in chunks while the SMs reduce the chunks that have "
                "arrived (for large messages)",
                64, 1024, 8192, 64, "copy chunk per rank, KiB (at most 1024 chunks)"));
  c.Add(Pipelined(Collective::kAllReduce, "all_reduce/push_pipelined",
                  "two-shot in which every byte crosses NVLink as a store into a "
                  "peer's scratch, pipelined in chunks; reads only the rank's own "
                  "input (for large messages on 3 or more GPUs)",
                  "pipeline chunk (all ranks), KiB"));
  c.Add(Chunked(Collective::kAllReduce, "all_reduce/p2p_ring",
                "ring: each rank stores only into the next one, passing partial "
                "sums then reduced shards along in 2 x (world - 1) steps; reads "
                "only the rank's own input (for large messages)",
                132, 1024, 0, 0, "part of a shard passed on at once, KiB (0: whole shards)"));
  ImplInfo ce_ring = Chunked(Collective::kAllReduce, "all_reduce/ce_ring",
                             "half the message through the copy engine all-reduce and half "
                             "through the ring at once: on one NVLink the two move more than "
                             "either alone (blocks: the ring's; for large messages)",
                             100, 1024, 32768, 64, "copy chunk per rank, KiB (at most 1024 chunks)");
  ce_ring.params[0].max_value = 131;  // AT_P2P_MAX_BLOCKS - 1: signal row 0 is the copy engine's
  c.Add(ce_ring);
  c.Add(NcclTuned(Collective::kAllGather, "all_gather/nccl", "ncclAllGather", 7));
  c.Add(P2p(Collective::kAllGather, "all_gather/p2p",
            "each rank copies its peers' inputs over NVLink", 32, 512));
  c.Add(NcclTuned(Collective::kReduceScatter, "reduce_scatter/nccl", "ncclReduceScatter", 7));
  c.Add(P2p(Collective::kReduceScatter, "reduce_scatter/p2p",
            "each rank reduces its slice reading every peer over NVLink", 32,
            512));
  c.Add(Nccl(Collective::kAllToAll, "all_to_all/nccl",
             "grouped ncclSend/ncclRecv, uneven splits"));
  c.Add(P2p(Collective::kAllToAll, "all_to_all/p2p",
            "each rank copies its piece of every peer's input over NVLink, "
            "even or uneven splits",
            32, 512));
  c.Add(NcclTuned(Collective::kBroadcast, "broadcast/nccl", "ncclBroadcast", 2));
  c.Add(P2p(Collective::kBroadcast, "broadcast/p2p",
            "each rank copies the root's input over NVLink", 32, 512));
  c.Add(Pipelined(Collective::kBroadcast, "broadcast/push_pipelined",
                  "the root stores each chunk's slices into the other ranks' "
                  "scratch, each forwards its slice to the rest: the root sends "
                  "each byte once (for large messages)",
                  "pipeline chunk, KiB"));
  if (test_faults) {
    ImplInfo hang = P2p(Collective::kAllReduce, "all_reduce/hang_test",
                        "TEST FAULT: one-shot on rank 0 alone, no spin limit: "
                        "a kernel that never finishes",
                        1, 32);
    c.Add(hang);
    ImplInfo nccl_hang = Nccl(Collective::kAllReduce, "all_reduce/nccl_hang_test",
                              "TEST FAULT: ncclAllReduce on rank 0 alone: waits for its "
                              "peers until the communicators are aborted");
    nccl_hang.min_world_size = 2;
    c.Add(nccl_hang);
  }
  return c;
}

}  // namespace autotuned::cuda
