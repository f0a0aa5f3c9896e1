#include "daemon/coordinate/leadership/cross_runs.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/common/grpc_status.h"
#include "daemon/coordinate/crossrun/transport.h"
#include "daemon/coordinate/leadership/cross_passes.h"
#include "daemon/coordinate/leadership/wire.h"

namespace autotuned::leadership {
namespace {

// Per problem of the run, per candidate, per rank.
using Outcomes = std::vector<std::vector<std::vector<RankOutcome>>>;

crossrun::Hub::AliveFn AliveVia(PeerClient* client) {
  if (client == nullptr) return crossrun::Hub::AliveFn();
  return [client](const std::string& daemon) {
    return client->Ping(daemon, absl::Now() + absl::Seconds(1)).ok();
  };
}

// Every rank's outcomes of the `n` candidates of one problem, from step
// `step` on: this daemon's (`mine`, for `local`), each daemon's own ranks
// from its timings, and UNAVAILABLE naming the daemon for the rest.
std::vector<std::vector<RankOutcome>> AllRanks(
    const ValidRequest& request, size_t n, int64_t step, const std::vector<int>& local,
    const std::vector<std::vector<RankOutcome>>& mine,
    const std::map<std::string, v1::RankTimings>& theirs,
    const std::map<std::string, std::string>& missing) {
  const int world = request.world_size;
  std::vector<std::vector<RankOutcome>> all(
      n, std::vector<RankOutcome>(world, RankOutcome{absl::UnknownError("not reported"), {}}));
  std::vector<std::vector<char>> filled(n, std::vector<char>(world, 0));
  for (size_t c = 0; c < n; ++c) {
    for (size_t i = 0; i < local.size() && i < mine[c].size(); ++i) {
      all[c][local[i]] = mine[c][i];
      filled[c][local[i]] = 1;
    }
    const int64_t at = step + static_cast<int64_t>(c);
    for (const auto& [daemon, t] : theirs) {
      if (t.steps_size() <= at) continue;
      for (const v1::RankResult& r : t.steps(static_cast<int>(at)).ranks()) {
        if (r.rank() < 0 || r.rank() >= world || request.rank_daemons[r.rank()] != daemon ||
            filled[c][r.rank()]) {
          continue;  // not that daemon's rank to report
        }
        all[c][r.rank()] = RankOutcomeFromWire(r);
        filled[c][r.rank()] = 1;
      }
    }
    for (int r = 0; r < world; ++r) {
      if (filled[c][r]) continue;
      const std::string& daemon = request.rank_daemons[r];
      auto why = missing.find(daemon);
      all[c][r].status = absl::UnavailableError(
          why != missing.end()
              ? absl::StrCat("daemon ", daemon, " sent no timings (", why->second, ")")
              : absl::StrCat("daemon ", daemon, " reported no outcome for this rank"));
    }
  }
  return all;
}

void LogRun(const ValidRequest& request, const rendezvous::Arrival& arrival,
            const v1::CrossRun& run, const rendezvous::Decision& decision, size_t daemons,
            const std::map<std::string, std::string>& missing, absl::Time go_at,
            int continued) {
  if (decision.response == nullptr) {
    spdlog::warn("round group={} run={}: every rank gets {}", request.group_id, run.run_id(),
                 decision.error.ToString());
    return;
  }
  std::vector<std::string> lost;
  for (const auto& [daemon, why] : missing) lost.push_back(absl::StrCat(daemon, ": ", why));
  std::vector<std::string> winners;
  for (const v1::ProblemResult& r : decision.response->results()) {
    winners.push_back(absl::StrCat(v1::DecisionStatus_Name(r.status()), " ",
                                   r.winner().empty() ? "none" : r.winner()));
  }
  spdlog::info(
      "round={} group={} seq={} world={} across {} daemons run={} measured={} "
      "continuations={} ms={:.1f} winners=[{}]{}",
      decision.response->round_id(), request.group_id, arrival.sequence, request.world_size,
      daemons, run.run_id(), run.problems_size(), continued,
      absl::ToDoubleMilliseconds(absl::Now() - go_at), absl::StrJoin(winners, "; "),
      lost.empty() ? "" : absl::StrCat(" missing: ", absl::StrJoin(lost, "; ")));
}

}  // namespace

CrossRuns::CrossRuns(Backend* backend, Engine* engine, Solver* solver,
                     PeerClient* peer_client, std::string self)
    : backend_(backend),
      engine_(engine),
      solver_(solver),
      self_(std::move(self)),
      hub_(self_, AliveVia(peer_client)) {}

std::optional<rounds::CrossRunner::Plan> CrossRuns::PlanRun(
    const ValidRequest& request, const rendezvous::Arrival& arrival) {
  Plan plan;
  auto run = std::make_shared<v1::CrossRun>();
  run->set_run_id(absl::StrCat(self_, "#", getpid(), "-", arrival.round_id));
  run->set_candidate_timeout_ms(absl::ToInt64Milliseconds(request.engine.timeout));
  run->set_catalogue_version(backend_->catalogue().Version());
  run->set_backend_token(backend_->CrossRunToken());
  run->set_passes(FixedPasses(request.engine));
  for (size_t i = 0; i < request.problems.size(); ++i) {
    plan.cached.push_back(solver_->Cached(request.problems[i], request));
    if (!plan.cached.back()) run->add_problems(static_cast<int>(i));
  }
  if (run->problems_size() == 0) return std::nullopt;
  std::vector<std::string> daemons = {self_};
  for (const std::string& d : request.rank_daemons) {
    if (!d.empty()) daemons.push_back(d);
  }
  hub_.Open(run->run_id(), daemons);
  plan.run = std::move(run);
  return plan;
}

rendezvous::Decision CrossRuns::Run(const ValidRequest& request,
                                    const rendezvous::Arrival& arrival, const Plan& plan,
                                    absl::Time start, const PublishFn& publish) {
  const v1::CrossRun& run = *plan.run;
  const std::string& run_id = run.run_id();
  const absl::Time go_at = absl::Now();
  const std::vector<int> local = request.local_ranks();
  const int64_t total = *RunCandidates(request, run);  // its own problems
  // Where each problem's candidates' steps start (CrossStep's base).
  std::vector<int64_t> bases;
  int64_t base = 0;
  for (int index : run.problems()) {
    bases.push_back(base);
    base += static_cast<int64_t>(request.problems[index].candidates.size());
  }

  // This daemon's ranks, step after step, in lockstep with the followers.
  Outcomes mine;
  for (int m = 0; m < run.problems_size(); ++m) {
    const ValidProblem& p = request.problems[run.problems(m)];
    mine.push_back(engine_->MeasurePart(
        p.spec, p.candidates, request.engine, local, run.backend_token(), run.passes(),
        [&](int c, int pass) -> std::shared_ptr<RunTransport> {
          return std::make_shared<crossrun::LeaderTransport>(
              &hub_, run_id, crossrun::CrossStep(bases[m], c, pass, total));
        }));
  }

  // The followers' timings: all of them, or those in by the bound.
  std::map<std::string, std::string> missing;
  const absl::Duration bound = RoundRunBound(request);
  const absl::Time wait_until = start + bound - std::min(absl::Seconds(2), bound / 4);
  std::map<std::string, v1::RankTimings> theirs =
      hub_.WaitTimings(run_id, 0, std::max(wait_until, absl::Now()), &missing);

  // Every rank's samples, per problem of the run, per candidate.
  std::vector<std::vector<PassSamples>> samples(run.problems_size());
  std::vector<int> pass_sizes;
  std::vector<int> pass_ids;
  for (int pass = 0; pass < std::max(1, run.passes()); ++pass) {
    pass_sizes.push_back(PassIterations(request.engine, pass));
    pass_ids.push_back(pass);
  }
  // Samples another daemon sent that the fixed passes cannot have made
  // rule its rank out, as in a continuation (JoinPass).
  const int fixed_iterations = std::accumulate(pass_sizes.begin(), pass_sizes.end(), 0);
  for (int m = 0; m < run.problems_size(); ++m) {
    const ValidProblem& p = request.problems[run.problems(m)];
    std::vector<std::vector<RankOutcome>> all =
        AllRanks(request, p.candidates.size(), bases[m], local, mine[m], theirs, missing);
    for (std::vector<RankOutcome>& ranks : all) {
      for (RankOutcome& r : ranks) r = CheckedSamples(std::move(r), fixed_iterations);
      samples[m].push_back(PassSamples{std::move(ranks), pass_sizes, pass_ids});
    }
  }
  auto ranking = [&](int m) {
    const ValidProblem& p = request.problems[run.problems(m)];
    std::vector<CandidateOutcome> outcomes;
    for (size_t c = 0; c < p.candidates.size(); ++c) {
      outcomes.push_back(OutcomeOf(static_cast<int>(c), p.candidates[c], samples[m][c]));
      outcomes.back().timed_by = TimedBy(request.engine);
    }
    return Rank(std::move(outcomes), request.engine.rule);
  };
  // Every daemon's timings came in and said it runs continuations.
  auto everyone = [&](const std::map<std::string, v1::RankTimings>& in) {
    return missing.empty() && std::all_of(in.begin(), in.end(), [](const auto& t) {
             return t.second.continues();
           });
  };

  // The adaptive passes (docs/protocol.md, "Continuations across daemons").
  RunState state;
  state.pass = std::max(1, run.passes());
  state.everyone = everyone(theirs);
  state.problems = run.problems_size();
  int answered = 0;  // the pass whose timings the next continuation answers
  int continued = 0;
  absl::Time continued_at = absl::InfiniteFuture();
  for (;;) {
    std::vector<std::vector<CandidateOutcome>> ranked;
    for (int m = 0; m < run.problems_size(); ++m) ranked.push_back(ranking(m));
    const absl::Time now = absl::Now();
    state.spent = continued_at == absl::InfiniteFuture() ? absl::ZeroDuration()
                                                         : now - continued_at;
    state.left = wait_until - now;
    const std::optional<v1::CrossPass> next = NextCrossPass(ranked, request.engine, state);
    if (!next) break;
    if (continued_at == absl::InfiniteFuture()) continued_at = now;
    v1::Decision continuation;
    continuation.mutable_round()->set_group_id(request.group_id);
    continuation.set_verdict(v1::GO);
    *continuation.mutable_go() = run;
    *continuation.mutable_go()->mutable_next() = *next;
    hub_.Continue(run_id, answered, std::move(continuation));
    ++continued;
    spdlog::info("run={} group={} continued: pass {}, {} steps", run_id,
                 absl::CEscape(request.group_id), next->pass(),
                 std::accumulate(next->problems().begin(), next->problems().end(), 0,
                                 [](int n, const v1::CrossPassProblem& p) {
                                   return n + p.candidates_size();
                                 }));
    const ScheduleOptions schedule = CrossPassSchedule(request.engine, *next);
    Outcomes pass_mine;
    for (int m = 0; m < run.problems_size(); ++m) {
      const ValidProblem& p = request.problems[run.problems(m)];
      const std::vector<int> order(next->problems(m).candidates().begin(),
                                   next->problems(m).candidates().end());
      std::vector<std::vector<RankOutcome>> by_order = engine_->MeasurePartPass(
          p.spec, p.candidates, request.engine, local, run.backend_token(), next->pass(),
          order, schedule, [&](int c, int pass) -> std::shared_ptr<RunTransport> {
            return std::make_shared<crossrun::LeaderTransport>(
                &hub_, run_id, crossrun::CrossStep(bases[m], c, pass, total));
          });
      pass_mine.emplace_back(p.candidates.size());
      for (size_t i = 0; i < order.size(); ++i) pass_mine[m][order[i]] = std::move(by_order[i]);
    }
    theirs = hub_.WaitTimings(run_id, next->pass(), std::max(wait_until, absl::Now()), &missing);
    // A daemon lost or late in a continuation ends the run as in the fixed
    // passes: its ranks' candidates are ruled out below.
    if (!missing.empty()) break;
    for (int m = 0; m < run.problems_size(); ++m) {
      const ValidProblem& p = request.problems[run.problems(m)];
      std::vector<std::vector<RankOutcome>> all = AllRanks(
          request, p.candidates.size(), bases[m], local, pass_mine[m], theirs, missing);
      for (int c : next->problems(m).candidates()) {
        JoinPass(&samples[m][c], std::move(all[c]), next->pass(), next->iterations());
      }
    }
    state.everyone = everyone(theirs);
    answered = next->pass();
    state.pass = next->pass() + 1;
  }
  if (!missing.empty()) {
    // As when a daemon's timings of the fixed passes are missing: every
    // candidate of the run fails on that daemon's ranks.
    for (std::vector<PassSamples>& problem : samples) {
      for (PassSamples& s : problem) {
        for (int r = 0; r < static_cast<int>(s.ranks.size()) && r < request.world_size; ++r) {
          auto why = missing.find(request.rank_daemons[r]);
          if (why == missing.end()) continue;
          s.ranks[r] = RankOutcome{
              absl::UnavailableError(absl::StrCat("daemon ", why->first, " sent no timings (",
                                                  why->second, ")")),
              {}};
        }
      }
    }
  }

  v1::TuneResponse measured = solver_->NewResponse(solver_->NextRoundId());
  for (const std::optional<v1::ProblemResult>& hit : plan.cached) {
    *measured.add_results() = hit ? *hit : v1::ProblemResult();
  }
  for (int m = 0; m < run.problems_size(); ++m) {
    const int index = run.problems(m);
    *measured.mutable_results(index) = solver_->Measured(request.problems[index], request,
                                                         ranking(m),
                                                         /*may_store=*/missing.empty());
  }

  rendezvous::Decision decision = publish(std::move(measured));
  v1::RoundKey key;
  key.set_group_id(request.group_id);
  hub_.Finish(run_id, DecisionToWire(decision, key));
  LogRun(request, arrival, run, decision, theirs.size() + missing.size() + 1, missing, go_at,
         continued);
  return decision;
}

absl::StatusOr<v1::Decision> CrossRuns::Reduce(const v1::RankTimings& timings,
                                               absl::Time deadline) {
  if (timings.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  absl::Status in = hub_.SubmitTimings(timings.run_id(), timings.from_daemon(), timings);
  if (!in.ok()) return in;
  return hub_.WaitDecision(timings.run_id(), timings.pass(), deadline);
}

absl::StatusOr<v1::ExchangeReply> CrossRuns::Exchange(const v1::ExchangeRequest& request,
                                                      absl::Time deadline) {
  if (request.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
  v1::ExchangeReply reply;
  if (request.abort_code() != 0) {
    hub_.Abort(request.run_id(), request.step(), request.from_daemon(),
               StatusFromWire(request.abort_code(), request.abort_message()));
    return reply;
  }
  absl::StatusOr<std::vector<std::string>> data =
      hub_.Exchange(request.run_id(), request.step(), request.generation(),
                    request.from_daemon(), request.data(), deadline);
  if (!data.ok()) return data.status();
  for (std::string& d : *data) reply.add_data(std::move(d));
  return reply;
}

}  // namespace autotuned::leadership
