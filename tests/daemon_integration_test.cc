// End to end: the daemon binary on the sim backend, reached over its Unix
// socket through the C++ client and the autotunectl CLI.
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cpp/client.h"
#include "tests/daemon_process.h"

namespace autotuned {
namespace {

// One CSV row's fields: a quoted field may hold commas and doubled quotes
// (candidates with several parameters, reasons).
std::vector<std::string> CsvFields(const std::string& row) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < row.size(); ++i) {
    const char c = row[i];
    if (quoted && c == '"' && i + 1 < row.size() && row[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

using testing::CommandResult;
using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::RunCommand;
using testing::ShortTempDir;
using testing::Runfile;

struct Node {
  std::string dir;
  std::string socket;
  std::vector<std::string> args;
};

Node MakeNode(const std::string& name, std::vector<std::string> extra = {}) {
  Node n;
  n.dir = FreshTempDir(name);
  n.socket = ShortTempDir() + "/autotuned.sock";
  n.args = {"--socket=" + n.socket, "--cache_dir=" + n.dir + "/cache",
            "--sim_gpus=4"};
  n.args.insert(n.args.end(), extra.begin(), extra.end());
  return n;
}

bool Started(DaemonProcess& daemon, const Node& n) {
  absl::Status s = daemon.Start(n.args, n.socket, n.dir + "/log");
  INFO(s.ToString());
  CHECK(s.ok());
  return s.ok();
}

std::unique_ptr<Client> Connect(const Node& n) {
  auto c = Client::Connect("unix:" + n.socket, absl::Seconds(10));
  REQUIRE(c.ok());
  return std::move(*c);
}

v1::TuneRequest AllReduce(int64_t bytes, std::vector<std::string> impls) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("integration");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_warmup(2);
  req.mutable_options()->set_iterations(10);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(bytes / 4);
  for (const std::string& impl : impls) p->add_candidates()->set_impl(impl);
  return req;
}

CommandResult Ctl(const Node& n, std::vector<std::string> args) {
  std::vector<std::string> argv = {Runfile("client/cli/autotunectl"),
                                   "--socket=" + n.socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

TEST_CASE("all_reduce 1 MiB, 3 candidates, 4 sim GPUs: ranked, cached, restarted") {
  Node n = MakeNode("ranked");
  DaemonProcess daemon;
  REQUIRE(Started(daemon, n));
  // The socket appears at its path with the configured mode: nobody can
  // connect to it before it has that mode.
  struct stat st;
  REQUIRE(stat(n.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);

  const v1::TuneRequest req = AllReduce(
      1 << 20, {"all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/ring"});
  auto client = Connect(n);
  auto first = client->Tune(req);
  REQUIRE(first.ok());
  REQUIRE(first->results_size() == 1);
  const v1::ProblemResult& r = first->results(0);
  CHECK(r.status() == v1::TUNED);
  REQUIRE(r.ranked_size() == 3);
  for (const v1::CandidateResult& c : r.ranked()) {
    INFO(c.ShortDebugString());
    CHECK(c.ok());
    CHECK(c.iterations() >= 10);  // more when close to the winner (later passes)
    CHECK(c.min_us() > 0);
    CHECK(c.min_us() <= c.median_us());
    CHECK(c.median_us() <= c.max_us());
    CHECK(c.rank_mean_us_size() == 4);
    CHECK(c.busbw_gbps() > 0);
  }
  // The winner first (kept within noise or below the margin although
  // slower by median, never when decisive), then the others by their paired
  // estimate (ranking.h's Estimates, not the raw median: on a loaded machine
  // the two orders differ, as ranking_test shows), each with its ratio to
  // the winner and that ratio's interval.
  if (r.ranked(0).median_us() > r.ranked(1).median_us()) CHECK(r.confidence() != v1::DECISIVE);
  for (int i = 1; i < r.ranked_size(); ++i) {
    INFO(r.ranked(i).ShortDebugString());
    CHECK(r.ranked(i).vs_winner_low() <= r.ranked(i).vs_winner());
    CHECK(r.ranked(i).vs_winner() <= r.ranked(i).vs_winner_high());
    if (r.confidence() == v1::DECISIVE && r.ranked(i).paired() > 0) {
      CHECK(r.ranked(i).vs_winner_low() > 1.0);
    }
  }
  CHECK(r.winner() == r.ranked(0).candidate().impl());

  auto second = client->Tune(req);
  REQUIRE(second.ok());
  CHECK(second->results(0).status() == v1::CACHED);
  CHECK(second->results(0).winner() == r.winner());

  // Restart: the answer survives in the cache directory.
  client.reset();
  CHECK(daemon.Stop(SIGTERM) == 0);
  REQUIRE(Started(daemon, n));
  client = Connect(n);
  auto after_restart = client->Tune(req);
  REQUIRE(after_restart.ok());
  CHECK(after_restart->results(0).status() == v1::CACHED);
  CHECK(after_restart->results(0).winner() == r.winner());

  // A garbage file in the cache does not stop the daemon.
  client.reset();
  CHECK(daemon.Stop(SIGTERM) == 0);
  {
    std::ofstream junk(n.dir + "/cache/" + std::string(32, 'a') + ".entry");
    junk << "this is not a cache entry";
  }
  REQUIRE(Started(daemon, n));
  client = Connect(n);
  auto listed = client->ListCache();
  REQUIRE(listed.ok());
  CHECK(listed->corrupt_files_ignored() == 1);
  CHECK(listed->entries_size() == 1);
  auto still = client->Tune(req);
  REQUIRE(still.ok());
  CHECK(still->results(0).status() == v1::CACHED);
  CHECK_THAT(daemon.Log(), Catch::Contains("aaaaaaaa"));
}

TEST_CASE("a hanging candidate is cut off, a wrong one disqualified, and the daemon serves on") {
  Node n = MakeNode("faults");
  const std::string config = n.dir + "/faults.conf";
  {
    std::ofstream f(config);
    f << "sim {\n"
         "  faults { name: \"all_reduce/hangs\" base: \"all_reduce/ring\" kind: HANG rank: 1 }\n"
         "  faults { name: \"all_reduce/wrong\" base: \"all_reduce/one_shot\" kind: WRONG_RESULT rank: 2 }\n"
         "}\n";
  }
  n.args.push_back("--config=" + config);
  DaemonProcess daemon;
  REQUIRE(Started(daemon, n));
  auto client = Connect(n);

  v1::TuneRequest req = AllReduce(
      64 << 10, {"all_reduce/hangs", "all_reduce/two_shot", "all_reduce/wrong"});
  req.mutable_options()->set_timeout_ms(500);
  const absl::Time start = absl::Now();
  auto got = client->Tune(req);
  const absl::Duration took = absl::Now() - start;
  REQUIRE(got.ok());
  const v1::ProblemResult& r = got->results(0);
  CHECK(took < absl::Seconds(5));  // one timeout plus the abort grace
  CHECK(r.status() == v1::TUNED);
  CHECK(r.winner() == "all_reduce/two_shot");
  REQUIRE(r.ranked_size() == 3);
  CHECK(r.ranked(1).candidate().impl() == "all_reduce/hangs");
  CHECK_FALSE(r.ranked(1).ok());
  CHECK_THAT(r.ranked(1).reason(), Catch::Contains("rank 1: DEADLINE_EXCEEDED"));
  CHECK(r.ranked(2).candidate().impl() == "all_reduce/wrong");
  CHECK_FALSE(r.ranked(2).ok());
  CHECK_THAT(r.ranked(2).reason(), Catch::Contains("rank 2: DATA_LOSS"));

  // The daemon goes on serving, on the same virtual GPUs.
  auto next = client->Tune(AllReduce(4096, {"all_reduce/ring", "all_reduce/one_shot"}));
  REQUIRE(next.ok());
  CHECK(next->results(0).status() == v1::TUNED);
  CHECK(next->results(0).ranked(1).ok());

  // Nothing won: the CLI's exit status says so (3), apart from errors (1).
  for (const bool json : {false, true}) {
    std::vector<std::string> args = {"tune", "--collective=all_reduce", "--bytes=4KiB",
                                     "--world=4", "--candidates=wrong", "--iters=3"};
    if (json) args.insert(args.begin(), "--json");
    CommandResult failed = Ctl(n, args);
    INFO(failed.out << failed.err);
    CHECK(failed.exit_code == 3);
    CHECK_THAT(failed.out, Catch::Contains("FAILED"));
  }
}

TEST_CASE("the CLI tunes, sweeps, lists, shows the node and manages the cache") {
  Node n = MakeNode("cli", {"--metrics_listen=127.0.0.1:0"});
  DaemonProcess daemon;
  REQUIRE(Started(daemon, n));

  CommandResult tune = Ctl(n, {"tune", "--collective=all_reduce", "--bytes=64KiB",
                               "--iters=5"});
  INFO(tune.out << tune.err);
  REQUIRE(tune.exit_code == 0);
  CHECK_THAT(tune.out, Catch::Contains("TUNED") && Catch::Contains("all_reduce/ring") &&
                           Catch::Contains("all_reduce/one_shot"));

  CommandResult json = Ctl(n, {"--json", "tune", "--collective=all_reduce",
                               "--bytes=64KiB", "--iters=5"});
  REQUIRE(json.exit_code == 0);
  CHECK_THAT(json.out, Catch::Contains("\"status\": \"CACHED\""));

  CommandResult sweep = Ctl(n, {"sweep", "--collective=all_gather", "--from=1KiB",
                                "--to=16KiB", "--factor=4", "--iters=3"});
  INFO(sweep.out << sweep.err);
  REQUIRE(sweep.exit_code == 0);
  CHECK_THAT(sweep.out, Catch::Contains("dispatch table"));
  CHECK_THAT(sweep.err, Catch::Contains("[3/3]"));
  CHECK_THAT(sweep.out, Catch::Contains("  algbw  busbw  winner"));

  // The same sweep (cached now) as CSV: sizes in bytes, one row per
  // candidate per size, the winner's bandwidths as plain numbers.
  CommandResult csv = Ctl(n, {"--csv", "sweep", "--collective=all_gather", "--from=1KiB",
                              "--to=16KiB", "--factor=4", "--iters=3"});
  INFO(csv.out << csv.err);
  REQUIRE(csv.exit_code == 0);
  std::vector<std::string> rows = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  REQUIRE(rows.size() > 3);
  CHECK_THAT(rows[0], Catch::StartsWith("bytes,collective,dtype,candidate,rank,won,"));
  std::set<std::string> sizes_seen;
  int winners = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> f = CsvFields(rows[i]);
    REQUIRE(f.size() == 20);
    sizes_seen.insert(f[0]);
    CHECK(f[1] == "all_gather");
    CHECK(f[15] == "CACHED");
    if (f[5] == "1") {
      ++winners;
      double busbw = 0;
      CHECK(absl::SimpleAtod(f[13], &busbw));
      CHECK(busbw > 0);
    }
  }
  CHECK(sizes_seen == std::set<std::string>{"1024", "4096", "16384"});
  CHECK(winners == 3);

  // --version: the daemon's version string, no daemon needed.
  CommandResult version = RunCommand({Runfile("client/cli/autotunectl"), "--version"});
  REQUIRE(version.exit_code == 0);
  REQUIRE_THAT(version.out, Catch::StartsWith("autotunectl ") && Catch::EndsWith("\n"));
  CommandResult info_json = Ctl(n, {"--json", "info"});
  REQUIRE(info_json.exit_code == 0);
  CHECK_THAT(info_json.out,
             Catch::Contains("\"daemon_version\": \"" +
                             version.out.substr(12, version.out.size() - 13) + "\""));

  CommandResult list = Ctl(n, {"list", "--collective=broadcast"});
  REQUIRE(list.exit_code == 0);
  CHECK_THAT(list.out, Catch::Contains("broadcast/binomial_tree"));
  CHECK_THAT(list.out, !Catch::Contains("all_reduce/ring"));

  CommandResult info = Ctl(n, {"info"});
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("sim"));
  // The port the daemon picked, and its figures: two tunes (TUNED, then
  // CACHED) and a sweep of three sizes measured, then again from the cache.
  const std::string key = "\"metrics_address\": \"";
  const size_t at = info_json.out.find(key);
  REQUIRE(at != std::string::npos);
  const size_t from = at + key.size();
  const std::string metrics_address =
      info_json.out.substr(from, info_json.out.find('"', from) - from);
  CHECK_THAT(metrics_address, Catch::StartsWith("127.0.0.1:") && !Catch::EndsWith(":0"));
  CHECK_THAT(info.out,
             Catch::Contains("http://" + metrics_address + "/metrics\n") &&
                 Catch::Contains(" in " + n.dir + "/cache, epoch ") &&
                 Catch::Contains("tuned 4, cached 4, fallback 0, failed 0; 0 calls refused"));

  CommandResult cached = Ctl(n, {"cache", "list"});
  REQUIRE(cached.exit_code == 0);
  CHECK_THAT(cached.out, Catch::Contains("all_gather"));
  CommandResult cleared = Ctl(n, {"cache", "clear"});
  REQUIRE(cleared.exit_code == 0);
  // 1 tune + 3 all_gather sizes.
  CHECK_THAT(cleared.out, Catch::Contains("removed 4 cache entries"));

  CommandResult bad = Ctl(n, {"tune", "--collective=all_reduce", "--bytes=1MiB",
                              "--candidates=all_reduce/nope"});
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.err, Catch::Contains("INVALID_ARGUMENT: problems[0].candidates[0].impl: "
                                      "unknown implementation"));
  CommandResult too_big = Ctl(n, {"tune", "--collective=all_reduce", "--bytes=1MiB",
                                  "--world=16", "--candidates=all_reduce/ring"});
  CHECK(too_big.exit_code == 1);
  CHECK_THAT(too_big.err, Catch::Contains("group.world_size: 16 ranks"));
  // Without candidates: the node's GPUs, not each implementation's ranks.
  CommandResult too_many = Ctl(n, {"tune", "--collective=all_gather", "--bytes=1MiB",
                                   "--world=8"});
  CHECK(too_many.exit_code == 1);
  CHECK_THAT(too_many.err, Catch::Contains("INVALID_ARGUMENT: --world: 8 ranks, but this "
                                           "node's sim backend has 4 GPUs"));
}

TEST_CASE("a sweep past the memory cap measures the sizes that fit and reports the others") {
  Node n = MakeNode("memcap");
  const std::string config = n.dir + "/memcap.conf";
  {
    std::ofstream f(config);
    // 1 MiB for the sim's four ranks together: an all_reduce of float32
    // needs 8 times its bytes (input and output of 4 ranks), so 64 KiB
    // fits, 256 KiB fits no candidate and 1 MiB not even one rank's buffers.
    f << "limits { max_buffer_bytes: 1048576 }\n";
  }
  n.args.push_back("--config=" + config);
  DaemonProcess daemon;
  REQUIRE(Started(daemon, n));

  CommandResult info = Ctl(n, {"info"});
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("1 MiB (all ranks together, host memory)"));

  const std::vector<std::string> sweep_args = {"sweep", "--collective=all_reduce",
                                               "--from=1KiB", "--to=1MiB", "--factor=4",
                                               "--iters=3"};
  CommandResult sweep = Ctl(n, sweep_args);
  INFO(sweep.out << sweep.err);
  CHECK(sweep.exit_code == 3);  // sizes not tuned
  CHECK_THAT(sweep.err, Catch::Contains("[6/6] 1 MiB: SKIPPED (skipped: needs 2097152 bytes "
                                        "per rank, over the memory cap of 1048576 bytes"));
  CHECK_THAT(sweep.err, Catch::Contains("[5/6] 256 KiB: SKIPPED (skipped: no candidate fits "
                                        "the memory cap of 1048576 bytes"));
  CHECK_THAT(sweep.err, Catch::Contains("[4/6] 64 KiB: winner"));
  CHECK_THAT(sweep.out, Catch::Contains("dispatch table") &&
                            Catch::Contains("256 KiB skipped: no candidate fits"));

  std::vector<std::string> csv_args = sweep_args;
  csv_args.insert(csv_args.begin(), "--csv");
  CommandResult csv = Ctl(n, csv_args);
  INFO(csv.out << csv.err);
  CHECK(csv.exit_code == 3);
  std::map<std::string, std::set<std::string>> statuses;  // by size
  const std::vector<std::string> rows = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> f = CsvFields(rows[i]);
    REQUIRE(f.size() >= 16);
    statuses[f[0]].insert(f[15]);
  }
  using Set = std::set<std::string>;
  CHECK(statuses == std::map<std::string, Set>{{"1024", Set{"CACHED"}},
                                               {"4096", Set{"CACHED"}},
                                               {"16384", Set{"CACHED"}},
                                               {"65536", Set{"CACHED"}},
                                               {"262144", Set{"SKIPPED"}},
                                               {"1048576", Set{"SKIPPED"}}});

  std::vector<std::string> json_args = sweep_args;
  json_args.insert(json_args.begin(), "--json");
  CommandResult json = Ctl(n, json_args);
  CHECK(json.exit_code == 3);
  CHECK_THAT(json.out, Catch::Contains("\"skipped\":true"));  // one update a line

  // Tune of a size that does not fit is refused, naming the count.
  CommandResult tune = Ctl(n, {"tune", "--collective=all_reduce", "--bytes=256KiB"});
  CHECK(tune.exit_code == 1);
  CHECK_THAT(tune.err, Catch::Contains("INVALID_ARGUMENT: problems[0].count: no candidate fits "
                                       "the memory cap of 1048576 bytes per GPU"));
}

TEST_CASE("health checking and reflection answer on the socket") {
  Node n = MakeNode("health");
  DaemonProcess daemon;
  REQUIRE(Started(daemon, n));
  auto channel = grpc::CreateChannel("unix:" + n.socket,
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);

  // grpc.health.v1.HealthCheckRequest{service: ""} is the empty message; the
  // answer HealthCheckResponse{status: SERVING} is the bytes 08 01.
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::Status s = grpc::Status::OK;
  bool done = false;
  absl::Mutex mu;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status status) {
                   absl::MutexLock lock(&mu);
                   s = status;
                   done = true;
                 });
  {
    absl::MutexLock lock(&mu);
    REQUIRE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10)));
  }
  REQUIRE(s.ok());
  std::vector<grpc::Slice> slices;
  REQUIRE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& sl : slices) bytes += std::string(sl.begin(), sl.end());
  CHECK(bytes == std::string("\x08\x01", 2));

  // ServerReflectionRequest{list_services: ""} is field 7, empty: 3a 00.
  grpc::ClientContext rctx;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&rctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE(cq.Next(&tag, &ok));
  grpc::Slice list_services(std::string("\x3a\x00", 2));
  grpc::ByteBuffer rreq(&list_services, 1);
  call->Write(rreq, reinterpret_cast<void*>(2));
  REQUIRE(cq.Next(&tag, &ok));
  grpc::ByteBuffer rresp;
  call->Read(&rresp, reinterpret_cast<void*>(3));
  REQUIRE(cq.Next(&tag, &ok));
  REQUIRE(ok);
  slices.clear();
  REQUIRE(rresp.Dump(&slices).ok());
  bytes.clear();
  for (const auto& sl : slices) bytes += std::string(sl.begin(), sl.end());
  CHECK_THAT(bytes, Catch::Contains("autotuned.v1.Autotune"));
  rctx.TryCancel();
  call->Finish(&s, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_CASE("a malformed configuration file is refused with its line") {
  const std::string dir = FreshTempDir("badconfig");
  const std::string config = dir + "/bad.conf";
  {
    std::ofstream f(config);
    f << "# comment\nsim {\n  gpus: four\n}\n";
  }
  DaemonProcess daemon;
  CHECK(daemon.RunToExit({"--config=" + config, "--socket=" + ShortTempDir() + "/s.sock"},
                         dir + "/log") == 2);
  CHECK_THAT(daemon.Log(), Catch::Contains("bad.conf:3:"));

  {
    std::ofstream f(config);
    f << "sim { gpus: 0 }\n";
  }
  DaemonProcess again;
  CHECK(again.RunToExit({"--config=" + config, "--socket=" + ShortTempDir() + "/s.sock"},
                        dir + "/log2") == 2);
  CHECK_THAT(again.Log(), Catch::Contains("sim.gpus"));
}

}  // namespace
}  // namespace autotuned
