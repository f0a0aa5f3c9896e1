// AutotuneService for ranks that ask one by one: the rendezvous
// (daemon/rendezvous/round_table.h), the round's answer handed to each rank,
// and the background measurement of rounds that fell back. The rules are in
// service.h.
#include <unistd.h>

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/cache/key.h"
#include "daemon/service/service.h"

namespace autotuned {
namespace {

// Background rounds waiting for the worker; more are dropped (logged).
constexpr size_t kMaxBackground = 16;

int TimingMode(const ValidRequest& request) {
  return request.cuda_graph ? v1::CUDA_GRAPH : v1::EVENT_LOOP;
}

// How long the round's runner may take: every candidate of every problem at
// its timeout, twice (the engine serializes rounds), plus 10 s.
absl::Duration RunBound(const ValidRequest& request) {
  int64_t candidates = 0;
  for (const ValidProblem& p : request.problems) candidates += p.candidates.size();
  return absl::Seconds(10) + 2 * candidates * request.engine.timeout;
}

rendezvous::RoundKey Key(const ValidRequest& request) {
  const int mode = TimingMode(request);
  std::string problems = absl::StrCat("timing_mode=", mode);
  for (const ValidProblem& p : request.problems) {
    absl::StrAppend(&problems, "\n",
                    CacheKeyText("", request.world_size, request.world_size, p.canonical,
                                 mode));
  }
  return rendezvous::RoundKey{request.group_id, CacheKeyDigest(request.members_text),
                              CacheKeyDigest(problems)};
}

// Not measured: the default (first) candidate. The table writes the reason.
v1::ProblemResult FallbackResult(const ValidProblem& problem, const ValidRequest& request,
                                 const std::string& fingerprint) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_status(v1::FALLBACK);
  r.set_winner(problem.candidates[0].impl);
  r.set_winner_index(0);
  r.set_bytes(problem.spec.MessageBytes());
  r.set_cache_key(CacheKey(fingerprint, request.world_size, request.world_size,
                           problem.canonical, TimingMode(request)));
  return r;
}

std::string Winners(const v1::TuneResponse& response) {
  std::vector<std::string> out;
  for (const v1::ProblemResult& r : response.results()) {
    out.push_back(r.winner().empty() ? "none" : r.winner());
  }
  return absl::StrJoin(out, "; ");
}

}  // namespace

std::optional<v1::ProblemResult> AutotuneService::Cached(const ValidProblem& problem,
                                                         const ValidRequest& request) {
  if (cache_ == nullptr || request.refresh) return std::nullopt;
  const std::string key_text = CacheKeyText(fingerprint_, request.world_size,
                                            request.world_size, problem.canonical,
                                            TimingMode(request));
  std::optional<v1::ProblemResult> hit = cache_->Lookup(CacheKeyDigest(key_text), key_text);
  if (!hit) {
    metrics_->cache_misses->Increment();
    return std::nullopt;
  }
  metrics_->cache_hits->Increment();
  hit->set_status(v1::CACHED);
  return hit;
}

absl::StatusOr<v1::TuneResponse> AutotuneService::RankRound(const ValidRequest& request,
                                                            absl::Time deadline) {
  const absl::Time start = absl::Now();
  metrics_->rounds->Increment();
  const std::string round_name = absl::StrCat(getpid(), "-", ++rounds_);

  // What this rank would decide if it opens the round: its cache snapshot.
  auto fallback = std::make_shared<v1::TuneResponse>();
  fallback->set_round_id(round_name);
  fallback->set_backend(backend_->node().backend);
  fallback->set_fingerprint(fingerprint_);
  size_t hits = 0;
  for (const ValidProblem& p : request.problems) {
    std::optional<v1::ProblemResult> hit = Cached(p, request);
    if (hit) ++hits;
    *fallback->add_results() = hit ? *std::move(hit) : FallbackResult(p, request, fingerprint_);
  }

  rendezvous::ArriveRequest ask;
  ask.key = Key(request);
  ask.rank = request.rank;
  ask.world_size = request.world_size;
  ask.window = request.presync_window;
  ask.run_bound = RunBound(request);
  ask.deadline = deadline;
  if (hits == request.problems.size()) ask.cached = fallback;
  ask.fallback = fallback;
  absl::StatusOr<rendezvous::Arrival> arrival = round_table_.Arrive(ask);
  if (!arrival.ok()) return arrival.status();
  const std::string group = request.group_id;

  rendezvous::Decision decision = arrival->decision;
  if (arrival->run) {
    v1::TuneResponse measured;
    measured.set_round_id(round_name);
    measured.set_backend(backend_->node().backend);
    measured.set_fingerprint(fingerprint_);
    const absl::Duration waited = absl::Now() - start;
    for (const ValidProblem& p : request.problems) {
      *measured.add_results() = Solve(p, request, arrival->decision.waited);
    }
    decision = round_table_.Publish(*arrival, std::move(measured));
    if (decision.verdict == rendezvous::Verdict::kMeasured) {
      spdlog::info(
          "round={} group={} seq={} world={} rank={} (ran it) problems={} waited_ms={:.1f} "
          "ms={:.1f} winners=[{}]",
          decision.response->round_id(), group, arrival->sequence, request.world_size,
          request.rank, request.problems.size(),
          absl::ToDoubleMilliseconds(decision.waited),
          absl::ToDoubleMilliseconds(absl::Now() - start - waited),
          Winners(*decision.response));
    }
  } else if (arrival->decided_here) {
    if (decision.verdict == rendezvous::Verdict::kError) {
      spdlog::warn("round={} group={} seq={} world={}: every rank gets {}", round_name, group,
                   arrival->sequence, request.world_size, decision.error.ToString());
    } else {
      spdlog::info("round={} group={} seq={} world={} {}: {} of {} ranks in time, "
                   "waited_ms={:.1f} winners=[{}]{}",
                   decision.response->round_id(), group, arrival->sequence,
                   request.world_size, rendezvous::VerdictName(decision.verdict),
                   decision.ranks_in_time, request.world_size,
                   absl::ToDoubleMilliseconds(decision.waited), Winners(*decision.response),
                   decision.verdict == rendezvous::Verdict::kFallback
                       ? absl::StrCat(" (", decision.response->results(0).reason(), ")")
                       : std::string());
    }
  }
  if (arrival->measure_in_background && config_.rendezvous().measure_after_fallback()) {
    MeasureInBackground(request);
  }
  if (decision.verdict == rendezvous::Verdict::kError) return decision.error;

  v1::TuneResponse out = *decision.response;
  int counts[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < out.results_size(); ++i) {
    v1::ProblemResult* r = out.mutable_results(i);
    r->mutable_problem()->set_label(request.problems[i].canonical.label());
    ++counts[r->status()];
  }
  metrics_->results_tuned->Increment(counts[v1::TUNED]);
  metrics_->results_cached->Increment(counts[v1::CACHED]);
  metrics_->results_fallback->Increment(counts[v1::FALLBACK]);
  metrics_->results_failed->Increment(counts[v1::FAILED]);
  metrics_->round_latency->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  return out;
}

bool AutotuneService::MeasureInBackground(const ValidRequest& request) {
  absl::MutexLock lock(&background_mu_);
  if (background_stop_) return false;
  if (background_.size() >= kMaxBackground) {
    spdlog::warn("background: {} rounds already waiting; group {} not measured after its "
                 "fallback",
                 background_.size(), request.group_id);
    return false;
  }
  background_.push_back(request);
  if (!background_thread_.joinable()) {
    background_thread_ = std::thread([this] { BackgroundLoop(); });
  }
  return true;
}

void AutotuneService::BackgroundLoop() {
  for (;;) {
    ValidRequest next;
    {
      absl::MutexLock lock(&background_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(background_mu_) {
        return background_stop_ || !background_.empty();
      };
      while (!background_mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1))) {
      }
      if (background_stop_) return;
      next = std::move(background_.front());
      background_.pop_front();
    }
    std::vector<std::string> winners;
    for (const ValidProblem& p : next.problems) {
      {
        absl::MutexLock lock(&background_mu_);
        if (background_stop_) return;
      }
      const v1::ProblemResult r = Solve(p, next);
      winners.push_back(absl::StrCat(v1::DecisionStatus_Name(r.status()), " ",
                                     r.winner().empty() ? "none" : r.winner()));
    }
    spdlog::info("background: group={} world={} measured after its fallback: [{}]",
                 next.group_id, next.world_size, absl::StrJoin(winners, "; "));
  }
}

void AutotuneService::StopBackground(bool join) {
  std::thread worker;
  {
    absl::MutexLock lock(&background_mu_);
    background_stop_ = true;
    background_.clear();
    if (join) worker = std::move(background_thread_);
  }
  if (worker.joinable()) worker.join();
}

AutotuneService::~AutotuneService() { StopBackground(/*join=*/true); }

}  // namespace autotuned
