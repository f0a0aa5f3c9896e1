// Mutual TLS on the peer port (StartPeerServer with PeerServerCredentials)
// with certificates made here: a good pair talks; another CA, an expired
// certificate, a certificate that names no configured peer and plaintext
// are refused before any handler runs, each with a log line, and so is a
// certificate of one peer sending another peer's from_daemon; the daemon's
// own files are checked at load (LoadPeerTls).
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_join.h"
#include "config/config_loader.h"
#include "daemon/coordinate/peer/peer_client.h"
#include "daemon/coordinate/peer/peer_service.h"
#include "daemon/coordinate/peer/peer_tls.h"
#include "daemon/coordinate/peer/test_certs_testing.h"
#include "daemon/serve/server/server.h"

namespace autotuned {
namespace {

constexpr char kToken[] = "s3cret-peer-token-0123456789";

std::string TmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The daemon's log lines, captured.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink_));
  }
  std::string Text() const { return absl::StrJoin(sink_->last_formatted(), ""); }
  // The log once it holds `text` (gRPC logs a refused handshake on its own
  // threads, maybe after the caller has its answer), or after 5 s.
  std::string Await(const std::string& text) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (Text().find(text) == std::string::npos && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return Text();
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

config::DaemonConfig TlsConfig(const TestCertFiles& files) {
  config::DaemonConfig c = *config::DefaultConfig();
  c.set_peer_listen("127.0.0.1:0");
  c.mutable_peer_tls()->set_ca_file(files.ca_file);
  c.mutable_peer_tls()->set_cert_file(files.cert_file);
  c.mutable_peer_tls()->set_key_file(files.key_file);
  return c;
}

PeerTls Loaded(const config::DaemonConfig& c) {
  absl::StatusOr<std::optional<PeerTls>> tls = LoadPeerTls(c);
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
  REQUIRE(tls->has_value());
  return **tls;
}

// The peer port of a daemon at 127.0.0.1 over mutual TLS; its peers are
// `peer_hosts`. Counts the calls that reach a handler.
struct TlsPeer {
  TlsPeer(const TestCertFiles& files, std::vector<std::string> peer_hosts,
          std::string token = "") {
    config = TlsConfig(files);
    service = std::make_unique<PeerService>(token, "node-a", "f1f2f3", 1024,
                                            std::move(peer_hosts));
    service->SetReadyHandler([this](const v1::ReadyRequest&, absl::Time,
                                    const std::function<bool()>&)
                                 -> absl::StatusOr<v1::Decision> {
      ++handled;
      v1::Decision d;
      d.set_verdict(v1::ANSWERED);
      return d;
    });
    auto started =
        StartPeerServer(config, service.get(), PeerServerCredentials(Loaded(config)));
    REQUIRE(started.ok());
    listening = std::move(*started);
  }
  ~TlsPeer() { listening.server->Shutdown(); }

  config::DaemonConfig config;
  std::unique_ptr<PeerService> service;
  PeerListening listening;
  std::atomic<int> handled{0};
};

// A follower named `self` (its peer_advertise, sent as from_daemon) dialing
// `address` with `files` (and `token`): Ping's and Ready's statuses.
struct Dialed {
  absl::Status ping;
  absl::Status ready;
};
Dialed Dial(const std::string& address, const TestCertFiles& files, std::string token = "",
            std::string self = "127.0.0.1:7001") {
  config::DaemonConfig c = TlsConfig(files);
  PeerClient client(std::move(token), std::move(self), {address},
                    PeerChannelCredentials(Loaded(c)));
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  Dialed out;
  out.ping = client.Ping(address, deadline);
  out.ready = client.Ready(address, v1::ReadyRequest(), deadline).status();
  return out;
}

TEST_CASE("two daemons with certificates of the CA talk over mutual TLS") {
  LogGrpcThroughSpdlog();
  TestCa ca(TmpDir(), "good");
  const TestCertFiles a = ca.Issue("a", {"IP:127.0.0.1"});
  const TestCertFiles b = ca.Issue("b", {"DNS:localhost", "IP:127.0.0.1"});
  TlsPeer leader(a, {"127.0.0.1"});
  const Dialed d = Dial(leader.listening.address, b);
  CHECK(d.ping.ok());
  CHECK(d.ready.ok());
  CHECK(leader.handled == 1);

  // By name as well as by address: the leader's certificate names both.
  TlsPeer named(ca.Issue("c", {"DNS:localhost"}), {"127.0.0.1"});
  const std::string port = named.listening.address.substr(named.listening.address.rfind(':'));
  CHECK(Dial("localhost" + port, b).ping.ok());
}

TEST_CASE("with a token too, both the certificate and the token are checked") {
  TestCa ca(TmpDir(), "both");
  const TestCertFiles a = ca.Issue("a", {"IP:127.0.0.1"});
  TlsPeer leader(a, {"127.0.0.1"}, kToken);
  CHECK(Dial(leader.listening.address, a, kToken).ready.ok());
  const Dialed wrong = Dial(leader.listening.address, a, "wrong-token-wrong-token");
  CHECK(wrong.ping.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(wrong.ready.message()), Catch::Contains("wrong peer token"));
  const Dialed none = Dial(leader.listening.address, a);
  CHECK_THAT(std::string(none.ping.message()), Catch::Contains("no \"authorization\""));
  CHECK(leader.handled == 1);
}

TEST_CASE("another CA, an expired certificate, a stranger's name and plaintext are refused "
          "before any work, each logged") {
  LogCapture log;
  LogGrpcThroughSpdlog();
  TestCa ca(TmpDir(), "fleet");
  TestCa other(TmpDir(), "other");
  TlsPeer leader(ca.Issue("leader", {"IP:127.0.0.1"}), {"127.0.0.1", "node-b.example"});
  const std::string& address = leader.listening.address;

  SECTION("a certificate of another CA") {
    const Dialed d = Dial(address, other.Issue("intruder", {"IP:127.0.0.1"}));
    CHECK(d.ping.code() == absl::StatusCode::kUnavailable);
    CHECK(d.ready.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(log.Await("peer TLS: handshake refused"),
               Catch::Contains("peer TLS: handshake refused"));
  }
  SECTION("an expired certificate of the CA") {
    const TestCertFiles expired =
        ca.Issue("expired", {"IP:127.0.0.1"}, absl::Hours(-48), absl::Hours(-24));
    // The follower's own load refuses it (a daemon would not start)...
    CHECK_THAT(std::string(LoadPeerTls(TlsConfig(expired)).status().message()),
               Catch::Contains("peer_tls.cert_file") &&
                   Catch::Contains("certificate has expired"));
    // ...and the leader refuses it on the wire.
    auto channel = grpc::CreateChannel(
        address, grpc::SslCredentials({ReadFile(expired.ca_file), ReadFile(expired.key_file),
                                       ReadFile(expired.cert_file)}));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    v1::PingReply pong;
    CHECK(v1::Peer::NewStub(channel)->Ping(&ctx, v1::PingRequest(), &pong).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(log.Await("peer TLS: handshake refused"),
               Catch::Contains("certificate verify failed"));
  }
  SECTION("a certificate of the CA that names no configured peer") {
    const Dialed d = Dial(address, ca.Issue("stranger", {"DNS:stranger.example"}));
    CHECK(d.ping.code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(d.ready.message()),
               Catch::Contains("names none of this daemon's peers") &&
                   Catch::Contains("DNS:stranger.example"));
    CHECK_THAT(log.Await("peer: refused a call from"),
               Catch::Contains("peer: refused a call from") &&
                               Catch::Contains("DNS:stranger.example"));
  }
  SECTION("a certificate of a configured peer speaking for another peer") {
    // 127.0.0.1's certificate, from_daemon node-b.example (also a peer).
    const TestCertFiles local = ca.Issue("local", {"IP:127.0.0.1"});
    const Dialed d = Dial(address, local, "", "node-b.example:7001");
    CHECK(d.ping.code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(d.ready.message()),
               Catch::Contains("from_daemon \"node-b.example:7001\"") &&
                   Catch::Contains("does not name its host") &&
                   Catch::Contains("IP:127.0.0.1"));
    CHECK_THAT(log.Await("does not name its host"),
               Catch::Contains("peer: refused a call from"));
    // The same certificate speaking for itself is served.
    CHECK(Dial(address, local).ready.ok());
    CHECK(leader.handled == 1);
    leader.handled = 0;
  }
  SECTION("plaintext") {
    auto stub = v1::Peer::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    v1::Decision decision;
    CHECK(stub->Ready(&ctx, v1::ReadyRequest(), &decision).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
    CHECK_THAT(log.Await("peer TLS: handshake refused"),
               Catch::Contains("peer TLS: handshake refused"));
  }
  SECTION("a leader whose certificate does not name the host dialed") {
    TlsPeer elsewhere(ca.Issue("elsewhere", {"DNS:node-c.example"}), {"127.0.0.1"});
    const Dialed d = Dial(elsewhere.listening.address, ca.Issue("b", {"IP:127.0.0.1"}));
    CHECK(d.ping.code() == absl::StatusCode::kUnavailable);
    CHECK(elsewhere.handled == 0);
  }
  CHECK(leader.handled == 0);
}

TEST_CASE("the daemon's own files are checked when loaded, errors naming the field") {
  TestCa ca(TmpDir(), "load");
  TestCa other(TmpDir(), "load-other");
  const TestCertFiles good = ca.Issue("node", {"IP:127.0.0.1"});
  auto error = [](const config::DaemonConfig& c) {
    return std::string(LoadPeerTls(c).status().message());
  };
  config::DaemonConfig c = TlsConfig(good);
  CHECK(LoadPeerTls(c).ok());
  c.clear_peer_tls();
  REQUIRE(LoadPeerTls(c).ok());
  CHECK_FALSE(LoadPeerTls(c)->has_value());

  c = TlsConfig(good);
  c.mutable_peer_tls()->set_key_file(good.key_file + ".missing");
  CHECK(LoadPeerTls(c).status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.key_file: cannot open"));

  c = TlsConfig(good);
  REQUIRE(chmod(good.key_file.c_str(), 0644) == 0);
  CHECK(LoadPeerTls(c).status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.key_file:") &&
                           Catch::Contains("is open to others (mode 0644)"));
  REQUIRE(chmod(good.key_file.c_str(), 0640) == 0);
  CHECK(LoadPeerTls(c).ok());

  c = TlsConfig(good);
  c.mutable_peer_tls()->set_ca_file(good.key_file);
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.ca_file:") &&
                           Catch::Contains("holds no PEM certificate"));

  c = TlsConfig(good);
  c.mutable_peer_tls()->set_key_file(ca.Issue("another", {"IP:127.0.0.1"}).key_file);
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.key_file: the key in") &&
                           Catch::Contains("is not the key of the certificate"));

  c = TlsConfig(good);
  c.mutable_peer_tls()->set_ca_file(other.ca_file());
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.cert_file:") &&
                           Catch::Contains("does not verify"));

  c = TlsConfig(ca.Issue("early", {"IP:127.0.0.1"}, absl::Hours(24), absl::Hours(48)));
  CHECK_THAT(error(c), Catch::Contains("certificate is not yet valid"));

  c = TlsConfig(good);
  c.set_peer_advertise("node7.example:7451");
  CHECK_THAT(error(c), Catch::StartsWith("peer_tls.cert_file:") &&
                           Catch::Contains("does not name node7.example") &&
                           Catch::Contains("IP:127.0.0.1"));
}

}  // namespace
}  // namespace autotuned
