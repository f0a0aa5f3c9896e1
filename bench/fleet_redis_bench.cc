// The fleet cache's lookup latency against a local redis-server (Debian's,
// started here: no persistence), as the daemon pays it after a local miss:
// FleetCache::Lookup for a key that is there (hit: GET, checksum, decode)
// and one that is not (miss: GET answering nil), and Publish (SET with a
// TTL), over a Unix socket and over TCP on loopback. Prints p50, p99 and
// the mean per operation, in microseconds, one line each, and what the
// fleet cache counted (any error makes the exit status 1).
//
//   fleet_redis_bench [ROUNDS]      (20000)
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/state/cache/key.h"
#include "daemon/state/fleetcache/fleet_cache.h"
#include "daemon/state/fleetcache/redis_server_testing.h"

namespace autotuned::fleetcache {
namespace {

constexpr char kFingerprint[] = "00112233aabbccdd";

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A realistic entry: an all_reduce with 4 ranked candidates.
std::string KeyText(int64_t count) {
  v1::Problem p;
  p.set_collective(v1::ALL_REDUCE);
  p.set_dtype(v1::BFLOAT16);
  p.set_count(count);
  for (const char* impl : {"all_reduce/ring", "all_reduce/one_shot", "all_reduce/two_shot",
                           "all_reduce/nccl"}) {
    p.add_candidates()->set_impl(impl);
  }
  return CacheKeyText(kFingerprint, 8, 8, p, 1, "links: NV18 NV18 NV18 NV18");
}

v1::ProblemResult Ranked(int64_t count) {
  v1::ProblemResult r;
  r.set_status(v1::TUNED);
  r.mutable_problem()->set_count(count);
  for (int c = 0; c < 4; ++c) {
    r.mutable_problem()->add_candidates()->set_impl(absl::StrCat("all_reduce/impl", c));
    v1::CandidateResult* cr = r.add_ranked();
    *cr->mutable_candidate() = r.problem().candidates(c);
    cr->set_index(c);
    cr->set_ok(true);
    cr->set_mean_us(10.0 + c);
    cr->set_median_us(10.0 + c);
    cr->set_min_us(9.0 + c);
    cr->set_max_us(12.0 + c);
    for (int rank = 0; rank < 8; ++rank) cr->add_rank_mean_us(10.0 + c);
  }
  r.set_winner("all_reduce/impl0");
  r.set_winner_index(0);
  return r;
}

void Report(const char* transport, const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  printf("%-5s %-8s n=%zu p50_us=%.1f p99_us=%.1f mean_us=%.1f\n", transport, what, us.size(),
         us[us.size() / 2], us[us.size() * 99 / 100], sum / static_cast<double>(us.size()));
}

template <typename F>
std::vector<double> Time(int rounds, F&& f) {
  std::vector<double> us;
  us.reserve(rounds);
  for (int i = 0; i < rounds; ++i) {
    const absl::Time start = absl::Now();
    f(i);
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  return us;
}

int Run(const char* transport, const std::string& address, int rounds) {
  metrics::Registry registry;
  metrics::DaemonMetrics metrics(&registry);
  // Bounds far above any latency measured: a call that overran the daemon's
  // default 100 ms would start an outage and later calls would fail at once,
  // timed as if they were lookups.
  FleetCacheOptions options;
  options.redis = address;
  options.connect_timeout = absl::Seconds(5);
  options.command_timeout = absl::Seconds(5);
  FleetCache fleet(options, &metrics);
  constexpr int kKeys = 1000;
  std::vector<std::string> texts;
  for (int k = 0; k < kKeys; ++k) texts.push_back(KeyText(1024 * (k + 1)));
  Report(transport, "publish", Time(rounds, [&](int i) {
           fleet.Publish(kFingerprint, texts[i % kKeys], Ranked(1024 * (i % kKeys + 1)));
         }));
  Report(transport, "hit", Time(rounds, [&](int i) {
           fleet.Lookup(kFingerprint, texts[i % kKeys]);
         }));
  Report(transport, "miss", Time(rounds, [&](int i) {
           fleet.Lookup(kFingerprint, KeyText(-1 - i));
         }));
  printf("%-5s counted: hits=%ld misses=%ld errors=%ld corrupt=%ld published=%ld "
         "publish_errors=%ld outages=%ld\n",
         transport, metrics.fleet_hits->value(), metrics.fleet_misses->value(),
         metrics.fleet_errors->value(), metrics.fleet_corrupt->value(),
         metrics.fleet_published->value(), metrics.fleet_publish_errors->value(),
         metrics.fleet_outages->value());
  return metrics.fleet_errors->value() + metrics.fleet_corrupt->value() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace autotuned::fleetcache

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (rounds < 100) {
    fprintf(stderr, "usage: fleet_redis_bench [ROUNDS >= 100]\n");
    return 2;
  }
  const int port = autotuned::fleetcache::FreePort();
  autotuned::fleetcache::RedisServer redis;
  const absl::Status started = redis.Start({"--port", std::to_string(port), "--bind", "127.0.0.1"});
  if (!started.ok()) {
    fprintf(stderr, "fleet_redis_bench: %s\n", started.ToString().c_str());
    return 1;
  }
  const std::string info = redis.Call({"INFO", "server"});
  const size_t at = info.find("redis_version:");
  printf("redis-server %s, rounds=%d per operation\n",
         at == std::string::npos ? "?" : info.substr(at + 14, info.find('\r', at) - at - 14).c_str(),
         rounds);
  int failed = autotuned::fleetcache::Run("unix", redis.address(), rounds);
  failed |= autotuned::fleetcache::Run("tcp", absl::StrCat("127.0.0.1:", port), rounds);
  return failed;
}
