#include "daemon/state/cache/cache.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/state/cache/entry_file.h"
#include "daemon/state/cache/file_util.h"

namespace autotuned {
namespace {

// A fresh, not yet existing directory under TEST_TMPDIR (two levels deep, so
// that Open has to create parents).
std::string NewDir(const std::string& name) {
  static int counter = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cache_test_", ::getpid(),
                      "_", counter++, "/", name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The directory's files but its epoch file.
std::vector<std::string> Names(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = cache_internal::ListDir(dir);
  REQUIRE(names.ok());
  names->erase(std::remove(names->begin(), names->end(), "epoch"), names->end());
  names->erase(std::remove(names->begin(), names->end(), "lock"), names->end());
  return *names;
}

v1::Problem AllReduce(int64_t count) {
  v1::Problem p;
  p.set_collective(v1::ALL_REDUCE);
  p.set_dtype(v1::FLOAT32);
  p.set_count(count);
  p.set_op(v1::SUM);
  v1::Candidate* ring = p.add_candidates();
  ring->set_impl("all_reduce/ring");
  (*ring->mutable_params())["chunk_kib"] = 64;
  (*ring->mutable_params())["channels"] = 2;
  p.add_candidates()->set_impl("all_reduce/tree");
  return p;
}

v1::ProblemResult Result(const v1::Problem& problem, double mean_us) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem;
  r.set_status(v1::TUNED);
  r.set_winner("all_reduce/ring");
  r.set_measured_unix_ms(1700000000000);
  v1::CandidateResult* c = r.add_ranked();
  *c->mutable_candidate() = problem.candidates(0);
  c->set_ok(true);
  c->set_mean_us(mean_us);
  return r;
}

struct Keyed {
  std::string key;
  std::string text;
};

Keyed KeyFor(int64_t count, int world_size = 4) {
  const std::string text =
      CacheKeyText("0123456789abcdef", world_size, world_size, AllReduce(count),
                   v1::EVENT_LOOP);
  return {CacheKeyDigest(text), text};
}

std::unique_ptr<ResultCache> OpenOrDie(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ResultCache>> cache = ResultCache::Open(dir);
  REQUIRE(cache.ok());
  return *std::move(cache);
}

NodeDescription Node(int gpus) {
  NodeDescription node;
  node.backend = "cuda";
  for (int i = 0; i < gpus; ++i) {
    node.gpus.push_back({i, "NVIDIA H100 80GB HBM3", int64_t{80} << 30,
                         absl::StrCat("0000:", i, ":00.0")});
  }
  for (int i = 0; i < gpus; ++i) {
    for (int j = 0; j < gpus; ++j)
      node.topology.push_back(i == j ? "X" : "NV18");
  }
  node.driver_version = "550.54.15";
  node.cuda_version = "12.4";
  node.nccl_version = "2.21.5";
  return node;
}

TEST_CASE("a stored result is found, listed and survives a restart") {
  const std::string dir = NewDir("cache");
  const Keyed k = KeyFor(1024, 8);
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    CHECK(cache->dir() == dir);
    CHECK(cache->size() == 0);
    struct stat st;
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 0777 & ~0750) == 0);

    REQUIRE(cache->Store(k.key, k.text, Result(AllReduce(1024), 12.5)).ok());
    std::optional<v1::ProblemResult> got = cache->Lookup(k.key);
    REQUIRE(got.has_value());
    CHECK(got->winner() == "all_reduce/ring");
    CHECK(got->ranked(0).mean_us() == 12.5);
    CHECK(cache->Lookup(k.key, k.text).has_value());
    CHECK(cache->size() == 1);
    CHECK(Names(dir) == std::vector<std::string>{k.key + ".entry"});
  }
  std::unique_ptr<ResultCache> reopened = OpenOrDie(dir);
  CHECK(reopened->size() == 1);
  CHECK(reopened->corrupt_files() == 0);
  std::optional<v1::ProblemResult> got = reopened->Lookup(k.key);
  REQUIRE(got.has_value());
  CHECK(got->problem().count() == 1024);
  CHECK(got->ranked(0).mean_us() == 12.5);

  std::vector<v1::CacheEntrySummary> list = reopened->List();
  REQUIRE(list.size() == 1);
  CHECK(list[0].key() == k.key);
  CHECK(list[0].winner() == "all_reduce/ring");
  CHECK(list[0].winner_mean_us() == 12.5);
  CHECK(list[0].world_size() == 8);
  CHECK(list[0].measured_unix_ms() == 1700000000000);
  CHECK(list[0].problem().count() == 1024);
}

TEST_CASE("a missing key is not found") {
  std::unique_ptr<ResultCache> cache = OpenOrDie(NewDir("cache"));
  const Keyed a = KeyFor(1024);
  CHECK_FALSE(cache->Lookup(a.key).has_value());
  REQUIRE(cache->Store(a.key, a.text, Result(AllReduce(1024), 1)).ok());
  CHECK_FALSE(cache->Lookup(KeyFor(2048).key).has_value());
  // The same key with another key text (a digest collision) is a miss.
  CHECK_FALSE(cache->Lookup(a.key, KeyFor(2048).text).has_value());
}

TEST_CASE("a store replaces the entry and leaves no temporary file") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  const Keyed a = KeyFor(1024);
  const Keyed b = KeyFor(4096);
  REQUIRE(cache->Store(a.key, a.text, Result(AllReduce(1024), 1)).ok());
  REQUIRE(cache->Store(a.key, a.text, Result(AllReduce(1024), 2)).ok());
  REQUIRE(cache->Store(b.key, b.text, Result(AllReduce(4096), 3)).ok());
  CHECK(cache->Lookup(a.key)->ranked(0).mean_us() == 2);
  CHECK(cache->size() == 2);
  std::vector<std::string> want = {a.key + ".entry", b.key + ".entry"};
  std::sort(want.begin(), want.end());
  CHECK(Names(dir) == want);
  cache.reset();  // a restart
  cache = OpenOrDie(dir);
  CHECK(cache->Lookup(a.key)->ranked(0).mean_us() == 2);

  std::vector<v1::CacheEntrySummary> list = cache->List();
  REQUIRE(list.size() == 2);
  CHECK(list[0].key() < list[1].key());
}

TEST_CASE("a store with a key that is not the key text's digest is refused") {
  std::unique_ptr<ResultCache> cache = OpenOrDie(NewDir("cache"));
  const Keyed a = KeyFor(1024);
  absl::Status s =
      cache->Store(a.key, KeyFor(2048).text, Result(AllReduce(1), 1));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  s = cache->Store("../../etc/passwd", a.text, Result(AllReduce(1), 1));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(cache->size() == 0);
}

TEST_CASE("corrupt files are counted and ignored, good entries still load") {
  const std::string dir = NewDir("cache");
  const Keyed good = KeyFor(1024);
  const Keyed other = KeyFor(2048);
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    REQUIRE(cache->Store(good.key, good.text, Result(AllReduce(1024), 7)).ok());
  }
  const std::string real = ReadAll(dir + "/" + good.key + ".entry");
  REQUIRE(real.size() > kEntryFileHeaderBytes + 10);
  const std::vector<std::string> corrupt = {
      KeyFor(1).key + ".entry",  // garbage
      KeyFor(2).key + ".entry",  // truncated copy of a real entry
      KeyFor(3).key + ".entry",  // header only, length mismatch
      KeyFor(4).key + ".entry",  // payload that is not a CacheEntry
      other.key + ".entry",      // a real entry under another key's name
      "not-a-key.entry",
      KeyFor(5).key + ".entry",  // right key, key text of another problem
  };
  WriteAll(dir + "/" + corrupt[0], "this is not a cache entry at all");
  WriteAll(dir + "/" + corrupt[1], real.substr(0, real.size() - 5));
  WriteAll(dir + "/" + corrupt[2], real.substr(0, kEntryFileHeaderBytes));
  std::string garbage_payload = real.substr(0, kEntryFileHeaderBytes);
  garbage_payload[8] = 4;
  for (int i = 9; i < 16; ++i) garbage_payload[i] = 0;
  garbage_payload += std::string("\xff\xff\xff\xff", 4);
  WriteAll(dir + "/" + corrupt[3], garbage_payload);
  WriteAll(dir + "/" + corrupt[4], real);
  WriteAll(dir + "/" + corrupt[5], real);
  cache::CacheEntry forged;
  forged.set_key(KeyFor(5).key);
  forged.set_key_text(KeyFor(6).text);
  WriteAll(dir + "/" + corrupt[6], EncodeEntryFile(forged));
  // Not entries: left alone, not counted.
  WriteAll(dir + "/README", "notes");
  // A temporary file of a live writer (our parent process) is left alone.
  WriteAll(dir + "/.tmp-" + good.key + "-" + std::to_string(::getppid()) + "-0",
           real.substr(0, 3));

  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  CHECK(cache->corrupt_files() == static_cast<int64_t>(corrupt.size()));
  CHECK(cache->size() == 1);
  REQUIRE(cache->Lookup(good.key).has_value());
  CHECK(cache->Lookup(good.key)->ranked(0).mean_us() == 7);
  CHECK_FALSE(cache->Lookup(other.key).has_value());
  // Nothing was deleted.
  CHECK(Names(dir).size() == corrupt.size() + 3);

  SECTION("Clear removes every entry file, corrupt ones included") {
    absl::StatusOr<ResultCache::Cleared> removed = cache->Clear();
    REQUIRE(removed.ok());
    CHECK(removed->removed == static_cast<int64_t>(corrupt.size()) + 1);
    CHECK(removed->not_removed == 0);
    CHECK(cache->size() == 0);
    CHECK(cache->corrupt_files() == 0);
    CHECK_FALSE(cache->Lookup(good.key).has_value());
    CHECK(Names(dir) == std::vector<std::string>{"README"});
    cache.reset();
    std::unique_ptr<ResultCache> reopened = OpenOrDie(dir);
    CHECK(reopened->size() == 0);
    CHECK(reopened->corrupt_files() == 0);
  }
}

TEST_CASE("an entry file that parses but is damaged is ignored, never answered") {
  const std::string dir = NewDir("cache");
  const Keyed good = KeyFor(1024);
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    REQUIRE(cache->Store(good.key, good.text, Result(AllReduce(1024), 7)).ok());
  }
  const std::string path = dir + "/" + good.key + ".entry";
  const std::string real = ReadAll(path);
  CHECK(real.substr(0, 8) == "ATCACHE2");
  absl::StatusOr<cache::CacheEntry> entry = DecodeEntryFile(real);
  REQUIRE(entry.ok());
  REQUIRE(CheckEntryResult(entry->result()).ok());

  // The bytes of the winner's name changed in place: the file still parses.
  std::string renamed = real;
  const size_t at = renamed.rfind("all_reduce/ring");
  REQUIRE(at != std::string::npos);
  renamed.replace(at, 15, "all_reduce/rm_x");
  REQUIRE(renamed.size() == real.size());

  // What each damage is reported as, in either form of the file.
  auto open_with = [&](const std::string& bytes) {
    WriteAll(path, bytes);
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    CHECK(cache->size() == 0);
    CHECK(cache->corrupt_files() == 1);
    CHECK_FALSE(cache->Lookup(good.key, good.text).has_value());
    absl::StatusOr<cache::CacheEntry> decoded = DecodeEntryFile(bytes);
    return decoded.ok() ? std::string(CheckEntryResult(decoded->result()).message())
                        : std::string(decoded.status().message());
  };
  CHECK_THAT(open_with(renamed), Catch::Contains("checksum mismatch"));

  // Files of the earlier form (no checksum) load when their result is sound...
  auto unchecked = [&](const v1::ProblemResult& result) {
    cache::CacheEntry e = *entry;
    *e.mutable_result() = result;
    return EncodeEntryFile(e, EntryFileFormat::kUnchecked);
  };
  WriteAll(path, unchecked(entry->result()));
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    CHECK(cache->corrupt_files() == 0);
    REQUIRE(cache->Lookup(good.key, good.text).has_value());
    CHECK(cache->Lookup(good.key, good.text)->winner() == "all_reduce/ring");
  }
  // ... and are ignored when it is not.
  // ProblemResult.winner (field 4, 15 bytes), then ranked[0]'s candidate.
  const std::string winner_field = std::string("\x22\x0f") + "all_reduce/ring";
  std::string old_renamed = unchecked(entry->result());
  REQUIRE(old_renamed.find(winner_field) != std::string::npos);
  old_renamed.replace(old_renamed.find(winner_field) + 2, 15, "all_reduce/rm_x");
  CHECK_THAT(open_with(old_renamed),
             Catch::Contains("names its winner \"all_reduce/rm_x\", not candidate 0"));
  old_renamed = unchecked(entry->result());
  old_renamed.replace(old_renamed.rfind("all_reduce/ring"), 15, "all_reduce/rm_x");
  CHECK_THAT(open_with(old_renamed),
             Catch::Contains("ranks first another candidate than its candidate 0"));
  v1::ProblemResult r = entry->result();
  r.set_winner_index(5);
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("winner_index 5"));
  r = entry->result();
  r.set_status(v1::FALLBACK);
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("status FALLBACK, not TUNED"));
  r = entry->result();
  r.mutable_ranked(0)->set_median_us(std::nan(""));
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("not a finite, non-negative time"));
  r = entry->result();
  r.mutable_ranked(0)->set_min_us(-1);
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("not a finite, non-negative time"));
  r = entry->result();
  r.mutable_ranked(0)->set_ok(false);
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("ranks first another candidate"));
  r = entry->result();
  *r.add_ranked() = r.ranked(0);
  CHECK_THAT(open_with(unchecked(r)), Catch::Contains("outside its problem's candidates or repeated"));
}

TEST_CASE("Open reads regular files of bounded size only, never blocking") {
  const std::string dir = NewDir("cache");
  const Keyed good = KeyFor(1024);
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    REQUIRE(cache->Store(good.key, good.text, Result(AllReduce(1024), 7)).ok());
  }
  const std::string good_path = dir + "/" + good.key + ".entry";
  // A symbolic link to a good entry, under its own key's name.
  const Keyed linked = KeyFor(2);
  WriteAll(dir + "/" + linked.key + ".real", ReadAll(good_path));
  REQUIRE(::symlink((dir + "/" + linked.key + ".real").c_str(),
                    (dir + "/" + linked.key + ".entry").c_str()) == 0);
  // Before: the FIFO blocked Open for ever, /dev/zero read until out of
  // memory, the sparse file was read whole.
  REQUIRE(::mkfifo((dir + "/" + KeyFor(3).key + ".entry").c_str(), 0600) == 0);
  REQUIRE(::symlink("/dev/zero", (dir + "/" + KeyFor(4).key + ".entry").c_str()) == 0);
  const std::string sparse = dir + "/" + KeyFor(5).key + ".entry";
  WriteAll(sparse, ReadAll(good_path));
  REQUIRE(::truncate(sparse.c_str(), static_cast<off_t>(kMaxEntryFileBytes) + 1) == 0);
  REQUIRE(::mkdir((dir + "/" + KeyFor(6).key + ".entry").c_str(), 0700) == 0);

  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  CHECK(cache->size() == 1);
  CHECK(cache->Lookup(good.key).has_value());
  CHECK_FALSE(cache->Lookup(linked.key).has_value());
  CHECK(cache->corrupt_files() == 5);

  absl::StatusOr<std::string> read =
      cache_internal::ReadRegularFile(sparse, kMaxEntryFileBytes);
  CHECK(read.status().code() == absl::StatusCode::kResourceExhausted);
  read = cache_internal::ReadRegularFile(dir + "/" + KeyFor(3).key + ".entry", 1);
  CHECK(read.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(read.status().message()), Catch::Contains("FIFO"));
  read = cache_internal::ReadRegularFile(dir + "/" + linked.key + ".entry", 1 << 20);
  CHECK_THAT(std::string(read.status().message()), Catch::Contains("symbolic link"));
}

TEST_CASE("Open removes temporary files whose writer is gone") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const Keyed k = KeyFor(1024);
  const std::string dead = ".tmp-" + k.key + "-" + std::to_string(child) + "-0";
  const std::string live = ".tmp-" + k.key + "-" + std::to_string(::getppid()) + "-0";
  WriteAll(dir + "/" + dead, "half");
  WriteAll(dir + "/" + live, "half");
  WriteAll(dir + "/.tmp-garbage", "half");
  cache.reset();
  cache = OpenOrDie(dir);
  CHECK(Names(dir) == std::vector<std::string>{live});
  CHECK(cache->corrupt_files() == 0);
}

TEST_CASE("Open leaves the epoch file a live process is writing; removes a dead one's") {
  const std::string dir = NewDir("cache");
  REQUIRE(cache_internal::MakeDirs(dir, 0750).ok());
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const std::string live = ".tmp-epoch-" + std::to_string(::getppid());
  WriteAll(dir + "/" + live, "half");
  WriteAll(dir + "/.tmp-epoch-" + std::to_string(child), "half");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  CHECK(Names(dir) == std::vector<std::string>{live});
}

TEST_CASE("a directory serves one cache at a time: a second Open is refused naming the "
          "directory and the holder's pid, and succeeds once the first is closed") {
  const std::string dir = NewDir("cache");
  const Keyed k = KeyFor(1024);
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  REQUIRE(cache->Store(k.key, k.text, Result(AllReduce(1024), 1)).ok());
  WriteAll(dir + "/.tmp-epoch-" + std::to_string(::getpid()), "being written");
  absl::StatusOr<std::unique_ptr<ResultCache>> second = ResultCache::Open(dir);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains(dir) && Catch::Contains("pid " + std::to_string(::getpid())));
  // The refused Open touched nothing.
  CHECK(Names(dir) == std::vector<std::string>{".tmp-epoch-" + std::to_string(::getpid()),
                                               k.key + ".entry"});
  // The lock survives a Clear.
  REQUIRE(cache->Clear().ok());
  CHECK_FALSE(ResultCache::Open(dir).ok());
  cache.reset();
  CHECK(ResultCache::Open(dir).ok());
}

TEST_CASE("Clear removes what it can and counts what it cannot") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  for (int64_t count : {1024, 2048}) {
    const Keyed k = KeyFor(count);
    REQUIRE(cache->Store(k.key, k.text, Result(AllReduce(count), 1)).ok());
  }
  // A non-empty directory named like an entry: unlink fails (root included).
  const std::string stuck = dir + "/" + KeyFor(7).key + ".entry";
  REQUIRE(::mkdir(stuck.c_str(), 0700) == 0);
  WriteAll(stuck + "/inside", "x");
  cache.reset();
  cache = OpenOrDie(dir);
  CHECK(cache->corrupt_files() == 1);
  absl::StatusOr<ResultCache::Cleared> cleared = cache->Clear();
  REQUIRE(cleared.ok());
  CHECK(cleared->removed == 2);
  CHECK(cleared->not_removed == 1);
  CHECK(cache->size() == 0);
  CHECK(cache->corrupt_files() == 1);
  CHECK(Names(dir) == std::vector<std::string>{KeyFor(7).key + ".entry"});
}

TEST_CASE("Clear removes files and entries and returns how many") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  for (int64_t count : {1024, 2048, 4096}) {
    const Keyed k = KeyFor(count);
    REQUIRE(cache->Store(k.key, k.text, Result(AllReduce(count), 1)).ok());
  }
  CHECK(cache->size() == 3);
  absl::StatusOr<ResultCache::Cleared> removed = cache->Clear();
  REQUIRE(removed.ok());
  CHECK(removed->removed == 3);
  CHECK(cache->size() == 0);
  CHECK(cache->List().empty());
  CHECK(Names(dir).empty());
  removed = cache->Clear();
  REQUIRE(removed.ok());
  CHECK(removed->removed == 0);
}

TEST_CASE("the epoch survives a restart and is renewed by Clear") {
  const std::string dir = NewDir("cache");
  std::string first;
  {
    std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
    first = cache->epoch();
    CHECK(IsCacheKey(first));
  }
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  CHECK(cache->epoch() == first);
  REQUIRE(cache->Clear().ok());
  const std::string second = cache->epoch();
  CHECK(IsCacheKey(second));
  CHECK(second != first);
  cache.reset();
  CHECK(OpenOrDie(dir)->epoch() == second);
  CHECK(OpenOrDie(NewDir("other"))->epoch() != second);

  // An unreadable epoch file is replaced by a new epoch.
  WriteAll(dir + "/epoch", "not an epoch");
  const std::string third = OpenOrDie(dir)->epoch();
  CHECK(IsCacheKey(third));
  CHECK(third != second);
}

TEST_CASE("past max_entries the oldest entries are evicted, files included, and the "
          "epoch renews") {
  const std::string dir = NewDir("evict");
  ResultCacheOptions options;
  options.max_entries = 3;
  std::unique_ptr<ResultCache> cache = *ResultCache::Open(dir, options);
  std::string epoch = cache->epoch();
  for (int64_t count = 1; count <= 3; ++count) {
    REQUIRE(cache->Store(KeyFor(count).key, KeyFor(count).text, Result(AllReduce(count), 5)).ok());
  }
  CHECK(cache->epoch() == epoch);  // adding removes nothing
  for (int64_t count = 4; count <= 5; ++count) {
    REQUIRE(cache->Store(KeyFor(count).key, KeyFor(count).text, Result(AllReduce(count), 5)).ok());
    CHECK(cache->size() == 3);
    CHECK(cache->epoch() != epoch);
    epoch = cache->epoch();
  }
  CHECK(cache->evictions() == 2);
  CHECK_FALSE(cache->Lookup(KeyFor(1).key).has_value());
  CHECK_FALSE(cache->Lookup(KeyFor(2).key).has_value());
  CHECK(cache->Lookup(KeyFor(3).key).has_value());
  CHECK(cache->Lookup(KeyFor(5).key).has_value());
  CHECK(Names(dir).size() == 3);
  // A restart with a lower bound evicts the oldest at once.
  cache.reset();
  options.max_entries = 1;
  cache = *ResultCache::Open(dir, options);
  CHECK(cache->size() == 1);
  CHECK(cache->evictions() == 2);
  CHECK(Names(dir).size() == 1);
}

TEST_CASE("past max_bytes the oldest entries are evicted; never the one just stored") {
  const std::string dir = NewDir("evict_bytes");
  ResultCacheOptions options;
  options.max_bytes = 4096;
  std::unique_ptr<ResultCache> cache = *ResultCache::Open(dir, options);
  for (int64_t count = 1; count <= 20; ++count) {
    REQUIRE(cache->Store(KeyFor(count).key, KeyFor(count).text, Result(AllReduce(count), 5)).ok());
    CHECK(cache->bytes() <= 4096);
    CHECK(cache->Lookup(KeyFor(count).key).has_value());
  }
  CHECK(cache->evictions() > 0);
  CHECK(cache->size() + cache->evictions() == 20);
  CHECK_FALSE(cache->Lookup(KeyFor(1).key).has_value());
  // One entry over the bound alone stays (the newest is never evicted).
  v1::ProblemResult huge = Result(AllReduce(99), 5);
  huge.set_reason(std::string(8192, 'r'));
  REQUIRE(cache->Store(KeyFor(99).key, KeyFor(99).text, huge).ok());
  CHECK(cache->size() == 1);
  CHECK(cache->Lookup(KeyFor(99).key).has_value());
}

TEST_CASE("Open fails, naming the path, when the directory cannot be made") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  const std::string file = dir + "/plain_file";
  WriteAll(file, "x");
  absl::StatusOr<std::unique_ptr<ResultCache>> got = ResultCache::Open(file);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(got.status().message()), Catch::Contains(file));
  got = ResultCache::Open(file + "/below");
  REQUIRE_FALSE(got.ok());
  CHECK_THAT(std::string(got.status().message()), Catch::Contains(file));
  CHECK_FALSE(ResultCache::Open("").ok());
}

TEST_CASE("concurrent stores and lookups") {
  const std::string dir = NewDir("cache");
  std::unique_ptr<ResultCache> cache = OpenOrDie(dir);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 10; ++i) {
        const int64_t count = 1 + t * 100 + i;
        const Keyed k = KeyFor(count);
        CHECK(cache->Store(k.key, k.text, Result(AllReduce(count), i)).ok());
        CHECK(cache->Lookup(k.key).has_value());
        cache->List();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(cache->size() == 40);
  CHECK(Names(dir).size() == 40);
  cache.reset();
  CHECK(OpenOrDie(dir)->size() == 40);
}

TEST_CASE("CacheKey changes with every input that matters") {
  const std::string fp = "0123456789abcdef";
  const v1::Problem p = AllReduce(1024);
  const std::string base = CacheKey(fp, 4, 4, p, v1::EVENT_LOOP);
  CHECK(IsCacheKey(base));
  CHECK(base == CacheKey(fp, 4, 4, p, v1::EVENT_LOOP));
  CHECK(base == CacheKeyDigest(CacheKeyText(fp, 4, 4, p, v1::EVENT_LOOP)));

  CHECK(base != CacheKey("fedcba9876543210", 4, 4, p, v1::EVENT_LOOP));
  CHECK(base != CacheKey(fp, 8, 4, p, v1::EVENT_LOOP));
  CHECK(base != CacheKey(fp, 4, 2, p, v1::EVENT_LOOP));
  CHECK(base != CacheKey(fp, 4, 4, p, v1::CUDA_GRAPH));
  CHECK(base != CacheKey(fp, 4, 4, AllReduce(2048), v1::EVENT_LOOP));

  v1::Problem param = p;
  (*param.mutable_candidates(0)->mutable_params())["chunk_kib"] = 128;
  CHECK(base != CacheKey(fp, 4, 4, param, v1::EVENT_LOOP));
  v1::Problem extra = p;
  (*extra.mutable_candidates(1)->mutable_params())["chunk_kib"] = 64;
  CHECK(base != CacheKey(fp, 4, 4, extra, v1::EVENT_LOOP));
  v1::Problem order = p;
  order.mutable_candidates()->SwapElements(0, 1);
  CHECK(base != CacheKey(fp, 4, 4, order, v1::EVENT_LOOP));
  v1::Problem dtype = p;
  dtype.set_dtype(v1::BFLOAT16);
  CHECK(base != CacheKey(fp, 4, 4, dtype, v1::EVENT_LOOP));

  // The label is not part of the key.
  v1::Problem labelled = p;
  labelled.set_label("layer0.attn");
  CHECK(base == CacheKey(fp, 4, 4, labelled, v1::EVENT_LOOP));

  CHECK(base != CacheKey(fp, 4, 4, p, v1::EVENT_LOOP, "links: NV18"));

  // A client candidate's key is part of the key; its display name is not.
  v1::Problem client = p;
  client.add_candidates()->mutable_client()->set_key("digest-1");
  client.mutable_candidates(2)->mutable_client()->set_name("mine");
  const std::string with_client = CacheKey(fp, 4, 4, client, v1::EVENT_LOOP);
  CHECK(with_client != base);
  client.mutable_candidates(2)->mutable_client()->set_name("renamed");
  CHECK(with_client == CacheKey(fp, 4, 4, client, v1::EVENT_LOOP));
  client.mutable_candidates(2)->mutable_client()->set_key("digest-2");
  CHECK(with_client != CacheKey(fp, 4, 4, client, v1::EVENT_LOOP));
}

TEST_CASE("PlacementText names the links between the ranks' GPUs") {
  NodeDescription node = Node(4);
  node.topology[0 * 4 + 2] = node.topology[2 * 4 + 0] = "SYS";
  CHECK(PlacementText(node, {}, 2) == "links: NV18");  // GPUs 0 and 1
  const v1::Problem p = AllReduce(1024);
  CHECK(KeyTextLinks(CacheKeyText("f", 3, 3, p, v1::EVENT_LOOP,
                                  PlacementText(node, {0, 1, 2}, 3))) == "NV18 SYS NV18");
  CHECK(KeyTextLinks(CacheKeyText("f", 3, 3, p, v1::EVENT_LOOP)).empty());
  CHECK(PlacementText(node, {2, 3}, 2) == "links: NV18");
  CHECK(PlacementText(node, {2, 0}, 2) == "links: SYS");
  CHECK(PlacementText(node, {0, 1, 2}, 3) == "links: NV18 SYS NV18");
  CHECK(PlacementText(node, {}, 1) == "links: ");
  // Nothing to name: no topology, or a device the node does not have.
  CHECK(PlacementText(node, {0, 4}, 2).empty());
  node.topology.clear();
  CHECK(PlacementText(node, {}, 2).empty());
}

TEST_CASE("CacheKey does not depend on map insertion order") {
  v1::Problem a;
  v1::Problem b;
  a.set_count(1);
  b.set_count(1);
  v1::Candidate* ca = a.add_candidates();
  v1::Candidate* cb = b.add_candidates();
  ca->set_impl("x");
  cb->set_impl("x");
  for (int i = 0; i < 40; ++i) {
    (*ca->mutable_params())[absl::StrCat("p", i)] = i;
    (*cb->mutable_params())[absl::StrCat("p", 39 - i)] = 39 - i;
  }
  const std::string ta = CacheKeyText("f", 2, 2, a, v1::EVENT_LOOP);
  CHECK(ta == CacheKeyText("f", 2, 2, b, v1::EVENT_LOOP));
  CHECK(CacheKey("f", 2, 2, a, v1::EVENT_LOOP) ==
        CacheKey("f", 2, 2, b, v1::EVENT_LOOP));
  CHECK(absl::StrContains(ta, "key: \"p0\""));
  CHECK(KeyTextWorldSize(ta) == 2);
}

TEST_CASE("NodeFingerprint is stable and changes with the node") {
  const std::string fp = NodeFingerprint(Node(8), "cat1");
  CHECK(fp.size() == 16);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fp == NodeFingerprint(Node(8), "cat1"));
  CHECK(fp != NodeFingerprint(Node(4), "cat1"));
  CHECK(fp != NodeFingerprint(Node(8), "cat2"));

  NodeDescription other = Node(8);
  other.gpus[3].name = "NVIDIA H200";
  CHECK(fp != NodeFingerprint(other, "cat1"));
  other = Node(8);
  other.gpus[0].memory_bytes -= 1;
  CHECK(fp != NodeFingerprint(other, "cat1"));
  other = Node(8);
  other.topology[1] = "SYS";
  CHECK(fp != NodeFingerprint(other, "cat1"));
  other = Node(8);
  other.nccl_version = "2.22.3";
  CHECK(fp != NodeFingerprint(other, "cat1"));
  other = Node(8);
  other.backend = "sim";
  CHECK(fp != NodeFingerprint(other, "cat1"));
  // PCI bus ids are not part of it: identical nodes share a fingerprint.
  other = Node(8);
  other.gpus[0].pci_bus_id = "0000:99:00.0";
  CHECK(fp == NodeFingerprint(other, "cat1"));
}

TEST_CASE("entry files round-trip and reject damage") {
  cache::CacheEntry entry;
  entry.set_key("k");
  entry.set_key_text("text");
  entry.set_stored_unix_ms(5);
  const std::string bytes = EncodeEntryFile(entry);
  CHECK(bytes.substr(0, 8) == "ATCACHE2");
  const std::string unchecked = EncodeEntryFile(entry, EntryFileFormat::kUnchecked);
  CHECK(unchecked.substr(0, 8) == "ATCACHE1");
  REQUIRE(DecodeEntryFile(unchecked).ok());
  CHECK(DecodeEntryFile(unchecked)->key_text() == "text");
  absl::StatusOr<cache::CacheEntry> back = DecodeEntryFile(bytes);
  REQUIRE(back.ok());
  CHECK(back->key_text() == "text");

  CHECK(DecodeEntryFile(bytes.substr(0, 10)).status().code() ==
        absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(DecodeEntryFile(bytes.substr(0, bytes.size() - 1))
                             .status()
                             .message()),
             Catch::Contains("length mismatch"));
  CHECK_THAT(std::string(DecodeEntryFile(bytes + "x").status().message()),
             Catch::Contains("length mismatch"));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  CHECK_THAT(std::string(DecodeEntryFile(bad_magic).status().message()),
             Catch::Contains("magic"));
}

}  // namespace
}  // namespace autotuned
