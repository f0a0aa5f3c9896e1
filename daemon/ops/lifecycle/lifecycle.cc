#include "daemon/ops/lifecycle/lifecycle.h"

#include <signal.h>
#include <sys/resource.h>
#include <string.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>

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

[[noreturn]] void ExitNow(const std::string& why) {
  spdlog::warn("{}: exiting now, rounds still queued or running are not measured", why);
  spdlog::default_logger()->flush();
  std::_Exit(0);
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

void IgnoreFileSizeLimit() { signal(SIGXFSZ, SIG_IGN); }

absl::StatusOr<int64_t> RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::ErrnoToStatus(errno, "getrlimit(RLIMIT_NOFILE)");
  }
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::ErrnoToStatus(errno, "setrlimit(RLIMIT_NOFILE)");
    }
  }
  return static_cast<int64_t>(limit.rlim_cur);
}

StopBound::~StopBound() {
  {
    absl::MutexLock lock(&mu_);
    disarmed_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StopBound::Arm(absl::Time bound) {
  thread_ = std::thread([this, bound] { Watch(bound); });
}

// The stop signals stay blocked in every thread: this one takes them.
void StopBound::Watch(absl::Time bound) {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (disarmed_) return;
    }
    const absl::Duration left = bound - absl::Now();
    if (left <= absl::ZeroDuration()) ExitNow("the stop's bound passed");
    const timespec wait = absl::ToTimespec(std::min(left, absl::Milliseconds(100)));
    const int sig = sigtimedwait(&stops, nullptr, &wait);
    if (sig > 0) ExitNow(absl::StrCat("second signal ", sig, " (", strsignal(sig), ")"));
  }
}

int RunUntilStopped(const Notifier& notifier, const LifecycleHooks& hooks,
                    absl::Duration drain_timeout, const std::string& ready_status,
                    bool* drained, StopBound* bound) {
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
  spdlog::info("signal {} ({}): draining, at most {}; a second signal stops at once", sig,
               strsignal(sig), absl::FormatDuration(drain_timeout));
  if (bound != nullptr) bound->Arm(absl::Now() + drain_timeout + kStopGrace + kExitSlack);
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
