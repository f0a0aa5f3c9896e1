#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

#include "client/cli/candidate.h"
#include "client/cli/enums.h"
#include "client/cli/flag_scan.h"
#include "client/cli/size.h"
#include "client/cli/test_util.h"

// Flags of the kinds autotunectl has, for the flag scan alone (the binary's
// own are defined in main.cc, which this test does not link).
ABSL_FLAG(std::string, scan_test_collective, "", "a string");
ABSL_FLAG(absl::Duration, scan_test_timeout, absl::Seconds(5), "a duration");
ABSL_FLAG(int64_t, scan_test_count, 0, "a whole number");
ABSL_FLAG(double, scan_test_ratio, 0, "a number");

namespace autotuned {
namespace cli {
namespace {

using testing::ErrorOf;

TEST_CASE("sizes parse with binary and decimal units") {
  CHECK(*ParseSize("1024") == 1024);
  CHECK(*ParseSize("0") == 0);
  CHECK(*ParseSize("4KiB") == 4096);
  CHECK(*ParseSize("1MiB") == 1 << 20);
  CHECK(*ParseSize("64MiB") == int64_t{64} << 20);
  CHECK(*ParseSize("1GiB") == int64_t{1} << 30);
  CHECK(*ParseSize("2TiB") == int64_t{2} << 40);
  CHECK(*ParseSize("1KB") == 1000);
  CHECK(*ParseSize("3MB") == 3000000);
  CHECK(*ParseSize("1GB") == 1000000000);
  CHECK(*ParseSize("512B") == 512);
  CHECK(*ParseSize("4 KiB") == 4096);
  CHECK(*ParseSize(" 4kib ") == 4096);
  CHECK(*ParseSize("8K") == 8192);
  CHECK(*ParseSize("1M") == 1 << 20);
  CHECK(*ParseSize("1.5KiB") == 1536);
  CHECK(*ParseSize("0.5MiB") == 1 << 19);
  CHECK_FALSE(ParseSize("8EiB").ok());
}

TEST_CASE("junk sizes are rejected with the text quoted") {
  CHECK_THAT(ErrorOf(ParseSize("").status()), Catch::Contains("empty"));
  CHECK_THAT(ErrorOf(ParseSize("abc").status()),
             Catch::Contains("\"abc\"") && Catch::Contains("no number"));
  CHECK_THAT(ErrorOf(ParseSize("-4KiB").status()), Catch::Contains("negative"));
  CHECK_THAT(ErrorOf(ParseSize("4XB").status()),
             Catch::Contains("unknown unit \"XB\""));
  CHECK_THAT(ErrorOf(ParseSize("4 KiBs").status()), Catch::Contains("unknown unit"));
  CHECK_THAT(ErrorOf(ParseSize("1.").status()), Catch::Contains("no digits"));
  CHECK_THAT(ErrorOf(ParseSize("1.3B").status()),
             Catch::Contains("not a whole number of bytes"));
  CHECK_THAT(ErrorOf(ParseSize("99999999999999999999").status()),
             Catch::Contains("too large"));
  CHECK_THAT(ErrorOf(ParseSize("9000000TiB").status()), Catch::Contains("too large"));
  CHECK_FALSE(ParseSize("4KiB4").ok());
  CHECK_FALSE(ParseSize("0x10").ok());
}

TEST_CASE("byte counts print in the largest whole binary unit") {
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1000) == "1000 B");
  CHECK(FormatBytes(1024) == "1 KiB");
  CHECK(FormatBytes(4096) == "4 KiB");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(64 << 20) == "64 MiB");
  CHECK(FormatBytes(int64_t{3} << 30) == "3 GiB");
  CHECK(*ParseSize(FormatBytes(int64_t{48} << 20)) == int64_t{48} << 20);
}

TEST_CASE("enums parse by name and alias") {
  CHECK(*ParseCollective("all_reduce") == v1::ALL_REDUCE);
  CHECK(*ParseCollective("all_gather") == v1::ALL_GATHER);
  CHECK(*ParseCollective("reduce_scatter") == v1::REDUCE_SCATTER);
  CHECK(*ParseCollective("all-to-all") == v1::ALL_TO_ALL);
  CHECK(*ParseCollective("Broadcast") == v1::BROADCAST);
  CHECK(*ParseDType("float32") == v1::FLOAT32);
  CHECK(*ParseDType("bfloat16") == v1::BFLOAT16);
  CHECK(*ParseDType("float16") == v1::FLOAT16);
  CHECK(*ParseDType("fp32") == v1::FLOAT32);
  CHECK(*ParseDType("BF16") == v1::BFLOAT16);
  CHECK(*ParseDType("fp16") == v1::FLOAT16);
  CHECK(*ParseReduceOp("sum") == v1::SUM);
  CHECK(*ParseReduceOp("max") == v1::MAX);
  CHECK(*ParseReduceOp("min") == v1::MIN);
  CHECK(*ParseTimingMode("cuda_graph") == v1::CUDA_GRAPH);

  CHECK_THAT(ErrorOf(ParseCollective("allreduce").status()),
             Catch::Contains("unknown collective \"allreduce\"") &&
                 Catch::Contains("all_reduce, all_gather"));
  CHECK_THAT(ErrorOf(ParseDType("int8").status()),
             Catch::Contains("unknown dtype \"int8\"") && Catch::Contains("bf16"));
  CHECK_THAT(ErrorOf(ParseReduceOp("avg").status()),
             Catch::Contains("\"avg\"") && Catch::Contains("sum, max, min"));
  CHECK_FALSE(ParseCollective("").ok());
}

TEST_CASE("enum names and sizes") {
  CHECK(CollectiveName(v1::REDUCE_SCATTER) == "reduce_scatter");
  CHECK(CollectiveName(v1::COLLECTIVE_UNSPECIFIED) == "unspecified");
  CHECK(CollectiveName(static_cast<v1::Collective>(42)) == "?42");
  CHECK(DTypeName(v1::BFLOAT16) == "bfloat16");
  CHECK(ReduceOpName(v1::MIN) == "min");
  CHECK(DecisionStatusName(v1::FALLBACK) == "FALLBACK");
  CHECK(DTypeSize(v1::FLOAT32) == 4);
  CHECK(DTypeSize(v1::BFLOAT16) == 2);
  CHECK(DTypeSize(v1::FLOAT16) == 2);
  CHECK(DTypeSize(v1::DTYPE_UNSPECIFIED) == 0);
}

TEST_CASE("candidates parse with and without parameters") {
  auto bare = ParseCandidate("all_reduce/ring");
  REQUIRE(bare.ok());
  CHECK(bare->impl() == "all_reduce/ring");
  CHECK(bare->params().empty());

  auto with = ParseCandidate("all_reduce/ring:chunk_kib=64,foo=2");
  REQUIRE(with.ok());
  CHECK(with->impl() == "all_reduce/ring");
  REQUIRE(with->params().size() == 2);
  CHECK(with->params().at("chunk_kib") == 64);
  CHECK(with->params().at("foo") == 2);
  CHECK(FormatCandidate(*with) == "all_reduce/ring:chunk_kib=64,foo=2");
  CHECK(ParseCandidate("x/y:n=-3")->params().at("n") == -3);
}

TEST_CASE("malformed candidates are rejected") {
  CHECK_THAT(ErrorOf(ParseCandidate("").status()),
             Catch::Contains("no implementation name"));
  CHECK_THAT(ErrorOf(ParseCandidate(":a=1").status()),
             Catch::Contains("no implementation name"));
  CHECK_THAT(ErrorOf(ParseCandidate("all_reduce/ring:").status()),
             Catch::Contains("no parameters"));
  CHECK_THAT(ErrorOf(ParseCandidate("all_reduce/ring:chunk").status()),
             Catch::Contains("\"chunk\" has no '='"));
  CHECK_THAT(ErrorOf(ParseCandidate("all_reduce/ring:chunk=big").status()),
             Catch::Contains("\"big\" is not an integer"));
  CHECK_THAT(ErrorOf(ParseCandidate("all_reduce/ring:a=1,a=2").status()),
             Catch::Contains("a given twice"));
  CHECK_THAT(ErrorOf(ParseCandidate("all_reduce/ring:=1").status()),
             Catch::Contains("bad parameter name"));
  CHECK_THAT(ErrorOf(ParseCandidate("all reduce").status()),
             Catch::Contains("bad implementation name"));
}

TEST_CASE("candidate lists split on commas, parameters continue") {
  auto list = ParseCandidateList(
      "all_reduce/ring:chunk_kib=64,foo=2,all_reduce/one_shot,"
      "all_reduce/two_shot:blocks=8");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 3);
  CHECK(FormatCandidate((*list)[0]) == "all_reduce/ring:chunk_kib=64,foo=2");
  CHECK(FormatCandidate((*list)[1]) == "all_reduce/one_shot");
  CHECK(FormatCandidate((*list)[2]) == "all_reduce/two_shot:blocks=8");
  CHECK(ParseCandidateList("")->empty());
  CHECK_THAT(ErrorOf(ParseCandidateList("a=1,all_reduce/ring").status()),
             Catch::Contains("must follow IMPL:NAME=INT"));
  CHECK_THAT(ErrorOf(ParseCandidateList("all_reduce/one_shot,a=1").status()),
             Catch::Contains("must follow"));
  CHECK_FALSE(ParseCandidateList("all_reduce/ring,,all_reduce/one_shot").ok());
}

TEST_CASE("NCCL's algorithm and protocol by name or number") {
  auto list = ParseCandidateList("nccl:algo=ring,proto=ll128,channels=8,nccl:algo=1,proto=simple");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK((*list)[0].params().at("algo") == 2);
  CHECK((*list)[0].params().at("proto") == 2);
  CHECK((*list)[0].params().at("channels") == 8);
  CHECK((*list)[1].params().at("algo") == 1);
  CHECK((*list)[1].params().at("proto") == 3);
  CHECK_THAT(ErrorOf(ParseCandidate("nccl:algo=rings").status()),
             Catch::Contains("\"rings\" is not an integer or one of NCCL's names"));
  // Names are NCCL's parameters' only.
  CHECK_THAT(ErrorOf(ParseCandidate("ring:chunk_kib=ring").status()),
             Catch::Contains("\"ring\" is not an integer (expected"));
}

TEST_CASE("a misspelt flag gets the nearest one, a bad value what its type takes") {
  CHECK(ErrorOf(ScanFlags({"tune", "--scan_test_colective=all_reduce"}).status()) ==
        "unknown flag --scan_test_colective; did you mean --scan_test_collective?");
  CHECK(ErrorOf(ScanFlags({"--scan_test_timeuot=5s"}).status()) ==
        "unknown flag --scan_test_timeuot; did you mean --scan_test_timeout?");
  // Three edits or more: no guess.
  CHECK(ErrorOf(ScanFlags({"--scan_test_zzzzz"}).status()) == "unknown flag --scan_test_zzzzz");
  CHECK_THAT(ErrorOf(ScanFlags({"--scan_test_timeout=abc"}).status()),
             Catch::StartsWith("--scan_test_timeout=abc: ") &&
                 Catch::EndsWith(" (expected a duration, e.g. 500ms, 5s, 10m)"));
  CHECK_THAT(ErrorOf(ScanFlags({"--scan_test_count", "x"}).status()),
             Catch::StartsWith("--scan_test_count=x: ") &&
                 Catch::EndsWith(" (expected a whole number)"));
  CHECK_THAT(ErrorOf(ScanFlags({"--scan_test_ratio=1/2"}).status()),
             Catch::EndsWith(" (expected a number)"));
  CHECK(ScanFlags({"--scan_test_collective=all_reduce", "--scan_test_count=3"}).ok());
}

TEST_CASE("the flag scan rejects unknown flags and keeps positionals") {
  CHECK_THAT(ErrorOf(ScanFlags({"tune", "--no_such_flag=1"}).status()),
             Catch::Contains("unknown flag --no_such_flag"));
  CHECK_THAT(ErrorOf(ScanFlags({"-no_such_flag"}).status()),
             Catch::Contains("unknown flag --no_such_flag"));
  auto scanned = ScanFlags({"cache", "list", "--", "--not-a-flag"});
  REQUIRE(scanned.ok());
  CHECK(scanned->positional ==
        std::vector<std::string>{"cache", "list", "--not-a-flag"});
  CHECK(scanned->given.empty());
}

}  // namespace
}  // namespace cli
}  // namespace autotuned
