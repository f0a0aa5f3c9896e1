// Retention on its own: rounds and keys made by hand as the RoundTable
// leaves them (round.h), time given explicitly.
#include "daemon/coordinate/rendezvous/retention.h"

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/coordinate/rendezvous/round.h"

namespace autotuned {
namespace rendezvous {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// The state of `key` (two ranks), made when new; rank 0 asked up to
// `asked`, rank 1 `behind` fewer times.
KeyState& Key(KeyStates& keys, const std::string& key, int64_t asked, int64_t behind,
              absl::Time last_ask) {
  std::unique_ptr<KeyState>& ks = keys[key];
  if (ks == nullptr) ks = std::make_unique<KeyState>();
  ks->world_size = 2;
  ks->asks = {asked, asked - behind};
  ks->next_sequence = asked;
  ks->last_ask = last_ask;
  return *ks;
}

// Round `sequence` of `key`, decided at `at` with an answer of about
// `payload` bytes while rank 1 has not asked for it; listed in its key.
std::shared_ptr<Round> Decided(KeyStates& keys, const std::string& key, int64_t sequence,
                               absl::Time at, int payload = 100) {
  KeyState& ks = Key(keys, key, sequence + 1, sequence + 1, at);
  auto r = std::make_shared<Round>();
  r->key_text = key;
  r->sequence = sequence;
  r->world_size = 2;
  r->asked = {1, 0};
  r->waiting = {0, 0};
  r->asked_count = 1;
  r->state = Round::State::kDecided;
  r->decided_at = at;
  auto response = std::make_shared<v1::TuneResponse>();
  response->set_round_id(std::string(payload, 'x'));
  r->decision.verdict = Verdict::kFallback;
  r->decision.response = std::move(response);
  ks.rounds[sequence] = r;
  return r;
}

bool Listed(KeyStates& keys, const std::string& key, int64_t sequence) {
  auto it = keys.find(key);
  return it != keys.end() && it->second->rounds.count(sequence) > 0;
}

TEST_CASE("a kept round counts its decision's bytes until it is released") {
  Retention retention(RetentionLimits{absl::Minutes(10), 16, int64_t{1} << 30});
  KeyStates keys;
  std::shared_ptr<Round> small = Decided(keys, "a", 0, kT0, 100);
  retention.Keep(small, keys, kT0);
  CHECK(retention.rounds() == 1);
  CHECK(small->kept);
  const int64_t one = retention.bytes();
  CHECK(one > 100);
  std::shared_ptr<Round> large = Decided(keys, "a", 1, kT0, 10'100);
  retention.Keep(large, keys, kT0);
  CHECK(retention.rounds() == 2);
  CHECK(retention.bytes() == one + large->kept_bytes);
  CHECK(large->kept_bytes - small->kept_bytes >= 10'000);

  retention.Release(small.get());
  CHECK(!small->kept);
  CHECK(retention.rounds() == 1);
  CHECK(retention.bytes() == large->kept_bytes);
  retention.Release(small.get());  // not kept any more: nothing changes
  CHECK(retention.rounds() == 1);
  CHECK(Listed(keys, "a", 0));  // taking it out of its key is the caller's
  CHECK(!small->dropped);
}

TEST_CASE("past max_rounds_kept the oldest decision is forgotten first, from its key") {
  Retention retention(RetentionLimits{absl::Minutes(10), 2, int64_t{1} << 30});
  KeyStates keys;
  std::shared_ptr<Round> r0 = Decided(keys, "a", 0, kT0);
  std::shared_ptr<Round> r1 = Decided(keys, "b", 0, kT0 + absl::Seconds(1));
  std::shared_ptr<Round> r2 = Decided(keys, "a", 1, kT0 + absl::Seconds(2));
  retention.Keep(r0, keys, kT0);
  retention.Keep(r1, keys, kT0 + absl::Seconds(1));
  CHECK(retention.rounds() == 2);
  retention.Keep(r2, keys, kT0 + absl::Seconds(2));
  CHECK(retention.rounds() == 2);
  CHECK(r0->dropped);
  CHECK(!r0->kept);
  CHECK(!Listed(keys, "a", 0));
  CHECK(keys.count("a") == 1);  // its sequence counters stay
  CHECK(Listed(keys, "b", 0));
  CHECK(Listed(keys, "a", 1));
  CHECK(!r1->dropped);
  CHECK(!r2->dropped);
}

TEST_CASE("a released round leaves its place in line: the next one counts from the rest") {
  Retention retention(RetentionLimits{absl::Minutes(10), 2, int64_t{1} << 30});
  KeyStates keys;
  std::shared_ptr<Round> r0 = Decided(keys, "a", 0, kT0);
  std::shared_ptr<Round> r1 = Decided(keys, "a", 1, kT0);
  std::shared_ptr<Round> r2 = Decided(keys, "a", 2, kT0);
  retention.Keep(r0, keys, kT0);
  retention.Keep(r1, keys, kT0);
  retention.Release(r0.get());  // its last rank asked: the table drops it
  keys["a"]->rounds.erase(0);
  retention.Keep(r2, keys, kT0);
  CHECK(retention.rounds() == 2);
  CHECK(!r1->dropped);
  CHECK(!r2->dropped);
  CHECK(Listed(keys, "a", 1));
  CHECK(Listed(keys, "a", 2));
}

TEST_CASE("decision_ttl: a kept round is forgotten once the TTL has passed since its decision") {
  const absl::Duration ttl = absl::Seconds(60);
  Retention retention(RetentionLimits{ttl, 16, int64_t{1} << 30});
  KeyStates keys;
  std::shared_ptr<Round> r0 = Decided(keys, "a", 0, kT0);
  std::shared_ptr<Round> r1 = Decided(keys, "b", 0, kT0 + ttl / 2);
  retention.Keep(r0, keys, kT0);
  retention.Keep(r1, keys, kT0 + ttl / 2);
  retention.Expire(keys, kT0 + ttl - absl::Nanoseconds(1));
  CHECK(retention.rounds() == 2);
  retention.Expire(keys, kT0 + ttl);
  CHECK(retention.rounds() == 1);
  CHECK(r0->dropped);
  CHECK(!Listed(keys, "a", 0));
  CHECK(Listed(keys, "b", 0));
  retention.Expire(keys, kT0 + ttl / 2 + ttl);
  CHECK(retention.rounds() == 0);
  CHECK(retention.bytes() == 0);
  CHECK(r1->dropped);
}

TEST_CASE("max_kept_bytes holds at every Keep, a decision larger than it not kept at all") {
  int64_t one = 0;
  {
    Retention probe(RetentionLimits{});
    KeyStates keys;
    probe.Keep(Decided(keys, "p", 0, kT0, 4'000), keys, kT0);
    one = probe.bytes();
  }
  const int64_t max_bytes = 2 * one + one / 2;
  Retention retention(RetentionLimits{absl::Minutes(10), 16, max_bytes});
  KeyStates keys;
  std::shared_ptr<Round> r0 = Decided(keys, "a", 0, kT0, 4'000);
  std::shared_ptr<Round> r1 = Decided(keys, "a", 1, kT0, 4'000);
  std::shared_ptr<Round> r2 = Decided(keys, "a", 2, kT0, 4'000);
  retention.Keep(r0, keys, kT0);
  retention.Keep(r1, keys, kT0);
  CHECK(retention.rounds() == 2);
  CHECK(retention.bytes() == 2 * one);
  retention.Keep(r2, keys, kT0);
  CHECK(retention.rounds() == 2);
  CHECK(retention.bytes() <= max_bytes);
  CHECK(r0->dropped);

  std::shared_ptr<Round> huge = Decided(keys, "a", 3, kT0, static_cast<int>(3 * one));
  retention.Keep(huge, keys, kT0);
  CHECK(retention.rounds() == 0);
  CHECK(retention.bytes() == 0);
  CHECK(huge->dropped);
  CHECK(keys["a"]->rounds.empty());
}

TEST_CASE("a key without rounds: forgotten at once in step, 2 x TTL after its last ask if not") {
  const absl::Duration ttl = absl::Seconds(60);
  Retention retention(RetentionLimits{ttl, 16, int64_t{1} << 30});
  KeyStates keys;
  Key(keys, "behind", 3, 1, kT0);   // a rank is late for a forgotten round
  Key(keys, "in_step", 3, 0, kT0);  // nothing to tell anyone
  KeyState& open = Key(keys, "open", 3, 1, kT0);
  open.rounds[2] = std::make_shared<Round>();  // undecided: not retention's
  retention.Expire(keys, kT0);
  CHECK(keys.count("in_step") == 0);
  CHECK(keys.count("behind") == 1);
  retention.Expire(keys, kT0 + 2 * ttl - absl::Nanoseconds(1));
  CHECK(keys.count("behind") == 1);
  retention.Expire(keys, kT0 + 2 * ttl);
  CHECK(keys.count("behind") == 0);
  retention.Expire(keys, kT0 + 100 * ttl);
  CHECK(keys.count("open") == 1);
}

TEST_CASE("more than 2 x max_rounds_kept + 64 keys: those without rounds go at once") {
  const RetentionLimits limits{absl::Minutes(10), 3, int64_t{1} << 30};
  const int most = 2 * limits.max_rounds_kept + 64;
  Retention retention(limits);
  KeyStates keys;
  Key(keys, "open", 3, 1, kT0).rounds[2] = std::make_shared<Round>();
  for (int i = 1; i < most; ++i) Key(keys, absl::StrCat("k", i), 3, 1, kT0);
  retention.Expire(keys, kT0);
  CHECK(static_cast<int>(keys.size()) == most);
  Key(keys, "one_more", 3, 1, kT0);
  retention.Expire(keys, kT0);
  CHECK(keys.size() == 1);
  CHECK(keys.count("open") == 1);
}

}  // namespace
}  // namespace rendezvous
}  // namespace autotuned
