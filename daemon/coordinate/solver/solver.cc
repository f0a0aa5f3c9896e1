#include "daemon/coordinate/solver/solver.h"

#include <unistd.h>

#include <array>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/request/key_text.h"
#include "daemon/coordinate/solver/result.h"
#include "daemon/state/cache/key.h"

namespace autotuned {
namespace {

// Results per DecisionStatus value.
std::array<int64_t, 5> Tally(const v1::TuneResponse& response) {
  std::array<int64_t, 5> counts = {0, 0, 0, 0, 0};
  for (const v1::ProblemResult& r : response.results()) {
    if (r.status() >= 0 && r.status() < static_cast<int>(counts.size())) ++counts[r.status()];
  }
  return counts;
}

// What the cache keeps of a result: none of the caller's display strings
// (the problem's label, the names of candidates the ranks run; a client
// winner is kept by its key). Each caller gets its own back on the way out
// (Solve, CachedRound, RestoreLabels).
v1::ProblemResult StoredResult(v1::ProblemResult result) {
  v1::Problem* problem = result.mutable_problem();
  problem->clear_label();
  for (v1::Candidate& c : *problem->mutable_candidates()) {
    if (c.has_client()) c.mutable_client()->clear_name();
  }
  for (v1::CandidateResult& c : *result.mutable_ranked()) {
    if (c.candidate().has_client()) c.mutable_candidate()->mutable_client()->clear_name();
  }
  const int w = result.winner_index();
  if (w >= 0 && w < problem->candidates_size() && problem->candidates(w).has_client()) {
    result.set_winner(problem->candidates(w).client().key());
  }
  return result;
}

}  // namespace

Solver::Solver(Backend* backend, ResultCache* cache, Engine* engine,
               metrics::DaemonMetrics* metrics, fleetcache::FleetCache* fleet)
    : backend_(backend),
      cache_(cache),
      engine_(engine),
      metrics_(metrics),
      fleet_(fleet),
      fingerprint_(NodeFingerprint(backend->node(), backend->catalogue().Version())) {}

std::string Solver::NextRoundId() { return absl::StrCat(getpid(), "-", ++rounds_); }

v1::TuneResponse Solver::NewResponse(const std::string& round_id) const {
  v1::TuneResponse response;
  response.set_round_id(round_id);
  response.set_backend(backend_->node().backend);
  response.set_fingerprint(fingerprint_);
  return response;
}

std::string Solver::KeyText(const ValidProblem& problem, const ValidRequest& request) const {
  if (!problem.key_text.empty()) return problem.key_text;
  return ProblemKeyText(fingerprint_, backend_->node(), problem, request);
}

std::optional<v1::ProblemResult> Solver::Cached(const ValidProblem& problem,
                                                const ValidRequest& request, Tiers tiers) {
  if (request.refresh) return std::nullopt;
  const std::string key_text = KeyText(problem, request);
  const std::string key = CacheKeyDigest(key_text);
  std::optional<v1::ProblemResult> hit;
  if (cache_ != nullptr) {
    hit = cache_->Lookup(key, key_text);
    (hit ? metrics_->cache_hits : metrics_->cache_misses)->Increment();
  }
  if (!hit && fleet_ != nullptr && tiers == Tiers::kLocalAndFleet) {
    hit = fleet_->Lookup(fingerprint_, key_text);
    if (hit && cache_ != nullptr) {
      absl::Status stored = cache_->Store(key, key_text, *hit);
      if (!stored.ok()) spdlog::warn("cache: fleet hit not stored ({}): {}", key, stored.ToString());
      SyncCacheFigures();
    }
  }
  if (!hit) return std::nullopt;
  hit->set_status(v1::CACHED);
  return hit;
}

v1::ProblemResult Solver::Solve(const ValidProblem& problem, const ValidRequest& request,
                                absl::Duration rendezvous, const DeviceLease::Token* held,
                                const std::function<bool()>& abandoned) {
  if (std::optional<v1::ProblemResult> hit = Cached(problem, request)) {
    hit->mutable_problem()->set_label(problem.canonical.label());
    return *std::move(hit);
  }
  return MeasureNow(problem, request, rendezvous, held, abandoned,
                    request.engine.lease_deadline == absl::InfiniteFuture()
                        ? absl::Now() + RoundRunBound(request)
                        : request.engine.lease_deadline);
}

v1::ProblemResult Solver::MeasureNow(const ValidProblem& problem, const ValidRequest& request,
                                     absl::Duration rendezvous, const DeviceLease::Token* held,
                                     const std::function<bool()>& abandoned,
                                     absl::Time lease_deadline) {
  metrics_->rendezvous_latency->Observe(absl::ToDoubleSeconds(rendezvous));
  EngineOptions options = request.engine;
  options.lease_deadline = lease_deadline;
  options.abandoned = abandoned;
  std::vector<CandidateOutcome> ranked =
      engine_->Measure(problem.spec, problem.candidates, options, held);
  return Measured(problem, request, ranked, /*may_store=*/!(abandoned && abandoned()));
}

v1::ProblemResult Solver::Measured(const ValidProblem& problem, const ValidRequest& request,
                                   const std::vector<CandidateOutcome>& ranked,
                                   bool may_store) {
  const std::string key_text = KeyText(problem, request);
  const std::string key = CacheKeyDigest(key_text);
  for (const CandidateOutcome& o : ranked) {
    if (o.timed_out) metrics_->candidate_timeouts->Increment();
  }
  metrics_->SetBackendFigures(backend_->gpu_memory_held_bytes(),
                              backend_->worker_restarts(), backend_->nccl_aborts());
  v1::ProblemResult result = ToProblemResult(problem, ranked, request.engine.rule.min_speedup);
  result.set_cache_key(key);
  if (!may_store || result.status() != v1::TUNED) return result;
  const v1::ProblemResult stored_result = StoredResult(result);
  if (cache_ != nullptr) {
    absl::Status stored = cache_->Store(key, key_text, stored_result);
    if (!stored.ok()) {
      spdlog::warn("cache: not stored ({}): {}", key, stored.ToString());
    }
    SyncCacheFigures();
  }
  if (fleet_ != nullptr) fleet_->Publish(fingerprint_, key_text, stored_result);
  return result;
}

std::array<int64_t, 5> Solver::CountResults(const v1::TuneResponse& response) {
  const std::array<int64_t, 5> counts = Tally(response);
  metrics_->results_tuned->Increment(counts[v1::TUNED]);
  metrics_->results_cached->Increment(counts[v1::CACHED]);
  metrics_->results_fallback->Increment(counts[v1::FALLBACK]);
  metrics_->results_failed->Increment(counts[v1::FAILED]);
  return counts;
}

absl::StatusOr<DeviceLease::Token> Solver::TurnFor(const ValidRequest& request,
                                                   const CallBounds& call, int left) {
  // What the measurements left will take, as they took here lately.
  auto reserve = [this, left] {
    return kAnswerMargin + 2 * left * engine_->RecentMeasureTime();
  };
  auto busy = [&](absl::Duration kept) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the devices are busy: the rounds queued before this one (",
        engine_->lease().waiting(), " waiting) did not leave time to measure it before the "
        "call's deadline (", absl::ToInt64Milliseconds(kept),
        " ms kept for its measurement); retry later"));
  };
  DeviceLease& lease = engine_->lease();
  const bool queued = lease.busy() || lease.waiting() > 0;
  const absl::Time bound = absl::Now() + RoundRunBound(request);
  const absl::Duration kept = reserve();
  const absl::Time by_caller = call.deadline - kept;
  absl::StatusOr<DeviceLease::Token> turn =
      lease.Acquire(std::min(bound, by_caller), absl::InfiniteFuture(), call.gone);
  if (turn.ok()) {
    // Its turn came after others' measurements: what they took says anew
    // whether this one still fits (the token is given back if not).
    const absl::Duration now_kept = reserve();
    if (queued && absl::Now() + now_kept > call.deadline) return busy(now_kept);
    return turn;
  }
  if (turn.status().code() != absl::StatusCode::kDeadlineExceeded || by_caller >= bound) {
    return turn;
  }
  return busy(kept);
}

absl::StatusOr<v1::TuneResponse> Solver::RunRound(const ValidRequest& request,
                                                  const CallBounds& call) {
  const absl::Time start = absl::Now();
  std::vector<v1::ProblemResult> results;
  for (size_t i = 0; i < request.problems.size(); ++i) {
    const ValidProblem& p = request.problems[i];
    if (call.gone && call.gone()) break;
    if (std::optional<v1::ProblemResult> hit = Cached(p, request)) {
      hit->mutable_problem()->set_label(p.canonical.label());
      results.push_back(*std::move(hit));
      continue;
    }
    absl::StatusOr<DeviceLease::Token> lease =
        TurnFor(request, call, static_cast<int>(request.problems.size() - i));
    if (!lease.ok() && lease.status().code() != absl::StatusCode::kDeadlineExceeded) {
      if (lease.status().code() == absl::StatusCode::kCancelled) break;
      return lease.status();
    }
    // Without the lease by the round's bound: the engine says so (or
    // measures, should the devices be free by now).
    results.push_back(MeasureNow(p, request, absl::ZeroDuration(),
                                 lease.ok() ? &*lease : nullptr, call.gone,
                                 absl::InfinitePast()));
  }
  if (call.gone && call.gone()) {
    spdlog::info("group={} world={}: the caller went away; measured {} of {} problems, "
                 "nothing more",
                 request.group_id.empty() ? "-" : request.group_id, request.world_size,
                 results.size(), request.problems.size());
    return absl::CancelledError("the caller went away");
  }
  return Finish(request, start, std::move(results));
}

void Solver::SyncCacheFigures() {
  if (cache_ == nullptr) return;
  metrics_->cache_entries->Set(cache_->size());
  const int64_t now = cache_->evictions();
  int64_t seen = evictions_seen_.load();
  while (now > seen && !evictions_seen_.compare_exchange_weak(seen, now)) {
  }
  if (now > seen) metrics_->cache_evictions->Increment(now - seen);
}

std::optional<v1::TuneResponse> Solver::CachedRound(const ValidRequest& request) {
  if (cache_ == nullptr || request.refresh) return std::nullopt;
  const absl::Time start = absl::Now();
  std::vector<v1::ProblemResult> results;
  for (const ValidProblem& p : request.problems) {
    const std::string key_text = KeyText(p, request);
    std::optional<v1::ProblemResult> hit = cache_->Lookup(CacheKeyDigest(key_text), key_text);
    if (!hit) return std::nullopt;
    hit->set_status(v1::CACHED);
    hit->mutable_problem()->set_label(p.canonical.label());
    results.push_back(*std::move(hit));
  }
  metrics_->cache_hits->Increment(static_cast<int64_t>(results.size()));
  return Finish(request, start, std::move(results));
}

v1::TuneResponse Solver::Finish(const ValidRequest& request, absl::Time start,
                                std::vector<v1::ProblemResult> results) {
  metrics_->rounds->Increment();
  v1::TuneResponse response = NewResponse(NextRoundId());
  std::vector<std::string> winners;
  for (size_t i = 0; i < results.size(); ++i) {
    const v1::ProblemResult& r = *response.add_results() = std::move(results[i]);
    winners.push_back(absl::StrCat(Describe(request.problems[i].spec), "->",
                                   r.winner().empty() ? "none" : r.winner()));
  }
  const std::array<int64_t, 5> counts = CountResults(response);
  const absl::Duration took = absl::Now() - start;
  metrics_->round_latency->Observe(absl::ToDoubleSeconds(took));
  spdlog::info(
      "round={} group={} world={} problems={} tuned={} cached={} failed={} "
      "ms={:.1f} winners=[{}]",
      response.round_id(), request.group_id.empty() ? "-" : request.group_id,
      request.world_size, request.problems.size(), counts[v1::TUNED], counts[v1::CACHED],
      counts[v1::FAILED], absl::ToDoubleMilliseconds(took), absl::StrJoin(winners, "; "));
  return response;
}

absl::Duration RoundRunBound(const ValidRequest& request) {
  absl::Duration measuring;
  for (const ValidProblem& p : request.problems) {
    measuring += MeasureBound(request.engine, static_cast<int>(p.candidates.size()));
  }
  return absl::Seconds(10) + 2 * measuring;
}

}  // namespace autotuned
