// End to end, on the daemon binary (sim backend) over its Unix socket: what
// careless or hostile callers cannot do to the others. Ranks waiting in long
// pre-sync windows never block measurements or cache hits (admission's two
// pools); a group of ranks that ask one by one recovers by itself from a
// stray caller that asked many extra times for one of its ranks
// (docs/protocol.md, "Out of step").
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/client.h"
#include "tests/daemon_process.h"
#include "tests/round_answer.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::ShortTempDir;

// A daemon with the configuration `config` (text format) in `dir`.
void StartDaemon(DaemonProcess& daemon, const std::string& dir, const std::string& config,
                 std::string* socket) {
  *socket = ShortTempDir() + "/autotuned.sock";
  std::ofstream(dir + "/config") << config;
  REQUIRE(daemon
              .Start({"--config=" + dir + "/config", "--socket=" + *socket,
                      "--cache_dir=" + dir + "/cache", "--sim_gpus=2"},
                     *socket, dir + "/log")
              .ok());
}

v1::TuneRequest WholeGroup(int64_t count) { return testing::WholeGroupAllReduce(2, count); }

v1::TuneRequest RankAsk(int rank, int64_t window_us, const std::string& group = "resync") {
  v1::TuneRequest req;
  v1::Group* g = req.mutable_group();
  g->set_id(group);
  g->set_world_size(2);
  g->set_rank(rank);
  for (int r = 0; r < 2; ++r) {
    v1::Member* m = g->add_members();
    m->set_rank(r);
    m->set_local_gpu(r);
  }
  req.mutable_options()->set_presync_window_us(window_us);
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(3);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(1024);
  for (const char* impl : {"all_reduce/ring", "all_reduce/one_shot"}) {
    p->add_candidates()->set_impl(impl);
  }
  return req;
}

TEST_CASE("every waiting slot taken by lone ranks in long windows: a cache hit and a "
          "measured whole-group call are still served") {
  const std::string dir = FreshTempDir("pools");
  std::string socket;
  DaemonProcess daemon;
  StartDaemon(daemon, dir, "limits { max_waiting_ranks: 4 max_concurrent_rounds: 2 }\n",
              &socket);
  auto client = Client::Connect("unix:" + socket, absl::Seconds(10));
  REQUIRE(client.ok());
  REQUIRE((*client)->Tune(WholeGroup(512)).ok());  // stored
  std::vector<std::thread> lone;
  for (int i = 0; i < 4; ++i) {
    lone.emplace_back([&, i] {
      absl::StatusOr<v1::TuneResponse> r =
          (*client)->Tune(RankAsk(0, 4000000, absl::StrCat("lone-", i)));
      CHECK(r.ok());
    });
  }
  auto waiting = [&] {
    absl::StatusOr<v1::NodeInfoResponse> node = (*client)->NodeInfo();
    return node.ok() ? node->metrics().rounds_in_flight() : -1;
  };
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (waiting() != 4 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  REQUIRE(waiting() == 4);
  absl::StatusOr<v1::TuneResponse> fifth = (*client)->Tune(RankAsk(0, 20000, "lone-5"));
  REQUIRE_FALSE(fifth.ok());
  CHECK(fifth.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(fifth.status().message()),
             Catch::Contains("limits.max_waiting_ranks = 4"));
  absl::StatusOr<v1::TuneResponse> hit = (*client)->Tune(WholeGroup(512));
  REQUIRE(hit.ok());
  CHECK(hit->results(0).status() == v1::CACHED);
  absl::StatusOr<v1::TuneResponse> measured = (*client)->Tune(WholeGroup(4096));
  REQUIRE(measured.ok());
  CHECK(measured->results(0).status() == v1::TUNED);
  for (std::thread& t : lone) t.join();
}

TEST_CASE("a stray caller's 22 extra asks for rank 0: the real ranks share rounds again "
          "within resync_after_missed_rounds + 1 steps") {
  const std::string dir = FreshTempDir("resync");
  std::string socket;
  DaemonProcess daemon;
  // Without the background measurement after a fallback, which would
  // otherwise answer the ranks from the cache while they are out of step.
  StartDaemon(daemon, dir, "rendezvous { measure_after_fallback: false }\n", &socket);
  auto client = Client::Connect("unix:" + socket, absl::Seconds(10));
  REQUIRE(client.ok());

  for (int i = 0; i < 22; ++i) {  // the stray: lone asks, each falls back
    absl::StatusOr<v1::TuneResponse> stray = (*client)->Tune(RankAsk(0, 20000));
    REQUIRE(stray.ok());
    CHECK(stray->results(0).status() == v1::FALLBACK);
  }
  // The real ranks ask together, step after step (default
  // resync_after_missed_rounds: 4).
  int first_shared = -1;
  for (int step = 0; step < 8; ++step) {
    std::vector<absl::StatusOr<v1::TuneResponse>> got(2, absl::UnknownError("not asked"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] { got[r] = (*client)->Tune(RankAsk(r, 1000000)); });
    }
    for (std::thread& t : ranks) t.join();
    REQUIRE(got[0].ok());
    REQUIRE(got[1].ok());
    const bool shared = got[0]->round_id() == got[1]->round_id() &&
                        got[0]->results(0).winner() == got[1]->results(0).winner();
    INFO("step " << step << ": rounds " << got[0]->round_id() << " and "
                 << got[1]->round_id());
    if (shared && first_shared < 0) first_shared = step;
    if (first_shared >= 0) {
      CHECK(shared);
      CHECK(got[0]->results(0).status() != v1::FALLBACK);
    }
  }
  CHECK(first_shared >= 0);
  CHECK(first_shared <= 5);
  CHECK_THAT(daemon.Log(), Catch::Contains("out of step"));
}

}  // namespace
}  // namespace autotuned
