#include "daemon/serve/server/health_service.h"

#include <atomic>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"

namespace autotuned {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct Served {
  std::atomic<bool> serving{true};
  HealthService service{[this] { return serving.load(); }};
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<Health::Stub> stub;

  Served() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    stub = Health::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                               grpc::InsecureChannelCredentials()));
  }
  ~Served() {
    service.Stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  grpc::Status Check(const std::string& name, HealthCheckResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    HealthCheckRequest request;
    request.set_service(name);
    return stub->Check(&ctx, request, response);
  }
};

TEST_CASE("Check: SERVING, NOT_SERVING while draining, NOT_FOUND for other services") {
  Served s;
  HealthCheckResponse r;
  REQUIRE(s.Check("", &r).ok());
  CHECK(r.status() == HealthCheckResponse::SERVING);
  REQUIRE(s.Check("autotuned.v1.Autotune", &r).ok());
  CHECK(r.status() == HealthCheckResponse::SERVING);
  s.serving = false;
  REQUIRE(s.Check("", &r).ok());
  CHECK(r.status() == HealthCheckResponse::NOT_SERVING);
  const grpc::Status unknown = s.Check("other.Service", &r);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(unknown.error_message().find("other.Service") != std::string::npos);
}

TEST_CASE("Watch streams the status and each change; Stop ends it; watchers are bounded") {
  Served s;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  HealthCheckRequest request;
  auto reader = s.stub->Watch(&ctx, request);
  HealthCheckResponse r;
  REQUIRE(reader->Read(&r));
  CHECK(r.status() == HealthCheckResponse::SERVING);

  // A drain shows at once when signalled.
  const absl::Time before = absl::Now();
  s.serving = false;
  s.service.Changed();
  REQUIRE(reader->Read(&r));
  CHECK(r.status() == HealthCheckResponse::NOT_SERVING);
  CHECK(absl::Now() - before < absl::Seconds(5));

  // Watching an unknown service: SERVICE_UNKNOWN, not an error.
  {
    grpc::ClientContext other_ctx;
    other_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    HealthCheckRequest other;
    other.set_service("nope");
    auto other_reader = s.stub->Watch(&other_ctx, other);
    REQUIRE(other_reader->Read(&r));
    CHECK(r.status() == HealthCheckResponse::SERVICE_UNKNOWN);
    other_ctx.TryCancel();
    while (other_reader->Read(&r)) {
    }
    other_reader->Finish();
  }
  // The server notices a cancelled watch at its next poll (250 ms).
  absl::SleepFor(absl::Milliseconds(600));

  // kMaxWatchers open at once (the first one included), one more refused.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> readers;
  int open = 1;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  grpc::Status refused;
  while (absl::Now() < give_up) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    readers.push_back(s.stub->Watch(contexts.back().get(), request));
    if (readers.back()->Read(&r)) {
      ++open;
      continue;
    }
    refused = readers.back()->Finish();
    break;
  }
  CHECK(open == HealthService::kMaxWatchers);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Stop ends every watch.
  s.service.Stop();
  CHECK_FALSE(reader->Read(&r));
  CHECK(reader->Finish().ok());
  for (auto& rd : readers) {
    while (rd->Read(&r)) {
    }
  }
}

}  // namespace
}  // namespace autotuned
