// The daemon's life after startup: readiness, reloads and the drain at stop,
// driven by signals and reported to the service manager (notify.h).
//
//   ready       READY=1 with a STATUS line, once the caller is listening.
//   SIGHUP      RELOADING=1, Hooks::reload (re-read the configuration and
//               apply what can change live), then READY=1 with the outcome in
//               STATUS. A failed reload keeps the running settings.
//   SIGTERM     Hooks::begin_drain (no new rounds), STOPPING=1, then
//   SIGINT      Hooks::wait_drained until the rounds in progress answered or
//               the drain timeout passed, then Hooks::stop (close the
//               listeners), and RunUntilStopped returns.
//
// Signals are taken synchronously with sigwait on the calling thread, so the
// hooks run there, never in a signal handler. Call BlockLifecycleSignals
// before starting any thread: threads inherit the mask, and a signal sent to
// the process is then delivered only to sigwait.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/lifecycle/notify.h"

namespace autotuned {

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

// Sends READY=1 (STATUS=`ready_status`) and serves signals as described
// above until SIGTERM or SIGINT; returns the signal that stopped it. The
// drain waits at most `drain_timeout`; `drained` tells whether every round
// in progress finished in time. Needs BlockLifecycleSignals first.
int RunUntilStopped(const Notifier& notifier, const LifecycleHooks& hooks,
                    absl::Duration drain_timeout, const std::string& ready_status,
                    bool* drained);

}  // namespace autotuned
