// Many multi-daemon rounds with random arrival order, delays around the
// pre-sync window, missing ranks and SIGKILLed daemons (restarted after
// their round): three real daemons on the sim backend as three hosts, two
// ranks each. The property: in every round, every rank whose own daemon
// survived gets the same answer (decision or error) as every other such
// rank. Prints the rounds run and the count per outcome.
//
// Environment (bazel test --test_env=..., which overrides the BUILD's env):
//   AUTOTUNED_RANDOM_ROUNDS  rounds to run (default 1000, about four minutes;
//                            tests/BUILD sets 200 for the default tier and
//                            1000 for multi_daemon_random_long_test)
//   AUTOTUNED_RANDOM_SEED    the seed (default: time-based; printed)
//   AUTOTUNED_RANDOM_REPORT  a file to write the figures to (optional)
//   AUTOTUNED_RANDOM_LEADER_KILLS  1: every round is "the leader SIGKILLed"
//                            (the rarest scenario, its races sought alone)
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/autotuned.grpc.pb.h"
#include "tests/daemon_process.h"
#include "tests/round_answer.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::ShortTempDir;

constexpr char kToken[] = "peer-token-for-the-random-multi-daemon-test";
constexpr int kHosts = 3;
constexpr int kRanksPerHost = 2;
constexpr int kWorld = kHosts * kRanksPerHost;
constexpr int64_t kWindowUs = 150000;

int FreePort() {
  const int port = testing::FreeLoopbackPort();
  REQUIRE(port > 0);
  return port;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

struct Host {
  std::string dir;
  std::string socket;
  std::string peer;
  std::vector<std::string> args;
  int starts = 0;
  std::unique_ptr<DaemonProcess> daemon = std::make_unique<DaemonProcess>();

  void Start() {
    const absl::Status s =
        daemon->Start(args, socket, absl::StrCat(dir, "/log.", starts++));
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
};

v1::TuneRequest RankAsk(const std::vector<Host>& hosts, const std::string& group, int rank,
                        int64_t count, bool refresh, int problems) {
  v1::TuneRequest req;
  v1::Group* g = req.mutable_group();
  g->set_id(group);
  g->set_world_size(kWorld);
  g->set_rank(rank);
  for (int r = 0; r < kWorld; ++r) {
    v1::Member* m = g->add_members();
    m->set_rank(r);
    m->set_local_gpu(r % kRanksPerHost);
    m->set_daemon(hosts[r / kRanksPerHost].peer);
  }
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(2);
  req.mutable_options()->set_timeout_ms(3000);
  req.mutable_options()->set_presync_window_us(kWindowUs);
  req.mutable_options()->set_refresh(refresh);
  for (int i = 0; i < problems; ++i) {
    v1::Problem* p = req.add_problems();
    p->set_label(absl::StrCat("rank", rank, "-problem", i));
    p->set_collective(i % 2 ? v1::ALL_GATHER : v1::ALL_REDUCE);
    p->set_dtype(v1::FLOAT32);
    p->set_count(count * kWorld);
    if (i % 2) {
      p->add_candidates()->set_impl("all_gather/ring");
      p->add_candidates()->set_impl("all_gather/direct");
    } else {
      p->add_candidates()->set_impl("all_reduce/ring");
      p->add_candidates()->set_impl("all_reduce/one_shot");
      p->add_candidates()->set_impl("all_reduce/two_shot");
    }
  }
  return req;
}

struct Answer {
  bool asked = false;
  grpc::Status status;
  v1::TuneResponse response;

  std::string Shared() const { return testing::SharedAnswer(status, response); }

  std::string Outcome() const {
    if (!status.ok()) {
      return absl::StrCat("error ", grpc::StatusCode(status.error_code()) ==
                                            grpc::StatusCode::UNAVAILABLE
                                        ? "UNAVAILABLE"
                                        : std::to_string(status.error_code()));
    }
    std::vector<std::string> kinds;
    for (const v1::ProblemResult& p : response.results()) {
      const std::string k = v1::DecisionStatus_Name(p.status());
      if (kinds.empty() || kinds.back() != k) kinds.push_back(k);
    }
    return absl::StrJoin(kinds, "+");
  }
};

Answer Ask(const Host& host, const v1::TuneRequest& req) {
  auto stub = v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + host.socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  Answer a;
  a.asked = true;
  a.status = stub->Tune(&ctx, req, &a.response);
  return a;
}

TEST_CASE("random rounds across 3 daemons: no two surviving ranks ever get different "
          "answers") {
  const int64_t rounds = EnvInt("AUTOTUNED_RANDOM_ROUNDS", 1000);
  const uint64_t seed = static_cast<uint64_t>(
      EnvInt("AUTOTUNED_RANDOM_SEED", absl::ToUnixNanos(absl::Now()) % 1000000007));
  std::mt19937_64 rng(seed);
  std::cout << "seed " << seed << ", rounds " << rounds << std::endl;

  std::vector<Host> hosts(kHosts);
  std::string peers;  // every daemon lists all of them (config peers)
  for (Host& host : hosts) {
    host.peer = absl::StrCat("127.0.0.1:", FreePort());
    absl::StrAppend(&peers, "peers: \"", host.peer, "\"\n");
  }
  for (int h = 0; h < kHosts; ++h) {
    Host& host = hosts[h];
    host.dir = FreshTempDir(absl::StrCat("random-", h));
    host.socket = ShortTempDir() + "/autotuned.sock";
    std::ofstream(host.dir + "/autotuned.conf")
        << "peer_token: \"" << kToken << "\"\npeer_advertise: \"" << host.peer << "\"\n"
        << peers;
    host.args = {"--config=" + host.dir + "/autotuned.conf", "--socket=" + host.socket,
                 "--cache_dir=" + host.dir + "/cache", "--peer_listen=" + host.peer,
                 "--sim_gpus=2"};
  }
  for (Host& h : hosts) h.Start();

  std::map<std::string, int64_t> outcomes;    // per surviving rank's answer
  std::map<std::string, int64_t> scenarios;
  int64_t divergent = 0, ranks_answered = 0;
  const absl::Time start = absl::Now();
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };

  const bool leader_kills_only = EnvInt("AUTOTUNED_RANDOM_LEADER_KILLS", 0) != 0;
  for (int64_t round = 0; round < rounds; ++round) {
    const int roll = leader_kills_only ? 99 : static_cast<int>(uniform(0, 99));
    std::string scenario;
    std::vector<bool> asks(kWorld, true);
    int64_t max_delay_ms = 0;
    int kill_host = -1;
    int64_t kill_after_ms = 0;
    bool refresh = uniform(0, 99) < 40;
    if (roll < 50) {
      scenario = "all ranks, delays within the window";
      max_delay_ms = kWindowUs / 1000 / 2;
    } else if (roll < 65) {
      scenario = "all ranks, delays around the window";
      max_delay_ms = kWindowUs / 1000 * 3 / 2;
    } else if (roll < 80) {
      scenario = "missing ranks";
      const int missing = static_cast<int>(uniform(1, 3));
      for (int i = 0; i < missing; ++i) asks[uniform(0, kWorld - 1)] = false;
      max_delay_ms = kWindowUs / 1000 / 2;
    } else if (roll < 93) {
      scenario = "a follower SIGKILLed";
      kill_host = static_cast<int>(uniform(1, kHosts - 1));
      kill_after_ms = uniform(0, 300);
      refresh = true;
      max_delay_ms = 30;
    } else {
      scenario = "the leader SIGKILLed";
      kill_host = 0;
      kill_after_ms = uniform(0, 300);
      refresh = true;
      max_delay_ms = 30;
    }
    ++scenarios[scenario];
    // Kill rounds measure more, so that the kill often lands mid-measurement.
    const int64_t count = kill_host >= 0 ? int64_t{4096} << uniform(0, 2)
                                         : int64_t{64} << uniform(0, 6);
    const int problems = kill_host >= 0 ? 3 : static_cast<int>(uniform(1, 3));
    const std::string group = absl::StrCat("g", round);

    std::vector<int> order(kWorld);
    for (int r = 0; r < kWorld; ++r) order[r] = r;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> delay(kWorld);
    for (int r = 0; r < kWorld; ++r) delay[r] = uniform(0, max_delay_ms);

    std::vector<Answer> answers(kWorld);
    std::vector<std::thread> threads;
    for (int r : order) {
      if (!asks[r]) continue;
      v1::TuneRequest req = RankAsk(hosts, group, r, count, refresh, problems);
      threads.emplace_back([&, r, req = std::move(req)] {
        absl::SleepFor(absl::Milliseconds(delay[r]));
        answers[r] = Ask(hosts[r / kRanksPerHost], req);
      });
    }
    if (kill_host >= 0) {
      absl::SleepFor(absl::Milliseconds(kill_after_ms));
      hosts[kill_host].daemon->Stop(SIGKILL);
    }
    for (std::thread& t : threads) t.join();

    std::string first;
    bool have_first = false;
    for (int r = 0; r < kWorld; ++r) {
      if (!answers[r].asked || r / kRanksPerHost == kill_host) continue;
      ++ranks_answered;
      ++outcomes[answers[r].Outcome()];
      if (!have_first) {
        first = answers[r].Shared();
        have_first = true;
      } else if (answers[r].Shared() != first) {
        ++divergent;
        std::cout << "round " << round << " (" << scenario << "): rank " << r
                  << " differs: " << answers[r].status.error_message() << " "
                  << answers[r].response.ShortDebugString() << std::endl;
        break;
      }
    }
    if (kill_host >= 0) hosts[kill_host].Start();
  }

  const absl::Duration took = absl::Now() - start;
  std::string report = absl::StrCat(
      "rounds ", rounds, " in ", absl::FormatDuration(took), " (seed ", seed, ")\n",
      "rounds with ranks that got different answers: ", divergent, "\n",
      "answers of surviving ranks: ", ranks_answered, "\n");
  for (const auto& [s, n] : scenarios) absl::StrAppend(&report, "scenario ", s, ": ", n, "\n");
  for (const auto& [o, n] : outcomes) absl::StrAppend(&report, "outcome ", o, ": ", n, "\n");
  std::cout << report;
  if (const char* path = std::getenv("AUTOTUNED_RANDOM_REPORT")) {
    std::ofstream(path) << report;
  }
  CHECK(divergent == 0);
}

}  // namespace
}  // namespace autotuned
