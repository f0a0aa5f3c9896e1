// The result cache: measured rankings kept in memory and on disk, so that a
// problem measured once on this node is answered at once afterwards, also
// after a daemon restart.
//
// On disk, one file per entry in the cache directory, named "<key>.entry"
// (key: CacheKeyDigest, 32 hex digits), in the ATCACHE2 format of
// entry_file.h (checksummed; ATCACHE1 files of earlier versions are read), mode
// 0640. Writes are atomic: a temporary file ".tmp-<key>-..." in the same
// directory is written, fsync'ed and renamed over the entry, then the
// directory is fsync'ed; a crash leaves the old entry or the new one, never a
// mix. Temporary files whose writer process is gone (a crash) are removed by
// Open. A directory belongs to one open cache, so one daemon, at a time:
// Open takes an exclusive flock on the file "lock" in it (made when missing,
// holding the pid of the process that has it), before it reads or removes
// anything there, and the cache holds it until it is destroyed; the file
// stays (Clear leaves it). Where the file system has no locks, Open logs a
// warning and goes on unlocked. Other files in the directory are left alone.
//
// Open reads regular files of at most kMaxEntryFileBytes only, without
// following symbolic links and without blocking. A "*.entry" file that cannot
// be used (a symbolic link, FIFO, device or directory; over the size limit;
// unreadable, bad magic, truncated, length mismatch, checksum mismatch,
// unparsable payload, key not matching its file name or key text, a result
// CheckEntryResult (entry_file.h) refuses) is logged with spdlog::warn naming
// the file (escaped) and the reason, at most kMaxLoggedFiles lines per Open
// and then one line with the count of the others, counted (corrupt_files())
// and ignored: never fatal, never deleted except by Clear().
//
// Bounds (ResultCacheOptions): at most max_entries entries and max_bytes
// bytes of them (an entry's size is its encoded record's); past either, the
// oldest entries (by the time they were stored) are evicted, file and
// memory, at Open and at every Store, never the entry just stored.
//
// The epoch: a random id (32 hex digits) naming the cache's contents, kept
// in the file "epoch" of the directory (written atomically; made when
// missing or unreadable) and renewed whenever entries are removed (Clear,
// eviction), so clients that keep decisions of their own key them on it
// (NodeInfo.cache_epoch): the same epoch means no entry was removed since.
//
// Thread-safety: every method may be called concurrently. Lookup, List,
// size and corrupt_files read memory only, under a reader lock that is never
// held during file I/O, so a lookup never waits for a disk. Store and Clear
// are serialized with each other (a separate lock held across their file
// I/O), so memory always ends up agreeing with the files they leave.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/state/cache/cache_entry.pb.h"
#include "daemon/state/cache/key.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

struct ResultCacheOptions {
  // Config cache.max_entries and cache.max_bytes.
  int64_t max_entries = 100000;
  int64_t max_bytes = int64_t{1} << 30;
};

class ResultCache {
 public:
  // Opens the cache in `dir`: creates it when missing (with its parents, like
  // mkdir -p, mode 0750) and loads every "*.entry" file into memory, skipping
  // (and counting) corrupt ones. Errors (naming `dir`): INVALID_ARGUMENT when
  // `dir` is empty; FAILED_PRECONDITION when it exists and is not a
  // directory, or when another open cache (another daemon, or another
  // ResultCache of this process) holds its lock: the message names the
  // holder's pid; the errno's code when it cannot be created, locked or
  // listed.
  static absl::StatusOr<std::unique_ptr<ResultCache>> Open(
      const std::string& dir, const ResultCacheOptions& options = {});

  ResultCache(const ResultCache&) = delete;
  ResultCache& operator=(const ResultCache&) = delete;
  // Lets go of the directory's lock.
  ~ResultCache();

  // The stored result for `key`, or nullopt. Memory only (the hot path).
  std::optional<v1::ProblemResult> Lookup(const std::string& key) const;
  // The same, and only when the entry's stored key text equals `key_text`:
  // nullopt on a digest collision.
  std::optional<v1::ProblemResult> Lookup(const std::string& key,
                                          const std::string& key_text) const;

  // Stores `result` under `key`, replacing an older entry, on disk (atomic,
  // durable when OK) and in memory. INVALID_ARGUMENT when `key` is not
  // CacheKeyDigest(key_text); RESOURCE_EXHAUSTED when the entry file would
  // be over kMaxEntryFileBytes; otherwise the errno's code of the failed file
  // operation, naming the file. A failure before the rename leaves the old
  // entry and no temporary file; when only the final directory fsync fails
  // the new entry is in place (and in memory) but may not survive a crash.
  absl::Status Store(const std::string& key, const std::string& key_text,
                     const v1::ProblemResult& result);

  // One summary per entry in memory, sorted by key. world_size comes from the
  // key text; winner_mean_us is ranked[0].mean_us when ranked[0] worked,
  // else 0.
  std::vector<v1::CacheEntrySummary> List() const;

  // How many unusable files Open logs one by one.
  static constexpr int kMaxLoggedFiles = 16;

  struct Cleared {
    int64_t removed = 0;      // "*.entry" files removed
    int64_t not_removed = 0;  // "*.entry" and temporary files still there
  };
  // Removes every entry it can: the "*.entry" files (corrupt ones included),
  // any temporary file left by an interrupted write, and their entries in
  // memory. A file that cannot be removed is logged (spdlog::warn, naming it
  // and the reason), counted in not_removed, and the others are still
  // removed; its entry stays in memory, and corrupt_files() becomes the
  // number of unusable entry files left. Errors only when the directory
  // cannot be listed or the new epoch cannot be written (the errno's code,
  // naming the path).
  absl::StatusOr<Cleared> Clear();

  // Corrupt files found by Open (and not removed by Clear since).
  int64_t corrupt_files() const;
  // Entries in memory.
  int64_t size() const;
  // The cache directory as given to Open.
  const std::string& dir() const { return dir_; }
  // The epoch (above).
  std::string epoch() const;
  // Entries evicted since Open (the bounds above), and their bytes now.
  int64_t evictions() const;
  int64_t bytes() const;

 private:
  using EntryMap =
      absl::flat_hash_map<std::string,
                          std::shared_ptr<const cache::CacheEntry>>;

  ResultCache(std::string dir, EntryMap entries, int64_t corrupt_files, std::string epoch,
              const ResultCacheOptions& options, int lock_fd);

  std::shared_ptr<const cache::CacheEntry> Find(const std::string& key) const;
  // Counts `entry` in bytes_ and order_ as the newest (Uncount: takes it
  // out).
  void Count(const cache::CacheEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Uncount(const cache::CacheEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // bytes_ and order_ anew from entries_.
  void Recount() ABSL_LOCKS_EXCLUDED(mu_);
  // Evicts the oldest entries, but `keep`, while over a bound; renews the
  // epoch when it evicted any.
  void EvictOverBounds(const std::string& keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string dir_;
  const int lock_fd_;  // the directory's lock, held open; -1: none
  // Serializes Store and Clear; held across their file I/O. Acquired before
  // mu_, never after.
  absl::Mutex write_mu_;
  // Guards the in-memory state; never held during file I/O.
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  EntryMap entries_ ABSL_GUARDED_BY(mu_);
  int64_t corrupt_files_ ABSL_GUARDED_BY(mu_);
  int64_t temp_seq_ ABSL_GUARDED_BY(write_mu_) = 0;
  std::string epoch_ ABSL_GUARDED_BY(mu_);
  const ResultCacheOptions options_;
  // The entries' keys in the order they were stored (loaded ones by their
  // stored_unix_ms): oldest first; and each key's place in it.
  std::map<int64_t, std::string> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> age_ ABSL_GUARDED_BY(mu_);
  int64_t next_age_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace autotuned
