#include "daemon/lifecycle/lifecycle.h"

#include <signal.h>
#include <string.h>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

sigset_t LifecycleSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

void Report(const absl::Status& s) {
  if (!s.ok()) spdlog::warn("service manager: {}", s.ToString());
}

}  // namespace

void BlockLifecycleSignals() {
  sigset_t set = LifecycleSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void UnblockLifecycleSignals() {
  sigset_t set = LifecycleSignals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void IgnoreBrokenPipes() { signal(SIGPIPE, SIG_IGN); }

int RunUntilStopped(const Notifier& notifier, const LifecycleHooks& hooks,
                    absl::Duration drain_timeout, const std::string& ready_status,
                    bool* drained) {
  const sigset_t set = LifecycleSignals();
  Report(notifier.Ready(ready_status));
  int sig = 0;
  while (true) {
    if (sigwait(&set, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    spdlog::info("SIGHUP: reloading the configuration");
    Report(notifier.Reloading("reloading the configuration"));
    absl::StatusOr<std::string> outcome = hooks.reload();
    if (outcome.ok()) {
      spdlog::info("reload: {}", *outcome);
    } else {
      spdlog::error("reload failed, the running settings stay: {}",
                    outcome.status().ToString());
    }
    Report(notifier.Ready(outcome.ok()
                              ? absl::StrCat(ready_status, "; reloaded")
                              : absl::StrCat(ready_status, "; reload failed: ",
                                             outcome.status().message())));
  }
  spdlog::info("signal {} ({}): draining, at most {}", sig, strsignal(sig),
               absl::FormatDuration(drain_timeout));
  hooks.begin_drain();
  Report(notifier.Stopping("draining: finishing the rounds in progress"));
  *drained = hooks.wait_drained(absl::Now() + drain_timeout);
  if (!*drained) {
    spdlog::warn("drain timeout: rounds still in progress are cut off");
  }
  hooks.stop();
  return sig;
}

}  // namespace autotuned
