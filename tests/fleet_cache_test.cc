// The fleet cache end to end: real daemons (sim backend) sharing one real
// redis-server (started here on a Unix socket in a temporary directory):
// what one daemon measured answered CACHED by another, not by a daemon of
// another fingerprint; Redis killed and back; a corrupt value; a wrong
// password; and a group over daemons that see different fleet entries,
// whose ranks all get the leader's answer (docs/protocol.md, "The fleet
// cache").
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/state/fleetcache/redis_server_testing.h"
#include "proto/autotuned.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/http_get.h"
#include "tests/round_answer.h"

namespace autotuned {
namespace {

using fleetcache::RedisServer;
using testing::DaemonNode;
using testing::DaemonProcess;
using testing::MakeDaemonNode;

constexpr char kHit[] = "autotuned_fleet_cache_lookups_total{result=\"hit\"}";
constexpr char kMiss[] = "autotuned_fleet_cache_lookups_total{result=\"miss\"}";
constexpr char kCorrupt[] = "autotuned_fleet_cache_lookups_total{result=\"corrupt\"}";
constexpr char kError[] = "autotuned_fleet_cache_lookups_total{result=\"error\"}";
constexpr char kPublished[] = "autotuned_fleet_cache_publishes_total{result=\"ok\"}";
constexpr char kPublishErrors[] = "autotuned_fleet_cache_publishes_total{result=\"error\"}";
constexpr char kOutages[] = "autotuned_fleet_cache_outages_total";
constexpr char kOutage[] = "autotuned_fleet_cache_outage";

// The fleet_cache block of a daemon's configuration: call bounds that a
// loaded machine does not overrun, a short backoff.
std::string FleetConfig(const std::string& redis, const std::string& extra = "") {
  return absl::StrCat("fleet_cache {\n  redis: \"", redis,
                      "\"\n  connect_timeout_ms: 5000\n  command_timeout_ms: 5000\n"
                      "  max_backoff_ms: 1000\n",
                      extra, "}\n");
}

struct Daemon {
  DaemonNode node;
  DaemonProcess process;

  Daemon(const std::string& name, const std::string& config,
         std::vector<std::string> extra = {}) {
    extra.push_back("--metrics_listen=127.0.0.1:0");
    node = MakeDaemonNode(name, config, std::move(extra));
  }
  void Start() {
    const absl::Status s = process.Start(node.args, node.socket, node.dir + "/log");
    INFO(s.ToString() << "\n" << process.Log());
    REQUIRE(s.ok());
  }
  std::unique_ptr<v1::Autotune::Stub> Stub() const {
    return v1::Autotune::NewStub(
        grpc::CreateChannel("unix:" + node.socket, grpc::InsecureChannelCredentials()));
  }
  v1::TuneResponse Tune(const v1::TuneRequest& req) const {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::TuneResponse resp;
    const grpc::Status s = Stub()->Tune(&ctx, req, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
    REQUIRE(resp.results_size() == req.problems_size());
    return resp;
  }
  std::map<std::string, double> Metrics() const {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::NodeInfoResponse info;
    REQUIRE(Stub()->NodeInfo(&ctx, {}, &info).ok());
    return testing::Samples(testing::HttpGet(info.metrics_address(), "/metrics"));
  }
};

v1::TuneRequest AllReduce(int64_t count) { return testing::WholeGroupAllReduce(4, count); }

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("a second daemon answers CACHED from the fleet what the first measured; another "
          "fingerprint does not") {
  RedisServer redis;
  REQUIRE(redis.Start().ok());
  Daemon a("fleet-a", FleetConfig(redis.address()));
  Daemon b("fleet-b", FleetConfig(redis.address()));
  Daemon other("fleet-other", FleetConfig(redis.address()), {"--sim_gpus=8"});
  a.Start();
  b.Start();
  other.Start();

  const v1::TuneResponse measured = a.Tune(AllReduce(1024));
  REQUIRE(measured.results(0).status() == v1::TUNED);
  CHECK(a.Metrics()[kPublished] == 1);

  const v1::TuneResponse shared = b.Tune(AllReduce(1024));
  CHECK(shared.fingerprint() == measured.fingerprint());
  CHECK(shared.results(0).status() == v1::CACHED);
  CHECK(shared.results(0).winner() == measured.results(0).winner());
  CHECK(shared.results(0).ranked(0).mean_us() == measured.results(0).ranked(0).mean_us());
  std::map<std::string, double> m = b.Metrics();
  CHECK(m[kHit] == 1);
  CHECK(m[kPublished] == 0);
  // Kept locally: the next ask does not reach the fleet.
  CHECK(b.Tune(AllReduce(1024)).results(0).status() == v1::CACHED);
  CHECK(b.Metrics()[kHit] == 1);

  const v1::TuneResponse own = other.Tune(AllReduce(1024));
  CHECK(own.fingerprint() != measured.fingerprint());
  CHECK(own.results(0).status() == v1::TUNED);
  m = other.Metrics();
  CHECK(m[kHit] == 0);
  CHECK(m[kMiss] == 1);
  CHECK(m[kPublished] == 1);
}

TEST_CASE("Redis killed mid-run: rounds are measured, the outage counted and logged once; "
          "publishing resumes when it is back") {
  RedisServer redis;
  REQUIRE(redis.Start().ok());
  Daemon a("fleet-outage-a", FleetConfig(redis.address()));
  Daemon b("fleet-outage-b", FleetConfig(redis.address()));
  a.Start();
  b.Start();
  REQUIRE(a.Tune(AllReduce(1024)).results(0).status() == v1::TUNED);

  redis.Kill();
  for (int64_t count : {2048, 4096, 8192}) {
    CHECK(a.Tune(AllReduce(count)).results(0).status() == v1::TUNED);
  }
  std::map<std::string, double> m = a.Metrics();
  CHECK(m[kOutage] == 1);
  CHECK(m[kOutages] == 1);
  CHECK(m[kError] >= 1);
  CHECK(m[kPublishErrors] >= 1);
  CHECK(m[kPublished] == 1);
  CHECK(Occurrences(a.process.Log(), "fleet cache: Redis") == 1);

  REQUIRE(redis.Start().ok());  // back, empty
  int64_t count = 16384;
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (a.Metrics()[kPublished] < 2 && absl::Now() < until) {
    count *= 2;
    CHECK(a.Tune(AllReduce(count)).results(0).status() == v1::TUNED);
    absl::SleepFor(absl::Milliseconds(100));
  }
  m = a.Metrics();
  REQUIRE(m[kPublished] == 2);
  CHECK(m[kOutage] == 0);
  CHECK(m[kOutages] == 1);
  CHECK(absl::StrContains(a.process.Log(), "is back after"));
  CHECK(b.Tune(AllReduce(count)).results(0).status() == v1::CACHED);
}

TEST_CASE("a corrupt value in Redis is ignored, counted and logged; the measurement replaces it") {
  RedisServer redis;
  REQUIRE(redis.Start().ok());
  Daemon a("fleet-corrupt-a", FleetConfig(redis.address()));
  Daemon b("fleet-corrupt-b", FleetConfig(redis.address()));
  a.Start();
  b.Start();
  const v1::TuneResponse measured = a.Tune(AllReduce(1024));
  const std::string key =
      absl::StrCat("autotuned:v1:", measured.fingerprint(), ":", measured.results(0).cache_key());
  REQUIRE(redis.Call({"GET", key}).rfind("ATFLEET1", 0) == 0);
  REQUIRE(redis.Call({"SET", key, "ATFLEET1 and then garbage, not a ranking"}) == "OK");

  CHECK(b.Tune(AllReduce(1024)).results(0).status() == v1::TUNED);
  std::map<std::string, double> m = b.Metrics();
  CHECK(m[kCorrupt] == 1);
  CHECK(m[kHit] == 0);
  CHECK(m[kOutage] == 0);
  CHECK(absl::StrContains(b.process.Log(), "ignored the value of " + key));
  CHECK(m[kPublished] == 1);
  CHECK(redis.Call({"GET", key}).rfind("ATFLEET1", 0) == 0);
  CHECK(redis.Call({"STRLEN", key}) != "41");
}

TEST_CASE("AUTH: a wrong password is a clear error and the daemon keeps serving; a password "
          "file open to others is refused") {
  RedisServer redis;
  REQUIRE(redis.Start({"--user", "fleet", "on", ">right-password-1", "~autotuned:*", "+@all",
                       "--user", "default", "off"},
                      {"AUTH", "fleet", "right-password-1"})
              .ok());
  const std::string dir = testing::FreshTempDir("fleet-auth-secrets");
  std::ofstream(dir + "/wrong") << "wrong-password-2\n";
  std::ofstream(dir + "/right") << "right-password-1\n";
  REQUIRE(chmod((dir + "/wrong").c_str(), 0600) == 0);
  REQUIRE(chmod((dir + "/right").c_str(), 0640) == 0);
  auto auth = [&](const std::string& file) {
    return FleetConfig(redis.address(),
                       absl::StrCat("  user: \"fleet\"\n  password_file: \"", dir, "/", file,
                                    "\"\n"));
  };

  Daemon wrong("fleet-auth-wrong", auth("wrong"));
  wrong.Start();
  CHECK(wrong.Tune(AllReduce(1024)).results(0).status() == v1::TUNED);
  std::map<std::string, double> m = wrong.Metrics();
  CHECK(m[kOutage] == 1);
  CHECK(m[kError] == 1);
  const std::string log = wrong.process.Log();
  CHECK(absl::StrContains(log, "AUTH as user fleet failed"));
  CHECK(absl::StrContains(log, "WRONGPASS"));
  CHECK_FALSE(absl::StrContains(log, "wrong-password-2"));

  Daemon right("fleet-auth-right", auth("right"));
  right.Start();
  CHECK(right.Tune(AllReduce(1024)).results(0).status() == v1::TUNED);
  CHECK(right.Metrics()[kPublished] == 1);
  CHECK_FALSE(absl::StrContains(right.process.Log(), "right-password-1"));

  REQUIRE(chmod((dir + "/right").c_str(), 0644) == 0);
  Daemon open("fleet-auth-open", auth("right"));
  CHECK(open.process.RunToExit(open.node.args, open.node.dir + "/log") == 2);
  CHECK(absl::StrContains(open.process.Log(), "fleet_cache.password_file"));
  CHECK(absl::StrContains(open.process.Log(), "0644"));
}

struct Answer {
  grpc::Status status;
  v1::TuneResponse response;
  std::string Shared() const { return testing::SharedAnswer(status, response); }
};

// A group over two daemons (one rank each, rank 0's daemon leads): every
// rank asks its own daemon at once; their answers.
std::vector<Answer> GroupRound(const std::vector<const Daemon*>& daemons,
                                             const std::vector<std::string>& peers,
                                             const std::string& group, int64_t count) {
  std::vector<Answer> answers(daemons.size());
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < daemons.size(); ++r) {
    ranks.emplace_back([&, r] {
      v1::TuneRequest req = AllReduce(count);
      v1::Group* g = req.mutable_group();
      g->set_id(group);
      g->set_world_size(static_cast<int>(daemons.size()));
      g->set_rank(static_cast<int>(r));
      for (size_t m = 0; m < daemons.size(); ++m) {
        v1::Member* member = g->add_members();
        member->set_rank(static_cast<int>(m));
        member->set_local_gpu(0);
        member->set_daemon(peers[m]);
      }
      req.mutable_options()->set_presync_window_us(5000000);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      answers[r].status = daemons[r]->Stub()->Tune(&ctx, req, &answers[r].response);
    });
  }
  for (std::thread& t : ranks) t.join();
  return answers;
}

TEST_CASE("a group over daemons that see different fleet entries: every rank gets what the "
          "leader's lookup found") {
  RedisServer redis;
  REQUIRE(redis.Start().ok());
  const std::string token = "peer-token-for-the-fleet-cache-test";
  std::vector<std::string> peers;
  std::string peer_list;
  for (int i = 0; i < 3; ++i) {
    peers.push_back(absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort()));
    absl::StrAppend(&peer_list, "peers: \"", peers.back(), "\"\n");
  }
  // a and c share the fleet's entries; b uses other keys, so sees none of
  // theirs.
  const std::vector<std::string> prefixes = {"autotuned", "other", "autotuned"};
  std::vector<std::unique_ptr<Daemon>> d;
  for (int i = 0; i < 3; ++i) {
    d.push_back(std::make_unique<Daemon>(
        absl::StrCat("fleet-group-", i),
        absl::StrCat("peer_token: \"", token, "\"\npeer_advertise: \"", peers[i], "\"\n",
                     peer_list,
                     FleetConfig(redis.address(),
                                 absl::StrCat("  key_prefix: \"", prefixes[i], "\"\n"))),
        std::vector<std::string>{"--peer_listen=" + peers[i], "--sim_gpus=2"}));
    d.back()->Start();
  }
  auto same = [](const std::vector<Answer>& answers, v1::DecisionStatus want) {
    for (const Answer& a : answers) {
      INFO(a.status.error_message());
      REQUIRE(a.status.ok());
      CHECK(a.response.results(0).status() == want);
      CHECK(a.Shared() == answers[0].Shared());
    }
  };

  // a leads: measured across a and b, published by a alone.
  same(GroupRound({d[0].get(), d[1].get()}, {peers[0], peers[1]}, "g1", 1024), v1::TUNED);
  CHECK(d[0]->Metrics()[kPublished] == 1);
  CHECK(d[1]->Metrics()[kPublished] == 0);

  // b leads: a holds the entry (locally and in the fleet) but a follows, so
  // both ranks get b's answer: measured, since b's lookup found nothing.
  same(GroupRound({d[1].get(), d[0].get()}, {peers[1], peers[0]}, "g2", 1024), v1::TUNED);
  const double a_lookups = d[0]->Metrics()[kHit] + d[0]->Metrics()[kMiss];

  // c leads: its fleet lookup finds a's entry, so both ranks get CACHED,
  // b's too, which sees no such entry and is never asked.
  const double b_lookups = d[1]->Metrics()[kHit] + d[1]->Metrics()[kMiss];
  same(GroupRound({d[2].get(), d[1].get()}, {peers[2], peers[1]}, "g3", 1024), v1::CACHED);
  CHECK(d[2]->Metrics()[kHit] == 1);
  CHECK(d[1]->Metrics()[kHit] + d[1]->Metrics()[kMiss] == b_lookups);
  CHECK(d[0]->Metrics()[kHit] + d[0]->Metrics()[kMiss] == a_lookups);
}

}  // namespace
}  // namespace autotuned
