// A minimal HTTP/1.1 server for read-only pages such as GET /metrics, on a
// plain TCP socket and one thread. Not a general web server: one request per
// connection (answered with "Connection: close"), GET and HEAD only, no
// request body, no keep-alive, no TLS.
//
// Answers: 200 with the page; 404 for an unknown path (the query string is
// ignored); 405 for another method; 400 for a malformed request line; 431
// when the request head exceeds Options::max_request_bytes; 408 when the head
// has not arrived within Options::read_timeout. Connections are served one
// after the other, each bounded by read_timeout (reading) and write_timeout
// (writing), so a slow client delays other scrapers by at most their sum.
//
// Thread-safety: Start and Stop from one owner thread; page bodies are
// produced on the server's thread, so a Page::body must be safe to call from
// there while the rest of the program runs.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

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

  // Closes the listener and joins the thread; a connection being served is
  // finished first (bounded by the timeouts). Idempotent.
  void Stop();

  // The bound address, "HOST:PORT" with the actual port, e.g. "127.0.0.1:9464".
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  HttpServer(Options options, std::map<std::string, HttpPage> pages, int listen_fd,
             int wake_fd, std::string address, int port);
  void Loop();
  void Serve(int fd);

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
