#include "daemon/state/fleetcache/fleet_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/common/escape.h"
#include "daemon/state/cache/key.h"
#include "daemon/state/fleetcache/codec.h"

namespace autotuned::fleetcache {
namespace {

// The first backoff of an outage: 100 ms, or max_backoff when shorter.
absl::Duration FirstBackoff(const FleetCacheOptions& o) {
  return std::min(absl::Milliseconds(100), o.max_backoff);
}

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  const std::string field = "fleet_cache.password_file";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(field, ": cannot open ", path));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, " is not a regular file"));
  }
  if ((st.st_mode & 0007) != 0) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: %s is open to others (mode %04o); allow the owner and group only "
        "(chmod o-rwx)",
        field, path, st.st_mode & 07777));
  }
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0 && text.size() < 4096) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const std::string password(absl::StripAsciiWhitespace(text));
  if (password.empty() || password.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " must hold one non-empty line, the password"));
  }
  return password;
}

}  // namespace

absl::StatusOr<FleetCacheOptions> FleetCacheOptionsFrom(const config::FleetCacheConfig& c) {
  FleetCacheOptions o;
  o.redis = c.redis();
  o.user = c.user();
  if (!c.password_file().empty()) {
    absl::StatusOr<std::string> password = ReadPassword(c.password_file());
    if (!password.ok()) return password.status();
    o.password = *std::move(password);
  }
  o.key_prefix = c.key_prefix();
  o.ttl = absl::Seconds(c.ttl_s());
  o.connect_timeout = absl::Milliseconds(c.connect_timeout_ms());
  o.command_timeout = absl::Milliseconds(c.command_timeout_ms());
  o.max_backoff = absl::Milliseconds(c.max_backoff_ms());
  if (!c.tls().ca_file().empty()) {
    absl::StatusOr<TlsFiles> tls = LoadTlsFiles("fleet_cache.tls", c.tls(), TlsRole::kClient);
    if (!tls.ok()) return tls.status();
    o.tls = *std::move(tls);
  }
  return o;
}

FleetCache::FleetCache(FleetCacheOptions options, metrics::DaemonMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics), backoff_(FirstBackoff(options_)) {}

FleetCache::~FleetCache() = default;

std::optional<v1::ProblemResult> FleetCache::Lookup(const std::string& fingerprint,
                                                    const std::string& key_text) {
  const std::string key = FleetKey(options_.key_prefix, fingerprint, key_text);
  absl::StatusOr<Reply> reply = Command({"GET", key});
  if (!reply.ok() && !absl::IsDataLoss(reply.status())) {
    metrics_->fleet_errors->Increment();
    return std::nullopt;
  }
  if (reply.ok() && (*reply)->type == REDIS_REPLY_NIL) {
    metrics_->fleet_misses->Increment();
    return std::nullopt;
  }
  absl::StatusOr<cache::CacheEntry> entry =
      !reply.ok() ? reply.status()
      : (*reply)->type == REDIS_REPLY_STRING
          ? DecodeFleetValue(std::string((*reply)->str, (*reply)->len), key_text)
          : absl::DataLossError(absl::StrCat("a reply of type ", (*reply)->type,
                                             ", not a string"));
  if (!entry.ok()) {
    metrics_->fleet_corrupt->Increment();
    spdlog::warn("fleet cache: ignored the value of {} in Redis {}: {}", LogEscaped(key),
                 LogEscaped(options_.redis), LogEscaped(entry.status().message()));
    return std::nullopt;
  }
  metrics_->fleet_hits->Increment();
  return entry->result();
}

void FleetCache::Publish(const std::string& fingerprint, const std::string& key_text,
                         const v1::ProblemResult& result) {
  cache::CacheEntry entry;
  entry.set_key(CacheKeyDigest(key_text));
  entry.set_key_text(key_text);
  *entry.mutable_result() = result;
  entry.set_stored_unix_ms(absl::ToUnixMillis(absl::Now()));
  absl::StatusOr<Reply> reply =
      Command({"SET", FleetKey(options_.key_prefix, fingerprint, key_text),
               EncodeFleetValue(entry), "PX",
               absl::StrCat(absl::ToInt64Milliseconds(options_.ttl))});
  (reply.ok() ? metrics_->fleet_published : metrics_->fleet_publish_errors)->Increment();
}

bool FleetCache::in_outage() const {
  absl::MutexLock lock(&mu_);
  return outage_;
}

absl::StatusOr<FleetCache::Reply> FleetCache::Command(const std::vector<std::string>& argv) {
  const absl::Time start = absl::Now();
  Context context;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&idle), start + options_.command_timeout)) {
      return absl::DeadlineExceededError("the connection stayed busy");
    }
    if (outage_ && absl::Now() < retry_at_) {
      return absl::UnavailableError("in an outage, not tried before the backoff ends");
    }
    busy_ = true;
    context = std::move(context_);
  }
  absl::StatusOr<Reply> reply = absl::UnknownError("not sent");
  if (context == nullptr) {
    absl::StatusOr<Context> connected = Connect();
    if (connected.ok()) {
      context = *std::move(connected);
    } else {
      reply = connected.status();
    }
  }
  if (context != nullptr) {
    reply = Send(context.get(), argv, absl::Now() + options_.command_timeout);
  }
  absl::MutexLock lock(&mu_);
  busy_ = false;
  if (reply.ok() || absl::IsDataLoss(reply.status())) {  // Redis answered
    context_ = std::move(context);
    Succeeded();
  } else {
    Failed(reply.status());  // the connection, if any, is closed
  }
  return reply;
}

absl::StatusOr<FleetCache::Context> FleetCache::Connect() const {
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  absl::StatusOr<Context> context = options_.tls ? ConnectTls(options_.redis, *options_.tls, deadline)
                                                 : ConnectPlain(options_.redis, deadline);
  if (!context.ok()) return context.status();
  if (!options_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options_.user.empty()) auth.push_back(options_.user);
    auth.push_back(options_.password);
    absl::StatusOr<Reply> reply = Send(context->get(), auth, deadline);
    if (!reply.ok()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "AUTH", options_.user.empty() ? "" : " as user " + LogEscaped(options_.user),
          " failed: ", reply.status().message()));
    }
  }
  return context;
}

absl::StatusOr<FleetCache::Reply> FleetCache::Send(RedisLink* context,
                                                   const std::vector<std::string>& argv,
                                                   absl::Time deadline) {
  absl::StatusOr<Reply> reply = context->Roundtrip(argv, deadline);
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    const std::string error((*reply)->str, (*reply)->len);
    if (absl::StartsWith(error, "WRONGTYPE")) {
      return absl::DataLossError("the key holds a value of another type");
    }
    return absl::FailedPreconditionError(absl::StrCat("Redis answered ", LogEscaped(error)));
  }
  return reply;
}

void FleetCache::Succeeded() {
  backoff_ = FirstBackoff(options_);
  if (!outage_) return;
  outage_ = false;
  metrics_->fleet_outage->Set(0);
  spdlog::info("fleet cache: Redis {} is back after {:.1f} s; sharing results again",
               LogEscaped(options_.redis), absl::ToDoubleSeconds(absl::Now() - outage_since_));
}

void FleetCache::Failed(const absl::Status& why) {
  const absl::Time now = absl::Now();
  if (outage_) {
    backoff_ = std::min(2 * backoff_, options_.max_backoff);
  } else {
    outage_ = true;
    outage_since_ = now;
    metrics_->fleet_outages->Increment();
    metrics_->fleet_outage->Set(1);
    spdlog::warn(
        "fleet cache: Redis {} unusable ({}); rounds use the local cache only until it "
        "answers again (retried with a backoff up to {} ms)",
        LogEscaped(options_.redis), std::string(why.message()),
        absl::ToInt64Milliseconds(options_.max_backoff));
  }
  retry_at_ = now + backoff_;
}

}  // namespace autotuned::fleetcache
