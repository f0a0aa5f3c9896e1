#include "daemon/measure/catalogue/catalogue.h"

#include <catch2/catch.hpp>

namespace autotuned {
namespace {

Catalogue MakeCatalogue() {
  Catalogue c;
  ImplInfo ring;
  ring.name = "all_reduce/ring";
  ring.collective = Collective::kAllReduce;
  ring.dtypes = {DType::kFloat32};
  ring.ops = {ReduceOp::kSum, ReduceOp::kMax};
  ring.min_world_size = 2;
  ring.max_world_size = 8;
  ring.alignment_bytes = 16;
  ring.params = {{"chunk_kib", 64, 1, 1024, "pipeline chunk"}};
  c.Add(ring);
  return c;
}

ProblemSpec AllReduce(int64_t count, int world) {
  ProblemSpec p;
  p.count = count;
  p.world_size = world;
  return p;
}

TEST_CASE("canonical candidates carry every parameter") {
  Catalogue c = MakeCatalogue();
  auto got = c.Canonicalize(AllReduce(1024, 4), {"all_reduce/ring", {}}, "f");
  REQUIRE(got.ok());
  CHECK(got->params.at("chunk_kib") == 64);
}

TEST_CASE("each unsupported request names the field and the reason") {
  Catalogue c = MakeCatalogue();
  auto err = [&](ProblemSpec p, CandidateSpec cand) {
    auto got = c.Canonicalize(p, cand, "problems[0].candidates[1]");
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(got.status().message());
  };
  CHECK_THAT(err(AllReduce(1024, 4), {"all_reduce/nope", {}}),
             Catch::Contains("problems[0].candidates[1].impl") &&
                 Catch::Contains("unknown implementation"));
  CHECK_THAT(err(AllReduce(1024, 4), {"all_reduce/ring", {{"threads", 1}}}),
             Catch::Contains("takes no parameter \"threads\""));
  CHECK_THAT(err(AllReduce(1024, 4), {"all_reduce/ring", {{"chunk_kib", 0}}}),
             Catch::Contains("outside [1, 1024]"));
  CHECK_THAT(err(AllReduce(1024, 16), {"all_reduce/ring", {}}),
             Catch::Contains("runs on 2 to 8 ranks"));
  CHECK_THAT(err(AllReduce(3, 4), {"all_reduce/ring", {}}),
             Catch::Contains("aligned to 16 bytes"));
  ProblemSpec bf = AllReduce(1024, 4);
  bf.dtype = DType::kBFloat16;
  CHECK_THAT(err(bf, {"all_reduce/ring", {}}), Catch::Contains("dtype bfloat16"));
  ProblemSpec mn = AllReduce(1024, 4);
  mn.op = ReduceOp::kMin;
  CHECK_THAT(err(mn, {"all_reduce/ring", {}}), Catch::Contains("reduce op min"));
  ProblemSpec ag = AllReduce(1024, 4);
  ag.collective = Collective::kAllGather;
  CHECK_THAT(err(ag, {"all_reduce/ring", {}}),
             Catch::Contains("implements all_reduce, not all_gather"));
}

TEST_CASE("parameters taken together are both set or both at their defaults") {
  Catalogue c;
  ImplInfo nccl;
  nccl.name = "all_reduce/nccl";
  nccl.collective = Collective::kAllReduce;
  nccl.dtypes = {DType::kFloat32};
  nccl.ops = {ReduceOp::kSum};
  nccl.params = {{"algo", 0, 0, 6, ""}, {"proto", 0, 0, 3, ""}, {"channels", 0, 0, 64, ""}};
  nccl.together = {"algo", "proto"};
  c.Add(nccl);
  const ProblemSpec p = AllReduce(1024, 2);
  CHECK(c.Canonicalize(p, {"all_reduce/nccl", {}}, "f").ok());
  CHECK(c.Canonicalize(p, {"all_reduce/nccl", {{"channels", 8}}}, "f").ok());
  CHECK(c.Canonicalize(p, {"all_reduce/nccl", {{"algo", 2}, {"proto", 3}}}, "f").ok());
  CHECK(c.Canonicalize(p, {"all_reduce/nccl", {{"algo", 0}, {"proto", 0}}}, "f").ok());
  auto one = c.Canonicalize(p, {"all_reduce/nccl", {{"proto", 1}}}, "problems[0].candidates[3]");
  REQUIRE_FALSE(one.ok());
  CHECK(one.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(one.status().message() ==
        "problems[0].candidates[3].params[\"proto\"]: \"all_reduce/nccl\" takes algo and proto "
        "together (both at their defaults, or neither)");
}

TEST_CASE("the version changes with the entries") {
  Catalogue a = MakeCatalogue();
  Catalogue b = MakeCatalogue();
  CHECK(a.Version() == b.Version());
  ImplInfo extra;
  extra.name = "all_reduce/other";
  b.Add(extra);
  CHECK(a.Version() != b.Version());
}

}  // namespace
}  // namespace autotuned
