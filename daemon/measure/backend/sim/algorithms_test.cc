// Every catalogue algorithm, driven through SimBackend::RunCandidate (which
// verifies the result exactly), for world sizes 1..8 and counts that do and
// do not divide evenly. Tags select one collective, so that BUILD can run
// the collectives as separate, parallel tests.
#include "daemon/measure/backend/sim/algorithms.h"

#include <map>
#include <string>
#include <vector>

#include "daemon/measure/backend/sim/test_util.h"

namespace autotuned::sim {
namespace {

using testing::MakeBackend;
using testing::Problem;
using testing::RequireCorrect;

const int kWorlds[] = {1, 2, 3, 4, 5, 6, 7, 8};
const int64_t kCounts[] = {1, 7, 1000, 65539};

bool Reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter;
}

// Every algorithm of `c` with its default parameters, every world size,
// count and (where relevant) reduce op; broadcast roots vary with the count.
void CheckCollective(Collective c) {
  auto backend = MakeBackend(8);
  const std::vector<const ImplInfo*> impls = backend->catalogue().List(&c);
  REQUIRE(impls.size() >= 2);
  const std::vector<ReduceOp> ops =
      Reducing(c) ? std::vector<ReduceOp>{ReduceOp::kSum, ReduceOp::kMax,
                                          ReduceOp::kMin}
                  : std::vector<ReduceOp>{ReduceOp::kSum};
  for (const ImplInfo* info : impls) {
    for (int world : kWorlds) {
      for (int64_t count : kCounts) {
        for (ReduceOp op : ops) {
          ProblemSpec p = Problem(c, world, count, op);
          p.root = static_cast<int>(count % world);
          RequireCorrect(*backend, p, {info->name, {}});
        }
      }
    }
  }
}

// The parameters change the schedule (rounds, steps, roots): check them too.
void CheckWithParams(Collective c, const std::string& impl,
                     const std::vector<std::map<std::string, int64_t>>& sets) {
  auto backend = MakeBackend(8);
  for (const auto& params : sets) {
    for (int world : {3, 8}) {
      for (int64_t count : {7, 1000, 65539}) {
        ProblemSpec p = Problem(c, world, count, ReduceOp::kMax);
        p.root = world - 1;
        std::map<std::string, int64_t> fitted = params;
        if (fitted.count("root")) fitted["root"] %= world;
        RequireCorrect(*backend, p, {impl, fitted});
      }
    }
  }
}

TEST_CASE("all_reduce algorithms are exact", "[all_reduce]") {
  CheckCollective(Collective::kAllReduce);
  CheckWithParams(Collective::kAllReduce, "all_reduce/ring",
                  {{{"chunk_kib", 1}}, {{"chunk_kib", 3}}});
  CheckWithParams(Collective::kAllReduce, "all_reduce/gather_reduce",
                  {{{"root", 2}}, {{"root", 7}}});
}

TEST_CASE("all_gather algorithms are exact", "[all_gather]") {
  CheckCollective(Collective::kAllGather);
}

TEST_CASE("reduce_scatter algorithms are exact", "[reduce_scatter]") {
  CheckCollective(Collective::kReduceScatter);
}

TEST_CASE("broadcast algorithms are exact", "[broadcast]") {
  CheckCollective(Collective::kBroadcast);
  CheckWithParams(Collective::kBroadcast, "broadcast/pipeline",
                  {{{"chunk_kib", 1}}, {{"chunk_kib", 5}}});
}

TEST_CASE("all_to_all algorithms are exact with even splits", "[all_to_all]") {
  CheckCollective(Collective::kAllToAll);
}

// Uneven splits with zeros: whole rows (a rank sends nothing), whole
// columns (a rank receives nothing) and scattered empty segments.
std::vector<int64_t> UnevenSplits(int world, int64_t scale) {
  std::vector<int64_t> splits(static_cast<size_t>(world) * world);
  for (int s = 0; s < world; ++s) {
    for (int d = 0; d < world; ++d) {
      int64_t v = ((s + 1) * (d + 3) * 37) % 11;  // 0..10, some zeros
      if (world > 2 && s == 1) v = 0;             // rank 1 sends nothing
      if (world > 3 && d == 2) v = 0;             // rank 2 receives nothing
      splits[static_cast<size_t>(s) * world + d] = v * scale + (v > 0 ? s : 0);
    }
  }
  return splits;
}

TEST_CASE("all_to_all algorithms are exact with uneven and zero splits",
          "[all_to_all]") {
  auto backend = MakeBackend(8);
  const Collective c = Collective::kAllToAll;
  for (const ImplInfo* info : backend->catalogue().List(&c)) {
    for (int world : kWorlds) {
      for (int64_t scale : {1, 997}) {
        ProblemSpec p = Problem(c, world, 0);
        p.split_counts = UnevenSplits(world, scale);
        RequireCorrect(*backend, p, {info->name, {}});
      }
      ProblemSpec all_zero = Problem(c, world, 0);
      all_zero.split_counts.assign(static_cast<size_t>(world) * world, 0);
      RequireCorrect(*backend, all_zero, {info->name, {}});
      ProblemSpec one = Problem(c, world, 0);  // a single element moves
      one.split_counts.assign(static_cast<size_t>(world) * world, 0);
      one.split_counts[static_cast<size_t>(world) * world - 1] = 1;
      RequireCorrect(*backend, one, {info->name, {}});
    }
  }
}

}  // namespace
}  // namespace autotuned::sim
