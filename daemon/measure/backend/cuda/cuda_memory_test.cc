// What a cuda candidate needs on one GPU, and that the default memory cap of
// an eight-GPU host of 80 GB fits every all_reduce candidate at 256 MiB.
#include "daemon/measure/backend/cuda/cuda_memory.h"

#include "config/config.pb.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/backend/cuda/cuda_catalogue.h"
#include "kernels/autotuned_kernels.h"

#include <catch2/catch.hpp>

namespace autotuned::cuda {
namespace {

ProblemSpec AllReduce(int world, int64_t bytes) {
  ProblemSpec p;
  p.collective = Collective::kAllReduce;
  p.dtype = DType::kBFloat16;
  p.world_size = world;
  p.count = bytes / 2;
  return p;
}

CandidateSpec Canonical(const Catalogue& catalogue, const ProblemSpec& p, const char* impl) {
  absl::StatusOr<CandidateSpec> c = catalogue.Canonicalize(p, {impl, {}}, "c", false);
  REQUIRE(c.ok());
  return *c;
}

TEST_CASE("scratch grows in powers of two from 4 MiB") {
  CHECK(ScratchCapacity(0) == kMinScratchBytes);
  CHECK(ScratchCapacity(kMinScratchBytes + 1) == 2 * kMinScratchBytes);
  CHECK(ScratchCapacity(int64_t{256} << 20) == int64_t{256} << 20);
}

TEST_CASE("a candidate needs its rank's buffers, plus the P2P scratch as allocated") {
  const Catalogue catalogue = CudaCatalogue(false);
  const int64_t mib = int64_t{1} << 20;
  const ProblemSpec p = AllReduce(4, 64 * mib);
  const int64_t buffers = 2 * 64 * mib + 32;
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/nccl")) == buffers);
  // The one-shot reads the peers' inputs: the group's smallest scratch.
  const int64_t signal = at_p2p_signal_bytes();
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/one_shot")) ==
        buffers + signal + kMinScratchBytes);
  // The two-shot's scratch holds one slice (a quarter on 4 ranks); the push
  // two-shot's, one slice per rank.
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/two_shot")) ==
        buffers + signal + 16 * mib);
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/two_shot_push")) ==
        buffers + signal + 64 * mib);
  // The push one-shot: three phases of every rank's input, rounded up, beside
  // the smallest scratch.
  const int64_t push = CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/one_shot_push"));
  CHECK(push >= buffers + signal + kMinScratchBytes + 3 * 4 * 64 * mib);
  // all_gather's output is world times its input.
  ProblemSpec gather = p;
  gather.collective = Collective::kAllGather;
  CHECK(CudaMemoryNeed(gather, Canonical(catalogue, gather, "all_gather/nccl")) ==
        5 * 64 * mib + 32);
}

TEST_CASE("every catalogue entry of the P2P kernels has its algo") {
  const Catalogue catalogue = CudaCatalogue(true);
  for (const ImplInfo* info : catalogue.List()) {
    CAPTURE(info->name);
    const bool nccl = info->name.find("nccl") != std::string::npos;
    CHECK((P2pAlgo(info->name) == 0) == nccl);
  }
}

TEST_CASE("all_to_all/p2p runs an uneven split matrix through all_to_all_v") {
  const Catalogue catalogue = CudaCatalogue(false);
  ProblemSpec p;
  p.collective = Collective::kAllToAll;
  p.dtype = DType::kFloat32;
  p.world_size = 3;
  p.count = 100;
  // Even splits, as a count or as a matrix of equal entries: the even kernel.
  CHECK(P2pAlgoFor(p, "all_to_all/p2p") == AT_ALGO_ALL_TO_ALL);
  p.split_counts.assign(9, 100);
  CHECK(P2pAlgoFor(p, "all_to_all/p2p") == AT_ALGO_ALL_TO_ALL);
  // Uneven, zeros included: rank 0 sends nothing, rank 2 receives 5 + 0.
  p.split_counts = {0, 0, 0,  //
                    7, 1000, 5,  //
                    3, 2, 0};
  CHECK(P2pAlgoFor(p, "all_to_all/p2p") == AT_ALGO_ALL_TO_ALL_V);
  CHECK(P2pAlgoFor(p, "all_to_all/nccl") == 0);
  CHECK(P2pAlgoFor(p, "all_reduce/one_shot") == AT_ALGO_ALL_REDUCE_ONE_SHOT);
  // The catalogue takes it, and its memory need is the largest row and
  // column of one rank (rank 1: sends 1012, receives 1002), the signal
  // buffer and the group's smallest scratch (all_to_all_v uses none).
  CHECK(catalogue.Supports(p, "all_to_all/p2p", "c").ok());
  const int64_t rank1 = (1012 + 1002) * 4 + 32;
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_to_all/p2p")) ==
        rank1 + at_p2p_signal_bytes() + kMinScratchBytes);
  CHECK(CudaMemoryNeed(p, Canonical(catalogue, p, "all_to_all/nccl")) == rank1);
}

// A fake node of eight GPUs of 80 GB with 79 GB free each: the default cap
// (config.proto's Limits) holds every all_reduce candidate at 256 MiB on
// 4 and on 8 of them.
class EightGpus : public Backend {
 public:
  EightGpus() {
    node_.backend = "cuda";
    for (int i = 0; i < 8; ++i) {
      node_.gpus.push_back({i, "80gb", int64_t{80} * 1000 * 1000 * 1000, "",
                            int64_t{79} * 1000 * 1000 * 1000});
    }
    catalogue_ = CudaCatalogue(false);
  }
  const NodeDescription& node() const override { return node_; }
  const Catalogue& catalogue() const override { return catalogue_; }
  int max_world_size() const override { return 8; }
  std::vector<RankOutcome> RunCandidate(const ProblemSpec&, const CandidateSpec&,
                                        const ScheduleOptions&, absl::Time) override {
    return {};
  }
  int64_t MemoryNeed(const ProblemSpec& p, const CandidateSpec& c) const override {
    return CudaMemoryNeed(p, c);
  }

 private:
  NodeDescription node_;
  Catalogue catalogue_;
};

TEST_CASE("the default cap does not stop a 256 MiB all_reduce on 4 or 8 GPUs of 80 GB") {
  const EightGpus node;
  const config::Limits defaults;
  const int64_t cap = MemoryCap(node, defaults.max_buffer_bytes(), defaults.gpu_memory_fraction());
  CHECK(cap > int64_t{16} << 30);
  const Collective ar = Collective::kAllReduce;
  for (int world : {4, 8}) {
    const ProblemSpec p = AllReduce(world, int64_t{256} << 20);
    for (const ImplInfo* info : node.catalogue().List(&ar)) {
      CAPTURE(world, info->name);
      CHECK(node.MemoryNeed(p, Canonical(node.catalogue(), p, info->name.c_str())) <= cap);
    }
  }
}

TEST_CASE("chunk_kib as elements: whole vectors, 0 for no chunks (the ring's whole shards)") {
  const Catalogue catalogue = CudaCatalogue(false);
  const ProblemSpec p = AllReduce(4, int64_t{64} << 20);
  CHECK(ChunkElems(p, Canonical(catalogue, p, "all_reduce/p2p_ring")) == 0);
  CHECK(ChunkElems(p, Canonical(catalogue, p, "all_reduce/two_shot")) == 0);
  CHECK(ChunkElems(p, Canonical(catalogue, p, "all_reduce/copy_engine")) == 8192 * 512);
  CandidateSpec ring = Canonical(catalogue, p, "all_reduce/p2p_ring");
  ring.params["chunk_kib"] = 256;
  CHECK(ChunkElems(p, ring) == 256 * 512);
  // The ring's scratch does not depend on its parts.
  CHECK(CudaMemoryNeed(p, ring) ==
        CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/two_shot_push")));
}

TEST_CASE("the in-place two-shot: its own algo, no scratch") {
  const Catalogue catalogue = CudaCatalogue(false);
  const ProblemSpec p = AllReduce(4, int64_t{64} << 20);
  CHECK(P2pAlgo("all_reduce/two_shot_in_place") == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE);
  const int64_t push = CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/two_shot_push"));
  const int64_t in_place =
      CudaMemoryNeed(p, Canonical(catalogue, p, "all_reduce/two_shot_in_place"));
  CHECK(in_place > 0);
  CHECK(in_place < push);
}

}  // namespace
}  // namespace autotuned::cuda
