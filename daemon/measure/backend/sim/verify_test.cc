#include "daemon/measure/backend/sim/verify.h"

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/pattern.h"

namespace autotuned::sim {
namespace {

TEST_CASE("a correct output passes and the first mismatch is named") {
  ProblemSpec p;
  p.collective = Collective::kAllReduce;
  p.op = ReduceOp::kSum;
  p.world_size = 3;
  p.count = 10;
  std::vector<float> out(10);
  for (int i = 0; i < 10; ++i) out[i] = pattern::AllReduceExpected(p.op, 3, i);
  CHECK(CheckOutput(p, 1, out.data()).ok());

  out[7] += 1;
  absl::Status s = CheckOutput(p, 1, out.data());
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(s.message()), Catch::Contains("rank 1: output[7] is ") &&
                                           Catch::Contains(", expected "));
}

TEST_CASE("a poisoned output never passes") {
  ProblemSpec p;
  p.collective = Collective::kBroadcast;
  p.world_size = 2;
  p.count = 4;
  std::vector<float> out(4);
  PoisonOutput(p, 0, out.data());
  CHECK(std::isnan(out[3]));
  CHECK(CheckOutput(p, 0, out.data()).code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("all_to_all segments come from their senders") {
  ProblemSpec p;
  p.collective = Collective::kAllToAll;
  p.world_size = 2;
  p.split_counts = {1, 2,   // rank 0 sends 1 to itself, 2 to rank 1
                    0, 3};  // rank 1 sends 0 to rank 0, 3 to itself
  std::vector<float> in0(3), in1(3);
  FillInput(p, 0, in0.data());
  FillInput(p, 1, in1.data());
  // Rank 1 receives rank 0's elements 1..2, then its own 0..2.
  std::vector<float> out1 = {in0[1], in0[2], in1[0], in1[1], in1[2]};
  CHECK(CheckOutput(p, 1, out1.data()).ok());
  std::swap(out1[0], out1[1]);
  CHECK(CheckOutput(p, 1, out1.data()).code() == absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace autotuned::sim
