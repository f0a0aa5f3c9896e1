// AutotuneService for groups whose ranks live on several daemons, once the
// leader said GO: the leader's run (its ranks, the followers' timings, the
// ranking, the final decision), a follower's part, and the peer calls the
// leader serves for them (ReduceTimings, Exchange). The rules are in
// service.h; the meeting point is daemon/crossrun/hub.h.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/crossrun/transport.h"
#include "daemon/service/service.h"

namespace autotuned {
namespace {

v1::Decision ToWire(const rendezvous::Decision& d, const v1::RoundKey& round) {
  v1::Decision out;
  *out.mutable_round() = round;
  if (d.verdict == rendezvous::Verdict::kError) {
    out.set_verdict(v1::REJECTED);
    out.set_error_code(static_cast<int>(d.error.code()));
    out.set_error_message(std::string(d.error.message()));
  } else {
    out.set_verdict(v1::ANSWERED);
    if (d.response != nullptr) *out.mutable_response() = *d.response;
  }
  return out;
}

RankOutcome FromWire(const v1::RankResult& r) {
  RankOutcome out;
  out.status = absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
  if (out.status.ok()) out.iteration_us.assign(r.iteration_us().begin(), r.iteration_us().end());
  return out;
}

}  // namespace

std::optional<AutotuneService::CrossPlan> AutotuneService::PlanCrossRun(
    const ValidRequest& request, const rendezvous::Arrival& arrival) {
  CrossPlan plan;
  auto run = std::make_shared<v1::CrossRun>();
  run->set_run_id(absl::StrCat(config_.peer_advertise(), "#", getpid(), "-", arrival.round_id));
  run->set_candidate_timeout_ms(absl::ToInt64Milliseconds(request.engine.timeout));
  run->set_catalogue_version(backend_->catalogue().Version());
  run->set_backend_token(backend_->CrossRunToken());
  for (size_t i = 0; i < request.problems.size(); ++i) {
    plan.cached.push_back(Cached(request.problems[i], request));
    if (!plan.cached.back()) run->add_problems(static_cast<int>(i));
  }
  if (run->problems_size() == 0) return std::nullopt;
  std::vector<std::string> daemons = {config_.peer_advertise()};
  for (const std::string& d : request.rank_daemons) {
    if (!d.empty()) daemons.push_back(d);
  }
  hub_.Open(run->run_id(), daemons);
  plan.run = std::move(run);
  return plan;
}

rendezvous::Decision AutotuneService::LeadCrossRun(const ValidRequest& request,
                                                   const rendezvous::Arrival& arrival,
                                                   const CrossPlan& plan, absl::Time start) {
  const v1::CrossRun& run = *plan.run;
  const std::string& run_id = run.run_id();
  const absl::Time go_at = absl::Now();
  const std::vector<int> local = request.local_ranks();

  // This daemon's ranks, step after step, in lockstep with the followers.
  std::vector<std::vector<std::vector<RankOutcome>>> mine;
  int64_t step = 0;
  for (int index : run.problems()) {
    const ValidProblem& p = request.problems[index];
    mine.push_back(engine_.MeasurePart(
        p.spec, p.candidates, request.engine, local, run.backend_token(),
        [&](int c) -> std::shared_ptr<RunTransport> {
          return std::make_shared<crossrun::LeaderTransport>(&hub_, run_id, step + c);
        }));
    step += p.candidates.size();
  }

  // The followers' timings: all of them, or those in by the bound.
  std::map<std::string, std::string> missing;
  const absl::Time wait_until =
      start + RoundRunBound(request) - std::min(absl::Seconds(2), RoundRunBound(request) / 4);
  std::map<std::string, v1::RankTimings> theirs =
      hub_.WaitTimings(run_id, std::max(wait_until, absl::Now()), &missing);

  v1::TuneResponse measured;
  measured.set_round_id(absl::StrCat(getpid(), "-", ++rounds_));
  measured.set_backend(backend_->node().backend);
  measured.set_fingerprint(fingerprint_);
  for (const std::optional<v1::ProblemResult>& hit : plan.cached) {
    *measured.add_results() = hit ? *hit : v1::ProblemResult();
  }
  const bool whole = missing.empty();
  step = 0;
  for (int m = 0; m < run.problems_size(); ++m) {
    const int index = run.problems(m);
    const ValidProblem& p = request.problems[index];
    const size_t n = p.candidates.size();
    std::vector<std::vector<RankOutcome>> all(
        n, std::vector<RankOutcome>(request.world_size,
                                    RankOutcome{absl::UnknownError("not reported"), {}}));
    std::vector<std::vector<char>> filled(n, std::vector<char>(request.world_size, 0));
    for (size_t c = 0; c < n; ++c) {
      for (size_t i = 0; i < local.size() && i < mine[m][c].size(); ++i) {
        all[c][local[i]] = mine[m][c][i];
        filled[c][local[i]] = 1;
      }
      for (const auto& [daemon, t] : theirs) {
        if (t.steps_size() <= step + static_cast<int64_t>(c)) continue;
        for (const v1::RankResult& r : t.steps(step + c).ranks()) {
          if (r.rank() < 0 || r.rank() >= request.world_size ||
              request.rank_daemons[r.rank()] != daemon || filled[c][r.rank()]) {
            continue;  // not that daemon's rank to report
          }
          all[c][r.rank()] = FromWire(r);
          filled[c][r.rank()] = 1;
        }
      }
      for (int r = 0; r < request.world_size; ++r) {
        if (filled[c][r]) continue;
        const std::string& daemon = request.rank_daemons[r];
        auto why = missing.find(daemon);
        all[c][r].status = absl::UnavailableError(
            why != missing.end()
                ? absl::StrCat("daemon ", daemon, " sent no timings (", why->second, ")")
                : absl::StrCat("daemon ", daemon, " reported no outcome for this rank"));
      }
    }
    *measured.mutable_results(index) =
        Measured(p, request, RankRanks(p.candidates, all), /*may_store=*/whole);
    step += n;
  }

  rendezvous::Decision decision = round_table_.Publish(arrival, std::move(measured));
  v1::RoundKey key;
  key.set_group_id(request.group_id);
  hub_.Finish(run_id, ToWire(decision, key));
  std::vector<std::string> lost;
  for (const auto& [daemon, why] : missing) lost.push_back(absl::StrCat(daemon, ": ", why));
  if (decision.response != nullptr) {
    std::vector<std::string> winners;
    for (const v1::ProblemResult& r : decision.response->results()) {
      winners.push_back(absl::StrCat(v1::DecisionStatus_Name(r.status()), " ",
                                     r.winner().empty() ? "none" : r.winner()));
    }
    spdlog::info(
        "round={} group={} seq={} world={} across {} daemons run={} measured={} "
        "ms={:.1f} winners=[{}]{}",
        decision.response->round_id(), request.group_id, arrival.sequence,
        request.world_size, theirs.size() + missing.size() + 1, run_id, run.problems_size(),
        absl::ToDoubleMilliseconds(absl::Now() - go_at), absl::StrJoin(winners, "; "),
        lost.empty() ? "" : absl::StrCat(" missing: ", absl::StrJoin(lost, "; ")));
  } else {
    spdlog::warn("round group={} run={}: every rank gets {}", request.group_id, run_id,
                 decision.error.ToString());
  }
  return decision;
}

absl::StatusOr<v1::TuneResponse> AutotuneService::FollowerCross(const ValidRequest& request,
                                                                const v1::CrossRun& go,
                                                                absl::Time deadline) {
  std::shared_ptr<FollowerRun> run;
  bool runner = false;
  const size_t local = request.local_ranks().size();
  {
    absl::MutexLock lock(&cross_mu_);
    const absl::Time now = absl::Now();
    for (auto it = follower_runs_.begin(); it != follower_runs_.end();) {
      it = now - it->second->started > absl::Minutes(30) ? follower_runs_.erase(it)
                                                         : std::next(it);
    }
    std::shared_ptr<FollowerRun>& slot = follower_runs_[go.run_id()];
    if (slot == nullptr) {
      slot = std::make_shared<FollowerRun>();
      slot->started = now;
      runner = true;
    }
    run = slot;
    if (++run->joined >= static_cast<int>(local)) follower_runs_.erase(go.run_id());
  }
  if (runner) {
    absl::StatusOr<v1::Decision> result = RunFollowerPart(request, go);
    absl::MutexLock lock(&cross_mu_);
    run->result = std::move(result);
    run->done = true;
  }
  absl::StatusOr<v1::Decision> result = absl::UnknownError("");
  {
    absl::MutexLock lock(&cross_mu_);
    auto done = [&run]() { return run->done; };
    if (!cross_mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no decision from the leader ", request.leader,
          " before this rank's deadline (its daemon is measuring the round)"));
    }
    result = run->result;
  }
  if (!result.ok()) {
    spdlog::warn("group={} rank={} run={}: {}", request.group_id, request.rank, go.run_id(),
                 result.status().ToString());
    return LeaderUnreachable(request.leader);
  }
  if (result->verdict() == v1::REJECTED) {
    return absl::Status(static_cast<absl::StatusCode>(result->error_code()),
                        result->error_message());
  }
  if (result->verdict() != v1::ANSWERED) {
    return absl::UnavailableError(absl::StrCat("leader ", request.leader, " answered ",
                                               v1::RoundVerdict_Name(result->verdict()),
                                               " to the timings of run ", go.run_id()));
  }
  v1::TuneResponse out = std::move(*result->mutable_response());
  for (int i = 0; i < out.results_size() && i < static_cast<int>(request.problems.size());
       ++i) {
    out.mutable_results(i)->mutable_problem()->set_label(
        request.problems[i].canonical.label());
  }
  return out;
}

absl::StatusOr<v1::Decision> AutotuneService::RunFollowerPart(const ValidRequest& request,
                                                              const v1::CrossRun& go) {
  const absl::Time started = absl::Now();
  const std::vector<int> local = request.local_ranks();
  EngineOptions options = request.engine;
  if (go.candidate_timeout_ms() > 0) {
    options.timeout = absl::Milliseconds(go.candidate_timeout_ms());
  }
  absl::Status refused;
  if (go.catalogue_version() != backend_->catalogue().Version()) {
    refused = absl::FailedPreconditionError(absl::StrCat(
        "daemon ", config_.peer_advertise(), " has catalogue ",
        backend_->catalogue().Version(), ", the leader ", go.catalogue_version()));
  }
  v1::RankTimings timings;
  timings.mutable_round()->set_group_id(request.group_id);
  timings.set_run_id(go.run_id());
  int64_t step = 0;
  for (int index : go.problems()) {
    if (index < 0 || index >= static_cast<int>(request.problems.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "go.problems: index ", index, " outside the ", request.problems.size(),
          " problems of the request"));
    }
    const ValidProblem& p = request.problems[index];
    auto transport = [&](int c) -> std::shared_ptr<RunTransport> {
      return std::make_shared<crossrun::FollowerTransport>(options_.peer_client,
                                                           request.leader, go.run_id(),
                                                           step + c);
    };
    std::vector<std::vector<RankOutcome>> outcomes;
    if (refused.ok()) {
      outcomes = engine_.MeasurePart(p.spec, p.candidates, options, local,
                                     go.backend_token(), transport);
    } else {
      for (size_t c = 0; c < p.candidates.size(); ++c) {
        transport(static_cast<int>(c))->Abort(refused);
        outcomes.emplace_back(local.size(), RankOutcome{refused, {}});
      }
    }
    for (const std::vector<RankOutcome>& ranks : outcomes) {
      v1::StepTimings* s = timings.add_steps();
      for (size_t i = 0; i < ranks.size() && i < local.size(); ++i) {
        v1::RankResult* r = s->add_ranks();
        r->set_rank(local[i]);
        r->set_code(static_cast<int>(ranks[i].status.code()));
        r->set_message(std::string(ranks[i].status.message()));
        for (double us : ranks[i].iteration_us) r->add_iteration_us(us);
      }
    }
    step += p.candidates.size();
  }
  int failed = 0;
  for (const v1::StepTimings& st : timings.steps()) {
    for (const v1::RankResult& r : st.ranks()) failed += r.code() != 0 ? 1 : 0;
  }
  spdlog::info("run={} group={}: this daemon's part done, {} steps on ranks [{}], "
               "{} rank outcomes failed, ms={:.1f}; timings to the leader {}",
               go.run_id(), request.group_id, timings.steps_size(),
               absl::StrJoin(local, ","), failed,
               absl::ToDoubleMilliseconds(absl::Now() - started), request.leader);
  return options_.peer_client->ReduceTimings(request.leader, std::move(timings),
                                             absl::Now() + RoundRunBound(request) +
                                                 absl::Seconds(5));
}

absl::StatusOr<v1::Decision> AutotuneService::LeadReduce(const v1::RankTimings& timings,
                                                         absl::Time deadline) {
  if (timings.run_id().empty()) {
    return absl::InvalidArgumentError("run_id: required");
  }
  absl::Status in = hub_.SubmitTimings(timings.run_id(), timings.from_daemon(), timings);
  if (!in.ok()) return in;
  return hub_.WaitDecision(timings.run_id(), deadline);
}

absl::StatusOr<v1::ExchangeReply> AutotuneService::LeadExchange(
    const v1::ExchangeRequest& request, absl::Time deadline) {
  if (request.run_id().empty()) {
    return absl::InvalidArgumentError("run_id: required");
  }
  v1::ExchangeReply reply;
  if (request.abort_code() != 0) {
    hub_.Abort(request.run_id(), request.step(), request.from_daemon(),
               absl::Status(static_cast<absl::StatusCode>(request.abort_code()),
                            request.abort_message()));
    return reply;
  }
  absl::StatusOr<std::vector<std::string>> data =
      hub_.Exchange(request.run_id(), request.step(), request.generation(),
                    request.from_daemon(), request.data(), deadline);
  if (!data.ok()) return data.status();
  for (std::string& d : *data) reply.add_data(std::move(d));
  return reply;
}

}  // namespace autotuned
