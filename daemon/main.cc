// autotuned: the per-node daemon. Parses flags and the configuration, sets up
// logging, builds the backend, the cache, the metrics, the daemon's core
// (daemon/ops/node) and the services that serve its parts, listens, and hands
// over to the lifecycle (daemon/ops/lifecycle): READY, reload on SIGHUP, drain and
// stop on SIGTERM or SIGINT. Nothing else happens here.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config/config_loader.h"
#include "daemon/measure/backend/cuda/worker/gpu_worker_main.h"
#include "daemon/measure/backend/factory/factory.h"
#include "daemon/state/cache/cache.h"
#include "daemon/state/cache/key.h"
#include "daemon/common/escape.h"
#include "daemon/common/self_exe.h"
#include "common/version.h"
#include "daemon/state/fleetcache/fleet_cache.h"
#include "daemon/serve/http/http_server.h"
#include "daemon/ops/lifecycle/heap.h"
#include "daemon/ops/lifecycle/lifecycle.h"
#include "daemon/ops/logging/logging.h"
#include "daemon/serve/server/listener_probe.h"
#include "daemon/ops/lifecycle/notify.h"
#include "daemon/ops/lifecycle/reload.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/ops/node/node.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/peer/peer_service.h"
#include "daemon/coordinate/peer/peer_tls.h"
#include "daemon/serve/server/health_service.h"
#include "daemon/serve/server/server.h"
#include "daemon/serve/service/service.h"

ABSL_FLAG(std::string, config, "", "configuration file (protobuf text format, "
          "schema config/config.proto); empty: the embedded default. Re-read "
          "on SIGHUP");
ABSL_FLAG(std::string, socket, "", "overrides unix_socket");
ABSL_FLAG(std::string, listen, "", "overrides tcp_listen (host:port)");
ABSL_FLAG(std::string, backend, "", "overrides backend: auto, sim or cuda");
ABSL_FLAG(int, sim_gpus, -1, "overrides sim.gpus (-1: the configuration's)");
ABSL_FLAG(std::string, cache_dir, "", "overrides cache.dir");
ABSL_FLAG(bool, no_cache, false, "overrides cache.enabled with false");
ABSL_FLAG(std::string, log_level, "", "overrides log_level");
ABSL_FLAG(std::string, metrics_listen, "", "overrides metrics_listen (host:port)");
ABSL_FLAG(std::string, peer_listen, "", "overrides peer_listen (host:port)");
ABSL_FLAG(bool, check_config, false,
          "print the effective configuration and exit (status 0 if valid)");
ABSL_FLAG(int64_t, listener_probe_ms, 2000,
          "how often the daemon checks that its client listener and its peer port answer; 3 "
          "failures in a row: the listener is made anew (5 failed remakes in a row: exit 1; "
          "0 = off)");
ABSL_FLAG(bool, gpu_worker, false,
          "internal: run as the cuda backend's GPU worker process (the daemon "
          "starts its own binary this way)");
ABSL_FLAG(bool, gpu_worker_test_faults, false,
          "internal: with --gpu_worker, add the test fault kernels");

namespace autotuned {
namespace {

// The file merged over the default, then the flags; validated.
absl::StatusOr<config::DaemonConfig> EffectiveConfig() {
  absl::StatusOr<config::DaemonConfig> c =
      config::LoadConfig(absl::GetFlag(FLAGS_config));
  if (!c.ok()) return c;
  if (!absl::GetFlag(FLAGS_socket).empty()) c->set_unix_socket(absl::GetFlag(FLAGS_socket));
  if (!absl::GetFlag(FLAGS_listen).empty()) c->set_tcp_listen(absl::GetFlag(FLAGS_listen));
  if (!absl::GetFlag(FLAGS_backend).empty()) c->set_backend(absl::GetFlag(FLAGS_backend));
  if (absl::GetFlag(FLAGS_sim_gpus) != -1) c->mutable_sim()->set_gpus(absl::GetFlag(FLAGS_sim_gpus));
  if (!absl::GetFlag(FLAGS_cache_dir).empty()) c->mutable_cache()->set_dir(absl::GetFlag(FLAGS_cache_dir));
  if (absl::GetFlag(FLAGS_no_cache)) c->mutable_cache()->set_enabled(false);
  if (!absl::GetFlag(FLAGS_log_level).empty()) c->set_log_level(absl::GetFlag(FLAGS_log_level));
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    c->set_metrics_listen(absl::GetFlag(FLAGS_metrics_listen));
  }
  if (!absl::GetFlag(FLAGS_peer_listen).empty()) {
    c->set_peer_listen(absl::GetFlag(FLAGS_peer_listen));
  }
  absl::Status valid = config::ValidateConfig(*c);
  if (!valid.ok()) return valid;
  return c;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// Probes a listener every --listener_probe_ms: the client listener with
// Health/Check (Unix socket, else the TCP port), the peer port by whether
// it still listens and takes its connections (TcpAccepting: it answers
// nothing without credentials). Three failures in a row: the listener is
// gone (e.g. gRPC stopped accepting for good when accept failed with "Too
// many open files"), and
// it is made anew in place; after kMaxFailedRestarts restarts in a row that
// could not open it, the daemon exits 1 so that the service manager
// restarts it (the last resort: the rounds in memory are lost). Null when
// off.
constexpr int kMaxFailedRestarts = 5;

template <typename Listener>
std::unique_ptr<ListenerProbe> StartProbe(const std::string& what, const std::string& target,
                                          ListenerProbe::Alive alive, Listener* listener,
                                          metrics::Counter* remakes) {
  const int64_t ms = absl::GetFlag(FLAGS_listener_probe_ms);
  if (ms <= 0) return nullptr;
  auto failed = std::make_shared<int>(0);  // restarts that failed in a row
  auto on_dead = [what, listener, target, failed, remakes] {
    const absl::Status restarted = listener->Restart();
    if (restarted.ok()) {
      *failed = 0;
      remakes->Increment();
      spdlog::warn("the {} listener {} no longer answered: made it anew ({} so far)", what,
                   target, listener->restarts());
      return true;
    }
    if (++*failed < kMaxFailedRestarts) {
      spdlog::error("the {} listener {} no longer answers and could not be made anew "
                    "({} of {}): {}", what, target, *failed, kMaxFailedRestarts,
                    restarted.ToString());
      return false;
    }
    spdlog::error("the {} listener {} no longer answers and could not be made anew "
                  "{} times: exiting (status 1) to be restarted", what, target,
                  kMaxFailedRestarts);
    spdlog::default_logger()->flush();
    std::_Exit(1);
  };
  if (!alive) {
    return std::make_unique<ListenerProbe>(target, absl::Milliseconds(ms), 3, on_dead);
  }
  return std::make_unique<ListenerProbe>(target, std::move(alive), absl::Milliseconds(ms), 3,
                                         on_dead);
}

int Run() {
  absl::StatusOr<config::DaemonConfig> config = EffectiveConfig();
  if (!config.ok()) {
    fprintf(stderr, "autotuned: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    config::DaemonConfig shown = *config;
    if (!shown.peer_token().empty()) shown.set_peer_token("<redacted>");
    printf("%s", shown.DebugString().c_str());
    return 0;
  }
  SetUpLogging(spdlog::level::from_str(config->log_level()));
  absl::StatusOr<std::string> peer_token = LoadPeerToken(*config);
  if (!peer_token.ok()) {
    fprintf(stderr, "autotuned: %s\n", std::string(peer_token.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::optional<PeerTls>> peer_tls = LoadPeerTls(*config);
  if (!peer_tls.ok()) {
    fprintf(stderr, "autotuned: %s\n", std::string(peer_tls.status().message()).c_str());
    return 2;
  }
  const std::vector<std::string> peers(config->peers().begin(), config->peers().end());
  absl::StatusOr<fleetcache::FleetCacheOptions> fleet_options =
      fleetcache::FleetCacheOptionsFrom(config->fleet_cache());
  if (!fleet_options.ok()) {
    fprintf(stderr, "autotuned: %s\n", std::string(fleet_options.status().message()).c_str());
    return 2;
  }

  // Before the first file is written (the socket's lock).
  IgnoreFileSizeLimit();
  // One daemon per socket path: before the cache, the backend or a listener.
  if (absl::StatusOr<int> lock = LockSocketPath(*config); !lock.ok()) {
    spdlog::error("{}", lock.status().ToString());
    return 1;
  }
  // Before any thread starts: signals then reach only the lifecycle's sigwait,
  // and every thread's arena is one of the bounded few.
  const int malloc_arenas = BoundMallocArenas();
  BlockLifecycleSignals();
  IgnoreBrokenPipes();
  // Made first, destroyed last: a stop also bounds the destructors below.
  StopBound stop_bound;
  absl::StatusOr<int64_t> open_files = RaiseOpenFileLimit();
  if (!open_files.ok()) spdlog::warn("open files: {}", open_files.status().ToString());
  const Notifier notifier(Env("NOTIFY_SOCKET"));
  absl::StatusOr<absl::Duration> watchdog_timeout = WatchdogTimeout(
      std::getenv("WATCHDOG_USEC"), std::getenv("WATCHDOG_PID"), getpid());
  if (!watchdog_timeout.ok()) {
    spdlog::warn("watchdog off: {}", watchdog_timeout.status().ToString());
    watchdog_timeout = absl::ZeroDuration();
  }
  // From here on, the service manager hears from us even while the backend
  // comes up.
  WatchdogPinger watchdog(&notifier, *watchdog_timeout);

  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(*config, SelfExe());
  if (!backend.ok()) {
    spdlog::error("backend: {}", backend.status().ToString());
    return 1;
  }
  std::unique_ptr<ResultCache> cache;
  if (config->cache().enabled()) {
    absl::StatusOr<std::unique_ptr<ResultCache>> opened =
        ResultCache::Open(config->cache().dir(),
                          ResultCacheOptions{config->cache().max_entries(),
                                             config->cache().max_bytes()});
    if (!opened.ok()) {
      spdlog::error("cache: {}", opened.status().ToString());
      return 1;
    }
    cache = std::move(*opened);
  }

  metrics::Registry registry;
  metrics::DaemonMetrics metrics(&registry);
  // What a burst of calls freed goes back to the system once it is over.
  IdleHeapTrimmer heap_trimmer(
      [&metrics] { return metrics.rounds_in_flight->value() == 0; });
  std::unique_ptr<fleetcache::FleetCache> fleet;
  if (!fleet_options->redis.empty()) {
    fleet = std::make_unique<fleetcache::FleetCache>(*std::move(fleet_options), &metrics);
  }
  std::unique_ptr<HttpServer> metrics_server;
  if (!config->metrics_listen().empty()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> started = HttpServer::Start(
        {config->metrics_listen()},
        {{"/metrics", HttpPage{"text/plain; version=0.0.4; charset=utf-8",
                               [&registry] { return registry.RenderText(); }}}});
    if (!started.ok()) {
      spdlog::error("metrics_listen: {}", started.status().ToString());
      return 1;
    }
    metrics_server = std::move(*started);
  }
  const std::string fingerprint =
      NodeFingerprint((*backend)->node(), (*backend)->catalogue().Version());
  std::unique_ptr<PeerService> peer;
  std::unique_ptr<PeerListener> peer_listener;
  if (!config->peer_listen().empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::optional<std::vector<std::string>> tls_peer_hosts;
    if (*peer_tls) {
      tls_peer_hosts = HostsOf(peers);
      LogGrpcThroughSpdlog();  // refused handshakes in the daemon's log
    }
    peer = std::make_unique<PeerService>(*peer_token, host, fingerprint,
                                         config->limits().max_waiting_ranks(),
                                         std::move(tls_peer_hosts));
    absl::StatusOr<std::unique_ptr<PeerListener>> started =
        PeerListener::Start(*config, peer.get(), PeerServerCredentials(*peer_tls));
    if (!started.ok()) {
      spdlog::error("{}", started.status().ToString());
      return 1;
    }
    peer_listener = std::move(*started);
  }
  const std::string peer_address = peer_listener ? peer_listener->address() : "";

  // Multi-daemon groups: this daemon reaches their leaders with the same
  // token and certificate, and leads those whose rank 0 is here.
  std::unique_ptr<PeerClient> peer_client;
  if (peer && !config->peer_advertise().empty()) {
    peer_client = std::make_unique<PeerClient>(*peer_token, config->peer_advertise(), peers,
                                               PeerChannelCredentials(*peer_tls));
    if (config->peers_size() == 0) {
      spdlog::warn(
          "peers is empty: groups spread over daemons are refused until the configuration "
          "lists the other daemons");
    }
  }
  Node node(backend->get(), cache.get(), *config, {&metrics, peer_client.get(), fleet.get()});
  if (peer) node.ServePeers(peer.get());
  AutotuneService service(
      {&node.backend(), node.cache(), &node.metrics(), &node.admission(), &node.settings(),
       &node.solver(), &node.rounds(), &node.client_runs(), &node.follower()},
      {node.started(), metrics_server ? metrics_server->address() : "", peer_address});
  HealthService health([&node] { return !node.draining(); });
  absl::StatusOr<std::unique_ptr<ClientListener>> listener =
      ClientListener::Start(*config, {&service, &health});
  if (!listener.ok()) {
    spdlog::error("{}", listener.status().ToString());
    return 1;
  }
  const std::string client_target = !(*listener)->unix_socket().empty()
                                        ? "unix:" + (*listener)->unix_socket()
                                        : absl::StrCat("127.0.0.1:", (*listener)->tcp_port());
  std::unique_ptr<ListenerProbe> probe =
      StartProbe("client", client_target, nullptr, listener->get(),
                 metrics.listener_remakes_client);
  std::unique_ptr<ListenerProbe> peer_probe;
  if (peer_listener) {
    const int port = peer_listener->port();
    peer_probe = StartProbe("peer", peer_address,
                            [port](absl::Duration) { return TcpAccepting(port); },
                            peer_listener.get(), metrics.listener_remakes_peer);
  }
  if (probe) {
    watchdog.SetHealthy([&probe, &peer_probe] {
      return probe->serving() && (peer_probe == nullptr || peer_probe->serving());
    });
  }
  spdlog::info(
      "autotuned {} ready: backend={} gpus={} fingerprint={} unix={} tcp_port={} "
      "metrics={} peer={}{} cache={} ({} entries, {} corrupt files ignored) fleet_cache={} "
      "malloc_arenas={}",
      kDaemonVersion, (*backend)->node().backend, (*backend)->max_world_size(), node.fingerprint(),
      (*listener)->unix_socket().empty() ? "off" : (*listener)->unix_socket(),
      (*listener)->tcp_port(), metrics_server ? metrics_server->address() : "off",
      peer_address.empty() ? "off" : peer_address,
      peer_address.empty() ? ""
      : *peer_tls ? (peer_token->empty() ? " (mutual TLS)" : " (mutual TLS and token)")
                  : " (token, no TLS)",
      cache ? cache->dir() : "off", cache ? cache->size() : 0,
      cache ? cache->corrupt_files() : 0,
      fleet ? LogEscaped(fleet->redis()) + (fleet->tls() ? " (TLS)" : "") : "off",
      malloc_arenas > 0 ? absl::StrCat(malloc_arenas) : "default");

  config::DaemonConfig running = *config;
  LifecycleHooks hooks;
  hooks.reload = [&]() -> absl::StatusOr<std::string> {
    absl::StatusOr<config::DaemonConfig> next = EffectiveConfig();
    if (!next.ok()) return next.status();
    const ConfigChanges changes = DiffConfig(running, *next);
    running = ApplyLive(running, *next);
    spdlog::set_level(spdlog::level::from_str(running.log_level()));
    node.UpdateSettings(running.limits(), running.defaults());
    if (peer) peer->SetMaxCalls(running.limits().max_waiting_ranks());
    if (changes.empty()) return std::string("no change");
    return absl::StrCat(
        "applied live: ", changes.live.empty() ? "none" : Describe(changes.live),
        "; need a restart (running values kept): ",
        changes.need_restart.empty() ? "none" : Describe(changes.need_restart));
  };
  hooks.begin_drain = [&] {
    watchdog.SetHealthy(nullptr);
    probe.reset();  // the listeners close during the stop
    peer_probe.reset();
    node.BeginDrain();
    health.Changed();
  };
  hooks.wait_drained = [&](absl::Time deadline) { return node.WaitForRounds(deadline); };
  hooks.stop = [&] {
    // Answers already computed are still sent; after kStopGrace calls are cut.
    const absl::Time deadline = absl::Now() + kStopGrace;
    health.Stop();
    (*listener)->Stop(deadline);
    if (peer_listener) peer_listener->Stop(deadline);
    if (metrics_server) metrics_server->Stop();
  };
  bool drained = false;
  RunUntilStopped(notifier, hooks, absl::Milliseconds(config->drain_timeout_ms()),
                  absl::StrCat("serving on ", (*listener)->unix_socket().empty()
                                                  ? "tcp" : (*listener)->unix_socket()),
                  &drained, &stop_bound);
  spdlog::info("stopped{}", drained ? "" : " (drain timed out)");
  return 0;
}

}  // namespace
}  // namespace autotuned

int main(int argc, char** argv) {
  // --help and --helpshort list this file's flags (absl's default looks
  // for a file named after the program).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "daemon/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "measures which implementation of a collective is fastest "
      "on this node.\nUsage: autotuned [--config=FILE] [flags]\n"
      "Signals: SIGHUP reloads log_level, limits and defaults from --config; "
      "SIGTERM drains (no new rounds, those in progress answered) and exits 0.");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_gpu_worker)) {
    // The worker inherits the daemon's blocked signals across exec; it must
    // die on the signals the service manager sends.
    autotuned::UnblockLifecycleSignals();
    return autotuned::cuda::GpuWorkerMain(absl::GetFlag(FLAGS_gpu_worker_test_faults));
  }
  return autotuned::Run();
}
