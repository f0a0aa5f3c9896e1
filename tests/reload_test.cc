// The configuration file and SIGHUP against a hostile operator's mistakes, on
// the daemon binary: files replaced by a FIFO, a directory, nothing, a loop
// of links or 100 MB between start and reload; values at 0, negative, huge,
// with control characters; storms of SIGHUPs while rounds run; limits
// lowered mid-round (the peer port's limit included); and two daemons
// started on one cache directory.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/ops/lifecycle/notify_listener.h"
#include "proto/autotuned.grpc.pb.h"
#include "proto/peer.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/round_answer.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::HasLine;
using testing::NotifyListener;
using Node = testing::DaemonNode;

std::string ConfigPath(const Node& n) { return n.dir + "/autotuned.conf"; }

void WriteConfig(const Node& n, const std::string& text) {
  const std::string path = ConfigPath(n);
  ::unlink(path.c_str());
  ::rmdir(path.c_str());
  std::ofstream(path) << text;
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
  return v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + n.socket, grpc::InsecureChannelCredentials()));
}

grpc::Status Tune(const Node& n, const v1::TuneRequest& req, v1::TuneResponse* resp = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  v1::TuneResponse ignored;
  return Stub(n)->Tune(&ctx, req, resp != nullptr ? resp : &ignored);
}

v1::NodeMetrics Metrics(const Node& n) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  v1::NodeInfoResponse info;
  return Stub(n)->NodeInfo(&ctx, {}, &info).ok() ? info.metrics() : v1::NodeMetrics();
}

// A whole-group all_reduce of `count` floats over `impls` with `iterations`.
v1::TuneRequest AllReduce(int64_t count, int iterations,
                          const std::vector<std::string>& impls = {"all_reduce/ring"}) {
  v1::TuneRequest req = testing::WholeGroupAllReduce(4, count);
  req.mutable_group()->set_id("reload");
  req.mutable_options()->set_iterations(iterations);
  v1::Problem* p = req.mutable_problems(0);
  p->clear_candidates();
  for (const std::string& impl : impls) p->add_candidates()->set_impl(impl);
  return req;
}

// Sends SIGHUP and returns the STATUS of the READY=1 that ends the reload.
std::string Reload(DaemonProcess& daemon, NotifyListener& notify) {
  REQUIRE(kill(daemon.pid(), SIGHUP) == 0);
  REQUIRE_FALSE(notify.WaitFor("RELOADING=1", absl::Seconds(20)).empty());
  const std::vector<std::string> ready = notify.WaitFor("READY=1", absl::Seconds(20));
  REQUIRE_FALSE(ready.empty());
  return ready.back();
}

bool Printable(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f;
  });
}

// The log's lines holding `what`.
std::vector<std::string> LinesWith(const std::string& log, const std::string& what) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.find(what) != absl::string_view::npos) out.emplace_back(line);
  }
  return out;
}

struct BadFile {
  std::string name;
  std::string said;  // in the STATUS of the failed reload
  std::function<void(const Node&)> make;
};

TEST_CASE("a reload that finds a bad file keeps the running settings, says why escaped, and "
          "the daemon still stops at once") {
  Node n = testing::MakeDaemonNode("bad-files", "limits { max_iterations: 50 }\n");
  std::unique_ptr<NotifyListener> notify = NotifyListener::MustCreate();
  DaemonProcess daemon;
  daemon.SetEnv({"NOTIFY_SOCKET=" + notify->address()});
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  REQUIRE_FALSE(notify->WaitFor("READY=1", absl::Seconds(20)).empty());
  const v1::TuneRequest sixty = AllReduce(256, 60);
  auto still_fifty = [&] {
    const grpc::Status s = Tune(n, sixty);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(), Catch::Contains("limits.max_iterations"));
  };
  still_fifty();

  const std::string path = ConfigPath(n);
  std::vector<BadFile> bad = {
      {"a FIFO nobody writes", "FIFO",
       [&](const Node&) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }},
      {"a directory", "directory",
       [&](const Node&) { REQUIRE(::mkdir(path.c_str(), 0700) == 0); }},
      {"no file", "cannot open config file", [](const Node&) {}},
      {"a loop of symbolic links", "cannot open config file",
       [&](const Node&) { REQUIRE(::symlink(path.c_str(), path.c_str()) == 0); }},
      {"100 MB", "over the limit",
       [&](const Node& node) {
         WriteConfig(node, "limits { max_iterations: 200 }\n");
         REQUIRE(::truncate(path.c_str(), off_t{100} << 20) == 0);
       }},
      {"control characters", "log_level: must not hold control characters, got \"in\\nfo\\033",
       [](const Node& node) { WriteConfig(node, "log_level: \"in\\nfo\\033[2J\"\n"); }},
      {"an unknown field", "has no field named",
       [](const Node& node) { WriteConfig(node, "limits { max_iteration: 200 }\n"); }},
      {"a zero limit", "limits.max_iterations: must be > 0",
       [](const Node& node) { WriteConfig(node, "limits { max_iterations: 0 }\n"); }},
      {"a negative limit", "limits.max_concurrent_rounds: must be > 0",
       [](const Node& node) {
         WriteConfig(node, "limits { max_iterations: 200 max_concurrent_rounds: -1 }\n");
       }},
      {"a huge duration", "drain_timeout_ms: must be between",
       [](const Node& node) {
         WriteConfig(node, "limits { max_iterations: 200 }\n"
                           "drain_timeout_ms: 9223372036854775807\n");
       }},
      {"a number its field cannot hold", "autotuned.conf:1:",
       [](const Node& node) { WriteConfig(node, "limits { max_iterations: 99999999999 }\n"); }},
  };
  if (geteuid() != 0) {  // root reads any file
    bad.push_back({"an unreadable file", "Permission denied", [&](const Node& node) {
                     WriteConfig(node, "limits { max_iterations: 200 }\n");
                     REQUIRE(::chmod(path.c_str(), 0) == 0);
                   }});
  }
  for (const BadFile& b : bad) {
    INFO(b.name);
    ::unlink(path.c_str());
    ::rmdir(path.c_str());
    b.make(n);
    const std::string status = Reload(daemon, *notify);
    CHECK_THAT(status, Catch::Contains("reload failed: ") && Catch::Contains(b.said));
    CHECK(std::count(status.begin(), status.end(), '\n') == 1);  // READY=1, STATUS=
    still_fifty();
  }
  const std::string log = daemon.Log();
  const std::vector<std::string> failed = LinesWith(log, "reload failed");
  CHECK(failed.size() == bad.size());
  for (const std::string& line : failed) {
    INFO(line);
    CHECK(Printable(line));
    CHECK(line.size() < 1024);
  }
  CHECK(LinesWith(log, "[2J").size() == 1);  // the escaped one, no second line made of it

  // A good file applies at once, a bad one next keeps it.
  WriteConfig(n, "limits { max_iterations: 200 }\n");
  CHECK_THAT(Reload(daemon, *notify), Catch::Contains("; reloaded"));
  CHECK(Tune(n, sixty).ok());
  ::unlink(path.c_str());
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  CHECK_THAT(Reload(daemon, *notify), Catch::Contains("FIFO"));
  CHECK(Tune(n, sixty).ok());
  const absl::Time stop = absl::Now();
  CHECK(daemon.Stop(SIGTERM) == 0);
  CHECK(absl::Now() - stop < absl::Seconds(10));
}

TEST_CASE("hundreds of SIGHUPs a second while rounds run: every round answered, a few log "
          "lines, and SIGTERM stops the daemon during the storm") {
  const std::string slow =
      "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" "
      "kind: SLOW_RANK rank: 1 delay_us: 2000 } }\n";
  Node n = testing::MakeDaemonNode("storm", slow + "limits { max_iterations: 100 }\n");
  DaemonProcess daemon;
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  const std::vector<std::string> files = {
      slow + "limits { max_iterations: 100 }\n", slow + "limits { max_iterations: 120 }\n",
      slow + "limits { max_iterations: 0 }\n", slow + "log_level: \"de\\nbug\"\n"};

  std::atomic<bool> storm{true};
  std::atomic<int> sent{0};
  std::thread stormer([&] {
    const absl::Time cap = absl::Now() + absl::Seconds(120);
    for (int i = 0; storm && absl::Now() < cap; ++i) {
      if (i % 25 == 0) WriteConfig(n, files[(i / 25) % files.size()]);
      if (kill(daemon.pid(), SIGHUP) != 0) break;
      ++sent;
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  constexpr int kClients = 3;
  constexpr int kRounds = 4;
  std::vector<std::thread> clients;
  std::vector<grpc::Status> status(kClients * kRounds);
  std::vector<v1::TuneResponse> answers(kClients * kRounds);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        const int i = c * kRounds + r;
        status[i] = Tune(n, AllReduce(1024 * (i + 1), 20, {"all_reduce/slow", "all_reduce/ring"}),
                         &answers[i]);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < status.size(); ++i) {
    INFO("round " << i << ": " << status[i].error_message());
    REQUIRE(status[i].ok());
    CHECK(answers[i].results(0).status() == v1::TUNED);
  }
  while (sent < 500) absl::SleepFor(absl::Milliseconds(10));
  // SIGTERM in the storm: the daemon stops (drained) all the same.
  REQUIRE(kill(daemon.pid(), SIGTERM) == 0);
  const int exit_status = daemon.Wait(absl::Seconds(20));
  storm = false;
  stormer.join();
  CHECK(exit_status == 0);
  const std::string log = daemon.Log();
  const size_t reload_lines = LinesWith(log, "reload").size();
  INFO(sent << " SIGHUPs, " << reload_lines << " reload lines");
  CHECK(reload_lines > 0);
  CHECK(reload_lines * 10 < static_cast<size_t>(sent.load()));
  for (const std::string& line : LinesWith(log, "reload")) CHECK(Printable(line));
  CHECK_THAT(log, Catch::Contains("stopped") && !Catch::Contains("drain timed out"));
}

TEST_CASE("limits lowered mid-round: the round in progress keeps its settings, new calls get "
          "the new ones") {
  Node n = testing::MakeDaemonNode(
      "mid-round",
      "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" "
      "kind: SLOW_RANK rank: 1 delay_us: 300000 } }\n"
      "limits { max_iterations: 50 }\n");
  std::unique_ptr<NotifyListener> notify = NotifyListener::MustCreate();
  DaemonProcess daemon;
  daemon.SetEnv({"NOTIFY_SOCKET=" + notify->address()});
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  REQUIRE_FALSE(notify->WaitFor("READY=1", absl::Seconds(20)).empty());

  const v1::TuneRequest five = AllReduce(1024, 5, {"all_reduce/slow", "all_reduce/ring"});
  grpc::Status first_status;
  v1::TuneResponse first;
  std::thread running([&] { first_status = Tune(n, five, &first); });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Metrics(n).rounds_in_flight() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(Metrics(n).rounds_in_flight() == 1);
  WriteConfig(n,
              "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" "
              "kind: SLOW_RANK rank: 1 delay_us: 300000 } }\n"
              "limits { max_iterations: 4 max_concurrent_rounds: 1 }\n"
              "defaults { iterations: 3 }\n");
  CHECK_THAT(Reload(daemon, *notify), Catch::Contains("; reloaded"));
  // A new call over the new limit is refused; a second round beside the one
  // running (seconds long) is refused by the new max_concurrent_rounds.
  const grpc::Status over = Tune(n, five);
  CHECK(over.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(over.error_message(), Catch::Contains("limits.max_iterations"));
  CHECK(Metrics(n).rounds_in_flight() == 1);
  const grpc::Status busy = Tune(n, AllReduce(2048, 3, {"all_reduce/slow", "all_reduce/ring"}));
  CHECK(busy.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(busy.error_message(), Catch::Contains("limits.max_concurrent_rounds = 1"));
  running.join();
  INFO(first_status.error_message());
  REQUIRE(first_status.ok());  // its 5 iterations, over the new limit of 4
  CHECK(first.results(0).status() == v1::TUNED);
  CHECK_THAT(daemon.Log(), Catch::Contains("limits.max_iterations 50 -> 4") &&
                               Catch::Contains("limits.max_concurrent_rounds 64 -> 1"));
  CHECK(daemon.Stop(SIGTERM) == 0);
}

constexpr char kToken[] = "peer-token-for-the-reload-test";

// Rank 1 of a 2-rank group led by `leader` (rank 0 on it, never asking), as
// the follower `follower` would forward it: the leader holds it for the
// pre-sync window, then falls back.
v1::ReadyRequest HeldReady(const std::string& group, const std::string& leader,
                           const std::string& follower) {
  v1::ReadyRequest ready;
  ready.mutable_round()->set_group_id(group);
  ready.set_from_daemon(follower);
  ready.add_ranks(1);
  v1::TuneRequest* req = ready.mutable_request();
  v1::Group* g = req->mutable_group();
  g->set_id(group);
  g->set_world_size(2);
  g->set_rank(1);
  for (int r = 0; r < 2; ++r) {
    v1::Member* m = g->add_members();
    m->set_rank(r);
    m->set_local_gpu(0);
    m->set_daemon(r == 0 ? leader : follower);
  }
  req->mutable_options()->set_warmup(1);
  req->mutable_options()->set_iterations(3);
  req->mutable_options()->set_presync_window_us(3000000);
  v1::Problem* p = req->add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(1024);
  p->add_candidates()->set_impl("all_reduce/ring");
  return ready;
}

TEST_CASE("limits.max_waiting_ranks bounds the peer port's calls and follows a reload") {
  const std::string leader = absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort());
  const std::string follower = absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort());
  auto config = [&](int max_waiting_ranks) {
    return absl::StrCat("peer_token: \"", kToken, "\"\npeer_advertise: \"", leader,
                        "\"\npeers: \"", follower,
                        "\"\nrendezvous { measure_after_fallback: false }\n"
                        "limits { max_waiting_ranks: ",
                        max_waiting_ranks, " }\n");
  };
  Node n = testing::MakeDaemonNode("peer-limit", config(1), {"--peer_listen=" + leader});
  std::unique_ptr<NotifyListener> notify = NotifyListener::MustCreate();
  DaemonProcess daemon;
  daemon.SetEnv({"NOTIFY_SOCKET=" + notify->address()});
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  REQUIRE_FALSE(notify->WaitFor("READY=1", absl::Seconds(20)).empty());
  auto stub = v1::Peer::NewStub(grpc::CreateChannel(leader, grpc::InsecureChannelCredentials()));
  auto ready = [&](const std::string& group, v1::Decision* decision) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(In(30));
    return stub->Ready(&ctx, HeldReady(group, leader, follower), decision);
  };
  // Holds `count` Ready calls; returns once the leader waits on all of them.
  struct Held {
    std::vector<std::thread> threads;
    std::vector<grpc::Status> status;
    std::vector<v1::Decision> decisions;
  };
  auto hold = [&](int count, const std::string& prefix) {
    auto held = std::make_unique<Held>();
    held->status.resize(count);
    held->decisions.resize(count);
    for (int i = 0; i < count; ++i) {
      held->threads.emplace_back([&ready, i, prefix, h = held.get()] {
        h->status[i] = ready(absl::StrCat(prefix, i), &h->decisions[i]);
      });
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (Metrics(n).rounds_in_flight() < count && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    REQUIRE(Metrics(n).rounds_in_flight() == count);
    return held;
  };
  auto release = [](std::unique_ptr<Held> held) {
    for (std::thread& t : held->threads) t.join();
    for (size_t i = 0; i < held->status.size(); ++i) {
      INFO(held->status[i].error_message() << " " << held->decisions[i].error_message());
      CHECK(held->status[i].ok());
      CHECK(held->decisions[i].verdict() == v1::ANSWERED);
      CHECK(held->decisions[i].response().results(0).status() == v1::FALLBACK);
    }
  };

  std::unique_ptr<Held> one = hold(1, "first-");
  v1::Decision refused;
  grpc::Status s = ready("refused-1", &refused);
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(s.error_message(), Catch::Contains("1 peer calls are being served"));
  release(std::move(one));

  WriteConfig(n, config(3));
  CHECK_THAT(Reload(daemon, *notify), Catch::Contains("; reloaded"));
  std::unique_ptr<Held> three = hold(3, "second-");
  s = ready("refused-3", &refused);
  CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(s.error_message(), Catch::Contains("3 peer calls are being served"));
  release(std::move(three));
  CHECK(daemon.Stop(SIGTERM) == 0);
}

TEST_CASE("two daemons on one cache directory: the second refuses to start, naming the "
          "directory and the first's pid, and touches none of its files") {
  Node a = testing::MakeDaemonNode("shared-cache", "");
  const std::string cache = a.dir + "/cache";
  DaemonProcess first;
  REQUIRE(first.Start(a.args, a.socket, a.dir + "/log-a").ok());
  v1::TuneResponse tuned;
  REQUIRE(Tune(a, AllReduce(4096, 3), &tuned).ok());
  REQUIRE(tuned.results(0).status() == v1::TUNED);
  // The first daemon's epoch file as it is being written.
  const std::string writing = absl::StrCat(cache, "/.tmp-epoch-", first.pid());
  std::ofstream(writing) << "being written";

  Node b = a;
  b.socket = testing::ShortTempDir() + "/b.sock";
  b.args = {"--config=" + ConfigPath(a), "--socket=" + b.socket, "--cache_dir=" + cache,
            "--sim_gpus=4"};
  DaemonProcess second;
  CHECK(second.RunToExit(b.args, a.dir + "/log-b") == 1);
  const std::string refused = second.Log();
  CHECK_THAT(refused, Catch::Contains(cache) &&
                          Catch::Contains(absl::StrCat("pid ", first.pid())) &&
                          Catch::Contains("one daemon at a time"));
  struct stat st;
  CHECK(::stat(writing.c_str(), &st) == 0);
  v1::TuneResponse cached;
  REQUIRE(Tune(a, AllReduce(4096, 3), &cached).ok());
  CHECK(cached.results(0).status() == v1::CACHED);
  CHECK(first.Stop(SIGTERM) == 0);

  // Once the first is gone the second starts, with its entries; the epoch
  // file its dead writer left is removed.
  REQUIRE(second.Start(b.args, b.socket, a.dir + "/log-b2").ok());
  REQUIRE(Tune(b, AllReduce(4096, 3), &cached).ok());
  CHECK(cached.results(0).status() == v1::CACHED);
  CHECK(::stat(writing.c_str(), &st) != 0);
  CHECK(second.Stop(SIGTERM) == 0);
}

}  // namespace
}  // namespace autotuned
