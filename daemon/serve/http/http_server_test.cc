// The HTTP server over a real loopback socket, driven by a raw client.
#include "daemon/serve/http/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

// Sends `request` to 127.0.0.1:port and returns everything the server sends
// back until it closes (bounded: 10 s). `hold_open` keeps the connection
// without finishing the request (the server must time out).
std::string Exchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::unique_ptr<HttpServer> StartServer(std::atomic<int>* renders,
                                        absl::Duration read_timeout = absl::Seconds(5),
                                        int max_connections = 16) {
  HttpServer::Options options;
  options.address = "127.0.0.1:0";
  options.max_request_bytes = 512;
  options.read_timeout = read_timeout;
  options.max_connections = max_connections;
  auto server = HttpServer::Start(
      options, {{"/metrics", HttpPage{"text/plain; version=0.0.4", [renders] {
                                        ++*renders;
                                        return std::string("x_total 1\n");
                                      }}}});
  REQUIRE(server.ok());
  return std::move(*server);
}

TEST_CASE("GET /metrics answers the page; other paths 404") {
  std::atomic<int> renders{0};
  auto server = StartServer(&renders);
  CHECK(server->port() > 0);
  CHECK(server->address() == absl::StrCat("127.0.0.1:", server->port()));

  const std::string ok =
      Exchange(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(ok, Catch::StartsWith("HTTP/1.1 200 OK\r\n"));
  CHECK_THAT(ok, Catch::Contains("Content-Type: text/plain; version=0.0.4\r\n"));
  CHECK_THAT(ok, Catch::Contains("Content-Length: 10\r\n"));
  CHECK_THAT(ok, Catch::EndsWith("\r\n\r\nx_total 1\n"));
  CHECK(renders == 1);

  CHECK_THAT(Exchange(server->port(), "GET /metrics?name=x HTTP/1.0\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 200 OK"));
  const std::string head = Exchange(server->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200 OK") &&
                       Catch::EndsWith("\r\n\r\n") &&
                       Catch::Contains("Content-Length: 10\r\n"));
  CHECK_THAT(Exchange(server->port(), "GET / HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 404 Not Found"));
  CHECK_THAT(Exchange(server->port(), "GET /metricsx HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 404 Not Found"));
}

TEST_CASE("bad requests get 400, 405 and 431, and the server serves on") {
  std::atomic<int> renders{0};
  auto server = StartServer(&renders);
  CHECK_THAT(Exchange(server->port(), "POST /metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 405 "));
  CHECK_THAT(Exchange(server->port(), "hello\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 400 "));
  CHECK_THAT(Exchange(server->port(), "GET metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 400 "));
  // A head over 512 bytes, finished or not.
  CHECK_THAT(Exchange(server->port(),
                      absl::StrCat("GET /metrics HTTP/1.1\r\nX: ",
                                   std::string(600, 'a'), "\r\n\r\n")),
             Catch::StartsWith("HTTP/1.1 431 "));
  CHECK_THAT(Exchange(server->port(), std::string(2000, 'a')),
             Catch::StartsWith("HTTP/1.1 431 "));
  CHECK(renders == 0);
  CHECK_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 200 OK"));
}

TEST_CASE("a client that never finishes its request gets 408") {
  std::atomic<int> renders{0};
  auto server = StartServer(&renders, absl::Milliseconds(200));
  CHECK_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n"),
             Catch::StartsWith("HTTP/1.1 408 "));
  CHECK_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 200 OK"));
  server->Stop();
  server->Stop();
}

// A client that connects and sends part of a request head, then nothing.
int SlowClient(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  send(fd, "GET /met", 8, MSG_NOSIGNAL);
  return fd;
}

TEST_CASE("slow clients never block a scrape") {
  std::atomic<int> renders{0};
  // Each slow client could hold a connection for 30 s.
  auto server = StartServer(&renders, absl::Seconds(30), /*max_connections=*/4);
  std::vector<int> slow;
  for (int i = 0; i < 3; ++i) slow.push_back(SlowClient(server->port()));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  CHECK_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 200 OK"));
  CHECK(absl::Now() - start < absl::Seconds(5));
  // More slow clients than connections: the oldest make room.
  for (int i = 0; i < 6; ++i) slow.push_back(SlowClient(server->port()));
  absl::SleepFor(absl::Milliseconds(100));
  CHECK_THAT(Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 200 OK"));
  CHECK(renders == 2);
  for (int fd : slow) close(fd);
}

TEST_CASE("a bad or busy address is refused with a reason") {
  HttpServer::Options options;
  options.address = "9464";
  auto bad = HttpServer::Start(options, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);

  options.address = "127.0.0.1:0";
  auto first = HttpServer::Start(options, {});
  REQUIRE(first.ok());
  options.address = (*first)->address();
  auto second = HttpServer::Start(options, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains("Address already in use"));
}

}  // namespace
}  // namespace autotuned
