// The fleet cache over TLS to a real redis-server's tls-port, with
// certificates made by the test: a good pair shares results; a Redis whose
// certificate another CA signed, has expired or names another host, a
// daemon without a client certificate, and plaintext to the TLS port are
// each a failure (an outage, its reason logged), never a hit.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/coordinate/peer/test_certs_testing.h"
#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/ops/tls/tls_files.h"
#include "daemon/state/fleetcache/codec.h"
#include "daemon/state/fleetcache/entries_testing.h"
#include "daemon/state/fleetcache/fleet_cache.h"
#include "daemon/state/fleetcache/redis_server_testing.h"

namespace autotuned::fleetcache {
namespace {

// A TCP port free now on 127.0.0.1.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

TlsFiles Client(const TestCertFiles& files, bool with_cert = true) {
  config::TlsConfig c;
  c.set_ca_file(files.ca_file);
  if (with_cert) {
    c.set_cert_file(files.cert_file);
    c.set_key_file(files.key_file);
  }
  absl::StatusOr<TlsFiles> tls = LoadTlsFiles("fleet_cache.tls", c, TlsRole::kClient);
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
  return *tls;
}

struct Fixture {
  Fixture() : sink(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    signal(SIGPIPE, SIG_IGN);  // as the daemon does
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }

  // Starts Redis with TLS only, presenting `server`, asking clients for a
  // certificate of `server`'s CA.
  void Start(const TestCertFiles& server) {
    port = FreePort();
    REQUIRE(redis
                .Start({"--tls-port", std::to_string(port), "--tls-cert-file", server.cert_file,
                        "--tls-key-file", server.key_file, "--tls-ca-cert-file",
                        server.ca_file})
                .ok());
  }

  FleetCacheOptions Options(TlsFiles tls) const {
    FleetCacheOptions o;
    o.redis = absl::StrCat("127.0.0.1:", port);
    o.ttl = absl::Seconds(60);
    o.connect_timeout = absl::Seconds(2);
    o.command_timeout = absl::Seconds(2);
    o.tls = std::move(tls);
    return o;
  }

  std::string Log() const { return absl::StrJoin(sink->last_formatted(), ""); }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink;
  metrics::Registry registry;
  metrics::DaemonMetrics metrics{&registry};
  RedisServer redis;
  int port = 0;
};

const char* TmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

TEST_CASE("over TLS with certificates of one CA, results are shared") {
  TestCa ca(TmpDir(), "redis-good");
  Fixture f;
  f.Start(ca.Issue("redis", {"IP:127.0.0.1"}));
  FleetCache fleet(f.Options(Client(ca.Issue("daemon", {"DNS:node7"}))), &f.metrics);
  CHECK_FALSE(fleet.Lookup(kTestFingerprint, TestKeyText(1024)).has_value());
  CHECK(f.metrics.fleet_misses->value() == 1);
  fleet.Publish(kTestFingerprint, TestKeyText(1024), TestRanking());
  CHECK(f.metrics.fleet_published->value() == 1);
  std::optional<v1::ProblemResult> hit = fleet.Lookup(kTestFingerprint, TestKeyText(1024));
  REQUIRE(hit.has_value());
  CHECK(hit->SerializeAsString() == TestRanking().SerializeAsString());
  CHECK(f.redis.Call({"EXISTS", FleetKey("autotuned", kTestFingerprint, TestKeyText(1024))}) ==
        "1");
  CHECK(f.metrics.fleet_errors->value() == 0);
  CHECK_FALSE(fleet.in_outage());
}

TEST_CASE("a Redis or a daemon the other side does not trust is an outage, logged") {
  TestCa ca(TmpDir(), "redis-fleet");
  TestCa other(TmpDir(), "redis-other");
  Fixture f;
  const TestCertFiles daemon = ca.Issue("daemon", {"DNS:node7"});
  struct Case {
    const char* what;
    TestCertFiles server;
    TlsFiles client;
    const char* reason;
  };
  // Redis sends its CA with its certificate (OpenSSL builds the chain from
  // tls-ca-cert-file): another CA's root is what the daemon finds untrusted.
  const std::vector<Case> cases = {
      {"a Redis certificate of another CA", other.Issue("redis-of-other", {"IP:127.0.0.1"}),
       Client(daemon), "certificate refused: self-signed certificate in certificate chain"},
      {"an expired Redis certificate",
       ca.Issue("redis-expired", {"IP:127.0.0.1"}, absl::Hours(-48), absl::Hours(-24)),
       Client(daemon), "certificate refused: certificate has expired"},
      {"a Redis certificate naming another host",
       ca.Issue("redis-elsewhere", {"DNS:redis.elsewhere"}), Client(daemon),
       "certificate refused: IP address mismatch"},
      {"no client certificate", ca.Issue("redis", {"IP:127.0.0.1"}), Client(daemon, false),
       "TLS: "},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      f.Start(c.server);
      FleetCache fleet(f.Options(c.client), &f.metrics);
      fleet.Publish(kTestFingerprint, TestKeyText(1024), TestRanking());
      CHECK_FALSE(fleet.Lookup(kTestFingerprint, TestKeyText(1024)).has_value());
      CHECK(fleet.in_outage());
      CHECK(f.metrics.fleet_publish_errors->value() == 1);
      CHECK(f.metrics.fleet_hits->value() == 0);
      CHECK_THAT(f.Log(), Catch::Contains("unusable") && Catch::Contains(c.reason));
      CHECK(f.redis.Call({"DBSIZE"}) == "0");
    }
  }
  SECTION("plaintext to the TLS port") {
    f.Start(ca.Issue("redis", {"IP:127.0.0.1"}));
    FleetCacheOptions plain = f.Options(Client(daemon));
    plain.tls.reset();
    FleetCache fleet(plain, &f.metrics);
    fleet.Publish(kTestFingerprint, TestKeyText(1024), TestRanking());
    CHECK(fleet.in_outage());
    CHECK(f.metrics.fleet_publish_errors->value() == 1);
    CHECK(f.redis.Call({"DBSIZE"}) == "0");
  }
}

TEST_CASE("fleet_cache.tls's files are checked when the options are made") {
  TestCa ca(TmpDir(), "redis-load");
  const TestCertFiles daemon = ca.Issue("daemon", {"DNS:node7"});
  config::FleetCacheConfig c;
  c.set_redis("127.0.0.1:6380");
  c.mutable_tls()->set_ca_file(daemon.ca_file);
  absl::StatusOr<FleetCacheOptions> o = FleetCacheOptionsFrom(c);
  REQUIRE(o.ok());
  REQUIRE(o->tls.has_value());
  CHECK(o->tls->cert_pem.empty());
  c.mutable_tls()->set_cert_file(daemon.cert_file);
  c.mutable_tls()->set_key_file(ca.Issue("another", {"DNS:node8"}).key_file);
  CHECK_THAT(std::string(FleetCacheOptionsFrom(c).status().message()),
             Catch::StartsWith("fleet_cache.tls.key_file: the key in"));
  c.mutable_tls()->set_ca_file(daemon.ca_file + ".missing");
  CHECK_THAT(std::string(FleetCacheOptionsFrom(c).status().message()),
             Catch::StartsWith("fleet_cache.tls.ca_file: cannot open"));
  c.clear_tls();
  REQUIRE(FleetCacheOptionsFrom(c).ok());
  CHECK_FALSE(FleetCacheOptionsFrom(c)->tls.has_value());
}

}  // namespace
}  // namespace autotuned::fleetcache
