#include "client/cli/args.h"

#include <cctype>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "client/cli/candidate.h"
#include "client/cli/commands.h"
#include "client/cli/test_util.h"

namespace autotuned {
namespace cli {
namespace {

using testing::ErrorOf;

RawFlags Tune(const std::string& collective, const std::string& bytes) {
  RawFlags f;
  f.collective = collective;
  f.bytes = bytes;
  f.given = {"collective", "bytes"};
  return f;
}

TEST_CASE("commands are one or two words") {
  CHECK(*ParseCommand({"tune"}) == Command::kTune);
  CHECK(*ParseCommand({"sweep"}) == Command::kSweep);
  CHECK(*ParseCommand({"list"}) == Command::kList);
  CHECK(*ParseCommand({"completion", "bash"}) == Command::kCompletion);
  CHECK_THAT(std::string(ParseCommand({"completion", "zsh"}).status().message()),
             Catch::Contains("\"completion\" needs \"bash\""));
  CHECK(*ParseCommand({"info"}) == Command::kInfo);
  CHECK(*ParseCommand({"cache", "list"}) == Command::kCacheList);
  CHECK(*ParseCommand({"cache", "clear"}) == Command::kCacheClear);
  CHECK_THAT(ErrorOf(ParseCommand({}).status()), Catch::Contains("no command"));
  CHECK_THAT(ErrorOf(ParseCommand({"tunes"}).status()),
             Catch::Contains("unknown command \"tunes\""));
  CHECK_THAT(ErrorOf(ParseCommand({"cache"}).status()),
             Catch::Contains("\"list\" or \"clear\""));
  CHECK_THAT(ErrorOf(ParseCommand({"cache", "drop"}).status()),
             Catch::Contains("cache drop"));
  CHECK_THAT(ErrorOf(ParseCommand({"info", "now"}).status()),
             Catch::Contains("unexpected argument \"now\""));
}

TEST_CASE("flags must apply to the command") {
  CHECK(CheckFlagsApply(Command::kTune, {"bytes", "socket", "json"}).ok());
  CHECK(CheckFlagsApply(Command::kSweep, {"csv"}).ok());
  CHECK_THAT(std::string(CheckFlagsApply(Command::kInfo, {"csv"}).message()),
             Catch::Contains("--csv does not apply to info"));
  CHECK_THAT(std::string(CheckFlagsApply(Command::kTune, {"csv", "json"}).message()),
             Catch::Contains("--json or --csv, not both"));
  CHECK(CheckFlagsApply(Command::kInfo, {"address", "flagfile"}).ok());
  CHECK(CheckFlagsApply(Command::kList, {"collective"}).ok());
  CHECK(CheckFlagsApply(Command::kSweep, {"to", "from"}).ok());
  CHECK_THAT(ErrorOf(CheckFlagsApply(Command::kTune, {"from"})),
             Catch::Contains("--from does not apply to tune"));
  CHECK_THAT(ErrorOf(CheckFlagsApply(Command::kList, {"dtype"})),
             Catch::Contains("--dtype does not apply to list"));
  CHECK_THAT(ErrorOf(CheckFlagsApply(Command::kSweep, {"bytes"})),
             Catch::Contains("--bytes does not apply to sweep"));
  CHECK_THAT(ErrorOf(CheckFlagsApply(Command::kCacheClear, {"collective"})),
             Catch::Contains("--collective does not apply to cache clear"));
}

TEST_CASE("--help names every flag a command takes") {
  for (Command command : {Command::kTune, Command::kSweep, Command::kTuneNccl, Command::kList,
                          Command::kInfo, Command::kCacheList, Command::kCacheClear,
                          Command::kCompletion}) {
    std::set<std::string> flags = CommandFlags(command);
    flags.insert(GlobalFlags().begin(), GlobalFlags().end());
    for (const std::string& flag : flags) {
      INFO(CommandName(command) << ": --" << flag);
      const std::string usage = kUsage;
      bool named = false;
      for (size_t at = usage.find("--" + flag); at != std::string::npos && !named;
           at = usage.find("--" + flag, at + 1)) {
        const size_t end = at + 2 + flag.size();
        named = end == usage.size() || !(std::isalnum(static_cast<unsigned char>(usage[end])) ||
                                         usage[end] == '_');
      }
      CHECK(named);
    }
  }
}

TEST_CASE("tune flags become a problem in elements") {
  RawFlags f = Tune("all_reduce", "1MiB");
  f.dtype = "bf16";
  f.op = "max";
  f.given.insert("op");
  f.candidates = "ring:chunk_kib=64,all_reduce/one_shot";
  f.world = 4;
  f.warmup = 3;
  f.iters = 50;
  f.timeout_ms = 2000;
  f.refresh = true;
  f.timing = "cuda_graph";
  auto plan = ParseTuneFlags(f);
  REQUIRE(plan.ok());
  const v1::Problem& p = plan->problem;
  CHECK(p.collective() == v1::ALL_REDUCE);
  CHECK(p.dtype() == v1::BFLOAT16);
  CHECK(p.count() == 524288);
  CHECK(p.op() == v1::MAX);
  REQUIRE(p.candidates_size() == 2);
  CHECK(FormatCandidate(p.candidates(0)) == "all_reduce/ring:chunk_kib=64");
  CHECK(p.candidates(1).impl() == "all_reduce/one_shot");
  CHECK(plan->world == 4);
  CHECK(plan->options.warmup() == 3);
  CHECK(plan->options.iterations() == 50);
  CHECK(plan->options.timeout_ms() == 2000);
  CHECK(plan->options.refresh());
  CHECK(plan->options.timing_mode() == v1::CUDA_GRAPH);
  CHECK_FALSE(plan->options.has_min_speedup());  // not given: the daemon's default
  f.given.insert("min_speedup");
  f.min_speedup = 0.05;
  CHECK(ParseTuneFlags(f)->options.min_speedup() == 0.05);
  f.min_speedup = -1;
  CHECK_FALSE(ParseTuneFlags(f).ok());
  f.min_speedup = 0.05;

  const v1::TuneRequest request = MakeTuneRequest(*plan, 4, {});
  CHECK(request.group().id() == "autotunectl");
  CHECK(request.group().world_size() == 4);
  CHECK(request.group().whole_group());
  CHECK(request.group().members().empty());
  REQUIRE(request.problems_size() == 1);
  CHECK(request.problems(0).count() == 524288);
  CHECK(request.problems(0).candidates().empty());
  CHECK(request.options().iterations() == 50);
}

TEST_CASE("--gpus places the ranks on those GPUs") {
  RawFlags f = Tune("all_reduce", "1MiB");
  f.gpus = "3,1";
  auto plan = ParseTuneFlags(f);
  REQUIRE(plan.ok());
  CHECK(plan->world == 2);
  const v1::TuneRequest request = MakeTuneRequest(*plan, plan->world, {});
  CHECK(request.group().world_size() == 2);
  CHECK(request.group().whole_group());
  REQUIRE(request.group().members_size() == 2);
  CHECK(request.group().members(0).rank() == 0);
  CHECK(request.group().members(0).local_gpu() == 3);
  CHECK(request.group().members(1).local_gpu() == 1);

  f.world = 3;
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()),
             Catch::Contains("--world=3 but --gpus lists 2 GPUs"));
  f.world = 0;
  f.gpus = "1,x";
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()),
             Catch::Contains("--gpus: \"x\" is not a GPU index"));
  f.gpus = "1,1";
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()),
             Catch::Contains("--gpus: GPU 1 is listed twice"));
}

TEST_CASE("bad tune flags are usage errors naming the flag") {
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("", "1MiB")).status()),
             Catch::Contains("--collective is required"));
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("all_reduce", "")).status()),
             Catch::Contains("--bytes is required"));
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("all_reduce", "lots")).status()),
             Catch::Contains("--bytes: invalid size \"lots\""));
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("all_reduce", "0")).status()),
             Catch::Contains("--bytes must be positive"));
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("all_reduce", "6")).status()),
             Catch::Contains("not a whole number of float32 elements"));
  CHECK_THAT(ErrorOf(ParseTuneFlags(Tune("allreduce", "4KiB")).status()),
             Catch::Contains("--collective: unknown collective"));
  RawFlags op = Tune("all_gather", "4KiB");
  op.op = "sum";
  op.given.insert("op");
  CHECK_THAT(ErrorOf(ParseTuneFlags(op).status()),
             Catch::Contains("--op applies to all_reduce and reduce_scatter"));
  RawFlags root = Tune("all_reduce", "4KiB");
  root.given.insert("root");
  CHECK_THAT(ErrorOf(ParseTuneFlags(root).status()),
             Catch::Contains("--root applies to broadcast only"));
  RawFlags far = Tune("broadcast", "4KiB");
  far.root = 8;
  far.world = 8;
  CHECK_THAT(ErrorOf(ParseTuneFlags(far).status()),
             Catch::Contains("--root=8 is not a rank of a 8-rank group"));
  RawFlags cand = Tune("all_reduce", "4KiB");
  cand.candidates = "ring:chunk";
  CHECK_THAT(ErrorOf(ParseTuneFlags(cand).status()),
             Catch::Contains("--candidates: invalid candidate"));
  RawFlags iters = Tune("all_reduce", "4KiB");
  iters.iters = -1;
  CHECK_THAT(ErrorOf(ParseTuneFlags(iters).status()), Catch::Contains("--iters"));
}

TEST_CASE("all_to_all takes explicit splits") {
  RawFlags f = Tune("all_to_all", "");
  f.splits = "1,2,3,4";
  f.world = 2;
  auto plan = ParseTuneFlags(f);
  REQUIRE(plan.ok());
  CHECK(plan->problem.split_counts_size() == 4);
  CHECK(plan->problem.split_counts(3) == 4);
  CHECK(plan->problem.count() == 0);

  f.world = 4;
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()),
             Catch::Contains("--splits has 4 counts; 4 ranks need 4 x 4 = 16"));
  f.world = 0;  // checked later against the node's GPU count
  CHECK(ParseTuneFlags(f).ok());
  CHECK_FALSE(CheckWorld(plan->problem, 8).ok());
  CHECK(CheckWorld(plan->problem, 2).ok());

  f.bytes = "4KiB";
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()), Catch::Contains("not both"));
  f.bytes = "";
  f.splits = "1,x";
  CHECK_THAT(ErrorOf(ParseTuneFlags(f).status()), Catch::Contains("\"x\""));
  RawFlags ar = Tune("all_reduce", "");
  ar.splits = "1,1,1,1";
  CHECK_THAT(ErrorOf(ParseTuneFlags(ar).status()),
             Catch::Contains("--splits applies to all_to_all only"));
}

TEST_CASE("sweep sizes multiply by the factor up to the limit") {
  CHECK(*SweepCounts(1024, 16384, 2, v1::FLOAT32) ==
        std::vector<int64_t>{256, 512, 1024, 2048, 4096});
  CHECK(*SweepCounts(1024, 20000, 4, v1::FLOAT16) ==
        std::vector<int64_t>{512, 2048, 8192});
  CHECK(*SweepCounts(4096, 4096, 2, v1::FLOAT32) == std::vector<int64_t>{1024});
  CHECK(SweepCounts(1024, 1 << 30, 2, v1::FLOAT32)->size() == 21);
  CHECK_THAT(ErrorOf(SweepCounts(1024, 512, 2, v1::FLOAT32).status()),
             Catch::Contains("below --from"));
  CHECK_THAT(ErrorOf(SweepCounts(1024, 4096, 1, v1::FLOAT32).status()),
             Catch::Contains("--factor must be >= 2"));
  CHECK_THAT(ErrorOf(SweepCounts(6, 4096, 2, v1::FLOAT32).status()),
             Catch::Contains("--from"));

  RawFlags f;
  f.collective = "all_gather";
  f.from = "1KiB";
  f.to = "4KiB";
  f.world = 8;
  f.given = {"collective", "from", "to"};
  auto plan = ParseSweepFlags(f);
  REQUIRE(plan.ok());
  v1::Candidate c;
  c.set_impl("all_gather/ring");
  const v1::SweepRequest request = MakeSweepRequest(*plan, 8, {c});
  CHECK(request.group().world_size() == 8);
  CHECK(request.group().whole_group());
  CHECK(request.problem().collective() == v1::ALL_GATHER);
  REQUIRE(request.problem().candidates_size() == 1);
  CHECK(std::vector<int64_t>(request.counts().begin(), request.counts().end()) ==
        std::vector<int64_t>{256, 512, 1024});
}

v1::Implementation Impl(const std::string& name, v1::Collective collective) {
  v1::Implementation impl;
  impl.set_name(name);
  impl.set_collective(collective);
  impl.add_dtypes(v1::FLOAT32);
  impl.add_ops(v1::SUM);
  impl.set_min_world_size(1);
  return impl;
}

TEST_CASE("default candidates are the suitable implementations in order") {
  v1::ListImplementationsResponse catalogue;
  *catalogue.add_implementations() = Impl("all_reduce/ring", v1::ALL_REDUCE);
  *catalogue.add_implementations() = Impl("all_gather/ring", v1::ALL_GATHER);
  v1::Implementation bf16 = Impl("all_reduce/bf16_only", v1::ALL_REDUCE);
  bf16.clear_dtypes();
  bf16.add_dtypes(v1::BFLOAT16);
  *catalogue.add_implementations() = bf16;
  v1::Implementation small = Impl("all_reduce/two_ranks", v1::ALL_REDUCE);
  small.set_min_world_size(2);
  small.set_max_world_size(2);
  *catalogue.add_implementations() = small;
  v1::Implementation aligned = Impl("all_reduce/aligned", v1::ALL_REDUCE);
  aligned.set_alignment_bytes(4096);
  *catalogue.add_implementations() = aligned;
  *catalogue.add_implementations() = Impl("all_reduce/one_shot", v1::ALL_REDUCE);

  v1::Problem p;
  p.set_collective(v1::ALL_REDUCE);
  p.set_dtype(v1::FLOAT32);
  p.set_count(256);  // 1 KiB
  std::vector<std::string> skipped;
  auto got = SelectCandidates(catalogue, p, 8, &skipped);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 2);
  CHECK((*got)[0].impl() == "all_reduce/ring");
  CHECK((*got)[1].impl() == "all_reduce/one_shot");
  REQUIRE(skipped.size() == 3);
  CHECK(skipped[0] == "all_reduce/bf16_only: does not take float32");
  CHECK(skipped[1] == "all_reduce/two_ranks: runs on 2 to 2 ranks, not 8");
  CHECK(skipped[2] == "all_reduce/aligned: needs sizes aligned to 4096 bytes");

  p.set_op(v1::MIN);
  auto none = SelectCandidates(catalogue, p, 8, nullptr);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(none.status().message()),
             Catch::Contains("all_reduce/ring: does not take op min"));

  v1::Problem bc;
  bc.set_collective(v1::BROADCAST);
  bc.set_dtype(v1::FLOAT32);
  CHECK(SelectCandidates(catalogue, bc, 8, nullptr).status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("on a node smaller than an implementation's minimum, the reason says so") {
  // ListImplementations clips max_world_size to the node: a 2..8-rank P2P
  // implementation on a one-GPU node is listed as 2..1.
  v1::ListImplementationsResponse catalogue;
  *catalogue.add_implementations() = Impl("all_reduce/nccl", v1::ALL_REDUCE);
  v1::Implementation p2p = Impl("all_reduce/one_shot", v1::ALL_REDUCE);
  p2p.set_min_world_size(2);
  p2p.set_max_world_size(1);
  *catalogue.add_implementations() = p2p;
  v1::Problem p;
  p.set_collective(v1::ALL_REDUCE);
  p.set_dtype(v1::FLOAT32);
  p.set_count(256);
  std::vector<std::string> skipped;
  auto got = SelectCandidates(catalogue, p, 1, &skipped);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0] == "all_reduce/one_shot: needs at least 2 ranks; this node runs at most 1");
}

TEST_CASE("the target comes from --socket, --address or the default") {
  REQUIRE(unsetenv("AUTOTUNED_SOCKET") == 0);
  CHECK(*ResolveTarget("", "") == "unix:/run/autotuned/autotuned.sock");
  CHECK(*ResolveTarget("/tmp/a.sock", "") == "unix:/tmp/a.sock");
  CHECK(*ResolveTarget("unix:/tmp/a.sock", "") == "unix:/tmp/a.sock");
  CHECK(*ResolveTarget("", "node7:7070") == "node7:7070");
  CHECK_THAT(ErrorOf(ResolveTarget("/tmp/a.sock", "node7:7070").status()),
             Catch::Contains("not both"));
}

TEST_CASE("errors name the option behind them where the message does not") {
  const absl::Status late = absl::DeadlineExceededError("Deadline Exceeded");
  CHECK(DescribeRpcError(late, Command::kSweep, false, absl::Milliseconds(1)) ==
        "DEADLINE_EXCEEDED: Deadline Exceeded (no answer within --deadline=1ms, the limit of "
        "one sweep call; give a longer one)");
  CHECK_THAT(DescribeRpcError(late, Command::kTune, false, absl::Minutes(10)),
             Catch::EndsWith("(no answer within --deadline=10m, the limit of one tune call; "
                             "give a longer one)"));
  CHECK_THAT(DescribeRpcError(late, Command::kTuneNccl, false, absl::Minutes(10)),
             Catch::Contains("--deadline=10m, the limit of one sweep call"));
  // --deadline bounds the measuring calls only; the daemon's own deadline
  // errors say what they are.
  CHECK(DescribeRpcError(late, Command::kInfo, false, absl::Minutes(10)) ==
        "DEADLINE_EXCEEDED: Deadline Exceeded");
  const absl::Status own = absl::DeadlineExceededError("candidate timed out after 10000 ms");
  CHECK(DescribeRpcError(own, Command::kTune, false, absl::Minutes(10)) ==
        "DEADLINE_EXCEEDED: candidate timed out after 10000 ms");

  const absl::Status away = absl::UnavailableError(
      "cannot connect to autotuned at unix:/run/autotuned/autotuned.sock within 5s");
  CHECK_THAT(DescribeRpcError(away, Command::kInfo, true, absl::Minutes(10)),
             Catch::StartsWith("UNAVAILABLE: cannot connect to autotuned at unix:/run/") &&
                 Catch::EndsWith("--socket=PATH, $AUTOTUNED_SOCKET or --address=HOST:PORT "
                                 "name another"));
  // A daemon that answered and then stopped (draining) is not a wrong target.
  const absl::Status draining = absl::UnavailableError("draining: the daemon is stopping");
  CHECK(DescribeRpcError(draining, Command::kTune, false, absl::Minutes(10)) ==
        "UNAVAILABLE: draining: the daemon is stopping");
}

}  // namespace
}  // namespace cli
}  // namespace autotuned
