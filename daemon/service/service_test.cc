// The service through its real gRPC stub, in-process, over a scripted backend
// (daemon/backend/fake_backend.h) and a real cache directory.
#include "daemon/service/service.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "config/config_loader.h"
#include "daemon/backend/fake_backend.h"
#include "daemon/service/dispatch.h"

namespace autotuned {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

FakeBackend::Script Timed(double us) {
  FakeBackend::Script s;
  s.iteration_us = {us};
  return s;
}

class Fixture {
 public:
  // `peers`: with a PeerClient (config peer_advertise must be set).
  explicit Fixture(const std::string& cache_name,
                   const std::function<void(config::DaemonConfig*)>& change = nullptr,
                   bool peers = false) {
    config_ = *config::DefaultConfig();
    config_.mutable_limits()->set_max_buffer_bytes(1 << 20);
    if (change) change(&config_);
    if (peers) {
      peer_client_ = std::make_unique<PeerClient>("a-test-peer-token-16+",
                                                  config_.peer_advertise());
    }
    FakeBackend::Script broken;
    broken.fail_rank = 1;
    broken.failure = absl::DataLossError("rank 1 index 0: got 3, want 4");
    FakeBackend::Script hang;
    hang.fail_rank = 1;
    hang.hang = true;
    FakeBackend::Script four = Timed(1);
    four.min_world_size = 4;
    backend_ = std::make_unique<FakeBackend>(
        4, std::map<std::string, FakeBackend::Script>{
               {"all_reduce/four_or_more", four},
               {"all_reduce/a", Timed(30)},
               {"all_reduce/b", Timed(10)},
               {"all_reduce/c", Timed(20)},
               {"all_reduce/broken", broken},
               {"all_reduce/hang", hang}});
    cache_ = *ResultCache::Open(TempDir(cache_name));
    service_ = std::make_unique<AutotuneService>(backend_.get(), cache_.get(), config_,
                                                 ServiceOptions{&metrics_, "m:1", "p:2",
                                                                peer_client_.get()});
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
  AutotuneService& service() { return *service_; }
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
  std::unique_ptr<AutotuneService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Autotune::Stub> stub_;
};

v1::TuneRequest Request(std::vector<std::string> impls, int64_t count = 1024) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("test");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_iterations(3);
  req.mutable_options()->set_warmup(1);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  for (const auto& impl : impls) p->add_candidates()->set_impl(impl);
  return req;
}

TEST_CASE("a tune request comes back ranked, then from the cache") {
  Fixture f("ranked");
  v1::TuneResponse resp;
  v1::TuneRequest req =
      Request({"all_reduce/a", "all_reduce/broken", "all_reduce/b", "all_reduce/c"});
  REQUIRE(f.Tune(req, &resp).ok());
  REQUIRE(resp.results_size() == 1);
  const v1::ProblemResult& r = resp.results(0);
  CHECK(r.status() == v1::TUNED);
  CHECK(r.winner() == "all_reduce/b");
  CHECK(r.winner_index() == 2);
  REQUIRE(r.ranked_size() == 4);
  CHECK(r.ranked(0).median_us() == 10);
  CHECK(r.ranked(1).candidate().impl() == "all_reduce/c");
  CHECK(r.ranked(2).candidate().impl() == "all_reduce/a");
  CHECK_FALSE(r.ranked(3).ok());
  CHECK_THAT(r.ranked(3).reason(), Catch::Contains("rank 1: DATA_LOSS"));
  CHECK(std::isinf(r.ranked(3).median_us()));
  // 4096 bytes in 10 us: 0.4096 GB/s algbw, x 2(n-1)/n = 1.5 busbw.
  CHECK(r.ranked(0).algbw_gbps() == Approx(0.4096));
  CHECK(r.ranked(0).busbw_gbps() == Approx(0.6144));
  CHECK(r.ranked(0).candidate().params().at("knob") == 1);

  const int runs = f.backend().runs();
  v1::TuneResponse again;
  REQUIRE(f.Tune(req, &again).ok());
  CHECK(again.results(0).status() == v1::CACHED);
  CHECK(again.results(0).winner() == "all_reduce/b");
  CHECK(f.backend().runs() == runs);

  req.mutable_options()->set_refresh(true);
  REQUIRE(f.Tune(req, &again).ok());
  CHECK(again.results(0).status() == v1::TUNED);
  CHECK(f.backend().runs() == runs + 4);
}

TEST_CASE("a batch gets one answer per problem, in order") {
  Fixture f("batch");
  v1::TuneRequest req = Request({"all_reduce/a", "all_reduce/b"});
  *req.add_problems() = req.problems(0);
  req.mutable_problems(1)->set_count(2048);
  req.mutable_problems(1)->set_label("second");
  v1::TuneResponse resp;
  REQUIRE(f.Tune(req, &resp).ok());
  REQUIRE(resp.results_size() == 2);
  CHECK(resp.results(1).problem().count() == 2048);
  CHECK(resp.results(1).problem().label() == "second");
}

TEST_CASE("every candidate failing is FAILED, not an error") {
  Fixture f("failed");
  v1::TuneResponse resp;
  REQUIRE(f.Tune(Request({"all_reduce/broken"}), &resp).ok());
  CHECK(resp.results(0).status() == v1::FAILED);
  CHECK(resp.results(0).winner().empty());
}

TEST_CASE("a candidate that cannot run the problem is ruled out; none runnable is invalid") {
  Fixture f("unrunnable");
  v1::TuneRequest req = Request({"all_reduce/four_or_more", "all_reduce/a"});
  req.mutable_group()->set_world_size(2);
  v1::TuneResponse r;
  REQUIRE(f.Tune(req, &r).ok());
  const v1::ProblemResult& p = r.results(0);
  CHECK(p.status() == v1::TUNED);
  CHECK(p.winner() == "all_reduce/a");
  REQUIRE(p.ranked_size() == 2);
  CHECK_FALSE(p.ranked(1).ok());
  CHECK(p.ranked(1).reason() == "candidate.impl: \"all_reduce/four_or_more\" runs on 4 to "
                                "1048576 ranks, not 2");
  CHECK(f.backend().runs() == 1);  // only all_reduce/a ran
  req.mutable_group()->set_world_size(4);  // now both run
  REQUIRE(f.Tune(req, &r).ok());
  CHECK(r.results(0).winner() == "all_reduce/four_or_more");

  v1::TuneRequest none = Request({"all_reduce/four_or_more"});
  none.mutable_group()->set_world_size(2);
  CHECK(f.TuneError(none) ==
        "problems[0].candidates[0].impl: \"all_reduce/four_or_more\" runs on 4 to 1048576 "
        "ranks, not 2");
}

TEST_CASE("bad input is INVALID_ARGUMENT naming the field") {
  Fixture f("invalid");
  const std::vector<std::string> two = {"all_reduce/a", "all_reduce/b"};
  v1::TuneRequest req;

  CHECK_THAT(f.TuneError(Request({"all_reduce/zzz"})),
             Catch::StartsWith("problems[0].candidates[0].impl: unknown implementation"));

  req = Request(two);
  req.mutable_problems(0)->set_collective(static_cast<v1::Collective>(42));
  CHECK(f.TuneError(req) == "problems[0].collective: unknown collective 42");

  CHECK(f.TuneError(Request(two, 0)) == "problems[0].count: must be positive, got 0");
  CHECK(f.TuneError(Request(two, -5)) == "problems[0].count: must be positive, got -5");
  CHECK_THAT(f.TuneError(Request(two, 1 << 20)),
             Catch::StartsWith("problems[0].count:") &&
                 Catch::Contains("memory cap of 1048576 bytes (limits.max_buffer_bytes)"));
  CHECK_THAT(f.TuneError(Request(two, INT64_MAX)),
             Catch::Contains("limits.max_buffer_bytes"));

  req = Request(two);
  req.mutable_options()->set_iterations(-1);
  CHECK(f.TuneError(req) ==
        "options.iterations: must be between 1 and 10000 (limits.max_iterations), got -1");
  req.mutable_options()->set_iterations(2000000000);
  CHECK_THAT(f.TuneError(req), Catch::StartsWith("options.iterations: must be between"));
  req = Request(two);
  req.mutable_options()->set_warmup(-3);
  CHECK_THAT(f.TuneError(req), Catch::StartsWith("options.warmup:"));
  req = Request(two);
  req.mutable_options()->set_timeout_ms(-1);
  CHECK_THAT(f.TuneError(req), Catch::StartsWith("options.timeout_ms:"));

  req = Request(two);
  req.mutable_group()->set_world_size(64);
  CHECK(f.TuneError(req) ==
        "group.world_size: 64 ranks, but the fake backend serves at most 4 on this node");
  req.mutable_group()->set_world_size(0);
  CHECK_THAT(f.TuneError(req), Catch::StartsWith("group.world_size: must be positive"));

  CHECK_THAT(f.TuneError(Request({"all_reduce/a", "all_reduce/b", "all_reduce/a"})),
             Catch::StartsWith("problems[0].candidates[2]: duplicate of candidates[0]"));

  req = Request(two);
  (*req.mutable_problems(0)->mutable_candidates(1)->mutable_params())["threads"] = 4;
  CHECK_THAT(f.TuneError(req),
             Catch::StartsWith("problems[0].candidates[1].params[\"threads\"]: "
                               "\"all_reduce/b\" takes no parameter \"threads\""));

  req = Request(two);
  req.clear_problems();
  CHECK(f.TuneError(req) == "problems: at least one problem is required");
  CHECK(f.TuneError(Request({})) ==
        "problems[0].candidates: at least one candidate is required");
  req = Request(two);
  req.mutable_problems(0)->set_dtype(v1::DTYPE_UNSPECIFIED);
  CHECK(f.TuneError(req) == "problems[0].dtype: is required");
  req = Request(two);
  req.mutable_problems(0)->set_root(2);
  CHECK(f.TuneError(req) == "problems[0].root: only broadcast takes a root");

  // Nothing ran for any of them.
  CHECK(f.backend().runs() == 0);
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

// Waits (bounded) until `n` rounds are in progress.
bool InFlight(Fixture& f, int64_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (f.Metrics().rounds_in_flight() == n) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
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
  f.service().UpdateSettings(more.limits(), more.defaults());
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
  f.service().BeginDrain();
  CHECK_FALSE(f.service().WaitForRounds(absl::Now()));
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

  CHECK(f.service().WaitForRounds(absl::Now() + absl::Seconds(20)));
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
  f.service().UpdateSettings(c.limits(), c.defaults());
  CHECK(f.TuneError(req) ==
        "options.iterations: must be between 1 and 100 (limits.max_iterations), got 200");
  req.mutable_options()->set_iterations(0);
  req.mutable_options()->set_refresh(true);
  REQUIRE(f.Tune(req, &resp).ok());
  CHECK(resp.results(0).ranked(0).iterations() == 4);
}

// Ranks asking one by one (group members given, whole_group false).

v1::TuneRequest RankRequest(const std::string& group, int rank, int world = 4,
                            int64_t window_us = 2000000) {
  v1::TuneRequest req = Request({"all_reduce/a", "all_reduce/b", "all_reduce/c"});
  req.mutable_group()->set_id(group);
  req.mutable_group()->set_world_size(world);
  req.mutable_group()->set_rank(rank);
  for (int r = 0; r < world; ++r) {
    v1::Member* m = req.mutable_group()->add_members();
    m->set_rank(r);
    m->set_local_gpu(r);
  }
  req.mutable_options()->set_presync_window_us(window_us);
  req.mutable_problems(0)->set_label(absl::StrCat("op-of-rank-", rank));
  return req;
}

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

// The response without what is each rank's own (the labels), as bytes.
std::string Shared(v1::TuneResponse r) {
  for (v1::ProblemResult& p : *r.mutable_results()) p.mutable_problem()->clear_label();
  std::string bytes;
  r.SerializeToString(&bytes);
  return bytes;
}

TEST_CASE("four ranks asking one by one: one measurement, identical answers") {
  Fixture f("ranks");
  std::vector<v1::TuneRequest> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(RankRequest("job", r));
  std::vector<Answer> answers = AskTogether(f, ranks);
  for (int r = 0; r < 4; ++r) {
    REQUIRE(answers[r].status.ok());
    const v1::ProblemResult& p = answers[r].response.results(0);
    CHECK(p.status() == v1::TUNED);
    CHECK(p.winner() == "all_reduce/b");
    CHECK(p.problem().label() == absl::StrCat("op-of-rank-", r));
    CHECK(Shared(answers[r].response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 3);  // one round: three candidates, measured once

  // Asked again: the next round, answered from the cache at once.
  answers = AskTogether(f, ranks);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::CACHED);
    CHECK(Shared(a.response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 3);
  const v1::NodeMetrics m = f.Metrics();
  CHECK(m.rounds() == 8);
  CHECK(m.results_tuned() == 4);
  CHECK(m.results_cached() == 4);
  // One round was measured: its rendezvous overhead is on record, positive
  // and a part of what the rounds took.
  CHECK(m.round_overhead().count() == 1);
  CHECK(m.round_overhead().sum_s() > 0);
  CHECK(m.round_overhead().sum_s() < m.round_latency().sum_s());
}

TEST_CASE("a rank missing: FALLBACK for the three, the same for the fourth asking late") {
  Fixture f("missing");
  std::vector<v1::TuneRequest> three;
  for (int r : {0, 1, 3}) three.push_back(RankRequest("job", r, 4, 1000000));
  std::vector<Answer> answers = AskTogether(f, three);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    REQUIRE(a.response.results_size() == 1);
    const v1::ProblemResult& p = a.response.results(0);
    CHECK(p.status() == v1::FALLBACK);
    CHECK(p.winner() == "all_reduce/a");  // the default: the first candidate
    CHECK(p.winner_index() == 0);
    CHECK(p.reason() ==
          "not every rank arrived within the pre-sync window (3 of 4 after 1000000 us)");
    CHECK(p.ranked_size() == 0);
    CHECK(Shared(a.response) == Shared(answers[0].response));
  }
  CHECK(f.backend().runs() == 0);

  v1::TuneResponse late;
  REQUIRE(f.Tune(RankRequest("job", 2, 4, 1000000), &late).ok());
  CHECK(Shared(late) == Shared(answers[0].response));
  CHECK(late.results(0).problem().label() == "op-of-rank-2");

  // Everyone has asked now: the round is measured in the background, and
  // the next round of the group is answered from the cache at once.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  v1::ListCacheResponse listed;
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    listed.Clear();
    REQUIRE(f.stub().ListCache(&ctx, {}, &listed).ok());
    if (listed.entries_size() == 1) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(listed.entries_size() == 1);
  CHECK(listed.entries(0).winner() == "all_reduce/b");
  std::vector<v1::TuneRequest> four;
  for (int r = 0; r < 4; ++r) four.push_back(RankRequest("job", r, 4, 1000000));
  answers = AskTogether(f, four);
  for (const Answer& a : answers) {
    REQUIRE(a.status.ok());
    CHECK(a.response.results(0).status() == v1::CACHED);
    CHECK(a.response.results(0).winner() == "all_reduce/b");
  }
  const v1::NodeMetrics m = f.Metrics();
  CHECK(m.results_fallback() == 4);
  CHECK(m.results_cached() == 4);
}

TEST_CASE("inconsistent ranks: every rank involved gets the same clear error") {
  Fixture f("inconsistent");
  SECTION("members that disagree") {
    v1::TuneRequest odd = RankRequest("m", 1, 2);
    odd.mutable_group()->mutable_members(0)->set_local_gpu(3);
    std::vector<Answer> answers;
    std::thread first([&] {
      v1::TuneResponse r;
      grpc::Status s = f.Tune(RankRequest("m", 0, 2), &r);
      answers.push_back({s, r});
    });
    REQUIRE(InFlight(f, 1));
    v1::TuneResponse r;
    grpc::Status s = f.Tune(odd, &r);
    first.join();
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("group.members: ranks of group \"m\" disagree on the "
                                 "world size or member list: rank "));
    REQUIRE(answers.size() == 1);
    CHECK(answers[0].status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(answers[0].status.error_message() == s.error_message());
  }
  SECTION("a problem set that differs") {
    v1::TuneRequest odd = RankRequest("p", 1, 2);
    odd.mutable_problems(0)->set_count(2048);
    grpc::Status first_status;
    std::thread first([&] {
      v1::TuneResponse r;
      first_status = f.Tune(RankRequest("p", 0, 2), &r);
    });
    REQUIRE(InFlight(f, 1));
    v1::TuneResponse r;
    grpc::Status s = f.Tune(odd, &r);
    first.join();
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("problems: ranks of group \"p\" asked for different "
                                 "problem sets at the same time"));
    CHECK(first_status.error_message() == s.error_message());
  }
  SECTION("two callers claiming one rank") {
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
    // The rank that asks later for that round gets it too.
    CHECK(f.TuneError(RankRequest("d", 1, 2)) == s.error_message());
  }
  SECTION("errors of one caller, before any round") {
    v1::TuneRequest req = RankRequest("x", 4);
    CHECK(f.TuneError(req) == "group.rank: must be in [0, 4), got 4");
    req = RankRequest("x", 0);
    req.mutable_group()->mutable_members()->RemoveLast();
    CHECK(f.TuneError(req) ==
          "group.members: 3 members for world_size 4; list every rank once");
    req = RankRequest("x", 0);
    req.mutable_group()->mutable_members(2)->set_rank(1);
    CHECK(f.TuneError(req) ==
          "group.members[2].rank: rank 1 is listed twice (also members[1])");
    req = RankRequest("x", 0);
    req.mutable_group()->mutable_members(2)->set_local_gpu(0);
    CHECK(f.TuneError(req) ==
          "group.members[2].local_gpu: GPU 0 is listed twice (also members[0])");
    req = RankRequest("x", 0);
    req.mutable_group()->mutable_members(1)->set_local_gpu(4);
    CHECK(f.TuneError(req) ==
          "group.members[1].local_gpu: must be in [0, 4) on this fake node, got 4");
    req = RankRequest("", 0);
    CHECK_THAT(f.TuneError(req), Catch::StartsWith("group.id: is required"));
    req = RankRequest("x", 0);
    req.mutable_group()->mutable_members(3)->set_daemon("elsewhere:7451");
    v1::TuneResponse r;
    grpc::Status s = f.Tune(req, &r);
    CHECK(s.error_code() == grpc::StatusCode::UNIMPLEMENTED);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("group.members[3].daemon: \"elsewhere:7451\" is another "
                                 "daemon (this one is unnamed: peer_advertise is empty)"));
    CHECK(f.backend().runs() == 0);
  }
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

// Multi-daemon groups, one side at a time (tests/multi_daemon_test.cc runs
// real daemons together).
v1::TuneRequest SpreadRequest(const std::string& group, int rank,
                              const std::vector<std::string>& daemons) {
  v1::TuneRequest req = RankRequest(group, rank, static_cast<int>(daemons.size()));
  for (size_t r = 0; r < daemons.size(); ++r) {
    req.mutable_group()->mutable_members(r)->set_daemon(daemons[r]);
  }
  return req;
}

v1::ReadyRequest Forwarded(const v1::TuneRequest& req, const std::string& from) {
  v1::ReadyRequest ready;
  ready.set_from_daemon(from);
  ready.add_ranks(req.group().rank());
  *ready.mutable_request() = req;
  return ready;
}

TEST_CASE("the leader counts a follower's forwarded rank like a local one: GO, and the "
          "follower's timings max-reduced into the one answer") {
  Fixture f("leader", [](config::DaemonConfig* c) { c->set_peer_advertise("lead:1"); },
            /*peers=*/true);
  const std::vector<std::string> daemons = {"lead:1", "follow:1"};
  Answer local;
  std::thread rank0(
      [&] { local.status = f.Tune(SpreadRequest("g", 0, daemons), &local.response); });
  absl::StatusOr<v1::Decision> remote = f.service().LeadReady(
      Forwarded(SpreadRequest("g", 1, daemons), "follow:1"), absl::Now() + absl::Seconds(20));
  REQUIRE(remote.ok());
  REQUIRE(remote->verdict() == v1::GO);
  const v1::CrossRun go = remote->go();
  CHECK(!go.run_id().empty());
  CHECK(go.problems_size() == 1);
  CHECK(go.candidate_timeout_ms() > 0);

  // What the follower's rank 1 measured: a 10, 50, 25 us per iteration (rank
  // 0's script: 30, 10, 20). The max over ranks makes c the fastest.
  CHECK(f.service().LeadReduce(v1::RankTimings(), absl::Now()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  v1::RankTimings timings;
  timings.set_run_id(go.run_id());
  timings.set_from_daemon("follow:1");
  for (double us : {10.0, 50.0, 25.0}) {
    v1::RankResult* r = timings.add_steps()->add_ranks();
    r->set_rank(1);
    for (int i = 0; i < 3; ++i) r->add_iteration_us(us);
  }
  v1::RankTimings stranger = timings;
  stranger.set_from_daemon("other:1");
  CHECK(f.service().LeadReduce(stranger, absl::Now()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  remote = f.service().LeadReduce(timings, absl::Now() + absl::Seconds(20));
  rank0.join();
  REQUIRE(local.status.ok());
  REQUIRE(remote.ok());
  REQUIRE(remote->verdict() == v1::ANSWERED);
  const v1::ProblemResult& result = local.response.results(0);
  CHECK(result.status() == v1::TUNED);
  CHECK(result.winner() == "all_reduce/c");
  REQUIRE(result.ranked_size() == 3);
  CHECK(result.ranked(0).rank_mean_us_size() == 2);
  CHECK(result.ranked(1).candidate().impl() == "all_reduce/a");
  CHECK(Shared(remote->response()) == Shared(local.response));
  CHECK(f.backend().runs() == 3);  // rank 0 alone, each candidate once

  // The run's other peer calls: bad input names the field; a finished run's
  // barriers are no longer open to strangers.
  CHECK(f.service().LeadExchange(v1::ExchangeRequest(), absl::Now()).status().message() ==
        "run_id: required");
  v1::ExchangeRequest exchange;
  exchange.set_run_id(go.run_id());
  exchange.set_from_daemon("other:1");
  CHECK(f.service().LeadExchange(exchange, absl::Now()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  exchange.set_run_id("no-such-run");
  CHECK(f.service().LeadExchange(exchange, absl::Now()).status().code() ==
        absl::StatusCode::kNotFound);

  // Asks this daemon must not serve: the same REJECTED shape, nothing run.
  remote = f.service().LeadReady(Forwarded(SpreadRequest("g", 0, daemons), "follow:1"),
                                 absl::Now() + absl::Seconds(5));
  REQUIRE(remote.ok());
  CHECK(remote->verdict() == v1::REJECTED);
  CHECK(remote->error_code() == static_cast<int>(absl::StatusCode::kInvalidArgument));
  CHECK_THAT(remote->error_message(), Catch::Contains("rank 0 is on this daemon"));
  remote = f.service().LeadReady(
      Forwarded(SpreadRequest("g", 1, {"other:1", "follow:1"}), "follow:1"),
      absl::Now() + absl::Seconds(5));
  REQUIRE(remote.ok());
  CHECK(remote->verdict() == v1::REJECTED);
  CHECK(remote->error_code() == static_cast<int>(absl::StatusCode::kFailedPrecondition));
  CHECK_THAT(remote->error_message(), Catch::Contains("does not lead group \"g\""));
  CHECK(f.backend().runs() == 3);
}

TEST_CASE("a follower never decides: its leader unreachable is UNAVAILABLE for its ranks") {
  Fixture f("follower", [](config::DaemonConfig* c) { c->set_peer_advertise("follow:1"); },
            /*peers=*/true);
  // Port 1 on loopback: nobody listens.
  const std::vector<std::string> daemons = {"127.0.0.1:1", "follow:1", "follow:1"};
  const std::vector<v1::TuneRequest> asks = {SpreadRequest("g", 1, daemons),
                                             SpreadRequest("g", 2, daemons)};
  std::vector<Answer> answers = AskTogether(f, asks);
  for (const Answer& a : answers) {
    CHECK(a.status.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(a.status.error_message(),
               Catch::StartsWith("leader 127.0.0.1:1 unreachable (followers never decide"));
  }
  CHECK(answers[0].status.error_message() == answers[1].status.error_message());
  CHECK(f.backend().runs() == 0);

  // A rank of another daemon is not this one's to forward.
  CHECK_THAT(f.TuneError(SpreadRequest("g", 0, daemons)),
             Catch::StartsWith("group.rank: rank 0 is on daemon \"127.0.0.1:1\""));
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

}  // namespace
}  // namespace autotuned
