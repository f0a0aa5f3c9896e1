// The daemon's life after startup: readiness, reloads and the drain at stop,
// driven by signals and reported to the service manager (notify.h).
//
//   ready       READY=1 with a STATUS line, once the caller is listening.
//   SIGHUP      RELOADING=1, Hooks::reload (re-read the configuration and
//               apply what can change live), then READY=1 with the outcome in
//               STATUS. A failed reload keeps the running settings. The
//               outcome is logged and put in STATUS escaped (LogEscaped: one
//               line, so no forged assignment or log line) and cut at
//               kMaxReloadOutcomeBytes. Under a storm of SIGHUPs (signals
//               coalesce: reloads run back to back) each distinct outcome is
//               logged once per kReloadLogPeriod, at most kReloadLogLines
//               lines in one, the others counted in the next line logged
//               (or at the stop); a pending SIGTERM or SIGINT is always
//               taken before a pending SIGHUP.
//   SIGTERM     Hooks::begin_drain (no new rounds), STOPPING=1, then
//   SIGINT      Hooks::wait_drained until the rounds in progress answered or
//               the drain timeout passed, then Hooks::stop (close the
//               listeners, at most kStopGrace), and RunUntilStopped returns.
//   the bound   With a StopBound: from the first SIGTERM or SIGINT on, the
//               process lives at most drain timeout + kStopGrace +
//               kExitSlack: past that it exits (status 0, logged) without
//               waiting for the rounds still queued or running. A second
//               SIGTERM or SIGINT exits at once. With the defaults (60 s) a
//               stop takes at most 66 s, within the unit's TimeoutStopSec
//               (deploy/autotuned.service).
//
// Signals are taken synchronously with sigwait on the calling thread, so the
// hooks run there, never in a signal handler. Call BlockLifecycleSignals
// before starting any thread: threads inherit the mask, and a signal sent to
// the process is then delivered only to sigwait.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/ops/lifecycle/notify.h"

namespace autotuned {

// The most bytes of a reload's outcome that its log line and STATUS show.
inline constexpr size_t kMaxReloadOutcomeBytes = 4096;
// Reload outcomes logged: each distinct one once per period, at most this
// many lines in one.
inline constexpr absl::Duration kReloadLogPeriod = absl::Seconds(10);
inline constexpr size_t kReloadLogLines = 32;

// How long Hooks::stop may let the calls already answered finish.
inline constexpr absl::Duration kStopGrace = absl::Seconds(5);
// What the bound on a stop adds to the drain timeout and kStopGrace.
inline constexpr absl::Duration kExitSlack = absl::Seconds(1);

struct LifecycleHooks {
  // Re-reads and applies the configuration. Returns a one-line summary of
  // what changed (for STATUS and the log), or why nothing did.
  std::function<absl::StatusOr<std::string>()> reload;
  // Stops taking new rounds; returns at once.
  std::function<void()> begin_drain;
  // True once no round is in progress; waits at most until `deadline`.
  std::function<bool(absl::Time deadline)> wait_drained;
  // Closes the listeners (after the drain, or at its timeout).
  std::function<void()> stop;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every
// thread it starts afterwards).
void BlockLifecycleSignals();
// Undoes it: for a child process, which inherits the mask across exec.
void UnblockLifecycleSignals();

// Ignores SIGPIPE for the whole process: when whatever reads the daemon's
// log goes away (a pipe to `head`, a dead collector), or a peer closes a
// socket or pipe, a write fails with EPIPE instead of killing the daemon.
void IgnoreBrokenPipes();

// Ignores SIGXFSZ for the whole process: a write past the file size limit
// (RLIMIT_FSIZE: `ulimit -f`, systemd's LimitFSIZE=), of a cache entry or a
// log file, fails with EFBIG (a store not made, logged) instead of killing
// the daemon.
void IgnoreFileSizeLimit();

// Raises the soft limit on open files to the hard one (systemd's default
// soft limit, 1024, is what a few hundred clients and peers exhaust); the
// limit now in force, or the error.
absl::StatusOr<int64_t> RaiseOpenFileLimit();

// The bound on a stop (above). Armed by RunUntilStopped at the first stop
// signal: from then on a thread of its own ends the process with
// std::_Exit(0) at the bound, or at once on a second SIGTERM or SIGINT,
// unless the StopBound is destroyed first (the daemon makes it before
// everything a stop must not wait for, so that it is destroyed last).
class StopBound {
 public:
  StopBound() = default;
  StopBound(const StopBound&) = delete;
  StopBound& operator=(const StopBound&) = delete;
  // Disarms it and waits for its thread.
  ~StopBound();

  // Starts the thread; `bound`: when the process must be gone. Once only.
  void Arm(absl::Time bound) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Watch(absl::Time bound) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool disarmed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Sends READY=1 (STATUS=`ready_status`) and serves signals as described
// above until SIGTERM or SIGINT; returns the signal that stopped it. The
// drain waits at most `drain_timeout`; `drained` tells whether every round
// in progress finished in time. `bound`, when not null, is armed at the
// first stop signal. Needs BlockLifecycleSignals first.
int RunUntilStopped(const Notifier& notifier, const LifecycleHooks& hooks,
                    absl::Duration drain_timeout, const std::string& ready_status,
                    bool* drained, StopBound* bound = nullptr);

}  // namespace autotuned
