// End to end: a group of ranks that ask one by one, on the daemon binary
// (sim backend) over its Unix socket, recovers by itself from a stray caller
// that asked many extra times for one of its ranks (docs/protocol.md, "Out
// of step").
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "client/cpp/client.h"
#include "tests/daemon_process.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::FreshTempDir;
using testing::ShortTempDir;

v1::TuneRequest RankAsk(int rank, int64_t window_us) {
  v1::TuneRequest req;
  v1::Group* g = req.mutable_group();
  g->set_id("resync");
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

TEST_CASE("a stray caller's 22 extra asks for rank 0: the real ranks share rounds again "
          "within resync_after_missed_rounds + 1 steps") {
  const std::string dir = FreshTempDir("resync");
  const std::string socket = ShortTempDir() + "/autotuned.sock";
  // Without the background measurement after a fallback, which would
  // otherwise answer the ranks from the cache while they are out of step.
  std::ofstream(dir + "/config") << "rendezvous { measure_after_fallback: false }\n";
  DaemonProcess daemon;
  REQUIRE(daemon
              .Start({"--config=" + dir + "/config", "--socket=" + socket,
                      "--cache_dir=" + dir + "/cache", "--sim_gpus=2"},
                     socket, dir + "/log")
              .ok());
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
