#include "daemon/state/fleetcache/redis_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/escape.h"

namespace autotuned::fleetcache {
namespace {

// At least 1 ms: a zero timeval would mean no timeout at all.
timeval BoundOf(absl::Duration d) { return absl::ToTimeval(std::max(d, absl::Milliseconds(1))); }

struct HostPort {
  std::string host;  // brackets of an IPv6 address removed
  int port = 0;
};

absl::StatusOr<HostPort> Split(const std::string& redis) {
  const size_t colon = redis.rfind(':');
  HostPort out;
  out.host = redis.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (colon == std::string::npos || !absl::SimpleAtoi(redis.substr(colon + 1), &out.port)) {
    return absl::InvalidArgumentError("fleet_cache.redis: no port");
  }
  return out;
}

class PlainLink final : public RedisLink {
 public:
  explicit PlainLink(redisContext* context) : context_(context) {}
  ~PlainLink() override { redisFree(context_); }

  absl::StatusOr<RedisReply> Roundtrip(const std::vector<std::string>& argv,
                                       absl::Time deadline) override {
    if (redisSetTimeout(context_, BoundOf(deadline - absl::Now())) != REDIS_OK) {
      return absl::UnavailableError("cannot set the socket's timeout");
    }
    std::vector<const char*> args;
    std::vector<size_t> lengths;
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    void* raw =
        redisCommandArgv(context_, static_cast<int>(argv.size()), args.data(), lengths.data());
    if (raw == nullptr) {
      return absl::UnavailableError(
          context_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
              ? std::string("no answer in time")
              : LogEscaped(context_->errstr));
    }
    return RedisReply(static_cast<redisReply*>(raw));
  }

 private:
  redisContext* const context_;
};

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "the connection was closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// Waits until `fd` is ready for `events` or `deadline`.
absl::Status Await(int fd, short events, absl::Time deadline) {
  for (;;) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return absl::UnavailableError("no answer in time");
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 60000)));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
    }
  }
}

// A non-blocking TCP connection to `hp` by `deadline`.
absl::StatusOr<int> ConnectTcp(const HostPort& hp, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", LogEscaped(hp.host), ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = strerror(errno);
      close(fd);
      continue;
    }
    absl::Status ready = Await(fd, POLLOUT, deadline);
    int err = 0;
    socklen_t len = sizeof(err);
    if (ready.ok() && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      freeaddrinfo(found);
      return fd;
    }
    why = ready.ok() ? strerror(err) : std::string(ready.message());
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat("cannot connect: ", why));
}

class TlsLink final : public RedisLink {
 public:
  TlsLink(int fd, SSL_CTX* ctx, SSL* ssl)
      : fd_(fd), ctx_(ctx), ssl_(ssl), reader_(redisReaderCreate()) {}
  ~TlsLink() override {
    redisReaderFree(reader_);
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    close(fd_);
  }

  // Drives `op` (SSL_connect, SSL_write, SSL_read) until it makes progress
  // or fails: its result (> 0), or why not.
  template <typename Op>
  absl::StatusOr<int> Drive(Op op, absl::Time deadline) {
    for (;;) {
      ERR_clear_error();
      const int r = op();
      if (r > 0) return r;
      const int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        absl::Status ready = Await(fd_, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
        if (!ready.ok()) return ready;
        continue;
      }
      const long verified = SSL_get_verify_result(ssl_);
      if (verified != X509_V_OK) {
        ERR_clear_error();
        return absl::UnavailableError(absl::StrCat(
            "TLS: Redis's certificate refused: ", X509_verify_cert_error_string(verified)));
      }
      if (e == SSL_ERROR_ZERO_RETURN) return absl::UnavailableError("Redis closed the connection");
      if (e == SSL_ERROR_SYSCALL && errno != 0) {
        return absl::UnavailableError(absl::StrCat("TLS: ", strerror(errno)));
      }
      return absl::UnavailableError(absl::StrCat("TLS: ", OpenSslError()));
    }
  }

  absl::Status Handshake(absl::Time deadline) {
    absl::StatusOr<int> done = Drive([this] { return SSL_connect(ssl_); }, deadline);
    return done.status();
  }

  absl::StatusOr<RedisReply> Roundtrip(const std::vector<std::string>& argv,
                                       absl::Time deadline) override {
    std::vector<const char*> args;
    std::vector<size_t> lengths;
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    char* command = nullptr;
    const int length = redisFormatCommandArgv(&command, static_cast<int>(argv.size()),
                                              args.data(), lengths.data());
    if (length < 0) return absl::ResourceExhaustedError("no memory for a Redis command");
    absl::Status sent = absl::OkStatus();
    for (int off = 0; sent.ok() && off < length;) {
      absl::StatusOr<int> n =
          Drive([&] { return SSL_write(ssl_, command + off, length - off); }, deadline);
      if (n.ok()) {
        off += *n;
      } else {
        sent = n.status();
      }
    }
    redisFreeCommand(command);
    if (!sent.ok()) return sent;
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
        return absl::UnavailableError(
            absl::StrCat("a reply that does not parse: ", LogEscaped(reader_->errstr)));
      }
      if (reply != nullptr) return RedisReply(static_cast<redisReply*>(reply));
      char buf[16384];
      absl::StatusOr<int> n =
          Drive([&] { return SSL_read(ssl_, buf, static_cast<int>(sizeof(buf))); }, deadline);
      if (!n.ok()) return n.status();
      if (redisReaderFeed(reader_, buf, static_cast<size_t>(*n)) != REDIS_OK) {
        return absl::UnavailableError("a reply that does not parse");
      }
    }
  }

 private:
  const int fd_;
  SSL_CTX* const ctx_;
  SSL* const ssl_;
  redisReader* const reader_;
};

// The context of a TLS client with `tls`'s CA and certificate: null (and
// *why set) when OpenSSL refuses them.
SSL_CTX* ClientContext(const TlsFiles& tls, std::string* why) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    *why = OpenSslError();
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  bool ok = true;
  BIO* ca = BIO_new_mem_buf(tls.ca_pem.data(), static_cast<int>(tls.ca_pem.size()));
  while (X509* x = PEM_read_bio_X509(ca, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x);
    X509_free(x);
  }
  BIO_free(ca);
  ERR_clear_error();
  if (!tls.cert_pem.empty()) {
    BIO* cert = BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size()));
    X509* leaf = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
    ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (X509* x = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr)) {
      if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {  // takes `x` when it succeeds
        X509_free(x);
        ok = false;
      }
    }
    BIO_free(cert);
    ERR_clear_error();
    BIO* key = BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size()));
    EVP_PKEY* pkey = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
    ok = ok && pkey != nullptr && SSL_CTX_use_PrivateKey(ctx, pkey) == 1;
    EVP_PKEY_free(pkey);
    BIO_free(key);
  }
  if (!ok) {
    *why = absl::StrCat("this daemon's certificate or key: ", OpenSslError());
    SSL_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisLink>> ConnectPlain(const std::string& redis,
                                                        absl::Time deadline) {
  const timeval tv = BoundOf(deadline - absl::Now());
  redisContext* raw = nullptr;
  if (absl::StartsWith(redis, "unix:")) {
    raw = redisConnectUnixWithTimeout(redis.substr(5).c_str(), tv);
  } else {
    absl::StatusOr<HostPort> hp = Split(redis);
    if (!hp.ok()) return hp.status();
    raw = redisConnectWithTimeout(hp->host.c_str(), hp->port, tv);
  }
  if (raw == nullptr) return absl::ResourceExhaustedError("no memory for a Redis context");
  auto link = std::make_unique<PlainLink>(raw);
  if (raw->err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect: ", LogEscaped(raw->errstr)));
  }
  return link;
}

absl::StatusOr<std::unique_ptr<RedisLink>> ConnectTls(const std::string& redis,
                                                      const TlsFiles& tls, absl::Time deadline) {
  absl::StatusOr<HostPort> hp = Split(redis);
  if (!hp.ok()) return hp.status();
  std::string why;
  SSL_CTX* ctx = ClientContext(tls, &why);
  if (ctx == nullptr) return absl::UnavailableError(absl::StrCat("TLS: ", why));
  absl::StatusOr<int> fd = ConnectTcp(*hp, deadline);
  if (!fd.ok()) {
    SSL_CTX_free(ctx);
    return fd.status();
  }
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) {
    SSL_CTX_free(ctx);
    close(*fd);
    return absl::ResourceExhaustedError("no memory for a TLS connection");
  }
  auto link = std::make_unique<TlsLink>(*fd, ctx, ssl);
  SSL_set_fd(ssl, *fd);
  unsigned char ip[16];
  const bool literal = inet_pton(AF_INET, hp->host.c_str(), ip) == 1 ||
                       inet_pton(AF_INET6, hp->host.c_str(), ip) == 1;
  const int named =
      literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), hp->host.c_str())
              : SSL_set1_host(ssl, hp->host.c_str()) & SSL_set_tlsext_host_name(ssl, hp->host.c_str());
  if (named != 1) {
    return absl::UnavailableError(
        absl::StrCat("TLS: cannot check the name ", LogEscaped(hp->host), ": ", OpenSslError()));
  }
  X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(ssl), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                                                           X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  absl::Status handshake = link->Handshake(deadline);
  if (!handshake.ok()) return handshake;
  return std::unique_ptr<RedisLink>(std::move(link));
}

}  // namespace autotuned::fleetcache
