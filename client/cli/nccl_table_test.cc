// tune-nccl's pure parts: its sweeps' candidates and flags, and the table
// text made from the sweeps' dispatch tables.
#include "client/cli/nccl_table.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_split.h"
#include "client/cli/test_util.h"

namespace autotuned {
namespace cli {
namespace {

using testing::ErrorOf;

std::string Spec(const v1::Candidate& c) {
  std::string s = c.impl();
  for (const char* p : {"algo", "proto", "channels"}) {
    auto it = c.params().find(p);
    if (it != c.params().end()) s += std::string(" ") + p + "=" + std::to_string(it->second);
  }
  return s;
}

TEST_CASE("the sweeps try NCCL's own choice first, then each algorithm and protocol") {
  std::vector<v1::Candidate> ar = NcclCandidates(v1::ALL_REDUCE, {});
  REQUIRE(ar.size() == 7);
  CHECK(Spec(ar[0]) == "all_reduce/nccl");
  CHECK(Spec(ar[1]) == "all_reduce/nccl algo=1 proto=1");
  CHECK(Spec(ar[6]) == "all_reduce/nccl algo=2 proto=3");
  std::vector<v1::Candidate> ag = NcclCandidates(v1::ALL_GATHER, {8});
  REQUIRE(ag.size() == 8);  // (own + ring x 3) at NCCL's channels and at 8
  CHECK(Spec(ag[0]) == "all_gather/nccl");
  CHECK(Spec(ag[4]) == "all_gather/nccl channels=8");
  CHECK(Spec(ag[7]) == "all_gather/nccl algo=2 proto=3 channels=8");
}

TEST_CASE("tune-nccl's flags: defaults, one sweep per collective, bad values named") {
  RawFlags f;
  NcclTablePlan plan = *ParseTuneNcclFlags(f);
  CHECK(plan.out == "/var/lib/autotuned/nccl_tuner.table");
  REQUIRE(plan.sweeps.size() == 4);
  CHECK(plan.sweeps[0].problem.collective() == v1::ALL_REDUCE);
  CHECK(plan.sweeps[3].problem.collective() == v1::BROADCAST);
  CHECK(plan.sweeps[0].problem.dtype() == v1::BFLOAT16);
  CHECK(plan.sweeps[0].counts.front() == 512);                 // 1 KiB of bf16
  CHECK(plan.sweeps[0].counts.back() == (int64_t{128} << 20));  // 256 MiB
  CHECK(plan.sweeps[0].counts[1] == 2048);                      // factor 4
  CHECK(plan.sweeps[0].problem.candidates_size() == 7);

  f.collectives = "reduce_scatter";
  f.channels = "4,16";
  f.out = "/tmp/t";
  f.to = "4KiB";
  f.given = {"to"};
  plan = *ParseTuneNcclFlags(f);
  REQUIRE(plan.sweeps.size() == 1);
  CHECK(plan.sweeps[0].counts.back() == 2048);
  CHECK(plan.sweeps[0].problem.candidates_size() == 12);
  CHECK(plan.out == "/tmp/t");

  f = RawFlags();
  f.channels = "0";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("--channels: \"0\""));
  f.channels = "65";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("1..64"));
  f.channels = "4,8,4";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("--channels: 4 given twice"));
  f = RawFlags();
  f.given = {"collectives"};
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("--collectives: empty"));
  f.collectives = "all_gather,all_gather";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()),
             Catch::Contains("--collectives: all_gather given twice"));
  f = RawFlags();
  f.collectives = "all_to_all";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("no algorithm"));
  f.collectives = "all_reduce,nope";
  CHECK_THAT(ErrorOf(ParseTuneNcclFlags(f).status()), Catch::Contains("--collectives"));
}

v1::SizeRange Range(int64_t min_count, int64_t max_count, int winner) {
  v1::SizeRange r;
  r.set_min_count(min_count);
  r.set_max_count(max_count);
  r.set_winner_index(winner);
  return r;
}

std::vector<std::string> Rows(const std::string& text) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty() && line[0] != '#' && !absl::StartsWith(line, "autotuned-nccl-table") &&
        !absl::StartsWith(line, "identity")) {
      rows.emplace_back(line);
    }
  }
  return rows;
}

TEST_CASE("the table: a row per range in NCCL's bytes, gaps split at their geometric middle") {
  NcclSweep ar;
  ar.collective = v1::ALL_REDUCE;
  ar.dtype = v1::BFLOAT16;
  ar.candidates = NcclCandidates(v1::ALL_REDUCE, {});
  // 512..2048 elements (1..4 KiB): ring/ll; 8192 (16 KiB) up: NCCL's own.
  *ar.table.add_ranges() = Range(512, 2048, 4);
  *ar.table.add_ranges() = Range(8192, 1 << 20, 0);
  NcclSweep ag;
  ag.collective = v1::ALL_GATHER;
  ag.dtype = v1::BFLOAT16;
  ag.candidates = NcclCandidates(v1::ALL_GATHER, {16});
  *ag.table.add_ranges() = Range(512, 512, 7);  // ring/simple, 16 channels
  const std::string text = *NcclTableText(4, {ar, ag}, "abc\n123");
  CHECK(absl::StartsWith(text, "autotuned-nccl-table 1\nidentity "));
  CHECK_THAT(text, Catch::Contains("# autotunectl tune-nccl; node fingerprint abc?123\n"));
  // sqrt(4096 * 16384) = 8192 bytes.
  CHECK(Rows(text) == std::vector<std::string>{
                          "all_reduce 4 1 0 8192 ring ll 0",
                          "all_reduce 4 1 8193 9223372036854775807 default default 0",
                          "all_gather 4 1 0 9223372036854775807 ring simple 16",
                      });
  // The identity follows the rows and the fingerprint.
  CHECK(text != *NcclTableText(4, {ar, ag}, "abd"));
  const std::string again = *NcclTableText(4, {ar, ag}, "abc\n123");
  CHECK(again == text);
  // all_gather's bytes are the world's: 512 elements of bf16 on 4 ranks is 4 KiB.
  ag.table.mutable_ranges(0)->set_max_count(512);
  *ag.table.add_ranges() = Range(2048, 2048, 0);
  CHECK(Rows(*NcclTableText(4, {ag}, "f"))[0] == "all_gather 4 1 0 8192 ring simple 16");
}

TEST_CASE("the rows of other world sizes in the existing file stay, its own are replaced") {
  NcclSweep ar;
  ar.collective = v1::ALL_REDUCE;
  ar.dtype = v1::BFLOAT16;
  ar.candidates = NcclCandidates(v1::ALL_REDUCE, {});
  *ar.table.add_ranges() = Range(512, 512, 0);
  const std::string existing =
      "autotuned-nccl-table 1\nidentity 00\n# c\n"
      "all_reduce 2 1 0 100 ring ll 0\n"
      "all_reduce 4 1 0 100 tree ll 0\n"
      "all_gather 8 1 0 100 ring simple 4\n"
      "nonsense 8 1 0 100 ring simple 4\n";
  CHECK(Rows(*NcclTableText(4, {ar}, "f", existing)) ==
        std::vector<std::string>{
            "all_reduce 4 1 0 9223372036854775807 default default 0",
            "all_reduce 2 1 0 100 ring ll 0",
            "all_gather 8 1 0 100 ring simple 4",
        });
  // Not a table: nothing kept.
  CHECK(Rows(*NcclTableText(4, {ar}, "f", "all_reduce 2 1 0 100 ring ll 0\n")).size() == 1);
}

TEST_CASE("a winner the plugin cannot apply is INVALID_ARGUMENT") {
  NcclSweep s;
  s.collective = v1::ALL_REDUCE;
  s.dtype = v1::FLOAT32;
  v1::Candidate odd;
  odd.set_impl("all_reduce/nccl");
  (*odd.mutable_params())["algo"] = 2;  // no proto
  s.candidates = {odd};
  *s.table.add_ranges() = Range(1, 1, 0);
  CHECK_THAT(ErrorOf(NcclTableText(2, {s}, "f").status()), Catch::Contains("is not an NCCL choice the tuner plugin can apply"));
  *s.table.mutable_ranges(0) = Range(1, 1, 3);
  CHECK_THAT(ErrorOf(NcclTableText(2, {s}, "f").status()), Catch::Contains("winner_index 3"));
}

}  // namespace
}  // namespace cli
}  // namespace autotuned
