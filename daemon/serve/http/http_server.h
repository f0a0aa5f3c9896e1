// A minimal HTTP/1.1 server for read-only pages such as GET /metrics, on a
// plain TCP socket and one thread that serves every connection at once
// (non-blocking sockets, one poll loop). Not a general web server: one
// request per connection (answered with "Connection: close"), GET and HEAD
// only, no request body, no keep-alive, no TLS.
//
// Answers: 200 with the page; 404 for an unknown path (the query string is
// ignored); 405 for another method; 400 for a malformed request line; 431
// when the request head exceeds Options::max_request_bytes; 408 when the head
// has not arrived within Options::read_timeout; 503 when max_connections are
// open and none of them is still sending its request head. Each connection is
// bounded by read_timeout (reading) and write_timeout (writing), and at most
// max_connections are open: when all are, the one that has been sending its
// head longest is closed to make room, so a slow client never blocks a
// scrape.
//
// Thread-safety: Start and Stop from one owner thread; page bodies are
// produced on the server's thread, so a Page::body must be safe to call from
// there while the rest of the program runs (and fast: the loop waits for it).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace autotuned {

struct HttpPage {
  std::string content_type;
  std::function<std::string()> body;
};

class HttpServer {
 public:
  struct Options {
    // "HOST:PORT"; HOST a name or address ("[::1]" for IPv6), PORT 0 for any.
    std::string address;
    size_t max_request_bytes = 8192;
    absl::Duration read_timeout = absl::Seconds(5);
    absl::Duration write_timeout = absl::Seconds(5);
    int max_connections = 16;
  };

  // Binds, listens and starts serving `pages` (path -> page) on a thread.
  // INVALID_ARGUMENT for a malformed address or an unknown host;
  // UNAVAILABLE (naming the address and errno) when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const Options& options, std::map<std::string, HttpPage> pages);

  // Stops, as Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Stops the loop and joins its thread; connections still open are closed.
  // Idempotent.
  void Stop();

  // The bound address, "HOST:PORT" with the actual port, e.g. "127.0.0.1:9464".
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  HttpServer(Options options, std::map<std::string, HttpPage> pages, int listen_fd,
             int wake_fd, std::string address, int port);
  struct Conn;
  void Loop();
  // Accepts what the listener has (at most max_connections at a time).
  void Accept(std::vector<Conn>* conns, absl::Time now);
  // Advances `c` after poll said `revents` (0: only its deadline may have
  // passed); closes it (fd -1) when done.
  void Step(Conn* c, short revents, absl::Time now);
  void Reply(Conn* c, std::string response, absl::Time now);
  // The response to a request head (without its final blank line).
  std::string Answer(const std::string& head) const;

  // Constant after construction.
  const Options options_;
  const std::map<std::string, HttpPage> pages_;
  const int listen_fd_;
  const int wake_fd_;  // eventfd: written by Stop to wake the loop
  const std::string address_;
  const int port_;

  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace autotuned
