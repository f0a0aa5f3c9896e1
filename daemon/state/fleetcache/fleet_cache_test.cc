// The fleet cache against a real redis-server (redis_server_testing.h).
#include "daemon/state/fleetcache/fleet_cache.h"

#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/state/cache/key.h"
#include "daemon/state/fleetcache/codec.h"
#include "daemon/state/fleetcache/entries_testing.h"
#include "daemon/state/fleetcache/redis_server_testing.h"

namespace autotuned::fleetcache {
namespace {

constexpr const char* kFingerprint = kTestFingerprint;

std::string KeyText(int64_t count, const std::string& fingerprint = kFingerprint) {
  return TestKeyText(count, fingerprint);
}
v1::ProblemResult Tuned() { return TestRanking(); }

struct Fixture {
  Fixture() { signal(SIGPIPE, SIG_IGN); }  // as the daemon does

  metrics::Registry registry;
  metrics::DaemonMetrics metrics{&registry};
  RedisServer redis;

  FleetCacheOptions Options() const {
    FleetCacheOptions o;
    o.redis = redis.address();
    o.ttl = absl::Seconds(60);
    o.connect_timeout = absl::Seconds(2);
    o.command_timeout = absl::Seconds(2);
    o.max_backoff = absl::Milliseconds(400);
    return o;
  }
};

// Calls `lookup` until the fleet cache has left its outage (its backoff is
// short in these tests), at most 10 s.
bool LeavesOutage(FleetCache& fleet) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    fleet.Lookup(kFingerprint, KeyText(1));
    if (!fleet.in_outage()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST_CASE("a published result is found for its key text and fingerprint only, with a TTL") {
  Fixture f;
  REQUIRE(f.redis.Start().ok());
  FleetCache fleet(f.Options(), &f.metrics);
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(f.metrics.fleet_misses->value() == 1);

  fleet.Publish(kFingerprint, KeyText(1024), Tuned());
  CHECK(f.metrics.fleet_published->value() == 1);
  std::optional<v1::ProblemResult> hit = fleet.Lookup(kFingerprint, KeyText(1024));
  REQUIRE(hit.has_value());
  CHECK(hit->SerializeAsString() == Tuned().SerializeAsString());
  CHECK(f.metrics.fleet_hits->value() == 1);

  const std::string other = "ffff2233aabbccdd";
  CHECK_FALSE(fleet.Lookup(other, KeyText(1024, other)).has_value());
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(2048)).has_value());

  int64_t pttl = 0;
  REQUIRE(absl::SimpleAtoi(
      f.redis.Call({"PTTL", FleetKey("autotuned", kFingerprint, KeyText(1024))}), &pttl));
  CHECK(pttl > 0);
  CHECK(pttl <= 60000);
  CHECK(f.metrics.fleet_errors->value() == 0);
  CHECK(f.metrics.fleet_outage->value() == 0);
}

TEST_CASE("a corrupt value is a miss, counted, and the next publish replaces it") {
  Fixture f;
  REQUIRE(f.redis.Start().ok());
  FleetCache fleet(f.Options(), &f.metrics);
  const std::string key = FleetKey("autotuned", kFingerprint, KeyText(1024));
  REQUIRE(f.redis.Call({"SET", key, "ATFLEET1 but nothing right after"}) == "OK");
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(f.metrics.fleet_corrupt->value() == 1);
  REQUIRE(f.redis.Call({"DEL", key}) == "1");
  REQUIRE(f.redis.Call({"LPUSH", key, "a list, not a string"}) == "1");
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(f.metrics.fleet_corrupt->value() == 2);
  REQUIRE(f.redis.Call({"DEL", key}) == "1");
  REQUIRE(f.redis.Call({"SET", key, "ATFLEET1 but nothing right after"}) == "OK");

  fleet.Publish(kFingerprint, KeyText(1024), Tuned());
  CHECK(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK_FALSE(fleet.in_outage());
}

TEST_CASE("Redis killed: calls fail at once during the outage; it ends when Redis is back") {
  Fixture f;
  REQUIRE(f.redis.Start().ok());
  FleetCache fleet(f.Options(), &f.metrics);
  fleet.Publish(kFingerprint, KeyText(1024), Tuned());
  REQUIRE(f.metrics.fleet_published->value() == 1);

  f.redis.Kill();
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(fleet.in_outage());
  CHECK(f.metrics.fleet_outage->value() == 1);
  CHECK(f.metrics.fleet_outages->value() == 1);
  fleet.Publish(kFingerprint, KeyText(2048), Tuned());
  CHECK(f.metrics.fleet_publish_errors->value() == 1);
  for (int i = 0; i < 5; ++i) fleet.Lookup(kFingerprint, KeyText(1024));
  CHECK(f.metrics.fleet_errors->value() == 6);
  CHECK(f.metrics.fleet_outages->value() == 1);  // one outage, however many calls

  REQUIRE(f.redis.Start().ok());  // empty: no persistence
  REQUIRE(LeavesOutage(fleet));
  CHECK(f.metrics.fleet_outage->value() == 0);
  fleet.Publish(kFingerprint, KeyText(2048), Tuned());
  CHECK(f.metrics.fleet_published->value() == 2);
  CHECK(fleet.Lookup(kFingerprint, KeyText(2048)).has_value());
}

TEST_CASE("a Redis that stops answering costs a call its bound, not more") {
  Fixture f;
  REQUIRE(f.redis.Start().ok());
  FleetCacheOptions options = f.Options();
  options.command_timeout = absl::Milliseconds(300);
  FleetCache fleet(options, &f.metrics);
  fleet.Publish(kFingerprint, KeyText(1024), Tuned());
  REQUIRE(kill(f.redis.pid(), SIGSTOP) == 0);
  const absl::Time start = absl::Now();
  CHECK_FALSE(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(absl::Now() - start < absl::Seconds(10));
  CHECK(fleet.in_outage());
  CHECK(f.metrics.fleet_errors->value() == 1);
  REQUIRE(kill(f.redis.pid(), SIGCONT) == 0);
  REQUIRE(LeavesOutage(fleet));
  CHECK(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());
}

TEST_CASE("AUTH with an ACL user: the right password works, a wrong one is an outage") {
  Fixture f;
  REQUIRE(f.redis.Start({"--user", "fleet", "on", ">right-password", "~autotuned:*", "+@all",
                         "--user", "default", "off"},
                        {"AUTH", "fleet", "right-password"})
              .ok());
  FleetCacheOptions good = f.Options();
  good.user = "fleet";
  good.password = "right-password";
  FleetCache fleet(good, &f.metrics);
  fleet.Publish(kFingerprint, KeyText(1024), Tuned());
  CHECK(fleet.Lookup(kFingerprint, KeyText(1024)).has_value());

  metrics::Registry registry;
  metrics::DaemonMetrics metrics(&registry);
  FleetCacheOptions bad = good;
  bad.password = "wrong-password";
  FleetCache refused(bad, &metrics);
  CHECK_FALSE(refused.Lookup(kFingerprint, KeyText(1024)).has_value());
  CHECK(refused.in_outage());
  CHECK(metrics.fleet_errors->value() == 1);
  CHECK(metrics.fleet_hits->value() == 0);
}

TEST_CASE("the password file: read, and refused when others may read it") {
  RedisServer dir_holder;  // only for its temporary directory
  const std::string path = dir_holder.dir() + "/password";
  {
    std::ofstream out(path);
    out << "  s3cret-password \n";
  }
  config::FleetCacheConfig c;
  c.set_redis("127.0.0.1:6379");
  c.set_password_file(path);
  REQUIRE(chmod(path.c_str(), 0640) == 0);
  absl::StatusOr<FleetCacheOptions> o = FleetCacheOptionsFrom(c);
  REQUIRE(o.ok());
  CHECK(o->password == "s3cret-password");

  REQUIRE(chmod(path.c_str(), 0644) == 0);
  o = FleetCacheOptionsFrom(c);
  CHECK(o.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(o.status().message(), "fleet_cache.password_file"));
  CHECK(absl::StrContains(o.status().message(), "0644"));
  CHECK_FALSE(absl::StrContains(o.status().message(), "s3cret"));

  c.set_password_file(path + ".missing");
  CHECK(FleetCacheOptionsFrom(c).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace autotuned::fleetcache
