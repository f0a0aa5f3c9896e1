// The peer service on a real TCP port (StartPeerServer), called through a
// real gRPC channel with and without the shared token.
#include "daemon/coordinate/peer/peer_service.h"

#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "config/config_loader.h"
#include "daemon/serve/server/health_service.h"
#include "daemon/serve/server/server.h"

namespace autotuned {
namespace {

constexpr char kToken[] = "s3cret-peer-token-0123456789";

struct Peer {
  explicit Peer(int max_calls = 1024) {
    config = *config::DefaultConfig();
    config.set_peer_listen("127.0.0.1:0");
    config.set_peer_token(kToken);
    service = std::make_unique<PeerService>(kToken, "node-a:7451", "f1f2f3", max_calls);
    auto started = StartPeerServer(config, service.get());
    REQUIRE(started.ok());
    listening = std::move(*started);
    channel = grpc::CreateChannel(listening.address, grpc::InsecureChannelCredentials());
    stub = v1::Peer::NewStub(channel);
  }
  ~Peer() { listening.server->Shutdown(); }

  grpc::Status Ping(const std::string& authorization, v1::PingReply* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    return stub->Ping(&ctx, v1::PingRequest(), reply);
  }

  config::DaemonConfig config;
  std::unique_ptr<PeerService> service;
  PeerListening listening;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Peer::Stub> stub;
};

TEST_CASE("a peer without the right token is refused with UNAUTHENTICATED") {
  Peer p;
  CHECK(p.listening.address.rfind("127.0.0.1:", 0) == 0);
  CHECK(p.listening.address != "127.0.0.1:0");
  v1::PingReply reply;
  struct Case {
    std::string authorization;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {"", "no \"authorization\" metadata"},
           {"Bearer wrong-token-wrong-token", "wrong peer token"},
           {std::string("Bearer ") + kToken + "x", "wrong peer token"},
           {"Bearer ", "wrong peer token"},
           {std::string("Basic ") + kToken, "is not \"Bearer <peer token>\""},
           {kToken, "is not \"Bearer <peer token>\""}}) {
    INFO(c.authorization);
    grpc::Status s = p.Ping(c.authorization, &reply);
    CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_THAT(s.error_message(), Catch::Contains(c.reason));
    CHECK_THAT(s.error_message(), !Catch::Contains(kToken));
  }
  CHECK(reply.daemon().empty());

  // The round calls check the token before saying they are not built.
  grpc::ClientContext ctx;
  v1::Decision decision;
  CHECK(p.stub->Ready(&ctx, v1::ReadyRequest(), &decision).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
}

TEST_CASE("a peer with the token gets Ping; Ready, ReduceTimings, Exchange and RunOutcome "
          "go to their handlers") {
  Peer p;
  v1::PingReply reply;
  grpc::Status s = p.Ping(std::string("Bearer ") + kToken, &reply);
  REQUIRE(s.ok());
  CHECK(reply.daemon() == "node-a:7451");
  CHECK(reply.fingerprint() == "f1f2f3");

  auto ready = [&p](v1::Decision* decision) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReadyRequest request;
    request.set_from_daemon("node-b:7451");
    request.add_ranks(3);
    return p.stub->Ready(&ctx, request, decision);
  };
  v1::Decision decision;
  grpc::Status r = ready(&decision);
  CHECK(r.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(r.error_message(), Catch::Contains("not serving rounds yet"));

  p.service->SetReadyHandler([](const v1::ReadyRequest& request, absl::Time deadline,
                                const std::function<bool()>&) -> absl::StatusOr<v1::Decision> {
    if (deadline == absl::InfiniteFuture()) return absl::InternalError("no deadline");
    if (request.ranks(0) == 3) {
      v1::Decision d;
      d.set_verdict(v1::ANSWERED);
      d.mutable_response()->set_round_id(request.from_daemon());
      return d;
    }
    return absl::InvalidArgumentError("bad rank");
  });
  r = ready(&decision);
  REQUIRE(r.ok());
  CHECK(decision.verdict() == v1::ANSWERED);
  CHECK(decision.response().round_id() == "node-b:7451");

  auto reduce = [&p](v1::Decision* decision) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RankTimings timings;
    timings.set_run_id("run-1");
    return p.stub->ReduceTimings(&ctx, timings, decision);
  };
  auto exchange = [&p](v1::ExchangeReply* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ExchangeRequest request;
    request.set_data(std::string(16 << 20, 'x'));  // larger than gRPC's 4 MiB default
    return p.stub->Exchange(&ctx, request, reply);
  };
  v1::ExchangeReply exchanged;
  CHECK(reduce(&decision).error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(exchange(&exchanged).error_code() == grpc::StatusCode::UNAVAILABLE);

  p.service->SetRunHandlers(
      [](const v1::RankTimings& request, absl::Time) -> absl::StatusOr<v1::Decision> {
        v1::Decision d;
        d.set_verdict(v1::ANSWERED);
        d.mutable_response()->set_round_id(request.run_id());
        return d;
      },
      [](const v1::ExchangeRequest& request,
         absl::Time) -> absl::StatusOr<v1::ExchangeReply> {
        if (request.data().size() != (16u << 20)) return absl::InternalError("cut short");
        return absl::AbortedError("rank 4 failed");
      });
  r = reduce(&decision);
  REQUIRE(r.ok());
  CHECK(decision.response().round_id() == "run-1");
  r = exchange(&exchanged);
  CHECK(r.error_code() == grpc::StatusCode::ABORTED);
  CHECK(r.error_message() == "rank 4 failed");

  auto outcome = [&p](v1::OutcomeReply* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::OutcomeRequest request;
    request.set_run_id("run-2");
    return p.stub->RunOutcome(&ctx, request, reply);
  };
  v1::OutcomeReply told;
  CHECK(outcome(&told).error_code() == grpc::StatusCode::UNAVAILABLE);
  p.service->SetOutcomeHandler(
      [](const v1::OutcomeRequest& request, absl::Time) -> absl::StatusOr<v1::OutcomeReply> {
        v1::OutcomeReply reply;
        reply.set_decided(true);
        reply.mutable_decision()->mutable_response()->set_round_id(request.run_id());
        return reply;
      });
  r = outcome(&told);
  REQUIRE(r.ok());
  CHECK(told.decided());
  CHECK(told.decision().response().round_id() == "run-2");
}

TEST_CASE("an authenticated peer holds at most max_calls calls at once") {
  Peer p(2);
  absl::Mutex mu;
  int waiting = 0;
  bool release = false;
  p.service->SetReadyHandler(
      [&](const v1::ReadyRequest&, absl::Time,
          const std::function<bool()>&) -> absl::StatusOr<v1::Decision> {
        absl::MutexLock lock(&mu);
        ++waiting;
        mu.Await(absl::Condition(&release));
        v1::Decision d;
        d.set_verdict(v1::ANSWERED);
        return d;
      });
  auto ready = [&p]() {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::Decision decision;
    return p.stub->Ready(&ctx, v1::ReadyRequest(), &decision);
  };
  std::vector<std::thread> held;
  std::vector<grpc::Status> held_status(2);
  for (int i = 0; i < 2; ++i) held.emplace_back([&, i] { held_status[i] = ready(); });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 2; }, &waiting));
  }
  // The third, and a Ping too: refused at once, the message never read.
  const grpc::Status third = ready();
  CHECK(third.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(third.error_message(), Catch::Contains("2 peer calls are being served"));
  v1::PingReply pong;
  CHECK(p.Ping(std::string("Bearer ") + kToken, &pong).error_code() ==
        grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A caller without the token is still told so first.
  CHECK(p.Ping("", &pong).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  for (std::thread& t : held) t.join();
  for (const grpc::Status& s : held_status) CHECK(s.ok());
  // Freed: served again.
  CHECK(p.Ping(std::string("Bearer ") + kToken, &pong).ok());
}

grpc::Status GenericCall(std::shared_ptr<grpc::Channel> channel, const std::string& method) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Mutex mu;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      absl::MutexLock lock(&mu);
                      status = s;
                      done = true;
                    });
  absl::MutexLock lock(&mu);
  REQUIRE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(15)));
  return status;
}

TEST_CASE("nothing else answers on the peer port: no health, no reflection") {
  // The client server serves health checking (the daemon's own service) and
  // turns on reflection process-wide.
  config::DaemonConfig client_config = *config::DefaultConfig();
  client_config.set_unix_socket("");
  client_config.set_tcp_listen("127.0.0.1:0");
  HealthService health([] { return true; });
  auto client_server = StartServer(client_config, {&health});
  REQUIRE(client_server.ok());
  auto client_channel = grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(client_server->tcp_port),
      grpc::InsecureChannelCredentials());
  CHECK(GenericCall(client_channel, "/grpc.health.v1.Health/Check").ok());

  Peer p;
  for (const char* method :
       {"/grpc.health.v1.Health/Check", "/autotuned.v1.Autotune/NodeInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    INFO(method);
    CHECK(GenericCall(p.channel, method).error_code() ==
          grpc::StatusCode::UNIMPLEMENTED);
  }
  client_server->server->Shutdown();
}

TEST_CASE("the peer token comes from the configuration or its file") {
  config::DaemonConfig c = *config::DefaultConfig();
  CHECK(LoadPeerToken(c)->empty());
  c.set_peer_token(kToken);
  CHECK(*LoadPeerToken(c) == kToken);

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/peer.token";
  c.clear_peer_token();
  c.set_peer_token_file(path);
  std::ofstream(path) << "  " << kToken << "\n";
  CHECK(*LoadPeerToken(c) == kToken);
  std::ofstream(path) << "short\n";
  CHECK_THAT(std::string(LoadPeerToken(c).status().message()),
             Catch::Contains("at least 16 characters"));
  std::ofstream(path) << kToken << "\n" << kToken << "\n";
  CHECK_THAT(std::string(LoadPeerToken(c).status().message()),
             Catch::Contains("must hold one line"));
  c.set_peer_token_file(path + ".missing");
  CHECK(LoadPeerToken(c).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace autotuned
