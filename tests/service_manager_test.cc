// The daemon binary started as the systemd unit starts it: NOTIFY_SOCKET and
// WATCHDOG_USEC pointing at a datagram socket this test owns. Readiness, the
// watchdog, the drain on SIGTERM (every client of the rounds in progress
// answered, new rounds refused, exit 0, the cache kept for the restart) and
// the reload on SIGHUP.
#include <signal.h>

#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "daemon/ops/lifecycle/notify_listener.h"
#include "proto/autotuned.grpc.pb.h"
#include "tests/daemon_process.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::HasLine;
using testing::NotifyListener;
using testing::ShortTempDir;

struct Node {
  std::string dir;
  std::string socket;
  std::string config;
  std::vector<std::string> args;
};

Node MakeNode(const std::string& name, const std::string& config_text) {
  Node n;
  n.dir = FreshTempDir(name);
  n.socket = ShortTempDir() + "/autotuned.sock";
  n.config = n.dir + "/autotuned.conf";
  std::ofstream(n.config) << config_text;
  n.args = {"--config=" + n.config, "--socket=" + n.socket,
            "--cache_dir=" + n.dir + "/cache", "--sim_gpus=4"};
  return n;
}

std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
  return v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + n.socket, grpc::InsecureChannelCredentials()));
}

grpc::Status Tune(const Node& n, const v1::TuneRequest& req, v1::TuneResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return Stub(n)->Tune(&ctx, req, resp);
}

v1::NodeMetrics Metrics(const Node& n) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::NodeInfoResponse info;
  grpc::Status s = Stub(n)->NodeInfo(&ctx, {}, &info);
  return s.ok() ? info.metrics() : v1::NodeMetrics();
}

v1::TuneRequest AllReduce(int64_t count, std::vector<std::string> impls,
                          int iterations = 3) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("lifecycle");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(iterations);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  for (const std::string& impl : impls) p->add_candidates()->set_impl(impl);
  return req;
}

TEST_CASE("started as the unit: READY, watchdog, SIGTERM mid-round answers every client, exit 0") {
  // all_reduce/slow sleeps 100 ms per call on rank 1: a round of it (verify,
  // 1 warmup, 5 timed) lasts about 0.7 s, long enough to send SIGTERM into.
  Node n = MakeNode("drain",
                    "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" "
                    "kind: SLOW_RANK rank: 1 delay_us: 100000 } }\n"
                    "drain_timeout_ms: 60000\n");
  std::unique_ptr<NotifyListener> notify = NotifyListener::MustCreate();
  DaemonProcess daemon;
  daemon.SetEnv({"NOTIFY_SOCKET=" + notify->address(), "WATCHDOG_USEC=200000"});
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  const std::vector<std::string> ready = notify->WaitFor("READY=1", absl::Seconds(20));
  REQUIRE_FALSE(ready.empty());
  CHECK_THAT(ready.back(), Catch::Contains("STATUS=serving on " + n.socket));
  CHECK_FALSE(notify->WaitFor("WATCHDOG=1", absl::Seconds(20)).empty());

  // Three clients, three rounds: one measuring, two queued for the devices.
  constexpr int kClients = 3;
  std::vector<grpc::Status> status(kClients);
  std::vector<v1::TuneResponse> answers(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      status[c] = Tune(n, AllReduce(1024 * (c + 1), {"all_reduce/slow", "all_reduce/ring"}, 5),
                       &answers[c]);
    });
  }
  // Every request admitted and some round still running (a busy machine may
  // have finished the first before the last arrived).
  auto admitted = [&] {
    const v1::NodeMetrics m = Metrics(n);
    return m.rounds_in_flight() > 0 && m.rounds_in_flight() + m.results_tuned() == kClients;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!admitted() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  REQUIRE(admitted());

  REQUIRE(kill(daemon.pid(), SIGTERM) == 0);
  REQUIRE_FALSE(notify->WaitFor("STOPPING=1", absl::Seconds(20)).empty());
  // Draining: a new round is refused, the daemon still answers.
  v1::TuneResponse refused;
  grpc::Status late = Tune(n, AllReduce(64, {"all_reduce/ring"}), &refused);
  CHECK(late.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(late.error_message(), Catch::StartsWith("draining: "));

  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    INFO("client " << c << ": " << status[c].error_message());
    REQUIRE(status[c].ok());
    REQUIRE(answers[c].results_size() == 1);
    CHECK(answers[c].results(0).status() == v1::TUNED);
    CHECK(answers[c].results(0).winner() == "all_reduce/ring");
  }
  CHECK(daemon.Wait(absl::Seconds(30)) == 0);
  CHECK_THAT(daemon.Log(), Catch::Contains("draining") && Catch::Contains("stopped"));
  CHECK_THAT(daemon.Log(), !Catch::Contains("drain timed out"));

  // A restart answers the drained rounds from the cache.
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log2").ok());
  v1::TuneResponse again;
  REQUIRE(Tune(n, AllReduce(1024, {"all_reduce/slow", "all_reduce/ring"}, 5), &again).ok());
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(daemon.Stop(SIGTERM) == 0);
}

TEST_CASE("SIGHUP applies live settings, names those needing a restart, survives a bad file") {
  Node n = MakeNode("reload", "limits { max_iterations: 50 }\n");
  std::unique_ptr<NotifyListener> notify = NotifyListener::MustCreate();
  DaemonProcess daemon;
  daemon.SetEnv({"NOTIFY_SOCKET=" + notify->address()});
  REQUIRE(daemon.Start(n.args, n.socket, n.dir + "/log").ok());
  REQUIRE_FALSE(notify->WaitFor("READY=1", absl::Seconds(20)).empty());

  const v1::TuneRequest hundred = AllReduce(256, {"all_reduce/ring"}, 100);
  v1::TuneResponse resp;
  grpc::Status s = Tune(n, hundred, &resp);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::Contains("limits.max_iterations"));

  std::ofstream(n.config) << "limits { max_iterations: 200 }\nsim { gpus: 2 }\n"
                             "log_level: \"debug\"\ndrain_timeout_ms: 1000\n";
  REQUIRE(kill(daemon.pid(), SIGHUP) == 0);
  REQUIRE_FALSE(notify->WaitFor("RELOADING=1", absl::Seconds(20)).empty());
  const std::vector<std::string> reloaded = notify->WaitFor("READY=1", absl::Seconds(20));
  REQUIRE_FALSE(reloaded.empty());
  CHECK_THAT(reloaded.back(), Catch::Contains("; reloaded"));
  CHECK(Tune(n, hundred, &resp).ok());
  CHECK_THAT(daemon.Log(),
             Catch::Contains("applied live: limits.max_iterations 50 -> 200, "
                             "log_level \"info\" -> \"debug\"") &&
                 Catch::Contains("need a restart (running values kept): "
                                 "drain_timeout_ms 60000 -> 1000"));
  // Flags still win over the file on a reload: --sim_gpus=4 hides sim.gpus.
  CHECK_THAT(daemon.Log(), !Catch::Contains("sim.gpus"));
  grpc::ClientContext ctx;
  v1::NodeInfoResponse info;
  REQUIRE(Stub(n)->NodeInfo(&ctx, {}, &info).ok());
  CHECK(info.gpus_size() == 4);

  std::ofstream(n.config) << "limits { max_iterations: oops }\n";
  REQUIRE(kill(daemon.pid(), SIGHUP) == 0);
  REQUIRE_FALSE(notify->WaitFor("RELOADING=1", absl::Seconds(20)).empty());
  const std::vector<std::string> failed = notify->WaitFor("READY=1", absl::Seconds(20));
  REQUIRE_FALSE(failed.empty());
  CHECK_THAT(failed.back(), Catch::Contains("reload failed: ") &&
                                Catch::Contains("autotuned.conf:1:"));
  CHECK(Tune(n, hundred, &resp).ok());  // the running settings stay
  CHECK(daemon.Stop(SIGTERM) == 0);
}

}  // namespace
}  // namespace autotuned
