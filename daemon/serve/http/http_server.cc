#include "daemon/serve/http/http_server.h"

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
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/escape.h"

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

// One client connection of the loop: reading its request head, writing the
// answer, then discarding what it still sends until it closes (lingering).
struct HttpServer::Conn {
  enum class Phase { kRead, kWrite, kLinger };
  int fd = -1;
  Phase phase = Phase::kRead;
  absl::Time started;
  absl::Time deadline;  // of the current phase
  std::string in;
  std::string out;
  size_t sent = 0;
  int linger_reads = 0;
};

void HttpServer::Loop() {
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
    absl::Time next = absl::Now() + absl::Seconds(1);
    for (const Conn& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == Conn::Phase::kWrite ? POLLOUT : POLLIN),
                     0});
      next = std::min(next, c.deadline);
    }
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(next - absl::Now()) + 1);
    const int r = poll(fds.data(), fds.size(), static_cast<int>(ms));
    if (r < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < conns.size(); ++i) Step(&conns[i], fds[i + 2].revents, now);
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Conn& c) { return c.fd < 0; }),
                conns.end());
    if ((fds[0].revents & POLLIN) != 0) Accept(&conns, now);
  }
  for (Conn& c : conns) close(c.fd);
}

void HttpServer::Accept(std::vector<Conn>* conns, absl::Time now) {
  for (int i = 0; i < options_.max_connections; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (static_cast<int>(conns->size()) >= options_.max_connections) {
      // Full: the client that has been sending its request head longest
      // makes room, so that slow clients never lock a scrape out.
      auto oldest = conns->end();
      for (auto it = conns->begin(); it != conns->end(); ++it) {
        if (it->phase == Conn::Phase::kRead && (oldest == conns->end() || it->started < oldest->started)) {
          oldest = it;
        }
      }
      if (oldest == conns->end()) {
        const std::string busy =
            Error(503, "Service Unavailable", "too many connections; retry shortly");
        (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
        close(fd);
        continue;
      }
      close(oldest->fd);
      conns->erase(oldest);
    }
    Conn c;
    c.fd = fd;
    c.started = now;
    c.deadline = now + options_.read_timeout;
    conns->push_back(std::move(c));
  }
}

void HttpServer::Reply(Conn* c, std::string response, absl::Time now) {
  c->out = std::move(response);
  c->sent = 0;
  c->phase = Conn::Phase::kWrite;
  c->deadline = now + options_.write_timeout;
}

void HttpServer::Step(Conn* c, short revents, absl::Time now) {
  char buf[4096];
  auto finish = [c] {
    close(c->fd);
    c->fd = -1;
  };
  switch (c->phase) {
    case Conn::Phase::kRead: {
      if (revents != 0) {
        const ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return finish();
        if (n > 0) c->in.append(buf, static_cast<size_t>(n));
      }
      const size_t end = c->in.find("\r\n\r\n");
      const size_t head_bytes = end == std::string::npos ? c->in.size() : end + 4;
      if (head_bytes > options_.max_request_bytes) {
        return Reply(c,
                     Error(431, "Request Header Fields Too Large",
                           absl::StrCat("the request head exceeds ", options_.max_request_bytes,
                                        " bytes")),
                     now);
      }
      if (end != std::string::npos) return Reply(c, Answer(c->in.substr(0, end)), now);
      if (now >= c->deadline) {
        return Reply(c, Error(408, "Request Timeout", "the request head did not arrive in time"),
                     now);
      }
      return;
    }
    case Conn::Phase::kWrite: {
      if (now >= c->deadline) return finish();
      if ((revents & POLLOUT) == 0) return;
      const ssize_t n =
          send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
      if (n <= 0) return finish();
      c->sent += static_cast<size_t>(n);
      if (c->sent < c->out.size()) return;
      // Closes without resetting the connection: a close with unread input
      // sends a TCP reset, which can destroy the answer before the client
      // reads it. What the client still sends is discarded, for a bounded
      // time and amount.
      shutdown(c->fd, SHUT_WR);
      c->phase = Conn::Phase::kLinger;
      c->deadline = now + std::min(options_.read_timeout, absl::Seconds(1));
      return;
    }
    case Conn::Phase::kLinger: {
      if (now >= c->deadline) return finish();
      if (revents == 0) return;
      if (recv(c->fd, buf, sizeof(buf), 0) <= 0 || ++c->linger_reads > 16) return finish();
      return;
    }
  }
}

std::string HttpServer::Answer(const std::string& head) const {
  const std::string line = head.substr(0, head.find("\r\n"));
  std::vector<std::string> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[2].rfind("HTTP/1.", 0) != 0 || parts[1].empty() ||
      parts[1][0] != '/') {
    return Error(400, "Bad Request", "malformed request line");
  }
  const std::string& method = parts[0];
  if (method != "GET" && method != "HEAD") {
    return Error(405, "Method Not Allowed", "only GET and HEAD");
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  auto page = pages_.find(path);
  if (page == pages_.end()) {
    return Error(404, "Not Found", absl::StrCat("no page ", LogEscaped(path)));
  }
  return Response(200, "OK", page->second.content_type, page->second.body(), method == "HEAD");
}

}  // namespace autotuned
