#include "daemon/state/cache/cache.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/common/escape.h"
#include "daemon/state/cache/entry_file.h"
#include "daemon/state/cache/file_util.h"

namespace autotuned {
namespace {

constexpr char kEntrySuffix[] = ".entry";
constexpr char kTempPrefix[] = ".tmp-";
constexpr mode_t kDirMode = 0750;
constexpr mode_t kFileMode = 0640;

std::string EntryPath(const std::string& dir, const std::string& key) {
  return absl::StrCat(dir, "/", key, kEntrySuffix);
}

// Reads and checks the entry file `path`, which claims to hold `key`.
// DATA_LOSS (or the read error) with the reason when it cannot be used.
absl::StatusOr<cache::CacheEntry> LoadEntryFile(const std::string& path,
                                                const std::string& key) {
  if (!IsCacheKey(key)) {
    return absl::DataLossError("the file name is not a cache key");
  }
  absl::StatusOr<std::string> bytes = cache_internal::ReadRegularFile(path, kMaxEntryFileBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<cache::CacheEntry> entry = DecodeEntryFile(*bytes);
  if (!entry.ok()) return entry.status();
  if (entry->key() != key) {
    return absl::DataLossError(absl::StrCat(
        "it holds key \"", entry->key(), "\", not the one of its file name"));
  }
  if (CacheKeyDigest(entry->key_text()) != key) {
    return absl::DataLossError(
        "its key text does not hash to the key of its file name");
  }
  absl::Status usable = CheckEntryResult(entry->result());
  if (!usable.ok()) return usable;
  return entry;
}

// The pid in a temporary file's name: ".tmp-<key>-<pid>-<seq>" (an entry's)
// or ".tmp-epoch-<pid>" (the epoch file's); 0 for any other name.
pid_t WriterPid(const std::string& name) {
  const std::vector<std::string> parts = absl::StrSplit(name, '-');
  const bool entry = parts.size() == 4;
  const bool epoch = parts.size() == 3 && parts[1] == "epoch";
  int64_t pid = 0;
  if (!(entry || epoch) || !absl::SimpleAtoi(parts[2], &pid) || pid <= 0 ||
      pid > std::numeric_limits<pid_t>::max()) {
    return 0;
  }
  return static_cast<pid_t>(pid);
}

constexpr char kLockFile[] = "lock";

// Takes "<dir>/lock": an exclusive flock held while the cache is open (the
// fd is returned), the file holding this process's pid. FAILED_PRECONDITION
// naming the directory and the holder's pid when another open cache holds
// it. Where the file system has no locks, logs so and returns the fd
// unlocked.
absl::StatusOr<int> LockDir(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kLockFile);
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, kFileMode);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("result cache: cannot open the lock ", path));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("result cache: the lock ", path, " is not a regular file"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
      spdlog::warn("result cache: cannot lock {} ({}): nothing keeps a second daemon off "
                   "this directory",
                   LogEscaped(path), std::strerror(err));
      return fd;
    }
    char held[32] = {};
    const ssize_t n = ::pread(fd, held, sizeof(held) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::ErrnoToStatus(err, absl::StrCat("result cache: cannot lock ", path));
    }
    const std::string holder(absl::StripAsciiWhitespace(
        absl::string_view(held, n > 0 ? static_cast<size_t>(n) : 0)));
    return absl::FailedPreconditionError(absl::StrCat(
        "result cache: ", dir, " is in use by another daemon (",
        holder.empty() ? "its pid unknown" : absl::StrCat("pid ", LogEscaped(holder)),
        ", holding ", path,
        "); a cache directory serves one daemon at a time: give each its own cache.dir"));
  }
  const std::string mine = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    spdlog::warn("result cache: cannot write this daemon's pid into {}: {}", LogEscaped(path),
                 std::strerror(errno));
  }
  return fd;
}

// Removes the temporary file `path` when no live process may still be
// writing it (its writer's pid is gone, or its name carries none).
void RemoveCrashedTemp(const std::string& path, const std::string& name) {
  const pid_t writer = WriterPid(name);
  if (writer != 0 && writer != ::getpid() &&
      (::kill(writer, 0) == 0 || errno != ESRCH)) {
    spdlog::info("result cache: leaving {}: its writer (pid {}) is alive",
                 LogEscaped(path), writer);
    return;
  }
  absl::Status removed = cache_internal::RemoveFile(path);
  if (removed.ok() || absl::IsNotFound(removed)) {
    spdlog::info("result cache: removed {}, left by an interrupted write",
                 LogEscaped(path));
  } else {
    spdlog::warn("result cache: {}", LogEscaped(removed.message()));
  }
}

constexpr char kEpochFile[] = "epoch";

// A new epoch written atomically to the directory's epoch file.
absl::StatusOr<std::string> NewEpoch(const std::string& dir) {
  absl::BitGen gen;
  const std::string epoch = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                                            absl::Uniform<uint64_t>(gen));
  const std::string path = absl::StrCat(dir, "/", kEpochFile);
  const std::string temp = absl::StrCat(dir, "/", kTempPrefix, kEpochFile, "-", ::getpid());
  cache_internal::RemoveFile(temp).IgnoreError();
  absl::Status written = cache_internal::WriteNewFileSynced(temp, epoch + "\n", kFileMode);
  if (!written.ok()) return written;
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status renamed =
        absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", temp, " to ", path));
    cache_internal::RemoveFile(temp).IgnoreError();
    return renamed;
  }
  absl::Status synced = cache_internal::SyncDir(dir);
  if (!synced.ok()) return synced;
  return epoch;
}

// The directory's epoch: the one in its epoch file, or a new one.
absl::StatusOr<std::string> LoadEpoch(const std::string& dir) {
  absl::StatusOr<std::string> bytes =
      cache_internal::ReadRegularFile(absl::StrCat(dir, "/", kEpochFile), 4096);
  if (bytes.ok()) {
    std::string epoch(absl::StripAsciiWhitespace(*bytes));
    if (IsCacheKey(epoch)) return epoch;
  }
  return NewEpoch(dir);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResultCache>> ResultCache::Open(
    const std::string& dir, const ResultCacheOptions& options) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("result cache: empty directory name");
  }
  absl::Status made = cache_internal::MakeDirs(dir, kDirMode);
  if (!made.ok()) return made;
  // Before anything in the directory is read or removed.
  absl::StatusOr<int> lock = LockDir(dir);
  if (!lock.ok()) return lock.status();
  struct Unlock {  // until the cache owns the lock
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{*lock};
  absl::StatusOr<std::vector<std::string>> names = cache_internal::ListDir(dir);
  if (!names.ok()) return names.status();

  EntryMap entries;
  int64_t corrupt = 0;
  for (const std::string& name : *names) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (absl::StartsWith(name, kTempPrefix)) {
      RemoveCrashedTemp(path, name);
      continue;
    }
    if (!absl::EndsWith(name, kEntrySuffix)) continue;
    const std::string key =
        name.substr(0, name.size() - (sizeof(kEntrySuffix) - 1));
    absl::StatusOr<cache::CacheEntry> entry = LoadEntryFile(path, key);
    if (!entry.ok()) {
      if (++corrupt <= kMaxLoggedFiles) {
        spdlog::warn("result cache: ignoring unusable file {}: {}",
                     LogEscaped(path),
                     LogEscaped(entry.status().message(), 2 * kMaxLoggedBytes));
      }
      continue;
    }
    entries[key] = std::make_shared<const cache::CacheEntry>(*std::move(entry));
  }
  if (corrupt > kMaxLoggedFiles) {
    spdlog::warn("result cache: {} more unusable files ignored, not listed",
                 corrupt - kMaxLoggedFiles);
  }
  absl::StatusOr<std::string> epoch = LoadEpoch(dir);
  if (!epoch.ok()) return epoch.status();
  spdlog::info(
      "result cache: {} entries loaded from {}, {} unusable files "
      "ignored, epoch {}",
      entries.size(), dir, corrupt, *epoch);
  std::unique_ptr<ResultCache> cache(
      new ResultCache(dir, std::move(entries), corrupt, *std::move(epoch), options, unlock.fd));
  unlock.fd = -1;
  absl::MutexLock write_lock(&cache->write_mu_);
  cache->EvictOverBounds("");
  return cache;
}

ResultCache::ResultCache(std::string dir, EntryMap entries,
                         int64_t corrupt_files, std::string epoch,
                         const ResultCacheOptions& options, int lock_fd)
    : dir_(std::move(dir)),
      lock_fd_(lock_fd),
      entries_(std::move(entries)),
      corrupt_files_(corrupt_files),
      epoch_(std::move(epoch)),
      options_(options) {
  Recount();
}

ResultCache::~ResultCache() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void ResultCache::Recount() {
  absl::MutexLock lock(&mu_);
  bytes_ = 0;
  order_.clear();
  age_.clear();
  std::vector<const cache::CacheEntry*> by_age;
  for (const auto& kv : entries_) by_age.push_back(kv.second.get());
  std::sort(by_age.begin(), by_age.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->stored_unix_ms(), a->key()) <
           std::make_pair(b->stored_unix_ms(), b->key());
  });
  for (const cache::CacheEntry* e : by_age) Count(*e);
}

void ResultCache::Count(const cache::CacheEntry& entry) {
  bytes_ += static_cast<int64_t>(entry.ByteSizeLong());
  const int64_t age = next_age_++;
  order_.emplace(age, entry.key());
  age_[entry.key()] = age;
}

void ResultCache::Uncount(const cache::CacheEntry& entry) {
  bytes_ -= static_cast<int64_t>(entry.ByteSizeLong());
  auto it = age_.find(entry.key());
  if (it == age_.end()) return;
  order_.erase(it->second);
  age_.erase(it);
}

void ResultCache::EvictOverBounds(const std::string& keep) {
  std::vector<std::string> evicted;
  {
    absl::MutexLock lock(&mu_);
    auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int64_t>(entries_.size()) > options_.max_entries ||
             bytes_ > options_.max_bytes;
    };
    for (auto it = order_.begin(); it != order_.end() && over();) {
      const std::string key = (it++)->second;
      if (key == keep) continue;
      auto entry = entries_.find(key);
      Uncount(*entry->second);
      entries_.erase(entry);
      evicted.push_back(key);
    }
    evictions_ += static_cast<int64_t>(evicted.size());
  }
  if (evicted.empty()) return;
  for (const std::string& key : evicted) {
    absl::Status removed = cache_internal::RemoveFile(EntryPath(dir_, key));
    if (!removed.ok() && !absl::IsNotFound(removed)) {
      spdlog::warn("result cache: evicted {} from memory, but its file stays: {}", key,
                   removed.ToString());
    }
  }
  absl::StatusOr<std::string> epoch = NewEpoch(dir_);
  if (epoch.ok()) {
    absl::MutexLock lock(&mu_);
    epoch_ = *epoch;
  } else {
    spdlog::warn("result cache: the epoch was not renewed after evicting: {}",
                 epoch.status().ToString());
  }
  spdlog::info("result cache: evicted the {} oldest entries (cache.max_entries = {}, "
               "cache.max_bytes = {})",
               evicted.size(), options_.max_entries, options_.max_bytes);
}

int64_t ResultCache::evictions() const {
  absl::ReaderMutexLock lock(&mu_);
  return evictions_;
}

int64_t ResultCache::bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return bytes_;
}

std::string ResultCache::epoch() const {
  absl::ReaderMutexLock lock(&mu_);
  return epoch_;
}

std::shared_ptr<const cache::CacheEntry> ResultCache::Find(
    const std::string& key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

std::optional<v1::ProblemResult> ResultCache::Lookup(
    const std::string& key) const {
  std::shared_ptr<const cache::CacheEntry> entry = Find(key);
  if (entry == nullptr) return std::nullopt;
  return entry->result();
}

std::optional<v1::ProblemResult> ResultCache::Lookup(
    const std::string& key, const std::string& key_text) const {
  std::shared_ptr<const cache::CacheEntry> entry = Find(key);
  if (entry == nullptr) return std::nullopt;
  if (entry->key_text() != key_text) {
    spdlog::warn("result cache: key {} collides: stored for another problem",
                 key);
    return std::nullopt;
  }
  return entry->result();
}

absl::Status ResultCache::Store(const std::string& key,
                                const std::string& key_text,
                                const v1::ProblemResult& result) {
  if (!IsCacheKey(key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key: not a cache key (32 lowercase hex digits): \"", key, "\""));
  }
  if (CacheKeyDigest(key_text) != key) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: ", key, " is not the digest of key_text"));
  }
  cache::CacheEntry entry;
  entry.set_key(key);
  entry.set_key_text(key_text);
  *entry.mutable_result() = result;
  entry.set_stored_unix_ms(absl::ToUnixMillis(absl::Now()));
  const std::string bytes = EncodeEntryFile(entry);
  if (bytes.size() > kMaxEntryFileBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("key ", key, ": entry of ", bytes.size(),
                     " bytes, over the cache's limit of ", kMaxEntryFileBytes));
  }
  auto shared = std::make_shared<const cache::CacheEntry>(std::move(entry));

  absl::MutexLock write_lock(&write_mu_);
  const std::string temp = absl::StrCat(dir_, "/", kTempPrefix, key, "-",
                                        ::getpid(), "-", temp_seq_++);
  const std::string path = EntryPath(dir_, key);
  absl::Status written =
      cache_internal::WriteNewFileSynced(temp, bytes, kFileMode);
  if (!written.ok()) return written;
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status renamed = absl::ErrnoToStatus(
        errno, absl::StrCat("cannot rename ", temp, " to ", path));
    cache_internal::RemoveFile(temp).IgnoreError();
    return renamed;
  }
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<const cache::CacheEntry>& slot = entries_[key];
    if (slot != nullptr) Uncount(*slot);
    slot = std::move(shared);
    Count(*slot);
  }
  EvictOverBounds(key);
  return cache_internal::SyncDir(dir_);
}

std::vector<v1::CacheEntrySummary> ResultCache::List() const {
  std::vector<std::shared_ptr<const cache::CacheEntry>> snapshot;
  {
    absl::ReaderMutexLock lock(&mu_);
    snapshot.reserve(entries_.size());
    for (const auto& kv : entries_) snapshot.push_back(kv.second);
  }
  std::sort(snapshot.begin(), snapshot.end(),
            [](const auto& a, const auto& b) { return a->key() < b->key(); });
  std::vector<v1::CacheEntrySummary> out;
  out.reserve(snapshot.size());
  for (const auto& e : snapshot) {
    v1::CacheEntrySummary s;
    s.set_key(e->key());
    *s.mutable_problem() = e->result().problem();
    s.set_winner(e->result().winner());
    if (e->result().ranked_size() > 0 && e->result().ranked(0).ok()) {
      s.set_winner_mean_us(e->result().ranked(0).mean_us());
    }
    s.set_measured_unix_ms(e->result().measured_unix_ms());
    s.set_world_size(KeyTextWorldSize(e->key_text()));
    s.set_links(KeyTextLinks(e->key_text()));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<ResultCache::Cleared> ResultCache::Clear() {
  absl::MutexLock write_lock(&write_mu_);
  absl::StatusOr<std::vector<std::string>> names =
      cache_internal::ListDir(dir_);
  if (!names.ok()) return names.status();
  Cleared cleared;
  std::vector<std::string> removed_keys;
  std::vector<std::string> kept_keys;
  for (const std::string& name : *names) {
    const bool entry = absl::EndsWith(name, kEntrySuffix);
    if (!entry && !absl::StartsWith(name, kTempPrefix)) continue;
    absl::Status s = cache_internal::RemoveFile(absl::StrCat(dir_, "/", name));
    if (absl::IsNotFound(s)) continue;
    const std::string key =
        entry ? name.substr(0, name.size() - (sizeof(kEntrySuffix) - 1)) : "";
    if (!s.ok()) {
      spdlog::warn("result cache: clear: {}", LogEscaped(s.message()));
      ++cleared.not_removed;
      if (entry) kept_keys.push_back(key);
      continue;
    }
    if (entry) {
      ++cleared.removed;
      removed_keys.push_back(key);
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& key : removed_keys) entries_.erase(key);
    corrupt_files_ = 0;
    for (const std::string& key : kept_keys) {
      if (!entries_.contains(key)) ++corrupt_files_;
    }
  }
  Recount();
  // Renewed even when nothing was removed; a failure to write it leaves the
  // old one in place (reported: the clear's error).
  absl::StatusOr<std::string> epoch = NewEpoch(dir_);
  if (!epoch.ok()) return epoch.status();
  {
    absl::MutexLock lock(&mu_);
    epoch_ = *epoch;
  }
  absl::Status synced = cache_internal::SyncDir(dir_);
  if (!synced.ok()) return synced;
  return cleared;
}

int64_t ResultCache::corrupt_files() const {
  absl::ReaderMutexLock lock(&mu_);
  return corrupt_files_;
}

int64_t ResultCache::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

}  // namespace autotuned
