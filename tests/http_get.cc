#include "tests/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace autotuned::testing {

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  int port = 0;
  REQUIRE(absl::SimpleAtoi(address.substr(colon + 1), &port));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  REQUIRE(inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) == 1);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n\r\n");
  REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[8192];
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t got = recv(fd, buf, sizeof(buf), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  close(fd);
  return out;
}

std::map<std::string, double> Samples(const std::string& page) {
  std::map<std::string, double> out;
  const std::string body = page.substr(page.find("\r\n\r\n") + 4);
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    REQUIRE(absl::SimpleAtod(line.substr(space + 1), &v));
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

}  // namespace autotuned::testing
