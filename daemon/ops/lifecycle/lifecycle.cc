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

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/escape.h"

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

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Which reload outcomes are logged: each distinct line once per
// kReloadLogPeriod, at most kReloadLogLines lines in one, so that a storm of
// SIGHUPs writes a few lines, not one per reload; the others are counted.
class OutcomeLog {
 public:
  // True when `line` is to be logged now; then *unlogged is how many lines
  // were held back since the last one logged.
  bool Allow(const std::string& line, int64_t* unlogged) {
    const absl::Time now = absl::Now();
    if (now - window_start_ >= kReloadLogPeriod) {
      window_start_ = now;
      logged_.clear();
    }
    if (logged_.contains(line) || logged_.size() >= kReloadLogLines) {
      ++unlogged_;
      return false;
    }
    logged_.insert(line);
    *unlogged = unlogged_;
    unlogged_ = 0;
    return true;
  }
  int64_t unlogged() const { return unlogged_; }

 private:
  absl::Time window_start_ = absl::InfinitePast();
  absl::flat_hash_set<std::string> logged_;
  int64_t unlogged_ = 0;
};

std::string Unlogged(int64_t n) {
  return n > 0 ? absl::StrCat(" (", n, " more reloads since the last such line, not logged)")
               : std::string();
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
  const sigset_t stops = StopSignals();
  Report(notifier.Ready(ready_status));
  OutcomeLog outcomes;
  int sig = 0;
  while (true) {
    // A pending stop signal first: sigwait takes the lowest-numbered signal,
    // and under a storm of SIGHUPs one is always pending again by the end of
    // each reload, which would hold off a SIGTERM for as long as the storm.
    const timespec now{0, 0};
    sig = sigtimedwait(&stops, nullptr, &now);
    if (sig > 0) break;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    spdlog::debug("SIGHUP: reloading the configuration");
    Report(notifier.Reloading("reloading the configuration"));
    absl::StatusOr<std::string> outcome = hooks.reload();
    // What the reload says may quote the file: escaped, bounded, one line.
    const std::string said = LogEscaped(
        outcome.ok() ? *outcome : outcome.status().ToString(), kMaxReloadOutcomeBytes);
    int64_t unlogged = 0;
    if (outcomes.Allow(absl::StrCat(outcome.ok(), said), &unlogged)) {
      if (outcome.ok()) {
        spdlog::info("reload: {}{}", said, Unlogged(unlogged));
      } else {
        spdlog::error("reload failed, the running settings stay: {}{}", said,
                      Unlogged(unlogged));
      }
    }
    Report(notifier.Ready(
        outcome.ok() ? absl::StrCat(ready_status, "; reloaded")
                     : absl::StrCat(ready_status, "; reload failed: ",
                                    LogEscaped(outcome.status().message(),
                                               kMaxReloadOutcomeBytes))));
  }
  if (outcomes.unlogged() > 0) {
    spdlog::info("{} more reloads with outcomes already logged, not logged", outcomes.unlogged());
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
