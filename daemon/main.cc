// autotuned: the per-node daemon. Parses flags and the configuration, sets up
// logging, builds the backend, the cache and the service, listens, and waits
// for SIGTERM or SIGINT. Nothing else happens here.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "config/config_loader.h"
#include "daemon/backend/factory.h"
#include "daemon/cache/cache.h"
#include "daemon/common/version.h"
#include "daemon/server/server.h"
#include "daemon/service/service.h"

ABSL_FLAG(std::string, config, "", "configuration file (protobuf text format, "
          "schema config/config.proto); empty: the embedded default");
ABSL_FLAG(std::string, socket, "", "overrides unix_socket");
ABSL_FLAG(std::string, listen, "", "overrides tcp_listen (host:port)");
ABSL_FLAG(std::string, backend, "", "overrides backend: auto, sim or cuda");
ABSL_FLAG(int, sim_gpus, 0, "overrides sim.gpus");
ABSL_FLAG(std::string, cache_dir, "", "overrides cache.dir");
ABSL_FLAG(bool, no_cache, false, "overrides cache.enabled with false");
ABSL_FLAG(std::string, log_level, "", "overrides log_level");
ABSL_FLAG(bool, check_config, false,
          "print the effective configuration and exit (status 0 if valid)");

namespace autotuned {
namespace {

absl::StatusOr<config::DaemonConfig> EffectiveConfig() {
  absl::StatusOr<config::DaemonConfig> c =
      config::LoadConfig(absl::GetFlag(FLAGS_config));
  if (!c.ok()) return c;
  if (!absl::GetFlag(FLAGS_socket).empty()) c->set_unix_socket(absl::GetFlag(FLAGS_socket));
  if (!absl::GetFlag(FLAGS_listen).empty()) c->set_tcp_listen(absl::GetFlag(FLAGS_listen));
  if (!absl::GetFlag(FLAGS_backend).empty()) c->set_backend(absl::GetFlag(FLAGS_backend));
  if (absl::GetFlag(FLAGS_sim_gpus) != 0) c->mutable_sim()->set_gpus(absl::GetFlag(FLAGS_sim_gpus));
  if (!absl::GetFlag(FLAGS_cache_dir).empty()) c->mutable_cache()->set_dir(absl::GetFlag(FLAGS_cache_dir));
  if (absl::GetFlag(FLAGS_no_cache)) c->mutable_cache()->set_enabled(false);
  if (!absl::GetFlag(FLAGS_log_level).empty()) c->set_log_level(absl::GetFlag(FLAGS_log_level));
  absl::Status valid = config::ValidateConfig(*c);
  if (!valid.ok()) return valid;
  return c;
}

int Run() {
  absl::StatusOr<config::DaemonConfig> config = EffectiveConfig();
  if (!config.ok()) {
    fprintf(stderr, "autotuned: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    printf("%s", config->DebugString().c_str());
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level()));

  // Block the stop signals before any thread starts, so that only sigwait
  // below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(*config);
  if (!backend.ok()) {
    spdlog::error("backend: {}", backend.status().ToString());
    return 1;
  }
  std::unique_ptr<ResultCache> cache;
  if (config->cache().enabled()) {
    absl::StatusOr<std::unique_ptr<ResultCache>> opened =
        ResultCache::Open(config->cache().dir());
    if (!opened.ok()) {
      spdlog::error("cache: {}", opened.status().ToString());
      return 1;
    }
    cache = std::move(*opened);
  }
  AutotuneService service(backend->get(), cache.get(), *config);
  absl::StatusOr<Listening> listening = StartServer(*config, {&service});
  if (!listening.ok()) {
    spdlog::error("{}", listening.status().ToString());
    return 1;
  }
  spdlog::info(
      "autotuned {} ready: backend={} gpus={} fingerprint={} unix={} tcp_port={} "
      "cache={} ({} entries, {} corrupt files ignored)",
      kDaemonVersion, (*backend)->node().backend, (*backend)->max_world_size(),
      service.fingerprint(),
      listening->unix_socket.empty() ? "off" : listening->unix_socket,
      listening->tcp_port, cache ? cache->dir() : "off", cache ? cache->size() : 0,
      cache ? cache->corrupt_files() : 0);

  int sig = 0;
  sigwait(&stop, &sig);
  spdlog::info("signal {}: stopping", sig);
  listening->server->Shutdown(std::chrono::system_clock::now() +
                              std::chrono::seconds(30));
  if (!listening->unix_socket.empty()) unlink(listening->unix_socket.c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace autotuned

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "autotuned: measures which implementation of a collective is fastest "
      "on this node.\nUsage: autotuned [--config=FILE] [flags]");
  absl::ParseCommandLine(argc, argv);
  return autotuned::Run();
}
