// The notification protocol against a datagram socket the test owns (as
// systemd would), the reload diff, and the signal loop driven by real
// signals sent to this process.
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "config/config_loader.h"
#include "daemon/ops/lifecycle/lifecycle.h"
#include "daemon/ops/lifecycle/notify.h"
#include "daemon/ops/lifecycle/notify_listener.h"
#include "daemon/ops/lifecycle/reload.h"

namespace autotuned {
namespace {

using testing::HasLine;
using testing::NotifyListener;

std::unique_ptr<NotifyListener> Listener(bool abstract) {
  absl::StatusOr<std::unique_ptr<NotifyListener>> l = NotifyListener::Create(abstract);
  REQUIRE(l.ok());
  return std::move(*l);
}

TEST_CASE("notifications reach a path socket and an abstract one") {
  for (bool abstract : {false, true}) {
    std::unique_ptr<NotifyListener> listener = Listener(abstract);
    INFO(listener->address());
    Notifier n(listener->address());
    CHECK(n.enabled());
    REQUIRE(n.Ready("serving").ok());
    CHECK(listener->Next(absl::Seconds(10)) == "READY=1\nSTATUS=serving");
    REQUIRE(n.Reloading("").ok());
    const std::string reloading = listener->Next(absl::Seconds(10));
    CHECK(HasLine(reloading, "RELOADING=1"));
    CHECK_THAT(reloading, Catch::Contains("\nMONOTONIC_USEC="));
    REQUIRE(n.Stopping("bye").ok());
    CHECK(listener->Next(absl::Seconds(10)) == "STOPPING=1\nSTATUS=bye");
    REQUIRE(n.Watchdog().ok());
    CHECK(listener->Next(absl::Seconds(10)) == "WATCHDOG=1");
  }
}

TEST_CASE("without a socket nothing is sent; a bad socket is an error") {
  CHECK_FALSE(Notifier("").enabled());
  CHECK(Notifier("").Ready("x").ok());
  CHECK(Notifier("relative/path").Ready("").code() == absl::StatusCode::kInvalidArgument);
  CHECK(Notifier("/nonexistent/autotuned/notify").Ready("").code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("a manager that does not read never stalls the sender") {
  char dir[] = "/tmp/atn-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string path = std::string(dir) + "/full";
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  Notifier n(path);
  int lost = 0;
  for (int i = 0; i < 100; ++i) {
    absl::Status s = n.Watchdog();
    if (!s.ok()) {
      CHECK(s.code() == absl::StatusCode::kUnavailable);
      ++lost;
    }
  }
  CHECK(lost > 0);  // the queue (net.unix.max_dgram_qlen) filled up
  close(fd);
  unlink(path.c_str());
  rmdir(dir);
}

TEST_CASE("WATCHDOG_USEC and WATCHDOG_PID give the watchdog timeout") {
  CHECK(*WatchdogTimeout(nullptr, nullptr, 7) == absl::ZeroDuration());
  CHECK(*WatchdogTimeout("", nullptr, 7) == absl::ZeroDuration());
  CHECK(*WatchdogTimeout("30000000", nullptr, 7) == absl::Seconds(30));
  CHECK(*WatchdogTimeout("30000000", "7", 7) == absl::Seconds(30));
  CHECK(*WatchdogTimeout("30000000", "8", 7) == absl::ZeroDuration());
  CHECK(WatchdogTimeout("soon", nullptr, 7).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(WatchdogTimeout("0", nullptr, 7).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(WatchdogTimeout("100", "me", 7).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("the watchdog pinger keeps sending WATCHDOG=1 until destroyed") {
  std::unique_ptr<NotifyListener> listener = Listener(true);
  Notifier n(listener->address());
  {
    WatchdogPinger pinger(&n, absl::Milliseconds(40));
    CHECK(pinger.interval() == absl::Milliseconds(20));
    for (int i = 0; i < 3; ++i) CHECK(listener->Next(absl::Seconds(10)) == "WATCHDOG=1");
  }
  // Drain what was in flight at destruction; then silence.
  while (!listener->Next(absl::Milliseconds(100)).empty()) {
  }
  CHECK(listener->Next(absl::Milliseconds(200)).empty());
  WatchdogPinger off(&n, absl::ZeroDuration());
  CHECK(listener->Next(absl::Milliseconds(100)).empty());
}

TEST_CASE("the watchdog pinger is silent while the daemon cannot serve") {
  std::unique_ptr<NotifyListener> listener = Listener(true);
  Notifier n(listener->address());
  std::atomic<bool> healthy{true};
  WatchdogPinger pinger(&n, absl::Milliseconds(40));
  pinger.SetHealthy([&healthy] { return healthy.load(); });
  CHECK(listener->Next(absl::Seconds(10)) == "WATCHDOG=1");
  healthy = false;
  while (!listener->Next(absl::Milliseconds(100)).empty()) {
  }
  CHECK(listener->Next(absl::Milliseconds(200)).empty());
  healthy = true;
  CHECK(listener->Next(absl::Seconds(10)) == "WATCHDOG=1");
}

TEST_CASE("a reload sorts changed fields into live and restart") {
  config::DaemonConfig before = *config::DefaultConfig();
  config::DaemonConfig after = before;
  CHECK(DiffConfig(before, after).empty());
  after.set_log_level("debug");
  after.mutable_limits()->set_max_iterations(100);
  after.mutable_limits()->set_max_request_bytes(1 << 20);
  after.mutable_defaults()->set_iterations(7);
  after.mutable_sim()->set_gpus(8);
  after.mutable_sim()->add_faults()->set_name("x");
  after.set_peer_token("0123456789abcdef0123");
  const ConfigChanges c = DiffConfig(before, after);
  REQUIRE(c.live.size() == 3);
  CHECK(c.live[0].field == "limits.max_iterations");
  CHECK(c.live[1].field == "defaults.iterations");
  CHECK(c.live[2].field == "log_level");
  CHECK(c.live[2].before == "\"info\"");
  CHECK(c.live[2].after == "\"debug\"");
  REQUIRE(c.need_restart.size() == 4);
  CHECK(c.need_restart[0].field == "sim.gpus");
  CHECK(c.need_restart[1].field == "sim.faults");
  CHECK(c.need_restart[1].after == "1 entries");
  CHECK(c.need_restart[2].field == "limits.max_request_bytes");
  CHECK(c.need_restart[3].field == "peer_token");
  CHECK(Describe(c.live) ==
        "limits.max_iterations 10000 -> 100, defaults.iterations 20 -> 7, "
        "log_level \"info\" -> \"debug\"");
  CHECK_THAT(Describe(c.need_restart), Catch::Contains("peer_token <redacted>") &&
                                           !Catch::Contains("0123456789"));

  const config::DaemonConfig applied = ApplyLive(before, after);
  CHECK(applied.log_level() == "debug");
  CHECK(applied.limits().max_iterations() == 100);
  CHECK(applied.limits().max_request_bytes() == before.limits().max_request_bytes());
  CHECK(applied.defaults().iterations() == 7);
  CHECK(applied.sim().gpus() == before.sim().gpus());
  CHECK(applied.peer_token().empty());
}

TEST_CASE("signals: READY, SIGHUP reloads, SIGTERM drains then stops") {
  BlockLifecycleSignals();
  std::unique_ptr<NotifyListener> listener = Listener(false);
  Notifier n(listener->address());
  std::atomic<int> reloads{0};
  std::atomic<bool> draining{false}, stopped{false};
  absl::Notification may_finish;
  LifecycleHooks hooks;
  hooks.reload = [&]() -> absl::StatusOr<std::string> {
    if (++reloads == 2) return absl::InvalidArgumentError("bad.conf:1:1: nope");
    return std::string("applied live: log_level");
  };
  hooks.begin_drain = [&] { draining = true; };
  hooks.wait_drained = [&](absl::Time deadline) {
    CHECK(draining);
    return may_finish.WaitForNotificationWithDeadline(deadline);
  };
  hooks.stop = [&] { stopped = true; };

  int stop_signal = 0;
  bool drained = false;
  std::thread loop([&] {
    stop_signal = RunUntilStopped(n, hooks, absl::Seconds(30), "serving", &drained);
  });
  CHECK(listener->Next(absl::Seconds(10)) == "READY=1\nSTATUS=serving");

  kill(getpid(), SIGHUP);
  CHECK(HasLine(listener->Next(absl::Seconds(10)), "RELOADING=1"));
  CHECK(listener->Next(absl::Seconds(10)) == "READY=1\nSTATUS=serving; reloaded");
  kill(getpid(), SIGHUP);
  CHECK(HasLine(listener->Next(absl::Seconds(10)), "RELOADING=1"));
  CHECK(listener->Next(absl::Seconds(10)) ==
        "READY=1\nSTATUS=serving; reload failed: bad.conf:1:1: nope");
  CHECK(reloads == 2);

  kill(getpid(), SIGTERM);
  CHECK_THAT(listener->Next(absl::Seconds(10)), Catch::StartsWith("STOPPING=1\n"));
  CHECK_FALSE(stopped);  // still draining: a round is "in progress"
  may_finish.Notify();
  loop.join();
  CHECK(stop_signal == SIGTERM);
  CHECK(drained);
  CHECK(stopped);
}

TEST_CASE("a drain that outlives its timeout still stops") {
  BlockLifecycleSignals();
  Notifier n("");
  LifecycleHooks hooks;
  hooks.reload = [] { return std::string(); };
  hooks.begin_drain = [] {};
  hooks.wait_drained = [](absl::Time deadline) {
    absl::SleepFor(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    return false;
  };
  bool stopped = false;
  hooks.stop = [&] { stopped = true; };
  bool drained = true;
  std::thread loop([&] {
    RunUntilStopped(n, hooks, absl::Milliseconds(50), "", &drained);
  });
  kill(getpid(), SIGINT);
  loop.join();
  CHECK_FALSE(drained);
  CHECK(stopped);
}

// The default logger writes to `out` while it lives.
class CapturedLog {
 public:
  CapturedLog() {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_CASE("a failed reload is logged and told escaped and bounded, on one line") {
  BlockLifecycleSignals();
  CapturedLog log;
  std::unique_ptr<NotifyListener> listener = Listener(true);
  Notifier n(listener->address());
  const std::string hostile =
      "bad.conf:1:1: \"in\nfo\"\nSTATUS=forged\nMAINPID=1\x1b[2J" + std::string(100000, 'x');
  LifecycleHooks hooks;
  hooks.reload = [&]() -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError(hostile);
  };
  hooks.begin_drain = [] {};
  hooks.wait_drained = [](absl::Time) { return true; };
  hooks.stop = [] {};
  bool drained = false;
  std::thread loop([&] { RunUntilStopped(n, hooks, absl::Seconds(30), "serving", &drained); });
  CHECK(listener->Next(absl::Seconds(10)) == "READY=1\nSTATUS=serving");
  kill(getpid(), SIGHUP);
  CHECK(HasLine(listener->Next(absl::Seconds(10)), "RELOADING=1"));
  const std::string ready = listener->Next(absl::Seconds(10));
  kill(getpid(), SIGTERM);
  loop.join();

  // Two assignments only: READY=1 and one STATUS line, nothing forged.
  CHECK_THAT(ready, Catch::StartsWith("READY=1\nSTATUS=serving; reload failed: bad.conf:1:1:"));
  CHECK(std::count(ready.begin(), ready.end(), '\n') == 1);
  CHECK(ready.size() < kMaxReloadOutcomeBytes + 200);
  CHECK_THAT(ready, Catch::Contains("in\\x0afo"));
  const std::string text = log.text();
  const size_t at = text.find("reload failed");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  CHECK_THAT(line, Catch::Contains("in\\x0afo\"\\x0aSTATUS=forged\\x0aMAINPID=1\\x1b[2J"));
  CHECK(line.size() < kMaxReloadOutcomeBytes + 200);
  CHECK_THAT(text, !Catch::Contains("\nSTATUS=forged"));
}

TEST_CASE("a storm of SIGHUPs never holds off SIGTERM, and its log lines are bounded") {
  BlockLifecycleSignals();
  CapturedLog log;
  Notifier n("");
  std::atomic<int> reloads{0};
  LifecycleHooks hooks;
  hooks.reload = [&]() -> absl::StatusOr<std::string> {
    ++reloads;
    absl::SleepFor(absl::Milliseconds(2));  // a reload takes a while: SIGHUP stays pending
    if (reloads % 2 == 0) return absl::InvalidArgumentError("bad.conf:1:1: nope");
    return std::string("no change");
  };
  hooks.begin_drain = [] {};
  hooks.wait_drained = [](absl::Time) { return true; };
  hooks.stop = [] {};
  std::atomic<bool> storm{true};
  std::thread stormer([&] {
    const absl::Time cap = absl::Now() + absl::Seconds(30);
    while (storm && absl::Now() < cap) kill(getpid(), SIGHUP);
  });
  bool drained = false;
  std::atomic<bool> returned{false};
  int stop_signal = 0;
  std::thread loop([&] {
    stop_signal = RunUntilStopped(n, hooks, absl::Seconds(30), "", &drained);
    returned = true;
  });
  while (reloads < 200) absl::SleepFor(absl::Milliseconds(1));
  const absl::Time sent = absl::Now();
  kill(getpid(), SIGTERM);
  while (!returned && absl::Now() - sent < absl::Seconds(20)) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const bool stopped_during_storm = returned.load();
  const absl::Duration took = absl::Now() - sent;
  storm = false;
  stormer.join();
  loop.join();
  CHECK(stopped_during_storm);
  CHECK(took < absl::Seconds(5));
  CHECK(stop_signal == SIGTERM);
  // Hundreds of reloads, two outcomes repeated: a bounded number of lines.
  const std::string text = log.text();
  const int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  INFO(reloads << " reloads, " << lines << " lines");
  CHECK(lines < reloads / 4);
  CHECK_THAT(text, Catch::Contains("reload failed") && Catch::Contains("reload: no change"));
  CHECK_THAT(text, Catch::Contains("not logged"));
}

TEST_CASE("a reload's description shows each value escaped and bounded") {
  config::DaemonConfig before = *config::DefaultConfig();
  config::DaemonConfig after = before;
  after.set_unix_socket("/run/" + std::string(3000, 'a') + "\n");
  after.set_log_level("debug");
  const ConfigChanges c = DiffConfig(before, after);
  REQUIRE(c.need_restart.size() == 1);
  const std::string described = Describe(c.need_restart);
  CHECK_THAT(described, Catch::StartsWith("unix_socket \"/run/autotuned/autotuned.sock\" -> \"/run/aaa"));
  CHECK_THAT(described, Catch::Contains("bytes)"));
  CHECK(described.size() < 300);
  CHECK(described.find('\n') == std::string::npos);
  CHECK(Describe(c.live) == "log_level \"info\" -> \"debug\"");
}

}  // namespace
}  // namespace autotuned
