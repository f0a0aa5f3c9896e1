// The service through its real gRPC stub, in-process, over the parts of a
// real daemon core (daemon/ops/node) on the scripted node
// (daemon/testing/scripted_node.h) and a real cache directory: what the
// adapter itself does (admission, validation, routing, statuses on the wire,
// figures, settings, drain). The parts it hands requests to have their own
// tests: daemon/coordinate/solver, daemon/coordinate/rounds,
// daemon/coordinate/leadership, daemon/coordinate/request; the peer calls the
// core serves, daemon/ops/node.
#include "daemon/serve/service/service.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "config/config_loader.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/ops/node/node.h"
#include "daemon/serve/service/dispatch.h"
#include "daemon/testing/scripted_node.h"

namespace autotuned {
namespace {

using testing::RankRequest;
using testing::Request;
using testing::Shared;
using testing::SpreadRequest;

class Fixture {
 public:
  // `peers`: with a PeerClient (config peer_advertise must be set).
  explicit Fixture(const std::string& cache_name,
                   const std::function<void(config::DaemonConfig*)>& change = nullptr,
                   bool peers = false) {
    config_ = testing::TestConfig();
    if (change) change(&config_);
    if (peers) {
      peer_client_ = std::make_unique<PeerClient>(
          "a-test-peer-token-16+", config_.peer_advertise(),
          std::vector<std::string>(config_.peers().begin(), config_.peers().end()));
    }
    backend_ = testing::ScriptedBackend();
    cache_ = *ResultCache::Open(
        testing::TempDir(cache_name),
        ResultCacheOptions{config_.cache().max_entries(), config_.cache().max_bytes()});
    node_ = std::make_unique<Node>(backend_.get(), cache_.get(), config_,
                                   NodeOptions{&metrics_, peer_client_.get()});
    service_ = std::make_unique<AutotuneService>(
        AutotuneService::Parts{&node_->backend(), node_->cache(), &node_->metrics(),
                               &node_->admission(), &node_->settings(), &node_->solver(),
                               &node_->rounds(), &node_->client_runs(), &node_->follower()},
        AutotuneService::Options{node_->started(), "m:1", "p:2"});
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::Autotune::NewStub(server_->InProcessChannel({}));
  }
  ~Fixture() { server_->Shutdown(); }

  grpc::Status Tune(const v1::TuneRequest& req, v1::TuneResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Tune(&ctx, req, resp);
  }

  // An error's message, or "OK".
  std::string TuneError(const v1::TuneRequest& req) {
    v1::TuneResponse resp;
    grpc::Status s = Tune(req, &resp);
    if (s.ok()) return "OK";
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    return s.error_message();
  }

  FakeBackend& backend() { return *backend_; }
  v1::Autotune::Stub& stub() { return *stub_; }
  Node& node() { return *node_; }
  metrics::Registry& registry() { return registry_; }

  v1::NodeMetrics Metrics() {
    grpc::ClientContext ctx;
    v1::NodeInfoResponse node;
    CHECK(stub_->NodeInfo(&ctx, {}, &node).ok());
    return node.metrics();
  }

 private:
  metrics::Registry registry_;
  metrics::DaemonMetrics metrics_{&registry_};
  config::DaemonConfig config_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<ResultCache> cache_;
  std::unique_ptr<PeerClient> peer_client_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<AutotuneService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Autotune::Stub> stub_;
};

struct Answer {
  grpc::Status status;
  v1::TuneResponse response;
};

// Each request from its own thread, all at once.
std::vector<Answer> AskTogether(Fixture& f, const std::vector<v1::TuneRequest>& requests) {
  std::vector<Answer> answers(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back(
        [&, i] { answers[i].status = f.Tune(requests[i], &answers[i].response); });
  }
  for (std::thread& t : threads) t.join();
  return answers;
}

// Waits (bounded) until `n` rounds are in progress.
bool InFlight(Fixture& f, int64_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (f.Metrics().rounds_in_flight() == n) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST_CASE("a whole-group tune through the stub: ranked, then from the cache") {
  Fixture f("ranked");
  v1::TuneResponse resp;
  v1::TuneRequest req = Request({"all_reduce/a", "all_reduce/broken", "all_reduce/b"});
  REQUIRE(f.Tune(req, &resp).ok());
  REQUIRE(resp.results_size() == 1);
  CHECK(resp.results(0).status() == v1::TUNED);
  CHECK(resp.results(0).winner() == "all_reduce/b");
  CHECK(resp.results(0).ranked_size() == 3);
  CHECK(resp.fingerprint() == f.node().fingerprint());
  v1::TuneResponse again;
  REQUIRE(f.Tune(req, &again).ok());
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(f.backend().runs() == 3);
}

TEST_CASE("an invalid request is INVALID_ARGUMENT on the wire, counted, nothing run") {
  Fixture f("invalid");
  CHECK(f.TuneError(Request({"all_reduce/a"}, 0)) ==
        "problems[0].count: must be positive, got 0");
  v1::TuneRequest other = RankRequest("x", 0);
  other.mutable_group()->mutable_members(3)->set_daemon("elsewhere:7451");
  v1::TuneResponse r;
  CHECK(f.Tune(other, &r).error_code() == grpc::StatusCode::UNIMPLEMENTED);
  CHECK(f.Metrics().rejected_invalid() == 2);
  CHECK(f.backend().runs() == 0);
}

TEST_CASE("a sweep past the memory cap measures the sizes that fit and skips the others") {
  Fixture f("sweep_cap");  // limits.max_buffer_bytes 1 MiB; no free memory known
  grpc::ClientContext info_ctx;
  v1::NodeInfoResponse node;
  REQUIRE(f.stub().NodeInfo(&info_ctx, {}, &node).ok());
  CHECK(node.memory_cap_bytes() == 1 << 20);
  v1::SweepRequest req;
  req.mutable_group()->set_world_size(2);
  req.mutable_options()->set_iterations(2);
  req.mutable_problem()->set_collective(v1::ALL_REDUCE);
  req.mutable_problem()->set_dtype(v1::FLOAT32);
  req.mutable_problem()->add_candidates()->set_impl("all_reduce/a");
  req.mutable_problem()->add_candidates()->set_impl("all_reduce/b");
  // 2 KiB and 512 KiB of input and output per rank fit; 2 MiB does not.
  for (int64_t c : {256, 65536, 262144}) req.add_counts(c);
  grpc::ClientContext ctx;
  auto reader = f.stub().Sweep(&ctx, req);
  v1::SweepUpdate u;
  std::vector<v1::SweepUpdate> updates;
  while (reader->Read(&u)) updates.push_back(u);
  REQUIRE(reader->Finish().ok());
  REQUIRE(updates.size() == 4);
  for (int i : {0, 1}) {
    CHECK(updates[i].size_result().status() == v1::TUNED);
    CHECK_FALSE(updates[i].size_result().skipped());
    CHECK(updates[i].size_result().winner() == "all_reduce/b");
  }
  const v1::ProblemResult& skipped = updates[2].size_result();
  CHECK(updates[2].done() == 3);
  CHECK(skipped.problem().count() == 262144);
  CHECK(skipped.status() == v1::FAILED);
  CHECK(skipped.skipped());
  CHECK(skipped.ranked_size() == 0);
  CHECK(skipped.winner().empty());
  CHECK(skipped.reason() ==
        "skipped: needs 2097152 bytes per rank, over the memory cap of 1048576 bytes per GPU "
        "(limits.max_buffer_bytes, limits.gpu_memory_fraction)");
  REQUIRE(updates[3].has_table());
  REQUIRE(updates[3].table().ranges_size() == 2);
  CHECK(updates[3].table().ranges(0).max_count() == 65536);
  CHECK(updates[3].table().ranges(1).winner().empty());
  // Nothing of the skipped size was measured or counted as a failure.
  CHECK(f.Metrics().results_failed() == 0);
  CHECK(f.Metrics().results_tuned() == 2);

  // Tune of the same size alone is refused, naming the count.
  v1::TuneRequest tune = testing::Request({"all_reduce/a"}, 262144);
  tune.mutable_group()->set_world_size(2);
  CHECK_THAT(f.TuneError(tune),
             Catch::StartsWith("problems[0].count: 262144 elements of 4 bytes per rank exceed "
                               "the memory cap of 1048576 bytes per GPU"));
}

TEST_CASE("a sweep streams every size and ends with the dispatch table") {
  Fixture f("sweep");
  v1::SweepRequest req;
  req.mutable_group()->set_world_size(2);
  req.mutable_options()->set_iterations(2);
  req.mutable_problem()->set_collective(v1::ALL_REDUCE);
  req.mutable_problem()->set_dtype(v1::FLOAT32);
  req.mutable_problem()->add_candidates()->set_impl("all_reduce/a");
  req.mutable_problem()->add_candidates()->set_impl("all_reduce/b");
  for (int64_t c : {256, 512, 1024}) req.add_counts(c);
  grpc::ClientContext ctx;
  auto reader = f.stub().Sweep(&ctx, req);
  v1::SweepUpdate u;
  std::vector<v1::SweepUpdate> updates;
  while (reader->Read(&u)) updates.push_back(u);
  REQUIRE(reader->Finish().ok());
  REQUIRE(updates.size() == 4);
  CHECK(updates[2].size_result().problem().count() == 1024);
  CHECK(updates[2].done() == 3);
  REQUIRE(updates[3].has_table());
  REQUIRE(updates[3].table().ranges_size() == 1);
  CHECK(updates[3].table().ranges(0).winner() == "all_reduce/b");
  CHECK(updates[3].table().ranges(0).max_bytes() == 4096);

  req.set_counts(1, 0);
  grpc::ClientContext ctx2;
  auto bad = f.stub().Sweep(&ctx2, req);
  while (bad->Read(&u)) {
  }
  grpc::Status s = bad->Finish();
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() == "counts[1]: must be positive, got 0");
}

TEST_CASE("dispatch tables merge runs of the same winner") {
  auto size = [](int64_t count, const std::string& winner) {
    v1::ProblemResult r;
    r.mutable_problem()->set_count(count);
    r.mutable_problem()->set_dtype(v1::FLOAT32);
    r.set_bytes(count * 4 * 8);  // message bytes differ: not used
    r.set_winner(winner);
    return r;
  };
  v1::DispatchTable t = BuildDispatchTable(
      {size(1, "x"), size(2, "x"), size(4, ""), size(8, "y"), size(16, "y"),
       size(32, "x")});
  REQUIRE(t.ranges_size() == 4);
  CHECK(t.ranges(0).min_count() == 1);
  CHECK(t.ranges(0).max_count() == 2);
  CHECK(t.ranges(1).winner().empty());
  CHECK(t.ranges(2).min_bytes() == 32);
  CHECK(t.ranges(2).max_bytes() == 64);
  CHECK(t.ranges(3).winner() == "x");
}

TEST_CASE("implementations and node info describe the backend") {
  Fixture f("info");
  grpc::ClientContext c1;
  v1::ListImplementationsResponse impls;
  REQUIRE(f.stub().ListImplementations(&c1, {}, &impls).ok());
  CHECK(impls.implementations_size() == 6);
  CHECK(impls.implementations(0).params(0).name() == "knob");
  grpc::ClientContext c0;
  v1::ListImplementationsRequest unknown;
  unknown.set_collective(static_cast<v1::Collective>(99));
  grpc::Status refused = f.stub().ListImplementations(&c0, unknown, &impls);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(refused.error_message() == "collective: unknown collective 99");
  grpc::ClientContext c2;
  v1::NodeInfoResponse node;
  REQUIRE(f.stub().NodeInfo(&c2, {}, &node).ok());
  CHECK(node.backend() == "fake");
  CHECK(node.gpus_size() == 4);
  CHECK(node.fingerprint().size() == 16);
  CHECK(node.metrics_address() == "m:1");
  CHECK(node.peer_address() == "p:2");
}

TEST_CASE("the figures count rounds, results, lookups, rejections and cut-offs") {
  Fixture f("figures");
  v1::TuneResponse resp;
  v1::TuneRequest req = Request({"all_reduce/a", "all_reduce/b"});
  REQUIRE(f.Tune(req, &resp).ok());          // tuned (miss)
  REQUIRE(f.Tune(req, &resp).ok());          // cached (hit)
  req.mutable_options()->set_refresh(true);  // tuned, no lookup
  REQUIRE(f.Tune(req, &resp).ok());
  REQUIRE(f.Tune(Request({"all_reduce/broken"}, 2048), &resp).ok());  // failed
  v1::TuneRequest hang = Request({"all_reduce/hang", "all_reduce/a"}, 4096);
  hang.mutable_options()->set_timeout_ms(100);
  REQUIRE(f.Tune(hang, &resp).ok());  // tuned, one cut off
  CHECK(f.TuneError(Request({"all_reduce/zzz"})) != "OK");

  const v1::NodeMetrics m = f.Metrics();
  CHECK(m.rounds() == 5);
  CHECK(m.results_tuned() == 3);
  CHECK(m.results_cached() == 1);
  CHECK(m.results_failed() == 1);
  CHECK(m.results_fallback() == 0);
  CHECK(m.rejected_invalid() == 1);
  CHECK(m.cache_hits() == 1);
  CHECK(m.cache_misses() == 3);
  CHECK(m.candidate_timeouts() == 1);
  CHECK(m.round_latency().count() == 5);
  CHECK(m.rendezvous_latency().count() == 4);  // every measured problem
  CHECK(m.rendezvous_latency().sum_s() == 0);
  CHECK(m.rounds_in_flight() == 0);
  CHECK_FALSE(m.draining());

  const std::string text = f.registry().RenderText();
  CHECK_THAT(text, Catch::Contains("autotuned_round_results_total{status=\"tuned\"} 3\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_cache_lookups_total{result=\"hit\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_cache_entries 2\n"));
}

TEST_CASE("ranks waiting in the rendezvous never block cache hits or measurements") {
  Fixture f("pools", [](config::DaemonConfig* c) {
    c->mutable_limits()->set_max_concurrent_rounds(1);
    c->mutable_limits()->set_max_waiting_ranks(2);
  });
  v1::TuneResponse resp;
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 4096), &resp).ok());  // stored
  // Every waiting slot taken by lone ranks in long windows.
  std::vector<std::thread> lone;
  std::vector<Answer> waited(2);
  for (int i = 0; i < 2; ++i) {
    lone.emplace_back([&, i] {
      waited[i].status = f.Tune(RankRequest(absl::StrCat("lone", i), 0, 2, 3000000),
                                &waited[i].response);
    });
  }
  REQUIRE(InFlight(f, 2));
  grpc::Status third = f.Tune(RankRequest("lone3", 0, 2), &resp);
  CHECK(third.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(third.error_message(), Catch::Contains("limits.max_waiting_ranks = 2"));
  // A cache hit and a measured whole-group call are still served.
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 4096), &resp).ok());
  CHECK(resp.results(0).status() == v1::CACHED);
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 8192), &resp).ok());
  CHECK(resp.results(0).status() == v1::TUNED);
  // The device slot taken too: a cache hit is still answered.
  v1::TuneRequest slow = Request({"all_reduce/hang"});
  slow.mutable_options()->set_timeout_ms(500);
  std::thread busy([&] {
    v1::TuneResponse r;
    CHECK(f.Tune(slow, &r).ok());
  });
  REQUIRE(InFlight(f, 3));
  CHECK(f.Tune(Request({"all_reduce/b"}), &resp).error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED);
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 8192), &resp).ok());
  CHECK(resp.results(0).status() == v1::CACHED);
  busy.join();
  for (std::thread& t : lone) t.join();
  for (const Answer& a : waited) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::FALLBACK);
  }
}

TEST_CASE("the cache keeps no caller's label: each caller gets its own back") {
  Fixture f("labels");
  v1::TuneRequest first = Request({"all_reduce/a", "all_reduce/b"});
  first.mutable_problems(0)->set_label("secret-label-of-caller-one");
  v1::TuneResponse resp;
  REQUIRE(f.Tune(first, &resp).ok());
  REQUIRE(resp.results(0).status() == v1::TUNED);
  CHECK(resp.results(0).problem().label() == "secret-label-of-caller-one");
  grpc::ClientContext ctx;
  v1::ListCacheResponse listed;
  REQUIRE(f.stub().ListCache(&ctx, {}, &listed).ok());
  REQUIRE(listed.entries_size() == 1);
  CHECK(listed.entries(0).problem().label().empty());
  grpc::ClientContext info_ctx;
  v1::NodeInfoResponse node;
  REQUIRE(f.stub().NodeInfo(&info_ctx, {}, &node).ok());
  const std::string file =
      absl::StrCat(node.cache_dir(), "/", listed.entries(0).key(), ".entry");
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_FALSE(bytes.empty());
  CHECK(bytes.find("secret-label") == std::string::npos);
  v1::TuneRequest second = first;
  second.mutable_problems(0)->set_label("caller-two");
  REQUIRE(f.Tune(second, &resp).ok());
  CHECK(resp.results(0).status() == v1::CACHED);
  CHECK(resp.results(0).problem().label() == "caller-two");
}

TEST_CASE("an eviction at the cache's bound is counted and renews the epoch") {
  Fixture f("evictions", [](config::DaemonConfig* c) { c->mutable_cache()->set_max_entries(1); });
  auto epoch = [&f] {
    grpc::ClientContext ctx;
    v1::NodeInfoResponse node;
    REQUIRE(f.stub().NodeInfo(&ctx, {}, &node).ok());
    return node.cache_epoch();
  };
  v1::TuneResponse resp;
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 1024), &resp).ok());
  const std::string first = epoch();
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 1024), &resp).ok());
  CHECK(resp.results(0).status() == v1::CACHED);
  CHECK(epoch() == first);
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 2048), &resp).ok());  // evicts the first
  CHECK(epoch() != first);
  CHECK(f.Metrics().cache_evictions() == 1);
  CHECK_THAT(f.registry().RenderText(),
             Catch::Contains("autotuned_cache_evictions_total 1\n"));
  REQUIRE(f.Tune(Request({"all_reduce/a"}, 1024), &resp).ok());
  CHECK(resp.results(0).status() == v1::TUNED);
}

TEST_CASE("one round over max_concurrent_rounds is RESOURCE_EXHAUSTED") {
  Fixture f("busy", [](config::DaemonConfig* c) {
    c->mutable_limits()->set_max_concurrent_rounds(1);
  });
  v1::TuneRequest slow = Request({"all_reduce/hang"});
  slow.mutable_options()->set_timeout_ms(500);
  grpc::Status first;
  std::thread t([&] {
    v1::TuneResponse r;
    first = f.Tune(slow, &r);
  });
  REQUIRE(InFlight(f, 1));
  v1::TuneResponse resp;
  grpc::Status busy = f.Tune(Request({"all_reduce/a"}), &resp);
  CHECK(busy.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(busy.error_message(),
             Catch::Contains("limits.max_concurrent_rounds = 1"));
  t.join();
  CHECK(first.ok());
  CHECK(f.Metrics().rejected_overloaded() == 1);
  // Raised live: two at once are fine now.
  config::DaemonConfig more = *config::DefaultConfig();
  f.node().UpdateSettings(more.limits(), more.defaults());
  std::thread again([&] {
    v1::TuneResponse r;
    first = f.Tune(slow, &r);
  });
  REQUIRE(InFlight(f, 1));
  CHECK(f.Tune(Request({"all_reduce/a"}), &resp).ok());
  again.join();
  CHECK(first.ok());
}

TEST_CASE("draining refuses new rounds and waits for the one in progress") {
  Fixture f("drain");
  v1::TuneRequest slow = Request({"all_reduce/hang", "all_reduce/b"});
  slow.mutable_options()->set_timeout_ms(300);
  grpc::Status first;
  v1::TuneResponse first_resp;
  std::thread t([&] { first = f.Tune(slow, &first_resp); });
  REQUIRE(InFlight(f, 1));
  f.node().BeginDrain();
  CHECK_FALSE(f.node().WaitForRounds(absl::Now()));
  v1::TuneResponse resp;
  grpc::Status refused = f.Tune(Request({"all_reduce/a"}), &resp);
  CHECK(refused.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(refused.error_message(), Catch::StartsWith("draining: "));
  grpc::ClientContext ctx;
  v1::SweepRequest sweep;
  auto reader = f.stub().Sweep(&ctx, sweep);
  v1::SweepUpdate u;
  while (reader->Read(&u)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::UNAVAILABLE);

  CHECK(f.node().WaitForRounds(absl::Now() + absl::Seconds(20)));
  t.join();
  REQUIRE(first.ok());
  CHECK(first_resp.results(0).winner() == "all_reduce/b");
  const v1::NodeMetrics m = f.Metrics();
  CHECK(m.draining());
  CHECK(m.rejected_draining() == 2);
}

TEST_CASE("new limits and defaults apply to later requests") {
  Fixture f("settings");
  v1::TuneRequest req = Request({"all_reduce/a"});
  req.mutable_options()->set_iterations(200);
  v1::TuneResponse resp;
  REQUIRE(f.Tune(req, &resp).ok());
  config::DaemonConfig c = *config::DefaultConfig();
  c.mutable_limits()->set_max_iterations(100);
  c.mutable_defaults()->set_iterations(4);
  f.node().UpdateSettings(c.limits(), c.defaults());
  CHECK(f.TuneError(req) ==
        "options.iterations: must be between 1 and 100 (limits.max_iterations), got 200");
  req.mutable_options()->set_iterations(0);
  req.mutable_options()->set_refresh(true);
  REQUIRE(f.Tune(req, &resp).ok());
  CHECK(resp.results(0).ranked(0).iterations() == 4);
}

// Ranks asking one by one (group members given, whole_group false).

TEST_CASE("ranks asking one by one get one measurement and the same answer") {
  Fixture f("ranks");
  std::vector<v1::TuneRequest> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(RankRequest("job", r));
  std::vector<Answer> answers = AskTogether(f, ranks);
  for (int r = 0; r < 4; ++r) {
    REQUIRE(answers[r].status.ok());
    CHECK(answers[r].response.results(0).status() == v1::TUNED);
    CHECK(answers[r].response.results(0).problem().label() == absl::StrCat("op-of-rank-", r));
    CHECK(Shared(answers[r].response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 3);
  const v1::NodeMetrics m = f.Metrics();
  CHECK(m.rounds() == 4);
  CHECK(m.results_tuned() == 4);
  CHECK(m.round_overhead().count() == 1);
}

TEST_CASE("a round's error reaches each of its ranks as INVALID_ARGUMENT, counted") {
  Fixture f("inconsistent");
  grpc::Status first_status;
  std::thread first([&] {
    v1::TuneResponse r;
    first_status = f.Tune(RankRequest("d", 0, 2), &r);
  });
  REQUIRE(InFlight(f, 1));
  v1::TuneResponse r;
  grpc::Status s = f.Tune(RankRequest("d", 0, 2), &r);
  first.join();
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() == "group.rank: rank 0 of group \"d\" already asked for this round");
  CHECK(first_status.error_message() == s.error_message());
  CHECK(f.TuneError(RankRequest("d", 1, 2)) == s.error_message());
  CHECK(f.Metrics().rejected_invalid() == 3);
}

TEST_CASE("ranks run on their members' GPUs; alike links share cached results") {
  // The fake node links GPUs 0-1 and 2-3 by "NV4", the other pairs by "SYS".
  Fixture f("placement");
  auto on = [](int gpu0, int gpu1) {
    v1::TuneRequest req = RankRequest("pair", 0, 2);
    req.mutable_group()->set_whole_group(true);
    req.mutable_group()->mutable_members(0)->set_local_gpu(gpu0);
    req.mutable_group()->mutable_members(1)->set_local_gpu(gpu1);
    return req;
  };
  v1::TuneResponse r;
  REQUIRE(f.Tune(on(3, 2), &r).ok());
  CHECK(r.results(0).status() == v1::TUNED);
  CHECK(f.backend().last_devices() == std::vector<int>{3, 2});
  CHECK(f.backend().runs() == 3);

  v1::TuneResponse again;
  REQUIRE(f.Tune(on(0, 1), &again).ok());  // linked alike: the same answer
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(again.results(0).cache_key() == r.results(0).cache_key());
  v1::TuneRequest no_members = Request({"all_reduce/a", "all_reduce/b", "all_reduce/c"});
  no_members.mutable_group()->set_world_size(2);
  REQUIRE(f.Tune(no_members, &again).ok());  // GPUs 0 and 1 by default
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(f.backend().runs() == 3);

  REQUIRE(f.Tune(on(1, 2), &again).ok());  // other links: measured there
  CHECK(again.results(0).status() == v1::TUNED);
  CHECK(again.results(0).cache_key() != r.results(0).cache_key());
  CHECK(f.backend().last_devices() == std::vector<int>{1, 2});
  CHECK(f.backend().runs() == 6);
  {
    grpc::ClientContext ctx;
    v1::ListCacheResponse cached;
    REQUIRE(f.stub().ListCache(&ctx, {}, &cached).ok());
    std::vector<std::string> links;
    for (const v1::CacheEntrySummary& e : cached.entries()) links.push_back(e.links());
    std::sort(links.begin(), links.end());
    CHECK(links == std::vector<std::string>{"NV4", "SYS"});
  }

  // Ranks asking one by one run on their GPUs too.
  std::vector<v1::TuneRequest> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    v1::TuneRequest req = on(2, 0);
    req.mutable_group()->set_whole_group(false);
    req.mutable_group()->set_rank(rank);
    req.mutable_options()->set_refresh(true);
    ranks.push_back(req);
  }
  for (const Answer& a : AskTogether(f, ranks)) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::TUNED);
  }
  CHECK(f.backend().last_devices() == std::vector<int>{2, 0});
}

TEST_CASE("members naming this daemon, or asked for the whole group, need no waiting") {
  Fixture f("advertised", [](config::DaemonConfig* c) { c->set_peer_advertise("here:7451"); });
  v1::TuneRequest req = RankRequest("w", 0, 2);
  req.mutable_group()->mutable_members(1)->set_daemon("here:7451");
  req.mutable_group()->set_whole_group(true);
  v1::TuneResponse r;
  REQUIRE(f.Tune(req, &r).ok());  // one caller for both ranks: measured at once
  CHECK(r.results(0).status() == v1::TUNED);
  req.mutable_group()->mutable_members(1)->set_daemon("there:7451");
  CHECK(f.Tune(req, &r).error_code() == grpc::StatusCode::UNIMPLEMENTED);
}

// Multi-daemon groups: the routing to the parts (daemon/coordinate/leadership has the
// rules; tests/multi_daemon_test.cc runs real daemons together).

TEST_CASE("a follower's ranks go to their leader; unreachable is UNAVAILABLE on the wire") {
  Fixture f("follower",
            [](config::DaemonConfig* c) {
              c->set_peer_advertise("follow:1");
              c->add_peers("127.0.0.1:1");
            },
            /*peers=*/true);
  // Port 1 on loopback: nobody listens.
  const std::vector<std::string> daemons = {"127.0.0.1:1", "follow:1", "follow:1"};
  std::vector<Answer> answers =
      AskTogether(f, {SpreadRequest("g", 1, daemons), SpreadRequest("g", 2, daemons)});
  for (const Answer& a : answers) {
    CHECK(a.status.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(a.status.error_message(),
               Catch::StartsWith("leader 127.0.0.1:1 unreachable (followers never decide"));
  }
  CHECK(f.backend().runs() == 0);
}

TEST_CASE("a sweep asked rank by rank: the same sizes and table for every rank") {
  Fixture f("rank_sweep");
  std::vector<std::vector<v1::SweepUpdate>> updates(2);
  std::vector<grpc::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      v1::SweepRequest req;
      *req.mutable_group() = RankRequest("s", r, 2).group();
      req.mutable_options()->set_iterations(2);
      req.mutable_options()->set_presync_window_us(2000000);
      req.mutable_problem()->set_collective(v1::ALL_REDUCE);
      req.mutable_problem()->set_dtype(v1::FLOAT32);
      req.mutable_problem()->add_candidates()->set_impl("all_reduce/a");
      req.mutable_problem()->add_candidates()->set_impl("all_reduce/b");
      for (int64_t c : {256, 512}) req.add_counts(c);
      grpc::ClientContext ctx;
      auto reader = f.stub().Sweep(&ctx, req);
      v1::SweepUpdate u;
      while (reader->Read(&u)) updates[r].push_back(u);
      status[r] = reader->Finish();
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(status[0].ok());
  REQUIRE(status[1].ok());
  REQUIRE(updates[0].size() == 3);
  REQUIRE(updates[1].size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(updates[0][i].SerializeAsString() == updates[1][i].SerializeAsString());
  }
  CHECK(updates[0][2].table().ranges(0).winner() == "all_reduce/b");
  CHECK(f.backend().runs() == 4);  // two sizes, two candidates, measured once
}

// A rank of a round with candidates of its own, through the stub: its Tune,
// then every step's barriers (each of its steps takes `us` per iteration),
// then its Report.
struct ClientRankEnd {
  v1::TuneResponse tune;
  grpc::Status report_status;
  v1::TuneResponse answer;
};

// Every step's barriers of `end.tune`'s run, then the Report.
void FinishClientRank(Fixture& f, const v1::TuneRequest& request, double us,
                      ClientRankEnd* end) {
  const v1::ClientRun& run = end->tune.run();
  v1::RunReport report;
  report.set_run_id(run.run_id());
  report.set_group_id(request.group().id());
  report.set_rank(request.group().rank());
  for (int i = 0; i < run.steps_size(); ++i) {
    v1::StepTimes* times = report.add_steps();
    times->set_step(i);
    bool proceed = true;
    for (v1::StepPhase phase : {v1::VERIFIED, v1::WARMED_UP}) {
      v1::StepRequest step;
      step.set_run_id(run.run_id());
      step.set_group_id(request.group().id());
      step.set_rank(request.group().rank());
      step.set_step(i);
      step.set_phase(phase);
      step.set_ok(true);
      v1::StepReply reply;
      grpc::ClientContext ctx;
      proceed = proceed && f.stub().RunStep(&ctx, step, &reply).ok() && reply.proceed();
    }
    times->set_ok(proceed);
    for (int t = 0; proceed && t < run.iterations(); ++t) times->add_times_us(us);
  }
  grpc::ClientContext ctx;
  end->report_status = f.stub().Report(&ctx, report, &end->answer);
}

ClientRankEnd RunClientRank(Fixture& f, const v1::TuneRequest& request, double us) {
  ClientRankEnd end;
  grpc::ClientContext tune_ctx;
  if (!f.stub().Tune(&tune_ctx, request, &end.tune).ok() || !end.tune.has_run()) return end;
  FinishClientRank(f, request, us, &end);
  return end;
}

std::vector<ClientRankEnd> RunClientRound(Fixture& f, int world,
                                          const std::vector<std::string>& candidates) {
  std::vector<ClientRankEnd> ends(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ends[r] = RunClientRank(f, testing::ClientRankRequest("own", r, world, candidates), 5);
    });
  }
  for (std::thread& t : threads) t.join();
  return ends;
}

TEST_CASE("candidates the ranks run: one schedule, one answer, then the cache") {
  for (int world : {2, 4}) {
    Fixture f(absl::StrCat("own-", world));
    const std::vector<std::string> candidates = {"all_reduce/a", "client:k1", "all_reduce/b"};
    std::vector<ClientRankEnd> ends = RunClientRound(f, world, candidates);
    for (int r = 0; r < world; ++r) {
      REQUIRE(ends[r].tune.has_run());
      CHECK(ends[r].tune.results_size() == 0);
      CHECK(ends[r].tune.run().SerializeAsString() == ends[0].tune.run().SerializeAsString());
      REQUIRE(ends[r].report_status.ok());
      const v1::ProblemResult& result = ends[r].answer.results(0);
      CHECK(result.status() == v1::TUNED);
      CHECK(result.winner() == "name of k1");  // 5 us, before b's 10 and a's 30
      CHECK(result.ranked_size() == 3);
      CHECK(result.problem().label() == absl::StrCat("op-of-rank-", r));
      CHECK(Shared(ends[r].answer) == Shared(ends[0].answer));
    }
    CHECK(f.backend().runs() == 2);  // a and b, once

    // The same candidates again: from the cache, nothing to run.
    std::vector<ClientRankEnd> again = RunClientRound(f, world, candidates);
    for (int r = 0; r < world; ++r) {
      CHECK_FALSE(again[r].tune.has_run());
      REQUIRE(again[r].tune.results_size() == 1);
      CHECK(again[r].tune.results(0).status() == v1::CACHED);
      CHECK(again[r].tune.results(0).winner() == "name of k1");
    }
    // A changed key is measured again.
    std::vector<ClientRankEnd> changed =
        RunClientRound(f, world, {"all_reduce/a", "client:k2", "all_reduce/b"});
    CHECK(changed[0].tune.has_run());
    CHECK(changed[0].answer.results(0).status() == v1::TUNED);
    const v1::NodeMetrics m = f.Metrics();
    CHECK(m.runs_opened() == 2);
    CHECK(m.runs_decided() == 2);
  }
}

TEST_CASE("a run holds the devices: a round that needs them waits for its decision") {
  Fixture f("own-lease");
  std::vector<v1::TuneRequest> asks;
  for (int r = 0; r < 2; ++r) asks.push_back(testing::ClientRankRequest("own", r, 2, {"client:k"}));
  std::vector<Answer> tuned = AskTogether(f, asks);
  REQUIRE(tuned[0].response.has_run());
  std::atomic<bool> decided{false};
  std::atomic<bool> measured_before_decision{false};
  v1::TuneResponse whole;
  std::thread other([&] {
    CHECK(f.Tune(Request({"all_reduce/a"}), &whole).ok());
    measured_before_decision = !decided.load();
  });
  absl::SleepFor(absl::Milliseconds(100));
  decided = true;
  std::vector<ClientRankEnd> ends(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ends[r].tune = tuned[r].response;
      FinishClientRank(f, asks[r], 5, &ends[r]);
    });
  }
  for (std::thread& t : ranks) t.join();
  other.join();
  CHECK_FALSE(measured_before_decision.load());
  CHECK(whole.results(0).status() == v1::TUNED);
  REQUIRE(ends[1].report_status.ok());
  CHECK(ends[1].answer.results(0).winner() == "name of k");
}

TEST_CASE("candidates the ranks run: refused where they cannot run, unknown runs") {
  Fixture f("own-refused");
  v1::TuneRequest whole = testing::ClientRankRequest("own", 0, 2, {"client:k1"});
  whole.mutable_group()->set_whole_group(true);
  CHECK_THAT(f.TuneError(whole), Catch::StartsWith("problems[0].candidates[0].client: "));
  v1::TuneResponse resp;
  grpc::ClientContext ctx;
  v1::StepRequest step;
  step.set_run_id("feed");
  step.set_phase(v1::VERIFIED);
  v1::StepReply reply;
  grpc::Status s = f.stub().RunStep(&ctx, step, &reply);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext ctx2;
  step.set_phase(v1::STEP_PHASE_UNSPECIFIED);
  s = f.stub().RunStep(&ctx2, step, &reply);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::StartsWith("phase: "));
}

TEST_CASE("NodeInfo names the cache's epoch, renewed by ClearCache") {
  Fixture f("epoch");
  auto epoch = [&f] {
    grpc::ClientContext ctx;
    v1::NodeInfoResponse node;
    CHECK(f.stub().NodeInfo(&ctx, {}, &node).ok());
    return node.cache_epoch();
  };
  const std::string first = epoch();
  CHECK(first.size() == 32);
  CHECK(epoch() == first);
  grpc::ClientContext ctx;
  v1::ClearCacheResponse cleared;
  REQUIRE(f.stub().ClearCache(&ctx, {}, &cleared).ok());
  CHECK(epoch() != first);
}

TEST_CASE("calls whose clients went away: their waits end within a poll and nothing of "
          "theirs is measured") {
  Fixture f("abandoned");
  // The devices held for 1.5 s.
  v1::TuneRequest slow = Request({"all_reduce/hang"});
  slow.mutable_options()->set_timeout_ms(1500);
  std::thread busy([&] {
    v1::TuneResponse r;
    CHECK(f.Tune(slow, &r).ok());
  });
  REQUIRE(InFlight(f, 1));
  // Whole-group misses and ranks of one (both wait for the devices), and
  // lone ranks of two (waiting in their windows).
  constexpr int kCalls = 10;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    const v1::TuneRequest req =
        i < 4   ? Request({"all_reduce/a", "all_reduce/b"}, 2048 * (i + 1))
        : i < 7 ? RankRequest(absl::StrCat("solo", i), 0, 1)
                : RankRequest(absl::StrCat("lone", i), 0, 2, 5000000);
    calls.emplace_back([&, i, req] {
      v1::TuneResponse r;
      statuses[i] = f.stub().Tune(contexts[i].get(), req, &r);
    });
  }
  REQUIRE(InFlight(f, 1 + kCalls));
  const absl::Time cancelled = absl::Now();
  for (auto& c : contexts) c->TryCancel();
  CHECK(InFlight(f, 1));  // (not REQUIRE: the threads below are joined)
  const absl::Duration took = absl::Now() - cancelled;
  INFO("the cancelled calls ended " << absl::FormatDuration(took) << " after their cancel");
  CHECK(took < absl::Seconds(1));
  for (std::thread& t : calls) t.join();
  for (const grpc::Status& s : statuses) CHECK(s.error_code() == grpc::StatusCode::CANCELLED);
  busy.join();
  absl::SleepFor(absl::Milliseconds(200));
  CHECK(f.backend().runs() == 1);  // the busy call's one candidate only
  CHECK(f.Metrics().rounds_in_flight() == 0);
}

TEST_CASE("a whole-group call whose turn on the devices would come after its deadline: "
          "RESOURCE_EXHAUSTED before the deadline") {
  Fixture f("overloaded");
  v1::TuneRequest slow = Request({"all_reduce/hang"});
  slow.mutable_options()->set_timeout_ms(2000);
  std::thread busy([&] {
    v1::TuneResponse r;
    CHECK(f.Tune(slow, &r).ok());
  });
  REQUIRE(InFlight(f, 1));
  const v1::TuneRequest miss = Request({"all_reduce/a", "all_reduce/b"}, 8192);
  {
    grpc::ClientContext ctx;
    const absl::Time sent = absl::Now();
    ctx.set_deadline(absl::ToChronoTime(sent + absl::Milliseconds(700)));
    v1::TuneResponse resp;
    const grpc::Status s = f.stub().Tune(&ctx, miss, &resp);
    CHECK(absl::Now() - sent < absl::Milliseconds(700));
    CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_THAT(s.error_message(), Catch::StartsWith("the devices are busy"));
  }
  CHECK(f.Metrics().rejected_overloaded() == 1);
  busy.join();
  // With time for it, the same call is measured.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::TuneResponse resp;
  REQUIRE(f.stub().Tune(&ctx, miss, &resp).ok());
  CHECK(resp.results(0).status() == v1::TUNED);
}

TEST_CASE("a per-rank ask answered from the cache takes no waiting slot") {
  Fixture f("hit-no-slot",
            [](config::DaemonConfig* c) { c->mutable_limits()->set_max_waiting_ranks(1); });
  v1::TuneResponse resp;
  REQUIRE(f.Tune(RankRequest("solo", 0, 1), &resp).ok());
  REQUIRE(resp.results(0).status() == v1::TUNED);
  // The one waiting slot taken by a lone rank in a long window.
  std::thread lone([&] {
    v1::TuneResponse r;
    CHECK(f.Tune(RankRequest("lone", 0, 2, 1000000), &r).ok());
  });
  REQUIRE(InFlight(f, 1));
  CHECK(f.Tune(RankRequest("other", 0, 2), &resp).error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED);
  REQUIRE(f.Tune(RankRequest("solo", 0, 1), &resp).ok());
  CHECK(resp.results(0).status() == v1::CACHED);
  lone.join();
}

}  // namespace
}  // namespace autotuned
