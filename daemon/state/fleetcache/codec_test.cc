#include "daemon/state/fleetcache/codec.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "daemon/state/cache/entry_file.h"
#include "daemon/state/cache/key.h"
#include "daemon/state/fleetcache/entries_testing.h"

namespace autotuned::fleetcache {
namespace {

std::string KeyText(int64_t count, const std::string& fingerprint = kTestFingerprint) {
  return TestKeyText(count, fingerprint);
}

cache::CacheEntry Entry(const std::string& key_text) {
  cache::CacheEntry e;
  e.set_key(CacheKeyDigest(key_text));
  e.set_key_text(key_text);
  *e.mutable_result() = TestRanking();
  e.set_stored_unix_ms(1700000000000);
  return e;
}

TEST_CASE("a key names the prefix, the format version, the fingerprint and the key's digest") {
  const std::string text = KeyText(1024);
  CHECK(FleetKey("fleet", "00112233aabbccdd", text) ==
        "fleet:v1:00112233aabbccdd:" + CacheKeyDigest(text));
  CHECK(FleetKey("fleet", "00112233aabbccdd", text) !=
        FleetKey("fleet", "00112233aabbccdd", KeyText(2048)));
  CHECK(FleetKey("fleet", "ffff2233aabbccdd", KeyText(1024, "ffff2233aabbccdd")) !=
        FleetKey("fleet", "00112233aabbccdd", text));
}

TEST_CASE("a value decodes to the entry it was made of, and only for its own key text") {
  const std::string text = KeyText(1024);
  const std::string value = EncodeFleetValue(Entry(text));
  CHECK(value.compare(0, 8, "ATFLEET1") == 0);
  absl::StatusOr<cache::CacheEntry> back = DecodeFleetValue(value, text);
  REQUIRE(back.ok());
  CHECK(back->SerializeAsString() == Entry(text).SerializeAsString());

  absl::StatusOr<cache::CacheEntry> other = DecodeFleetValue(value, KeyText(2048));
  CHECK(other.status().code() == absl::StatusCode::kDataLoss);
  CHECK(absl::StrContains(other.status().message(), "another problem's"));
}

TEST_CASE("garbage is told from a value, with the reason") {
  const std::string text = KeyText(1024);
  const std::string good = EncodeFleetValue(Entry(text));
  auto reason = [&](const std::string& value) {
    absl::StatusOr<cache::CacheEntry> e = DecodeFleetValue(value, text);
    REQUIRE(e.status().code() == absl::StatusCode::kDataLoss);
    return std::string(e.status().message());
  };
  CHECK(absl::StrContains(reason(""), "too short"));
  CHECK(absl::StrContains(reason("not a value at all, but long enough to have a header"),
                          "bad magic"));
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x40;
  CHECK(reason(flipped) == "checksum mismatch");
  CHECK(reason(good.substr(0, good.size() - 1)) == "checksum mismatch");

  // A well-formed value whose result is no usable ranking.
  cache::CacheEntry failed = Entry(text);
  failed.mutable_result()->set_status(v1::FAILED);
  CHECK(absl::StrContains(reason(EncodeFleetValue(failed)), "not TUNED"));
  cache::CacheEntry out_of_range = Entry(text);
  out_of_range.mutable_result()->set_winner_index(3);
  CHECK(absl::StrContains(reason(EncodeFleetValue(out_of_range)),
                          "winner_index 3, not one of its problem's 1 candidates"));
  cache::CacheEntry renamed = Entry(text);
  renamed.mutable_result()->set_winner("all_reduce/elsewhere");
  CHECK(absl::StrContains(reason(EncodeFleetValue(renamed)),
                          "names its winner \"all_reduce/elsewhere\""));

  // The checksum right, the entry file inside it not.
  const std::string file = "ATCACHE1 truncated";
  CHECK(!reason(std::string("ATFLEET1") + CacheKeyDigest(file) + file).empty());
}

}  // namespace
}  // namespace autotuned::fleetcache
