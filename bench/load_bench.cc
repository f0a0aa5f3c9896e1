// Load benchmark (not a test): many concurrent clients against one running
// daemon, mostly cache hits with a steady trickle of misses, as a node full
// of compiler processes would ask. Prints throughput, latency percentiles
// (all, hits, misses), errors by status code, and the daemon's resident
// memory before and after. bench/load.sh starts the daemon and runs this.
//
//   load_bench --socket=/path/autotuned.sock --clients=64 --duration=60s
//              --miss_every=50 --daemon_pid=PID
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/autotuned.grpc.pb.h"

ABSL_FLAG(std::string, socket, "/run/autotuned/autotuned.sock", "the daemon's Unix socket");
ABSL_FLAG(int, clients, 64, "concurrent clients, one channel and one thread each");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "how long to send requests");
ABSL_FLAG(int, miss_every, 50, "one request in this many asks a problem never seen "
          "(a cache miss, measured on the backend); the others ask one of --hot");
ABSL_FLAG(int, hot, 16, "distinct problems measured once up front, then answered from the cache");
ABSL_FLAG(int, daemon_pid, 0, "the daemon's pid, to report its resident memory");

namespace autotuned {
namespace {

v1::TuneRequest Request(int64_t count) {
  v1::TuneRequest req;
  req.mutable_group()->set_id("load");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(5);
  v1::Problem* p = req.add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  p->add_candidates()->set_impl("all_reduce/ring");
  p->add_candidates()->set_impl("all_reduce/one_shot");
  p->add_candidates()->set_impl("all_reduce/two_shot");
  return req;
}

// Hot problems: 4 KiB, 8 KiB, ... (multiples of 1024 elements); misses:
// about 16 KiB, never repeated and never a multiple of 1024 elements, 16-byte
// aligned as every candidate requires.
int64_t HotCount(int i) { return 1024 * (i + 1); }
int64_t MissCount(int64_t i) { return 4004 + 8 * i; }

int64_t RssKiB(int pid) {
  if (pid <= 0) return -1;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

struct Samples {
  absl::Mutex mu;
  std::vector<double> hit_ms, miss_ms;
  std::map<std::string, int64_t> errors;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

void PrintLatency(const char* what, const std::vector<double>& ms) {
  printf("  %-6s %9zu requests  p50 %8.3f ms  p90 %8.3f ms  p99 %8.3f ms  max %8.3f ms\n",
         what, ms.size(), Percentile(ms, 0.5), Percentile(ms, 0.9), Percentile(ms, 0.99),
         Percentile(ms, 1.0));
}

std::unique_ptr<v1::Autotune::Stub> Connect(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection per client
  return v1::Autotune::NewStub(grpc::CreateCustomChannel(
      "unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

int Main() {
  const std::string socket = absl::GetFlag(FLAGS_socket);
  const int clients = absl::GetFlag(FLAGS_clients);
  const int hot = absl::GetFlag(FLAGS_hot);
  const int miss_every = absl::GetFlag(FLAGS_miss_every);
  const int pid = absl::GetFlag(FLAGS_daemon_pid);

  const int64_t rss_start = RssKiB(pid);
  auto warm = Connect(socket);
  for (int i = 0; i < hot; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::TuneResponse resp;
    grpc::Status s = warm->Tune(&ctx, Request(HotCount(i)), &resp);
    if (!s.ok()) {
      fprintf(stderr, "load_bench: warming problem %d: %s\n", i, s.error_message().c_str());
      return 1;
    }
  }
  const int64_t rss_warm = RssKiB(pid);

  Samples samples;
  std::atomic<int64_t> next_miss{0};
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::GetFlag(FLAGS_duration);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = Connect(socket);
      std::vector<double> hit_ms, miss_ms;
      std::map<std::string, int64_t> errors;
      for (int64_t k = c; absl::Now() < end; k += clients) {
        const bool miss = miss_every > 0 && k % miss_every == miss_every - 1;
        const v1::TuneRequest req =
            Request(miss ? MissCount(next_miss++) : HotCount(static_cast<int>(k % hot)));
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::TuneResponse resp;
        const absl::Time t0 = absl::Now();
        grpc::Status s = stub->Tune(&ctx, req, &resp);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
        const v1::DecisionStatus want = miss ? v1::TUNED : v1::CACHED;
        if (!s.ok()) {
          ++errors[absl::StrCat("grpc code ", s.error_code(), ": ", s.error_message())];
        } else if (resp.results_size() != 1 || resp.results(0).status() != want) {
          ++errors[absl::StrCat("unexpected status ",
                                resp.results_size() ? resp.results(0).status() : -1)];
        } else {
          (miss ? miss_ms : hit_ms).push_back(ms);
        }
      }
      absl::MutexLock lock(&samples.mu);
      samples.hit_ms.insert(samples.hit_ms.end(), hit_ms.begin(), hit_ms.end());
      samples.miss_ms.insert(samples.miss_ms.end(), miss_ms.begin(), miss_ms.end());
      for (const auto& [what, n] : errors) samples.errors[what] += n;
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t rss_end = RssKiB(pid);

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::NodeInfoResponse info;
  const bool have_info = warm->NodeInfo(&ctx, {}, &info).ok();

  absl::MutexLock lock(&samples.mu);
  std::vector<double> all = samples.hit_ms;
  all.insert(all.end(), samples.miss_ms.begin(), samples.miss_ms.end());
  int64_t errors = 0;
  for (const auto& [what, n] : samples.errors) errors += n;
  printf("clients %d, duration %.1f s, hot problems %d, one miss in %d requests\n", clients,
         seconds, hot, miss_every);
  printf("throughput  %.0f answered requests/s (%zu answered, %lld errors)\n",
         all.size() / seconds, all.size(), static_cast<long long>(errors));
  printf("latency (client side, per Tune call):\n");
  PrintLatency("all", all);
  PrintLatency("hits", samples.hit_ms);
  PrintLatency("misses", samples.miss_ms);
  for (const auto& [what, n] : samples.errors) {
    printf("error x%lld: %s\n", static_cast<long long>(n), what.c_str());
  }
  if (pid > 0) {
    printf("daemon RSS  %.1f MiB at start, %.1f MiB after warming, %.1f MiB after the run\n",
           rss_start / 1024.0, rss_warm / 1024.0, rss_end / 1024.0);
  }
  if (have_info) {
    const v1::NodeMetrics& m = info.metrics();
    printf("daemon      rounds %lld, tuned %lld, cached %lld, rejected %lld, cache entries %lld\n",
           static_cast<long long>(m.rounds()), static_cast<long long>(m.results_tuned()),
           static_cast<long long>(m.results_cached()),
           static_cast<long long>(m.rejected_invalid() + m.rejected_draining() +
                                  m.rejected_overloaded()),
           static_cast<long long>(info.cache_entries()));
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace autotuned

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return autotuned::Main();
}
