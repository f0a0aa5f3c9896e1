// RoundTable with real threads and the real clock: many groups at once, each
// rank a thread asking twice for the same problem set, with random arrival
// order and random delays around the pre-sync window (some ranks in time,
// some near the window's end, some late, some much later), plus a few
// groups with a cached answer, a duplicate caller, a rank with another
// problem set, or a runner that overruns its bound.
//
// The invariant: every caller handed a decision for a round (same round_id)
// got the same decision, and a GO round had exactly one runner. Rounds
// default to 1,000 (RENDEZVOUS_RANDOM_ROUNDS overrides; the manual target
// round_table_random_long_test runs 10,000); RENDEZVOUS_RANDOM_SEED repeats
// a run.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/rendezvous/round_table.h"

namespace autotuned {
namespace rendezvous {
namespace {

constexpr absl::Duration kWindow = absl::Milliseconds(2);
constexpr absl::Duration kRunBound = absl::Milliseconds(40);
constexpr int kAsks = 2;       // asks per rank per group: two rounds
constexpr int kParallel = 8;   // groups in flight at once

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

std::shared_ptr<const v1::TuneResponse> Response(const std::string& tag,
                                                 v1::DecisionStatus status) {
  auto r = std::make_shared<v1::TuneResponse>();
  r->set_round_id(tag);
  v1::ProblemResult* p = r->add_results();
  p->set_status(status);
  p->set_winner(tag);
  return r;
}

// What one caller was handed, as comparable text.
std::string Fingerprint(const Decision& d) {
  std::string out = absl::StrCat(VerdictName(d.verdict), "|", d.ranks_in_time, "|",
                                 d.error.ToString(), "|");
  if (d.response != nullptr) {
    std::string bytes;
    d.response->SerializeToString(&bytes);
    out += bytes;
  }
  return out;
}

struct Tally {
  absl::Mutex mu;
  // round_id -> what each caller of it was handed.
  std::map<uint64_t, std::vector<std::string>> handed ABSL_GUARDED_BY(mu);
  std::map<uint64_t, int> runners ABSL_GUARDED_BY(mu);
  std::map<uint64_t, Verdict> verdict ABSL_GUARDED_BY(mu);
  std::map<std::string, int> caller_only ABSL_GUARDED_BY(mu);  // by status code
  int background ABSL_GUARDED_BY(mu) = 0;
  int callers ABSL_GUARDED_BY(mu) = 0;
};

struct Plan {
  int world = 2;
  bool cached = false;
  int duplicate_rank = -1;  // an extra caller claiming this rank (first ask)
  int odd_rank = -1;        // asks its first round with another problem set
  bool overrun = false;     // runners sleep past the bound
  std::vector<std::vector<absl::Duration>> delay;  // [rank][ask]
};

Plan MakePlan(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  Plan p;
  p.world = 2 + static_cast<int>(rng() % 7);
  const double kind = u(rng);
  if (kind < 0.05) {
    p.cached = true;
  } else if (kind < 0.08) {
    p.duplicate_rank = static_cast<int>(rng() % p.world);
  } else if (kind < 0.11) {
    p.odd_rank = static_cast<int>(rng() % p.world);
  } else if (kind < 0.13) {
    p.overrun = true;
  }
  const double w = absl::ToDoubleMicroseconds(kWindow);
  p.delay.resize(p.world + 1);
  for (auto& asks : p.delay) {
    for (int a = 0; a < kAsks; ++a) {
      const double pick = u(rng);
      double us;
      if (pick < 0.85) {
        us = u(rng) * 0.8 * w;          // in time
      } else if (pick < 0.92) {
        us = (0.8 + 0.4 * u(rng)) * w;  // around the window's end
      } else if (pick < 0.97) {
        us = (1.5 + 2.5 * u(rng)) * w;  // late
      } else {
        us = (5 + 5 * u(rng)) * w;      // much later
      }
      asks.push_back(absl::Microseconds(us));
    }
  }
  return p;
}

void Caller(RoundTable& table, Tally& tally, const std::string& group, const Plan& plan,
            int rank, int thread, bool duplicate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int asks = duplicate ? 1 : kAsks;
  for (int a = 0; a < asks; ++a) {
    absl::SleepFor(plan.delay[thread][a]);
    ArriveRequest req;
    req.key = RoundKey{group, "members",
                       rank == plan.odd_rank && a == 0 ? "odd" : "problems"};
    req.rank = rank;
    req.world_size = plan.world;
    req.window = kWindow;
    req.run_bound = kRunBound;
    req.deadline = absl::Now() + absl::Seconds(20);
    const std::string from = absl::StrCat("rank", rank, duplicate ? "dup" : "");
    req.fallback = Response("default-from-" + from, v1::FALLBACK);
    if (plan.cached) req.cached = Response("cached-from-" + from, v1::CACHED);
    absl::StatusOr<Arrival> arrival = table.Arrive(req);
    absl::MutexLock lock(&tally.mu);
    ++tally.callers;
    if (!arrival.ok()) {
      ++tally.caller_only[absl::StatusCodeToString(arrival.status().code())];
      continue;
    }
    if (arrival->run) {
      ++tally.runners[arrival->round_id];
      tally.mu.Unlock();
      absl::SleepFor(plan.overrun ? kRunBound + absl::Milliseconds(10)
                                  : absl::Microseconds(rng() % 1000));
      const Decision d = table.Publish(
          *arrival, *Response(absl::StrCat("measured-by-", from), v1::TUNED));
      tally.mu.Lock();
      tally.handed[arrival->round_id].push_back(Fingerprint(d));
      tally.verdict[arrival->round_id] = d.verdict;
      continue;
    }
    tally.handed[arrival->round_id].push_back(Fingerprint(arrival->decision));
    tally.verdict[arrival->round_id] = arrival->decision.verdict;
    if (arrival->measure_in_background) ++tally.background;
  }
}

TEST_CASE("random arrivals: no two ranks of a round are handed different decisions") {
  const int64_t rounds_wanted = EnvInt("RENDEZVOUS_RANDOM_ROUNDS", 1000);
  const uint64_t seed = static_cast<uint64_t>(
      EnvInt("RENDEZVOUS_RANDOM_SEED", static_cast<int64_t>(std::random_device{}())));
  const int64_t groups = (rounds_wanted + kAsks - 1) / kAsks;
  RoundTable table(Clock::Real());
  Tally tally;
  const absl::Time start = absl::Now();

  std::vector<std::thread> workers;
  for (int w = 0; w < kParallel; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(seed * 7919 + w);
      for (int64_t g = w; g < groups; g += kParallel) {
        const Plan plan = MakePlan(rng);
        const std::string group = absl::StrCat("g", g);
        std::vector<std::thread> ranks;
        for (int r = 0; r < plan.world; ++r) {
          ranks.emplace_back(Caller, std::ref(table), std::ref(tally), group, plan, r, r,
                             false, rng());
        }
        if (plan.duplicate_rank >= 0) {
          ranks.emplace_back(Caller, std::ref(table), std::ref(tally), group, plan,
                             plan.duplicate_rank, plan.world, true, rng());
        }
        for (std::thread& t : ranks) t.join();
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  absl::MutexLock lock(&tally.mu);
  int divergent = 0, bad_runners = 0;
  std::map<std::string, int> outcomes;
  for (const auto& [id, handed] : tally.handed) {
    for (const std::string& h : handed) {
      if (h != handed[0]) {
        ++divergent;
        break;
      }
    }
    ++outcomes[VerdictName(tally.verdict[id])];
  }
  for (const auto& [id, n] : tally.runners) {
    if (n != 1) ++bad_runners;
  }
  std::string caller_only;
  for (const auto& [code, n] : tally.caller_only) {
    absl::StrAppend(&caller_only, caller_only.empty() ? "" : ", ", code, " ", n);
  }
  printf("rendezvous random: seed %llu, %lld groups, %zu rounds, %d callers, %.2f s\n",
         static_cast<unsigned long long>(seed), static_cast<long long>(groups),
         tally.handed.size(), tally.callers, seconds);
  printf("  GO (measured) %d, ANSWERED (cache) %d, FALLBACK %d, ERROR %d; "
         "runners %zu; background measurements due %d\n",
         outcomes["MEASURED"], outcomes["ANSWERED"], outcomes["FALLBACK"],
         outcomes["ERROR"], tally.runners.size(), tally.background);
  printf("  caller-only errors: %s\n", caller_only.empty() ? "none" : caller_only.c_str());
  printf("  rounds with two ranks handed different decisions: %d; GO rounds without "
         "exactly one runner: %d\n",
         divergent, bad_runners);
  fflush(stdout);

  CHECK(static_cast<int64_t>(tally.handed.size()) >= rounds_wanted);
  CHECK(divergent == 0);
  CHECK(bad_runners == 0);
  CHECK(outcomes["MEASURED"] > 0);
  CHECK(outcomes["FALLBACK"] > 0);
  CHECK(table.blocked() == 0);
}

}  // namespace
}  // namespace rendezvous
}  // namespace autotuned
