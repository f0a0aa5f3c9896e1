#include "client/cli/format.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/cli/table.h"

namespace autotuned {
namespace cli {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The value of `key` in FormatNodeInfo's key/value lines ("" when absent).
std::string Fact(const std::string& text, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, key + " ")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(key.size())));
    }
  }
  return "";
}

v1::Candidate Cand(const std::string& impl) {
  v1::Candidate c;
  c.set_impl(impl);
  return c;
}

v1::CandidateResult Ok(const v1::Candidate& c, int index, double mean,
                       double busbw) {
  v1::CandidateResult r;
  *r.mutable_candidate() = c;
  r.set_index(index);
  r.set_ok(true);
  r.set_mean_us(mean);
  r.set_median_us(mean - 0.5);
  r.set_min_us(mean - 1);
  r.set_max_us(mean + 2);
  r.set_spread(3.0 / (mean - 0.5));
  r.set_algbw_gbps(busbw / 2);
  r.set_busbw_gbps(busbw);
  r.set_iterations(20);
  return r;
}

v1::CandidateResult RuledOut(const v1::Candidate& c, int index,
                             const std::string& reason) {
  v1::CandidateResult r;
  *r.mutable_candidate() = c;
  r.set_index(index);
  r.set_ok(false);
  r.set_reason(reason);
  r.set_mean_us(kInf);
  r.set_median_us(kInf);
  r.set_min_us(kInf);
  r.set_max_us(kInf);
  return r;
}

// all_reduce float32 of `count` elements with candidates ring (chunk_kib=64),
// one_shot, two_shot; `fast` (0 or 1) wins, two_shot is ruled out.
v1::ProblemResult AllReduceResult(int64_t count, int fast) {
  v1::ProblemResult result;
  v1::Problem* p = result.mutable_problem();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  p->set_op(v1::SUM);
  v1::Candidate ring = Cand("all_reduce/ring");
  (*ring.mutable_params())["chunk_kib"] = 64;
  *p->add_candidates() = ring;
  *p->add_candidates() = Cand("all_reduce/one_shot");
  *p->add_candidates() = Cand("all_reduce/two_shot");
  result.set_status(v1::TUNED);
  result.set_winner(p->candidates(fast).impl());
  result.set_winner_index(fast);
  result.set_bytes(count * 4);
  *result.add_ranked() = Ok(p->candidates(fast), fast, 12.3, 170.25);
  *result.add_ranked() = Ok(p->candidates(1 - fast), 1 - fast, 20.0, 104.5);
  v1::CandidateResult& runner_up = *result.mutable_ranked(1);
  runner_up.set_paired(8);
  runner_up.set_vs_winner(1.6234);
  runner_up.set_vs_winner_low(1.5512);
  runner_up.set_vs_winner_high(1.7049);
  *result.add_ranked() =
      RuledOut(p->candidates(2), 2, "needs 16-byte aligned sizes");
  return result;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST_CASE("a text table pads columns and trims line ends") {
  TextTable t({{"a"}, {"num", TextTable::Align::kRight}, {"z"}});
  t.AddRow({"long cell", "1", ""});
  t.AddRow({"x", "1234"});
  CHECK(t.Render() ==
        "a           num  z\n"
        "long cell     1\n"
        "x          1234\n");
}

TEST_CASE("a ranked result shows the winner first and the ruled-out last") {
  const std::string text = FormatProblemResult(AllReduceResult(262144, 0));
  INFO(text);
  const std::vector<std::string> lines = Lines(text);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] ==
        "all_reduce float32 sum, 1 MiB (262144 elements): TUNED, winner "
        "all_reduce/ring:chunk_kib=64");
  CHECK_THAT(lines[1], Catch::Contains("rank") && Catch::Contains("implementation") &&
                           Catch::Contains("mean us") &&
                           Catch::Contains("busbw GB/s"));
  CHECK_THAT(lines[2], Catch::StartsWith("     1  all_reduce/ring:chunk_kib=64") &&
                           Catch::Contains("12.3") && Catch::Contains("11.8") &&
                           Catch::Contains("14.3") && Catch::Contains("25.4%") &&
                           Catch::Contains("170.2") && Catch::EndsWith("ok"));
  CHECK_THAT(lines[3], Catch::StartsWith("     2  all_reduce/one_shot") &&
                           Catch::Contains("20.0") && Catch::Contains("104.5") &&
                           Catch::Contains("+62.3% (+55.1%..+70.5%)"));
  // The winner, and a candidate whose passes did not pair: no ratio.
  CHECK_THAT(lines[1], Catch::Contains("vs winner"));
  CHECK(lines[2].find('%', lines[2].find("170.2")) == std::string::npos);
  CHECK_THAT(lines[4], Catch::StartsWith("     -  all_reduce/two_shot") &&
                           Catch::EndsWith("ruled out: needs 16-byte aligned sizes"));
  CHECK(text.find("inf") == std::string::npos);
}

TEST_CASE("the header names cached, fallback and failed answers") {
  v1::ProblemResult cached = AllReduceResult(1024, 1);
  cached.set_status(v1::CACHED);
  cached.set_measured_unix_ms(1700000000000);
  CHECK_THAT(Lines(FormatProblemResult(cached))[0],
             Catch::Contains(": CACHED (measured 2023-11-14 22:13:20 UTC), "
                             "winner all_reduce/one_shot"));

  v1::ProblemResult fallback = AllReduceResult(1024, 0);
  fallback.set_status(v1::FALLBACK);
  fallback.set_reason("peer rank 3 timed out");
  fallback.clear_ranked();
  CHECK(FormatProblemResult(fallback) ==
        "all_reduce float32 sum, 4 KiB (1024 elements): FALLBACK (peer rank 3 "
        "timed out), default all_reduce/ring:chunk_kib=64\n");

  v1::ProblemResult failed = AllReduceResult(1024, 0);
  failed.set_status(v1::FAILED);
  failed.set_winner("");
  failed.set_reason("no candidate succeeded");
  failed.clear_ranked();
  *failed.add_ranked() = RuledOut(failed.problem().candidates(0), 0, "kernel fault");
  const std::string text = FormatProblemResult(failed);
  CHECK_THAT(text, Catch::StartsWith("all_reduce float32 sum, 4 KiB (1024 elements): "
                                     "FAILED (no candidate succeeded)\n"));
  CHECK_THAT(text, Catch::Contains("ruled out: kernel fault"));
}

TEST_CASE("problems describe broadcast roots, splits and labels") {
  v1::Problem b;
  b.set_collective(v1::BROADCAST);
  b.set_dtype(v1::BFLOAT16);
  b.set_count(512);
  b.set_root(3);
  b.set_label("embed");
  CHECK(DescribeProblem(b) ==
        "[embed] broadcast bfloat16 from rank 3, 1 KiB (512 elements)");
  v1::Problem a;
  a.set_collective(v1::ALL_TO_ALL);
  a.set_dtype(v1::FLOAT16);
  for (int i = 0; i < 4; ++i) a.add_split_counts(i * 8);
  CHECK(DescribeProblem(a) ==
        "all_to_all float16, splits 0,8,16,24 elements (4 counts)");
}

TEST_CASE("a tune response names the round and every result") {
  v1::TuneResponse response;
  response.set_round_id("r-17");
  response.set_backend("sim");
  *response.add_results() = AllReduceResult(256, 1);
  const std::string text = FormatTuneResponse(response);
  CHECK_THAT(text, Catch::StartsWith("round r-17, backend sim\n\nall_reduce float32"));
  CHECK_THAT(text, Catch::Contains("winner all_reduce/one_shot"));
}

TEST_CASE("sweep progress names the size and the winner") {
  v1::SweepUpdate update;
  *update.mutable_size_result() = AllReduceResult(1024, 1);
  update.set_done(3);
  update.set_total(17);
  CHECK(FormatSweepProgress(update) == "[3/17] 4 KiB: winner all_reduce/one_shot 11.8 us");
  update.mutable_size_result()->set_status(v1::CACHED);
  update.mutable_size_result()->set_reason("fastest median");
  CHECK(FormatSweepProgress(update) ==
        "[3/17] 4 KiB: winner all_reduce/one_shot 11.8 us (CACHED)");
  update.mutable_size_result()->set_status(v1::FALLBACK);
  update.mutable_size_result()->set_reason("rank 2 timed out");
  update.mutable_size_result()->clear_ranked();
  CHECK(FormatSweepProgress(update) ==
        "[3/17] 4 KiB: default all_reduce/one_shot (FALLBACK: rank 2 timed out)");
  update.mutable_size_result()->set_status(v1::FAILED);
  update.mutable_size_result()->set_winner("");
  CHECK(FormatSweepProgress(update) == "[3/17] 4 KiB: FAILED (rank 2 timed out)");
  v1::SweepUpdate table;
  table.mutable_table();
  CHECK(FormatSweepProgress(table).empty());
}

TEST_CASE("the sweep table marks each size's winner") {
  const std::vector<v1::ProblemResult> sizes = {
      AllReduceResult(256, 1), AllReduceResult(1024, 1),
      AllReduceResult(262144, 0)};
  const std::string text = FormatSweepTable(sizes);
  INFO(text);
  std::vector<std::string> lines = Lines(text);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "all_reduce float32 sum: median us per candidate (the ranking statistic), * = winner;");
  CHECK(lines[1] == "algbw, busbw: the winner's, GB/s");
  lines.erase(lines.begin());
  CHECK_THAT(lines[1], Catch::Contains("size") &&
                           Catch::Contains("ring:chunk_kib=64") &&
                           Catch::Contains("one_shot") &&
                           Catch::Contains("two_shot") &&
                           Catch::EndsWith("algbw   busbw  winner"));
  CHECK(lines[1].find("all_reduce/") == std::string::npos);
  CHECK_THAT(lines[2], Catch::StartsWith("  1 KiB") &&
                           Catch::Contains("19.5 ") && Catch::Contains("11.8*") &&
                           Catch::EndsWith("85.12  170.25  one_shot"));
  CHECK_THAT(lines[3], Catch::StartsWith("  4 KiB"));
  CHECK_THAT(lines[4], Catch::StartsWith("  1 MiB") && Catch::Contains("11.8*") &&
                           Catch::EndsWith("ring:chunk_kib=64"));
  // The "11.8*" of 1 MiB sits in the ring column, left of one_shot's 19.5.
  CHECK(lines[4].find("11.8*") < lines[4].find("19.5"));
  CHECK(lines[2].find("19.5") < lines[2].find("11.8*"));
}

TEST_CASE("CSV: a header, one row per candidate per size, plain numbers") {
  v1::ProblemResult fallback = AllReduceResult(1024, 0);
  fallback.clear_ranked();
  fallback.set_status(v1::FALLBACK);
  fallback.set_reason("world too large");
  const std::string text = FormatCsv({AllReduceResult(262144, 0), fallback});
  INFO(text);
  const std::vector<std::string> lines = Lines(text);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] ==
        "bytes,collective,dtype,candidate,rank,won,ok,mean_us,median_us,min_us,max_us,"
        "spread,algbw_gbps,busbw_gbps,iterations,status,reason,vs_winner,vs_winner_low,"
        "vs_winner_high");
  // 1 MiB as bytes; the parameters' commas never split a field. The
  // runner-up's time over the winner's, paired by pass, last.
  CHECK(lines[1] ==
        "1048576,all_reduce,float32,all_reduce/ring:chunk_kib=64,1,1,1,12.300,11.800,"
        "11.300,14.300,0.254,85.125,170.250,20,TUNED,,,,");
  CHECK(lines[2] ==
        "1048576,all_reduce,float32,all_reduce/one_shot,2,0,1,20.000,19.500,19.000,"
        "22.000,0.154,52.250,104.500,20,TUNED,,1.623,1.551,1.705");
  CHECK(lines[3] ==
        "1048576,all_reduce,float32,all_reduce/two_shot,,0,0,,,,,,,,0,TUNED,"
        "needs 16-byte aligned sizes,,,");
  CHECK(lines[4] ==
        "4096,all_reduce,float32,all_reduce/ring:chunk_kib=64,,1,0,,,,,,,,0,FALLBACK,"
        "world too large,,,");
  for (const std::string& line : lines) {
    CHECK(std::count(line.begin(), line.end(), ',') == 19);  // 20 fields each
  }

  v1::ProblemResult quoted = AllReduceResult(256, 1);
  quoted.mutable_ranked(2)->set_reason("rank 1: \"x\", then y");
  CHECK_THAT(FormatCsv({quoted}), Catch::EndsWith(",\"rank 1: \"\"x\"\", then y\",,,\n"));
}

// A sweep size left out at the memory cap: FAILED, skipped, nothing ranked.
v1::ProblemResult SkippedResult(int64_t count) {
  v1::ProblemResult result = AllReduceResult(count, 0);
  result.clear_ranked();
  result.set_winner("");
  result.set_winner_index(-1);
  result.set_status(v1::FAILED);
  result.set_skipped(true);
  result.set_reason("skipped: no candidate fits the memory cap of 1048576 bytes per GPU");
  return result;
}

TEST_CASE("a skipped sweep size shows as SKIPPED with its reason in progress, table, CSV, JSON") {
  v1::SweepUpdate update;
  *update.mutable_size_result() = SkippedResult(1 << 20);
  update.set_done(2);
  update.set_total(2);
  CHECK(FormatSweepProgress(update) ==
        "[2/2] 4 MiB: SKIPPED (skipped: no candidate fits the memory cap of 1048576 bytes "
        "per GPU)");

  const std::string table = FormatSweepTable({AllReduceResult(1024, 1), SkippedResult(1 << 20)});
  INFO(table);
  const std::vector<std::string> lines = Lines(table);
  REQUIRE(lines.size() == 6);
  CHECK_THAT(lines[3], Catch::StartsWith("  4 KiB") && Catch::EndsWith("one_shot"));
  CHECK_THAT(lines[4], Catch::StartsWith("  4 MiB") && Catch::EndsWith("SKIPPED"));
  CHECK(lines[4].find('*') == std::string::npos);
  CHECK(lines[5] ==
        "4 MiB skipped: no candidate fits the memory cap of 1048576 bytes per GPU");

  const std::vector<std::string> csv = Lines(FormatCsv({SkippedResult(1 << 20)}));
  REQUIRE(csv.size() == 2);
  CHECK(csv[1] ==
        "4194304,all_reduce,float32,,,0,0,,,,,,,,0,SKIPPED,"
        "skipped: no candidate fits the memory cap of 1048576 bytes per GPU,,,");

  CHECK_THAT(*ToJson(update, false), Catch::Contains("\"skipped\":true") &&
                                         Catch::Contains("\"status\":\"FAILED\""));
}

TEST_CASE("the dispatch table lists size ranges and winners with parameters") {
  const v1::ProblemResult result = AllReduceResult(1024, 0);
  v1::DispatchTable table;
  v1::SizeRange* small = table.add_ranges();
  small->set_min_count(256);
  small->set_max_count(65536);
  small->set_min_bytes(1024);
  small->set_max_bytes(262144);
  small->set_winner("all_reduce/one_shot");
  small->set_winner_index(1);
  v1::SizeRange* large = table.add_ranges();
  large->set_min_count(131072);
  large->set_max_count(16777216);
  large->set_min_bytes(524288);
  large->set_max_bytes(67108864);
  large->set_winner("all_reduce/ring");
  large->set_winner_index(0);
  v1::SizeRange* one = table.add_ranges();
  one->set_min_count(33554432);
  one->set_max_count(33554432);
  one->set_min_bytes(134217728);
  one->set_max_bytes(134217728);
  one->set_winner("all_reduce/other");
  one->set_winner_index(7);
  const std::string text = FormatDispatchTable(table, result.problem());
  INFO(text);
  const std::vector<std::string> lines = Lines(text);
  REQUIRE(lines.size() == 5);
  CHECK_THAT(lines[4], Catch::Contains("128 MiB") &&
                           Catch::EndsWith(" 33554432  all_reduce/other"));
  CHECK(lines[0] == "dispatch table:");
  CHECK_THAT(lines[1], Catch::Contains("from") && Catch::Contains("to") &&
                           Catch::Contains("winner"));
  CHECK_THAT(lines[2], Catch::Contains("1 KiB") && Catch::Contains("256 KiB") &&
                           Catch::Contains("256-65536") &&
                           Catch::EndsWith("all_reduce/one_shot"));
  CHECK_THAT(lines[3], Catch::Contains("512 KiB") && Catch::Contains("64 MiB") &&
                           Catch::EndsWith("all_reduce/ring:chunk_kib=64"));
}

TEST_CASE("implementations, node info and cache render") {
  v1::ListImplementationsResponse impls;
  impls.set_catalogue_version("c0ffee");
  v1::Implementation* ring = impls.add_implementations();
  ring->set_name("all_reduce/ring");
  ring->set_collective(v1::ALL_REDUCE);
  ring->set_description("ring, pipelined");
  ring->add_dtypes(v1::FLOAT32);
  ring->add_dtypes(v1::BFLOAT16);
  ring->add_ops(v1::SUM);
  ring->set_min_world_size(2);
  ring->set_max_world_size(8);
  ring->set_alignment_bytes(16);
  v1::ParamSpec* chunk = ring->add_params();
  chunk->set_name("chunk_kib");
  chunk->set_default_value(64);
  chunk->set_min_value(1);
  chunk->set_max_value(1024);
  const std::string list = FormatImplementations(impls);
  CHECK_THAT(list, Catch::Contains("all_reduce/ring") &&
                       Catch::Contains("float32,bfloat16") &&
                       Catch::Contains("2-8") && Catch::Contains("16 B") &&
                       Catch::Contains("chunk_kib=64[1..1024]") &&
                       Catch::Contains("ring, pipelined") &&
                       Catch::EndsWith("1 implementations, catalogue c0ffee\n"));

  v1::NodeInfoResponse info;
  info.set_hostname("node7");
  info.set_backend("sim");
  info.set_daemon_version("0.1.0");
  info.set_uptime_s(3725);
  for (int i = 0; i < 2; ++i) {
    v1::Gpu* gpu = info.add_gpus();
    gpu->set_index(i);
    gpu->set_name("H100");
    gpu->set_memory_bytes(int64_t{80} << 30);
    gpu->set_free_bytes(int64_t{79} << 30);
  }
  for (const char* link : {"X", "NV18", "NV18", "X"}) info.add_topology(link);
  info.set_memory_cap_bytes(int64_t{32} << 30);
  std::string node = FormatNodeInfo(info);
  INFO(node);
  CHECK_THAT(node, Catch::StartsWith("host") && Catch::Contains("node7") &&
                       Catch::Contains("up 1h2m5s") && Catch::Contains("80 GiB") &&
                       Catch::Contains("79 GiB") && Catch::Contains("free at start") &&
                       Catch::Contains("32 GiB (all ranks together, host memory)") &&
                       Catch::Contains("topology:") && Catch::Contains("NV18"));
  CHECK(Fact(node, "cache") == "off");
  CHECK(Fact(node, "metrics") == "off");
  CHECK(Fact(node, "peer port") == "off");
  CHECK(Fact(node, "daemon") == "0.1.0, up 1h2m5s, 0 rounds served");
  info.set_backend("cuda");
  CHECK_THAT(FormatNodeInfo(info), Catch::Contains("32 GiB per GPU"));

  // What the daemon listens on and its figures, as NodeInfo reports them.
  info.set_cache_entries(3);
  info.set_cache_dir("/var/lib/autotuned/cache");
  info.set_cache_epoch("e0e1");
  info.set_metrics_address("127.0.0.1:39464");
  info.set_peer_address("0.0.0.0:7451");
  info.set_rounds_served(9);
  v1::NodeMetrics* m = info.mutable_metrics();
  m->set_results_tuned(4);
  m->set_results_cached(5);
  m->set_results_fallback(6);
  m->set_results_failed(7);
  m->set_rejected_invalid(2);
  m->set_rejected_overloaded(1);
  m->set_rounds_in_flight(2);
  m->set_draining(true);
  const std::string live = FormatNodeInfo(info);
  INFO(live);
  CHECK(Fact(live, "daemon") == "0.1.0, up 1h2m5s, 9 rounds served, 2 in flight, draining");
  CHECK(Fact(live, "cache") == "3 entries in /var/lib/autotuned/cache, epoch e0e1");
  CHECK(Fact(live, "metrics") == "http://127.0.0.1:39464/metrics");
  CHECK(Fact(live, "peer port") == "0.0.0.0:7451");
  CHECK(Fact(live, "results") ==
        "tuned 4, cached 5, fallback 6, failed 7; 3 calls refused (invalid 2, draining 0, "
        "overloaded 1)");

  v1::ListCacheResponse cache;
  v1::CacheEntrySummary* entry = cache.add_entries();
  entry->set_key("k1");
  *entry->mutable_problem() = AllReduceResult(1024, 0).problem();
  entry->set_winner("all_reduce/ring");
  entry->set_winner_mean_us(12.25);
  entry->set_world_size(8);
  entry->set_links("NV18");
  cache.set_corrupt_files_ignored(2);
  const std::string entries = FormatCacheList(cache);
  CHECK_THAT(entries, Catch::Contains("all_reduce float32 sum, 4 KiB") &&
                          Catch::Contains(" NV18 ") &&
                          Catch::Contains("12.2") && Catch::Contains("k1") &&
                          Catch::EndsWith("1 cache entries, 2 corrupt files ignored\n"));
  v1::ClearCacheResponse cleared;
  cleared.set_removed(5);
  CHECK(FormatClearCache(cleared) == "removed 5 cache entries\n");
  cleared.set_not_removed(2);
  CHECK(FormatClearCache(cleared) ==
        "removed 5 cache entries; 2 files could not be removed (see the daemon's log)\n");
}

TEST_CASE("JSON keeps the proto field names and prints defaults") {
  v1::ClearCacheResponse cleared;
  CHECK(*ToJson(cleared, false) == "{\"removed\":\"0\",\"not_removed\":\"0\"}\n");
  v1::SweepUpdate update;
  *update.mutable_size_result() = AllReduceResult(1024, 0);
  const std::string json = *ToJson(update, true);
  CHECK_THAT(json, Catch::Contains("\"size_result\"") &&
                       Catch::Contains("\"winner_index\"") &&
                       Catch::Contains("\"busbw_gbps\"") &&
                       Catch::Contains("\"Infinity\""));
  CHECK(json.back() == '\n');
}

}  // namespace
}  // namespace cli
}  // namespace autotuned
