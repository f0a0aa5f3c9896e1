#include "client/cpp/client.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/match.h"
#include "client/cpp/status.h"

namespace autotuned {
namespace {

std::string TestTmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A unix target under TEST_TMPDIR where nothing listens. Bazel's TEST_TMPDIR
// can be longer than a socket path may be; then the test works in it and
// names the socket relative to it.
std::string DeadSocketTarget() {
  const std::string path = TestTmpDir() + "/nothing-listens.sock";
  if (path.size() <= 100) return "unix:" + path;
  REQUIRE(chdir(TestTmpDir().c_str()) == 0);
  return "unix:nothing-listens.sock";
}

TEST_CASE("Connect to a socket where nothing listens is UNAVAILABLE in time") {
  const std::string target = DeadSocketTarget();
  const absl::Duration timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  auto client = Client::Connect(target, timeout);
  const absl::Duration took = absl::Now() - start;
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(client.status().message()), Catch::Contains(target));
  CHECK(took >= timeout - absl::Milliseconds(50));
  CHECK(took < timeout + absl::Seconds(3));
}

TEST_CASE("Connect accepts a bare absolute path as a unix socket") {
  const std::string path = "/tmp/autotuned-client-test-" +
                           std::to_string(getpid()) + ".sock";
  auto client = Client::Connect(path, absl::Milliseconds(100));
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(client.status().message()),
             Catch::Contains("unix:" + path));
}

TEST_CASE("a socket path too long for sockaddr_un fails at once") {
  const std::string target = "unix:/" + std::string(200, 'x') + ".sock";
  const absl::Time start = absl::Now();
  auto client = Client::Connect(target, absl::Seconds(10));
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(client.status().message()),
             Catch::Contains("at most 107"));
  CHECK(absl::Now() - start < absl::Seconds(1));
}

TEST_CASE("targets are normalized") {
  CHECK(*NormalizeTarget("/run/a.sock") == "unix:/run/a.sock");
  CHECK(*NormalizeTarget("unix:/run/a.sock") == "unix:/run/a.sock");
  CHECK(*NormalizeTarget("unix:///run/a.sock") == "unix:///run/a.sock");
  CHECK(*NormalizeTarget("node7:50051") == "node7:50051");
  CHECK(*NormalizeTarget("dns:node7:50051") == "dns:node7:50051");
  CHECK(NormalizeTarget("").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(NormalizeTarget("unix:").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("the default target honours AUTOTUNED_SOCKET") {
  REQUIRE(unsetenv(kSocketEnvVar) == 0);
  CHECK(DefaultTarget() == "unix:/run/autotuned/autotuned.sock");
  REQUIRE(setenv(kSocketEnvVar, "", 1) == 0);
  CHECK(DefaultTarget() == "unix:/run/autotuned/autotuned.sock");
  REQUIRE(setenv(kSocketEnvVar, "/tmp/at.sock", 1) == 0);
  CHECK(DefaultTarget() == "unix:/tmp/at.sock");
  REQUIRE(setenv(kSocketEnvVar, "localhost:7070", 1) == 0);
  CHECK(DefaultTarget() == "localhost:7070");
  REQUIRE(unsetenv(kSocketEnvVar) == 0);
}

TEST_CASE("calls on a channel to nowhere return the transport's status") {
  auto channel = grpc::CreateChannel(DeadSocketTarget(),
                                     grpc::InsecureChannelCredentials());
  auto client = Client::FromChannel(channel, "nowhere");
  client->set_query_timeout(absl::Seconds(5));
  CHECK(client->query_timeout() == absl::Seconds(5));
  CHECK(client->measure_timeout() == kDefaultMeasureTimeout);
  auto info = client->NodeInfo();
  REQUIRE_FALSE(info.ok());
  CHECK(info.status().code() == absl::StatusCode::kUnavailable);

  client->set_measure_timeout(absl::Seconds(5));
  int updates = 0;
  auto table = client->Sweep(v1::SweepRequest(),
                             [&](const v1::SweepUpdate&) { ++updates; });
  REQUIRE_FALSE(table.ok());
  CHECK(table.status().code() == absl::StatusCode::kUnavailable);
  CHECK(updates == 0);
}

TEST_CASE("gRPC statuses convert with code and message unchanged") {
  CHECK(FromGrpcStatus(grpc::Status::OK).ok());
  for (int code = 1; code <= 16; ++code) {
    const std::string message =
        "problems[0].count: must be positive #" + std::to_string(code);
    absl::Status got = FromGrpcStatus(
        grpc::Status(static_cast<grpc::StatusCode>(code), message));
    CHECK(static_cast<int>(got.code()) == code);
    CHECK(got.message() == message);
  }
  absl::Status invalid = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"));
  CHECK(invalid.code() == absl::StatusCode::kInvalidArgument);
  CHECK(invalid.message() == "bad");
  absl::Status odd =
      FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(99), "odd"));
  CHECK(odd.code() == absl::StatusCode::kUnknown);
  CHECK(odd.message() == "odd");
}

}  // namespace
}  // namespace autotuned
