// AutotuneService for ranks that ask one by one: the rendezvous
// (daemon/rendezvous/round_table.h), the round's answer handed to each rank,
// the background measurement of rounds that fell back, and the multi-daemon
// rounds (FollowerRound forwards to the leader, LeadReady serves a follower).
// The rules are in service.h.
#include <unistd.h>

#include <algorithm>
#include <thread>
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

rendezvous::RoundKey Key(const ValidRequest& request) {
  const int mode = request.timing_mode();
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
v1::ProblemResult FallbackResult(const ValidProblem& problem, const std::string& key) {
  v1::ProblemResult r;
  *r.mutable_problem() = problem.canonical;
  r.set_status(v1::FALLBACK);
  r.set_winner(problem.candidates[0].impl);
  r.set_winner_index(0);
  r.set_bytes(problem.spec.MessageBytes());
  r.set_cache_key(key);
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

absl::Status LeaderUnreachable(const std::string& leader) {
  return absl::UnavailableError(absl::StrCat(
      "leader ", leader,
      " unreachable (followers never decide; ask again once the leader is back)"));
}

// How long the round's runner may take: every candidate of every problem at
// its timeout, twice (the engine serializes rounds), plus 10 s.
absl::Duration RoundRunBound(const ValidRequest& request) {
  int64_t candidates = 0;
  for (const ValidProblem& p : request.problems) candidates += p.candidates.size();
  return absl::Seconds(10) + 2 * candidates * request.engine.timeout;
}

std::string AutotuneService::KeyText(const ValidProblem& problem,
                                     const ValidRequest& request) const {
  const std::vector<int>& devices = request.engine.schedule.devices;
  const int ranks_here = devices.empty() ? request.world_size : static_cast<int>(devices.size());
  return CacheKeyText(fingerprint_, request.world_size, request.world_size, problem.canonical,
                      request.timing_mode(), PlacementText(backend_->node(), devices, ranks_here));
}

std::optional<v1::ProblemResult> AutotuneService::Cached(const ValidProblem& problem,
                                                         const ValidRequest& request) {
  if (cache_ == nullptr || request.refresh) return std::nullopt;
  const std::string key_text = KeyText(problem, request);
  std::optional<v1::ProblemResult> hit = cache_->Lookup(CacheKeyDigest(key_text), key_text);
  if (!hit) {
    metrics_->cache_misses->Increment();
    return std::nullopt;
  }
  metrics_->cache_hits->Increment();
  hit->set_status(v1::CACHED);
  return hit;
}

absl::StatusOr<v1::TuneResponse> AutotuneService::RankRound(
    const ValidRequest& request, absl::Time deadline, std::shared_ptr<const v1::CrossRun>* go) {
  if (!request.leader.empty()) return FollowerRound(request, deadline);
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
    *fallback->add_results() = hit ? *std::move(hit) : FallbackResult(p, CacheKeyDigest(KeyText(p, request)));
  }

  rendezvous::ArriveRequest ask;
  ask.key = Key(request);
  ask.rank = request.rank;
  ask.world_size = request.world_size;
  ask.window = request.presync_window;
  ask.run_bound = RoundRunBound(request);
  ask.deadline = deadline;
  if (hits == request.problems.size()) ask.cached = fallback;
  ask.fallback = fallback;
  ask.return_on_go = go != nullptr;
  absl::StatusOr<rendezvous::Arrival> arrival = round_table_.Arrive(ask);
  if (!arrival.ok()) return arrival.status();
  const std::string group = request.group_id;
  if (arrival->go != nullptr) {  // a follower's rank: its daemon takes part
    *go = arrival->go;
    return v1::TuneResponse();
  }

  rendezvous::Decision decision = arrival->decision;
  std::optional<CrossPlan> plan;
  if (arrival->run && request.spread()) plan = PlanCrossRun(request, *arrival);
  if (plan) {
    // Ranks on several daemons: every daemon measures its own ranks.
    round_table_.Announce(*arrival, plan->run);
    if (go != nullptr) {
      // This call answers its follower GO; the leader's run goes on beside it.
      {
        absl::MutexLock lock(&cross_mu_);
        ++cross_threads_;
      }
      std::thread([this, request, arrival = *arrival, plan = *plan, start] {
        LeadCrossRun(request, arrival, plan, start);
        absl::MutexLock lock(&cross_mu_);
        --cross_threads_;
      }).detach();
      *go = plan->run;
      return v1::TuneResponse();
    }
    decision = LeadCrossRun(request, *arrival, *plan, start);
  } else if (arrival->run) {
    v1::TuneResponse measured;
    measured.set_round_id(round_name);
    measured.set_backend(backend_->node().backend);
    measured.set_fingerprint(fingerprint_);
    const absl::Time measuring_from = absl::Now();
    for (const ValidProblem& p : request.problems) {
      *measured.add_results() = Solve(p, request, arrival->decision.waited);
    }
    const absl::Duration measuring = absl::Now() - measuring_from;
    decision = round_table_.Publish(*arrival, std::move(measured));
    if (decision.verdict == rendezvous::Verdict::kMeasured) {
      // This rank arrived last (its arrival made the round GO): from its
      // request reaching the daemon to every rank's answer published, less
      // the measuring, is what the rendezvous itself cost.
      const absl::Duration overhead =
          absl::Now() -
          (request.received == absl::InfinitePast() ? start : request.received) - measuring;
      metrics_->round_overhead->Observe(absl::ToDoubleSeconds(overhead));
      spdlog::info(
          "round={} group={} seq={} world={} rank={} (ran it) problems={} waited_ms={:.1f} "
          "ms={:.1f} overhead_us={:.0f} winners=[{}]",
          decision.response->round_id(), group, arrival->sequence, request.world_size,
          request.rank, request.problems.size(),
          absl::ToDoubleMilliseconds(decision.waited), absl::ToDoubleMilliseconds(measuring),
          absl::ToDoubleMicroseconds(overhead), Winners(*decision.response));
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
  if (arrival->measure_in_background && config_.rendezvous().measure_after_fallback() &&
      !request.spread() && request.world_size <= backend_->max_world_size()) {
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

absl::StatusOr<v1::TuneResponse> AutotuneService::FollowerRound(const ValidRequest& request,
                                                                absl::Time deadline) {
  v1::ReadyRequest ready;
  ready.mutable_round()->set_group_id(request.group_id);
  ready.mutable_round()->set_problems_digest(Key(request).problems_digest);
  ready.add_ranks(request.rank);
  *ready.mutable_request() = request.wire;
  const absl::Time cap =
      absl::Now() + request.presync_window + RoundRunBound(request) + absl::Seconds(5);
  const absl::Time call_deadline = std::min(deadline, cap);
  absl::StatusOr<v1::Decision> decision =
      options_.peer_client->Ready(request.leader, ready, call_deadline);
  if (!decision.ok()) {
    if (call_deadline == deadline && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no decision from the leader ", request.leader, " before this rank's deadline"));
    }
    // The detail goes to the log only: every rank of this daemon gets the
    // same status for the same failure.
    spdlog::warn("group={} rank={}: leader {} unreachable: {}", request.group_id,
                 request.rank, request.leader, decision.status().ToString());
    return LeaderUnreachable(request.leader);
  }
  if (decision->verdict() == v1::GO) return FollowerCross(request, decision->go(), deadline);
  if (decision->verdict() == v1::REJECTED) {
    return absl::Status(static_cast<absl::StatusCode>(decision->error_code()),
                        decision->error_message());
  }
  if (decision->verdict() != v1::ANSWERED) {
    return absl::UnavailableError(absl::StrCat("leader ", request.leader, " answered ",
                                               v1::RoundVerdict_Name(decision->verdict()),
                                               ", which this daemon version does not serve"));
  }
  v1::TuneResponse out = std::move(*decision->mutable_response());
  for (int i = 0; i < out.results_size() && i < static_cast<int>(request.problems.size());
       ++i) {
    out.mutable_results(i)->mutable_problem()->set_label(
        request.problems[i].canonical.label());
  }
  return out;
}

absl::StatusOr<v1::Decision> AutotuneService::LeadReady(const v1::ReadyRequest& ready,
                                                        absl::Time deadline) {
  if (admission_.draining()) return Admission::DrainingError();
  v1::Decision out;
  *out.mutable_round() = ready.round();
  auto reject = [&out](const absl::Status& s) {
    out.set_verdict(v1::REJECTED);
    out.set_error_code(static_cast<int>(s.code()));
    out.set_error_message(std::string(s.message()));
    return out;
  };
  const std::shared_ptr<const Settings> now = settings();
  ValidationContext context = Validation(*now);
  context.asking_daemon = ready.from_daemon();
  if (context.asking_daemon.empty() || context.asking_daemon == context.self_daemon) {
    return reject(absl::InvalidArgumentError("from_daemon: must name the follower"));
  }
  absl::StatusOr<ValidRequest> valid = ValidateTune(ready.request(), context);
  if (!valid.ok()) return reject(valid.status());
  if (!valid->per_rank || !valid->leader.empty()) {
    return reject(absl::FailedPreconditionError(absl::StrCat(
        "this daemon (\"", context.self_daemon, "\") does not lead group \"",
        valid->group_id, "\": its rank 0 is ",
        valid->per_rank ? absl::StrCat("on \"", valid->leader, "\"") : "not given")));
  }
  if (ready.ranks_size() != 1 || ready.ranks(0) != valid->rank) {
    return reject(absl::InvalidArgumentError(
        "ranks: one rank per Ready, the request's group.rank"));
  }
  absl::StatusOr<Admission::Ticket> ticket = admission_.Admit();
  if (!ticket.ok()) return ticket.status();
  std::shared_ptr<const v1::CrossRun> go;
  absl::StatusOr<v1::TuneResponse> answer = RankRound(*valid, deadline, &go);
  if (!answer.ok()) return reject(answer.status());
  if (go != nullptr) {
    out.set_verdict(v1::GO);
    *out.mutable_go() = *go;
    return out;
  }
  out.set_verdict(v1::ANSWERED);
  *out.mutable_response() = *std::move(answer);
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

AutotuneService::~AutotuneService() {
  StopBackground(/*join=*/true);
  // Leaders' runs started for a follower end by their run bound.
  absl::MutexLock lock(&cross_mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cross_mu_) { return cross_threads_ == 0; };
  cross_mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Minutes(10));
}

}  // namespace autotuned
