// Work no one waits for, against the daemon binary over its socket
// (docs/security.md, "Limits"): calls cancelled by their clients stop the
// daemon's work for them within about a second and give their memory back
// (to the system, once the daemon is idle);
// an overloaded daemon answers RESOURCE_EXHAUSTED before its callers'
// deadlines rather than letting them pass.
//
// AUTOTUNED_ABANDONED_CALLS sets how many calls are cancelled (the default
// tier 100; the manual _long twin 1,000).
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/autotuned.grpc.pb.h"
#include "tests/daemon_process.h"

namespace autotuned {
namespace {

using testing::DaemonProcess;
using testing::MakeDaemonNode;
using Node = testing::DaemonNode;

// "all_reduce/slow" sleeps 20 ms per iteration on rank 0: a measurement of
// about 0.15 s, so that the rounds queued for the devices take seconds.
constexpr char kConfig[] =
    "sim { faults { name: \"all_reduce/slow\" base: \"all_reduce/ring\" kind: SLOW_RANK "
    "rank: 0 delay_us: 20000 } }\n"
    "defaults { min_passes: 1 max_passes: 1 }\n";

std::unique_ptr<v1::Autotune::Stub> Stub(const Node& n) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return v1::Autotune::NewStub(grpc::CreateCustomChannel(
      "unix:" + n.socket, grpc::InsecureChannelCredentials(), args));
}

// A float32 all_reduce of `count` elements between the slow candidate and
// ring: the whole group of `world` ranks, or rank 0 of it asking for itself
// (group `group`, window `window_us`).
v1::TuneRequest Ask(int64_t count, int world, const std::string& group = "",
                    int64_t window_us = 0) {
  v1::TuneRequest req;
  req.mutable_group()->set_world_size(world);
  if (!group.empty()) {
    req.mutable_group()->set_id(group);
    req.mutable_group()->set_rank(0);
    for (int r = 0; r < world; ++r) {
      v1::Member* m = req.mutable_group()->add_members();
      m->set_rank(r);
      m->set_local_gpu(r);
    }
    req.mutable_options()->set_presync_window_us(window_us);
  }
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(4);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  p->add_candidates()->set_impl("all_reduce/slow");
  p->add_candidates()->set_impl("all_reduce/ring");
  return req;
}

int64_t RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

int64_t InFlight(v1::Autotune::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::NodeInfoResponse info;
  return stub.NodeInfo(&ctx, {}, &info).ok() ? info.metrics().rounds_in_flight() : -1;
}

int Calls() {
  int n = 100;
  const char* env = std::getenv("AUTOTUNED_ABANDONED_CALLS");
  if (env != nullptr) REQUIRE(absl::SimpleAtoi(env, &n));
  return n;
}

TEST_CASE("calls cancelled by their clients after 10 ms: the daemon's work for them stops "
          "within a second, its memory bounded") {
  Node n = MakeDaemonNode("abandoned", kConfig, {"--log_level=warn"});
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  auto stub = Stub(n);
  {
    // Threads, buffers and the sim warmed up by one measured call.
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::TuneResponse resp;
    REQUIRE(stub->Tune(&ctx, Ask(1024, 2), &resp).ok());
  }
  const int64_t rss_before = RssKib(d.pid());
  const int calls = Calls();
  // Half whole-group misses; half ranks asking for themselves: of one rank
  // (measured at once, waiting for the devices) and lone ranks of two
  // (waiting in a 5 s window). `load`: which load this is (every count new).
  auto cancelled_load = [&](int load) {
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<v1::TuneResponse> responses(calls);
    std::vector<grpc::Status> statuses(calls);
    std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<v1::TuneResponse>>> readers;
    for (int i = 0; i < calls; ++i) {
      const int64_t count = 2048 + 16 * (load * calls + i);  // every one a miss
      const std::string group = absl::StrCat(load, "-", i);
      const v1::TuneRequest req = i % 2 == 0   ? Ask(count, 2)
                                  : i % 4 == 1 ? Ask(count, 1, "one-" + group)
                                               : Ask(count, 2, "lone-" + group, 5000000);
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
      readers.push_back(stub->AsyncTune(contexts.back().get(), req, &cq));
      readers.back()->Finish(&responses[i], &statuses[i], reinterpret_cast<void*>(i + 1));
    }
    absl::SleepFor(absl::Milliseconds(10));
    for (auto& c : contexts) c->TryCancel();
    const absl::Time cancelled = absl::Now();
    std::map<int, int> codes;
    for (int i = 0; i < calls; ++i) {
      void* tag;
      bool ok;
      REQUIRE(cq.Next(&tag, &ok));
      ++codes[statuses[reinterpret_cast<intptr_t>(tag) - 1].error_code()];
    }
    // The daemon's side: every round it took on ends.
    absl::Duration took = absl::InfiniteDuration();
    const absl::Time until = cancelled + absl::Seconds(60);
    while (absl::Now() < until) {
      if (InFlight(*stub) == 0) {
        took = absl::Now() - cancelled;
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    absl::SleepFor(absl::Seconds(1));
    const int64_t rss = RssKib(d.pid());
    std::string seen;
    for (const auto& [code, count] : codes) absl::StrAppend(&seen, " code ", code, " x", count);
    std::fprintf(stderr,
                 "abandoned: load %d, %d calls cancelled after 10 ms:%s; rounds_in_flight "
                 "back to 0 %s after the cancels; RSS %lld KiB (%lld KiB before the first)\n",
                 load, calls, seen.c_str(), absl::FormatDuration(took).c_str(),
                 static_cast<long long>(rss), static_cast<long long>(rss_before));
    CHECK(took < absl::Milliseconds(1500));
    CHECK(codes[grpc::StatusCode::CANCELLED] == calls);
    return rss;
  };
  // Memory bounded: what a load freed goes back to the system once the
  // daemon is idle (docs/operations.md, "Memory"), and the resident memory
  // plateaus: the first load leaves what its code paths, threads and gRPC's
  // pools touched, each further load as large (about) nothing more. Without
  // the bound on malloc's arenas and the idle trim, every load left several
  // MiB more, freed but kept in the arenas of gRPC's threads.
  const int64_t rss_first = cancelled_load(0);
  const int64_t rss_second = cancelled_load(1);
  const int64_t rss_third = cancelled_load(2);
  CHECK(rss_first - rss_before < 8 * 1024);
  CHECK(rss_second - rss_first < 4 * 1024);
  CHECK(rss_third - rss_second < 2 * 1024);
  CHECK(InFlight(*stub) == 0);
  CHECK(d.Stop(SIGTERM) == 0);
}

TEST_CASE("overloaded by concurrent cache misses: every call answered OK or RESOURCE_EXHAUSTED "
          "before its deadline") {
  Node n = MakeDaemonNode("overload", kConfig, {"--log_level=warn"});
  DaemonProcess d;
  REQUIRE(d.Start(n.args, n.socket, n.dir + "/log").ok());
  // 24 clients asking misses of about 0.15 s each with a 1 s deadline: the
  // devices' queue is several seconds long.
  constexpr int kClients = 24;
  const absl::Time end = absl::Now() + absl::Seconds(6);
  absl::Mutex mu;
  std::map<int, int> codes;
  int late = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = Stub(n);
      for (int k = 0; absl::Now() < end; ++k) {
        grpc::ClientContext ctx;
        const absl::Time sent = absl::Now();
        ctx.set_deadline(absl::ToChronoTime(sent + absl::Seconds(1)));
        v1::TuneResponse resp;
        const grpc::Status s = stub->Tune(&ctx, Ask(4096 + 16 * (k * kClients + c), 2), &resp);
        absl::MutexLock lock(&mu);
        ++codes[s.error_code()];
        if (absl::Now() - sent >= absl::Seconds(1)) ++late;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  std::string seen;
  for (const auto& [code, count] : codes) absl::StrAppend(&seen, " code ", code, " x", count);
  INFO("calls by status:" << seen << "; " << late << " answered at or after their deadline");
  std::fprintf(stderr, "overload: calls by status:%s; %d answered at or after their deadline\n",
               seen.c_str(), late);
  CHECK(codes.count(grpc::StatusCode::OK) == 1);
  CHECK(codes.count(grpc::StatusCode::RESOURCE_EXHAUSTED) == 1);
  CHECK(codes.count(grpc::StatusCode::DEADLINE_EXCEEDED) == 0);
  CHECK(codes.size() == 2);  // nothing else
  CHECK(late == 0);
  CHECK(d.Stop(SIGTERM) == 0);
}

}  // namespace
}  // namespace autotuned
