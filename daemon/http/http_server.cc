#include "daemon/http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace autotuned {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

absl::StatusOr<HostPort> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("want HOST:PORT, got \"", address, "\""));
  }
  HostPort hp{address.substr(0, colon), address.substr(colon + 1)};
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  return hp;
}

std::string FormatAddress(const sockaddr_storage& sa, int* port) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    *port = ntohs(in6->sin6_port);
    return absl::StrCat("[", host, "]:", *port);
  }
  const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
  inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
  *port = ntohs(in->sin_port);
  return absl::StrCat(host, ":", *port);
}

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool WaitFd(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

void WriteAll(int fd, const std::string& data, absl::Time deadline) {
  size_t done = 0;
  while (done < data.size()) {
    if (!WaitFd(fd, POLLOUT, deadline)) return;
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Closes after the answer without resetting the connection: a close with
// unread input sends a TCP reset, which can destroy the answer before the
// client reads it. Discards what the client still sends, for a bounded time
// and amount.
void LingeringClose(int fd, absl::Time deadline) {
  shutdown(fd, SHUT_WR);
  char buf[4096];
  for (int i = 0; i < 16 && WaitFd(fd, POLLIN, deadline); ++i) {
    if (recv(fd, buf, sizeof(buf), 0) <= 0) break;
  }
  close(fd);
}

std::string Response(int code, const char* reason, const std::string& content_type,
                     const std::string& body, bool head) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ",
                      content_type, "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", head ? "" : body);
}

std::string Error(int code, const char* reason, const std::string& why) {
  return Response(code, reason, "text/plain; charset=utf-8",
                  absl::StrCat(code, " ", reason, ": ", why, "\n"), false);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const Options& options, std::map<std::string, HttpPage> pages) {
  absl::StatusOr<HostPort> hp = SplitAddress(options.address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &found);
  if (gai != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve \"", options.address, "\": ", gai_strerror(gai)));
  }
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      last_errno = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.address, ": ", strerror(last_errno)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int port = 0;
  const std::string address = FormatAddress(bound, &port);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(options, std::move(pages), fd, wake, address, port));
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

HttpServer::HttpServer(Options options, std::map<std::string, HttpPage> pages,
                       int listen_fd, int wake_fd, std::string address, int port)
    : options_(std::move(options)),
      pages_(std::move(pages)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      address_(std::move(address)),
      port_(port) {}

HttpServer::~HttpServer() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void HttpServer::Loop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int r = poll(fds, 2, -1);
    if (r < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) continue;
    Serve(conn);
    LingeringClose(conn, absl::Now() + std::min(options_.read_timeout, absl::Seconds(1)));
  }
}

void HttpServer::Serve(int fd) {
  const absl::Time read_deadline = absl::Now() + options_.read_timeout;
  std::string head;
  char buf[1024];
  size_t end = std::string::npos;
  while (true) {
    end = head.find("\r\n\r\n");
    const size_t head_bytes = end == std::string::npos ? head.size() : end + 4;
    if (head_bytes > options_.max_request_bytes) {
      WriteAll(fd,
               Error(431, "Request Header Fields Too Large",
                     absl::StrCat("the request head exceeds ",
                                  options_.max_request_bytes, " bytes")),
               absl::Now() + options_.write_timeout);
      return;
    }
    if (end != std::string::npos) break;
    if (!WaitFd(fd, POLLIN, read_deadline)) {
      WriteAll(fd, Error(408, "Request Timeout", "the request head did not arrive in time"),
               absl::Now() + options_.write_timeout);
      return;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // the client went away
    head.append(buf, static_cast<size_t>(n));
  }
  const absl::Time write_deadline = absl::Now() + options_.write_timeout;
  const std::string line = head.substr(0, head.find("\r\n"));
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[2].rfind("HTTP/1.", 0) != 0 || parts[1].empty() ||
      parts[1][0] != '/') {
    WriteAll(fd, Error(400, "Bad Request", "malformed request line"), write_deadline);
    return;
  }
  const std::string& method = parts[0];
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Error(405, "Method Not Allowed", "only GET and HEAD"), write_deadline);
    return;
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  auto page = pages_.find(path);
  if (page == pages_.end()) {
    WriteAll(fd, Error(404, "Not Found", absl::StrCat("no page ", path)), write_deadline);
    return;
  }
  WriteAll(fd,
           Response(200, "OK", page->second.content_type, page->second.body(),
                    method == "HEAD"),
           write_deadline);
}

}  // namespace autotuned
