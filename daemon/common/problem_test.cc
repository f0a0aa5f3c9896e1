#include "daemon/common/problem.h"

#include <catch2/catch.hpp>

#include "kernels/pattern.h"

namespace autotuned {
namespace {

TEST_CASE("buffer sizes follow the per-rank count conventions") {
  ProblemSpec p;
  p.count = 10;
  p.world_size = 4;
  p.collective = Collective::kAllGather;
  CHECK(p.InputCount(0) == 10);
  CHECK(p.OutputCount(3) == 40);
  CHECK(p.MessageBytes() == 160);
  p.collective = Collective::kReduceScatter;
  CHECK(p.InputCount(1) == 40);
  CHECK(p.OutputCount(1) == 10);
  CHECK(p.BusBandwidthFactor() == Approx(0.75));
  p.collective = Collective::kAllReduce;
  CHECK(p.BusBandwidthFactor() == Approx(1.5));
  CHECK(p.MaxRankBytes() == 80);
}

TEST_CASE("all_to_all offsets walk the split matrix") {
  ProblemSpec p;
  p.collective = Collective::kAllToAll;
  p.world_size = 2;
  p.split_counts = {1, 2, 3, 4};  // 0->0:1 0->1:2 1->0:3 1->1:4
  CHECK(p.InputCount(0) == 3);
  CHECK(p.InputCount(1) == 7);
  CHECK(p.OutputCount(0) == 4);
  CHECK(p.OutputCount(1) == 6);
  CHECK(p.InputOffset(1, 1) == 3);
  CHECK(p.OutputOffset(1, 1) == 2);
  CHECK(p.MessageBytes() == 7 * 4);
}

TEST_CASE("even all_to_all: the device check's rule is the split matrix's") {
  ProblemSpec even;
  even.collective = Collective::kAllToAll;
  even.world_size = 4;
  even.count = 5;  // no matrix: 5 from every rank to every rank
  ProblemSpec matrix = even;
  matrix.split_counts.assign(16, 5);
  for (int rank = 0; rank < 4; ++rank) {
    for (int64_t i = 0; i < 20; ++i) {
      INFO("rank " << rank << " index " << i);
      CHECK(ExpectedOutput(even, rank, i) == pattern::AllToAllEvenExpected(rank, 5, i));
      CHECK(ExpectedOutput(matrix, rank, i) == pattern::AllToAllEvenExpected(rank, 5, i));
    }
  }
}

TEST_CASE("descriptions name the problem") {
  ProblemSpec p;
  p.count = 3;
  p.world_size = 2;
  CHECK(Describe(p) == "all_reduce float32 x3 sum w2");
  CandidateSpec c{"all_reduce/ring", {{"chunk_kib", 64}}};
  CHECK(Describe(c) == "all_reduce/ring{chunk_kib=64}");
}

}  // namespace
}  // namespace autotuned
