#include "daemon/coordinate/rounds/rank_rounds.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/request/labels.h"
#include "daemon/coordinate/solver/result.h"
#include "daemon/state/cache/key.h"

namespace autotuned::rounds {
namespace {

std::string Winners(const v1::TuneResponse& response) {
  std::vector<std::string> out;
  for (const v1::ProblemResult& r : response.results()) {
    out.push_back(r.winner().empty() ? "none" : r.winner());
  }
  return absl::StrJoin(out, "; ");
}

}  // namespace

rendezvous::RoundKey RoundKeyOf(const ValidRequest& request) {
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

RankRounds::RankRounds(Solver* solver, CrossRunner* cross, clientrun::ClientRuns* runs,
                       metrics::DaemonMetrics* metrics, const RankRoundsOptions& options)
    : solver_(solver),
      cross_(cross),
      client_runs_(runs),
      metrics_(metrics),
      options_(options),
      table_(rendezvous::Clock::Real(), options.table),
      background_([solver](const ValidProblem& problem, const ValidRequest& request) {
        return solver->Solve(problem, request);
      }) {}

RankRounds::~RankRounds() {
  background_.Stop();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_ == 0; };
  mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Minutes(10));
}

absl::StatusOr<v1::TuneResponse> RankRounds::Round(const ValidRequest& request,
                                                   const Caller& caller,
                                                   std::shared_ptr<const v1::CrossRun>* go) {
  const absl::Time start = absl::Now();
  metrics_->rounds->Increment();
  const std::string round_id = solver_->NextRoundId();
  absl::StatusOr<rendezvous::Arrival> arrival =
      Arrive(request, round_id, caller, /*return_on_go=*/go != nullptr);
  if (!arrival.ok()) return arrival.status();
  if (arrival->resynced) {
    spdlog::warn("group={} world={}: its ranks were out of step (rounds in a row decided "
                 "without every rank in time); re-synced at rank {}'s ask, round {}",
                 request.group_id, request.world_size, request.rank, arrival->sequence);
  }
  if (arrival->go != nullptr) {  // a follower's rank: its daemon takes part
    *go = arrival->go;
    return v1::TuneResponse();
  }

  rendezvous::Decision decision = arrival->decision;
  if (arrival->run) {
    std::optional<CrossRunner::Plan> plan;
    if (request.spread() && cross_ != nullptr) plan = cross_->PlanRun(request, *arrival);
    if (plan) {
      // Ranks on several daemons: every daemon measures its own ranks.
      table_.Announce(*arrival, plan->run);
      if (go != nullptr) {
        // This call answers its follower GO; the run goes on beside it.
        StartAcross(request, *arrival, *plan, start);
        *go = plan->run;
        return v1::TuneResponse();
      }
      decision = MeasureAcross(request, *arrival, *plan, start);
    } else {
      decision = MeasureHere(request, *arrival, round_id, start, caller);
    }
  } else if (arrival->decided_here) {
    LogDecided(request, *arrival, decision, round_id);
  }
  // The daemon cannot run the callers' own candidates in the background.
  if (arrival->measure_in_background && options_.measure_after_fallback &&
      !request.spread() && !request.has_client() &&
      request.world_size <= options_.max_world_size) {
    background_.Add(request);
  }
  if (decision.verdict == rendezvous::Verdict::kError) return decision.error;
  if (decision.response->has_run() && client_runs_ != nullptr) {
    client_runs_->Attach(decision.response->run().run_id(), request.rank,
                  std::make_shared<const ValidRequest>(request));
  }
  return RankAnswer(request, decision, start);
}

absl::StatusOr<rendezvous::Arrival> RankRounds::Arrive(const ValidRequest& request,
                                                       const std::string& round_id,
                                                       const Caller& caller,
                                                       bool return_on_go) {
  // What this rank would decide if it opens the round: its local cache
  // snapshot. Not the fleet cache: every rank of the group would ask it, and
  // a slow Redis would hold ranks past the window; the round's one runner
  // asks it (Solve) before measuring.
  auto fallback = std::make_shared<v1::TuneResponse>(solver_->NewResponse(round_id));
  size_t hits = 0;
  for (const ValidProblem& p : request.problems) {
    std::optional<v1::ProblemResult> hit = solver_->Cached(p, request, Solver::Tiers::kLocal);
    if (hit) ++hits;
    *fallback->add_results() =
        hit ? *std::move(hit)
            : FallbackResult(p, CacheKeyDigest(solver_->KeyText(p, request)));
  }
  rendezvous::ArriveRequest ask;
  ask.key = RoundKeyOf(request);
  ask.rank = request.rank;
  ask.world_size = request.world_size;
  ask.window = request.presync_window;
  ask.run_bound = RoundRunBound(request);
  ask.deadline = caller.deadline;
  if (hits == request.problems.size()) ask.cached = fallback;
  ask.fallback = fallback;
  ask.return_on_go = return_on_go;
  ask.gone = caller.gone;
  ask.admit = caller.admit;
  return table_.Arrive(ask);
}

rendezvous::Decision RankRounds::MeasureHere(const ValidRequest& request,
                                             const rendezvous::Arrival& arrival,
                                             const std::string& round_id, absl::Time start,
                                             const Caller& caller) {
  const absl::Time measuring_from = absl::Now();
  // No one to answer: this caller went away, and so did every other's.
  std::function<bool()> abandoned;
  if (caller.gone) {
    abandoned = [this, &arrival, gone = caller.gone] {
      return gone() && table_.Abandoned(arrival);
    };
  }
  std::optional<v1::TuneResponse> run;
  if (client_runs_ != nullptr && request.has_client()) {
    run = client_runs_->Start(request, round_id, measuring_from + RoundRunBound(request),
                              arrival.decision.waited, abandoned);
  }
  v1::TuneResponse measured = run ? *std::move(run) : solver_->NewResponse(round_id);
  for (size_t i = 0; !run && i < request.problems.size(); ++i) {
    if (abandoned && abandoned()) break;
    *measured.add_results() = solver_->Solve(request.problems[i], request, arrival.decision.waited,
                                             nullptr, abandoned);
  }
  const absl::Duration measuring = absl::Now() - measuring_from;
  // (A run opened all the same is published: it holds the lease until its
  // first step's bound only, unless a rank calls it, and Start opens none
  // once abandoned.)
  if (abandoned && !measured.has_run() && abandoned()) {
    spdlog::info("round={} group={} seq={} world={}: every rank's caller went away; "
                 "measuring stopped after {:.1f} ms, nothing stored",
                 round_id, request.group_id, arrival.sequence, request.world_size,
                 absl::ToDoubleMilliseconds(measuring));
    return table_.Publish(arrival, absl::CancelledError(
                                       "every rank's caller went away before the round was "
                                       "measured"));
  }
  rendezvous::Decision decision = table_.Publish(arrival, std::move(measured));
  if (decision.verdict != rendezvous::Verdict::kMeasured) return decision;
  // This rank arrived last (its arrival made the round GO): from its request
  // reaching the daemon to every rank's answer published, less the
  // measuring, is what the rendezvous itself cost.
  const absl::Duration overhead =
      absl::Now() - (request.received == absl::InfinitePast() ? start : request.received) -
      measuring;
  metrics_->round_overhead->Observe(absl::ToDoubleSeconds(overhead));
  spdlog::info(
      "round={} group={} seq={} world={} rank={} (ran it) problems={} waited_ms={:.1f} "
      "ms={:.1f} overhead_us={:.0f} winners=[{}]",
      decision.response->round_id(), request.group_id, arrival.sequence, request.world_size,
      request.rank, request.problems.size(), absl::ToDoubleMilliseconds(decision.waited),
      absl::ToDoubleMilliseconds(measuring), absl::ToDoubleMicroseconds(overhead),
      Winners(*decision.response));
  return decision;
}

rendezvous::Decision RankRounds::MeasureAcross(const ValidRequest& request,
                                               const rendezvous::Arrival& arrival,
                                               const CrossRunner::Plan& plan,
                                               absl::Time start) {
  return cross_->Run(request, arrival, plan, start, [this, &arrival](v1::TuneResponse measured) {
    return table_.Publish(arrival, std::move(measured));
  });
}

void RankRounds::StartAcross(const ValidRequest& request, const rendezvous::Arrival& arrival,
                             const CrossRunner::Plan& plan, absl::Time start) {
  {
    absl::MutexLock lock(&mu_);
    ++runs_;
  }
  std::thread([this, request, arrival, plan, start] {
    MeasureAcross(request, arrival, plan, start);
    absl::MutexLock lock(&mu_);
    --runs_;
  }).detach();
}

void RankRounds::LogDecided(const ValidRequest& request, const rendezvous::Arrival& arrival,
                            const rendezvous::Decision& decision,
                            const std::string& round_id) const {
  if (decision.verdict == rendezvous::Verdict::kError) {
    spdlog::warn("round={} group={} seq={} world={}: every rank gets {}", round_id,
                 request.group_id, arrival.sequence, request.world_size,
                 decision.error.ToString());
    return;
  }
  spdlog::info("round={} group={} seq={} world={} {}: {} of {} ranks in time, "
               "waited_ms={:.1f} winners=[{}]{}",
               decision.response->round_id(), request.group_id, arrival.sequence,
               request.world_size, rendezvous::VerdictName(decision.verdict),
               decision.ranks_in_time, request.world_size,
               absl::ToDoubleMilliseconds(decision.waited), Winners(*decision.response),
               decision.verdict == rendezvous::Verdict::kFallback
                   ? absl::StrCat(" (", decision.response->results(0).reason(), ")")
                   : std::string());
}

v1::TuneResponse RankRounds::RankAnswer(const ValidRequest& request,
                                        const rendezvous::Decision& decision,
                                        absl::Time start) {
  v1::TuneResponse out = *decision.response;
  RestoreLabels(request, &out);
  solver_->CountResults(out);
  metrics_->round_latency->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  return out;
}

}  // namespace autotuned::rounds
