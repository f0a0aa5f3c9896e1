#include "daemon/coordinate/leadership/follower.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/crossrun/transport.h"
#include "daemon/coordinate/leadership/cross_passes.h"
#include "daemon/coordinate/leadership/wire.h"
#include "daemon/coordinate/request/labels.h"
#include "daemon/coordinate/rounds/rank_rounds.h"
#include "daemon/coordinate/solver/solver.h"

namespace autotuned::leadership {
namespace {

// The answer of an ANSWERED decision with this rank's labels, the error of a
// REJECTED one; UNAVAILABLE for another verdict (`what`: what was asked).
absl::StatusOr<v1::TuneResponse> AnswerOf(v1::Decision decision, const ValidRequest& request,
                                          const std::string& what) {
  if (decision.verdict() == v1::REJECTED) return RejectedStatus(decision);
  if (decision.verdict() != v1::ANSWERED) {
    return absl::UnavailableError(absl::StrCat("leader ", request.leader, " answered ",
                                               v1::RoundVerdict_Name(decision.verdict()),
                                               what));
  }
  v1::TuneResponse out = std::move(*decision.mutable_response());
  RestoreLabels(request, &out);
  return out;
}

}  // namespace

absl::Status LeaderUnreachable(const std::string& leader) {
  return absl::UnavailableError(absl::StrCat(
      "leader ", leader,
      " unreachable (followers never decide; ask again once the leader is back)"));
}

Follower::Follower(PeerClient* client, Engine* engine, const Backend* backend,
                   std::string self)
    : client_(client), engine_(engine), backend_(backend), self_(std::move(self)) {}

absl::StatusOr<v1::TuneResponse> Follower::Round(const ValidRequest& request,
                                                 absl::Time deadline,
                                                 const std::function<bool()>& gone) {
  const rendezvous::RoundKey key = rounds::RoundKeyOf(request);
  v1::ReadyRequest ready;
  ready.mutable_round()->set_group_id(request.group_id);
  ready.mutable_round()->set_problems_digest(key.problems_digest);
  ready.add_ranks(request.rank);
  *ready.mutable_request() = request.wire;
  const absl::Time cap =
      absl::Now() + request.presync_window + RoundRunBound(request) + absl::Seconds(5);
  const absl::Time call_deadline = std::min(deadline, cap);
  int64_t sequence = 0;
  std::shared_ptr<Asked> asked = StartAsk(request, key.ToString(), &sequence);
  absl::StatusOr<v1::Decision> decision =
      client_->Ready(request.leader, ready, call_deadline, gone);
  {
    absl::MutexLock lock(&mu_);
    --asked->in_flight;
    if (decision.ok() && decision->verdict() == v1::ANSWERED && !asked->answered) {
      asked->answered = *decision;
    }
  }
  if (!decision.ok()) {
    if (decision.status().code() == absl::StatusCode::kCancelled && gone && gone()) {
      return decision.status();  // nobody to answer
    }
    if (call_deadline == deadline && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no decision from the leader ", request.leader, " before this rank's deadline"));
    }
    // The detail goes to the log only: every rank of this daemon gets the
    // same status for the same failure.
    spdlog::warn("group={} rank={}: leader {} unreachable: {}", request.group_id,
                 request.rank, request.leader, decision.status().ToString());
    // The leader may have answered the round to other ranks before it was
    // lost: to this daemon's (asked_, so this daemon asks itself first) or
    // to another follower's.
    v1::OutcomeRequest ask;
    ask.set_round_key(key.ToString());
    ask.set_sequence(sequence);
    decision = FromOtherFollowers(request, ask, LeaderUnreachable(request.leader),
                                  call_deadline);
    if (!decision.ok()) return decision.status();
  }
  if (decision->verdict() == v1::GO) return Cross(request, decision->go(), deadline);
  return AnswerOf(*std::move(decision), request, ", which this daemon version does not serve");
}

std::shared_ptr<Follower::Asked> Follower::StartAsk(const ValidRequest& request,
                                                    const std::string& key,
                                                    int64_t* sequence) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    it = now - it->second.second > kForgetRunsAfter ? sequences_.erase(it) : std::next(it);
  }
  while (sequences_.size() > 4 * kMaxKeptRuns) {
    sequences_.erase(std::min_element(
        sequences_.begin(), sequences_.end(),
        [](const auto& a, const auto& b) { return a.second.second < b.second.second; }));
  }
  for (auto it = asked_.begin(); it != asked_.end();) {
    it = now - it->second->started > kForgetRunsAfter && it->second->in_flight == 0
             ? asked_.erase(it)
             : std::next(it);
  }
  std::pair<int64_t, absl::Time>& next = sequences_[absl::StrCat(key, "|", request.rank)];
  *sequence = next.first++;
  next.second = now;
  std::shared_ptr<Asked>& round = asked_[absl::StrCat(key, "#", *sequence)];
  if (round == nullptr) {
    round = std::make_shared<Asked>();
    round->started = now;
    for (const std::string& d : request.rank_daemons) {
      if (!d.empty()) round->daemons.insert(d);
    }
  }
  ++round->in_flight;
  std::shared_ptr<Asked> out = round;
  while (asked_.size() > kMaxKeptRuns) {
    auto oldest = asked_.end();
    for (auto it = asked_.begin(); it != asked_.end(); ++it) {
      if (it->second->in_flight == 0 &&
          (oldest == asked_.end() || it->second->started < oldest->second->started)) {
        oldest = it;
      }
    }
    if (oldest == asked_.end()) break;
    asked_.erase(oldest);
  }
  return out;
}

std::shared_ptr<Follower::Run> Follower::Join(const ValidRequest& request,
                                              const v1::CrossRun& go, bool* runner) {
  const int local_ranks = static_cast<int>(request.local_ranks().size());
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto* runs : {&runs_, &kept_}) {
    for (auto it = runs->begin(); it != runs->end();) {
      it = now - it->second->started > kForgetRunsAfter ? runs->erase(it) : std::next(it);
    }
  }
  std::shared_ptr<Run>& slot = runs_[go.run_id()];
  *runner = slot == nullptr;
  if (*runner) {
    slot = std::make_shared<Run>();
    slot->started = now;
    for (const std::string& d : request.rank_daemons) {
      if (!d.empty()) slot->daemons.insert(d);
    }
    kept_[go.run_id()] = slot;
    while (kept_.size() > kMaxKeptRuns) {
      auto oldest = std::min_element(kept_.begin(), kept_.end(), [](const auto& a, const auto& b) {
        return a.second->started < b.second->started;
      });
      kept_.erase(oldest);
    }
  }
  std::shared_ptr<Run> run = slot;
  if (++run->joined >= local_ranks) runs_.erase(go.run_id());
  return run;
}

absl::StatusOr<v1::TuneResponse> Follower::Cross(const ValidRequest& request,
                                                 const v1::CrossRun& go,
                                                 absl::Time deadline) {
  bool runner = false;
  std::shared_ptr<Run> run = Join(request, go, &runner);
  if (runner) {
    absl::Time timings_deadline = absl::Now();
    absl::StatusOr<v1::Decision> result = RunPart(request, go, &timings_deadline);
    {
      // What other followers of the run are told from now on (Outcome): the
      // leader's answer to this daemon alone, never one learnt from them.
      absl::MutexLock lock(&mu_);
      run->called = true;
      if (result.ok()) run->from_leader = *result;
    }
    if (!result.ok()) {
      v1::OutcomeRequest ask;
      ask.set_run_id(go.run_id());
      // Within the timings' call's own bound: a follower cut off from the
      // leader until then answers as before (docs/protocol.md).
      result = FromOtherFollowers(request, ask, result.status(),
                                  std::min(deadline, timings_deadline));
    }
    absl::MutexLock lock(&mu_);
    run->result = std::move(result);
    run->done = true;
  }
  absl::StatusOr<v1::Decision> result = absl::UnknownError("");
  {
    absl::MutexLock lock(&mu_);
    auto done = [&run]() { return run->done; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
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
  return AnswerOf(*std::move(result), request,
                  absl::StrCat(" to the timings of run ", go.run_id()));
}

absl::StatusOr<v1::Decision> Follower::FromOtherFollowers(const ValidRequest& request,
                                                          const v1::OutcomeRequest& ask,
                                                          absl::Status failed,
                                                          absl::Time deadline) {
  // This daemon first (what its other ranks received), then the others.
  std::vector<std::string> followers = {self_};
  for (const std::string& d : request.rank_daemons) {
    if (!d.empty() && d != request.leader && d != self_ &&
        std::find(followers.begin(), followers.end(), d) == followers.end()) {
      followers.push_back(d);
    }
  }
  const std::string what =
      ask.run_id().empty() ? absl::StrCat("round ", ask.sequence()) : ask.run_id();
  for (const std::string& other : followers) {
    absl::StatusOr<v1::OutcomeReply> reply = absl::UnknownError("");
    if (other == self_) {
      v1::OutcomeRequest mine = ask;
      mine.set_from_daemon(self_);
      absl::MutexLock lock(&mu_);
      reply = mine.run_id().empty() ? RoundOutcome(mine, deadline) : v1::OutcomeReply();
    } else {
      reply = client_->RunOutcome(other, ask, deadline);
    }
    if (!reply.ok()) {
      spdlog::warn("group={} {}: no outcome from the follower {}: {}", request.group_id, what,
                   other, reply.status().ToString());
      continue;
    }
    if (reply->decided()) {
      spdlog::info("group={} {}: the leader {} was lost ({}); its decision came from the "
                   "follower {}",
                   request.group_id, what, request.leader, failed.ToString(), other);
      return std::move(*reply->mutable_decision());
    }
  }
  return failed;
}

absl::StatusOr<v1::OutcomeReply> Follower::Outcome(const v1::OutcomeRequest& request,
                                                   absl::Time deadline) {
  if (request.run_id().empty() && request.round_key().empty()) {
    return absl::InvalidArgumentError("run_id: required");
  }
  absl::MutexLock lock(&mu_);
  if (request.run_id().empty()) return RoundOutcome(request, deadline);
  v1::OutcomeReply reply;
  auto it = kept_.find(request.run_id());
  if (it == kept_.end()) return reply;
  std::shared_ptr<Run> run = it->second;
  if (run->daemons.count(request.from_daemon()) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "from_daemon: \"", request.from_daemon(), "\" has no rank in run ", request.run_id()));
  }
  auto called = [&run]() { return run->called; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&called), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "this daemon's timings of run ", request.run_id(), " are still with the leader"));
  }
  if (run->from_leader) {
    reply.set_decided(true);
    *reply.mutable_decision() = *run->from_leader;
  }
  return reply;
}

absl::StatusOr<v1::OutcomeReply> Follower::RoundOutcome(const v1::OutcomeRequest& request,
                                                        absl::Time deadline) {
  v1::OutcomeReply reply;
  auto it = asked_.find(absl::StrCat(request.round_key(), "#", request.sequence()));
  if (it == asked_.end()) return reply;
  std::shared_ptr<Asked> round = it->second;
  if (request.from_daemon() != self_ && round->daemons.count(request.from_daemon()) == 0) {
    return absl::PermissionDeniedError(absl::StrCat("from_daemon: \"", request.from_daemon(),
                                                    "\" has no rank in round ",
                                                    request.sequence(), " of that key"));
  }
  auto ended = [&round]() { return round->answered || round->in_flight == 0; };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ended), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "this daemon's asks of round ", request.sequence(), " are still with the leader"));
  }
  if (round->answered) {
    reply.set_decided(true);
    *reply.mutable_decision() = *round->answered;
  }
  return reply;
}

absl::StatusOr<v1::Decision> Follower::RunPart(const ValidRequest& request,
                                               const v1::CrossRun& go,
                                               absl::Time* timings_deadline) {
  const absl::Time started = absl::Now();
  absl::StatusOr<v1::RankTimings> timings = MeasurePart(request, go);
  if (!timings.ok()) return timings.status();
  int failed = 0;
  for (const v1::StepTimings& st : timings->steps()) {
    for (const v1::RankResult& r : st.ranks()) failed += r.code() != 0 ? 1 : 0;
  }
  spdlog::info("run={} group={}: this daemon's part done, {} steps on ranks [{}], "
               "{} rank outcomes failed, ms={:.1f}; timings to the leader {}",
               go.run_id(), request.group_id, timings->steps_size(),
               absl::StrJoin(request.local_ranks(), ","), failed,
               absl::ToDoubleMilliseconds(absl::Now() - started), request.leader);
  *timings_deadline = absl::Now() + RoundRunBound(request) + absl::Seconds(5);
  // Each continuation's pass is after the last; at most kMaxCrossPasses.
  int last = std::max(1, go.passes()) - 1;
  for (;;) {
    absl::StatusOr<v1::Decision> reply =
        client_->ReduceTimings(request.leader, *std::move(timings), *timings_deadline);
    if (!reply.ok() || reply->verdict() != v1::GO) return reply;
    timings = MeasureContinuation(request, go, reply->go(), &last);
  }
}

v1::RankTimings Follower::MeasureContinuation(const ValidRequest& request,
                                              const v1::CrossRun& go, const v1::CrossRun& next,
                                              int* last) {
  const std::vector<int> local = request.local_ranks();
  EngineOptions options = request.engine;
  if (go.candidate_timeout_ms() > 0) {
    options.timeout = absl::Milliseconds(go.candidate_timeout_ms());
  }
  const int64_t total = *RunCandidates(request, go);  // checked by MeasurePart
  std::vector<int> sizes;
  for (int index : go.problems()) {
    sizes.push_back(static_cast<int>(request.problems[index].candidates.size()));
  }
  const v1::CrossPass& pass = next.next();
  absl::Status refused = next.run_id() == go.run_id()
                             ? CheckCrossPass(pass, *last, sizes)
                             : absl::InvalidArgumentError(absl::StrCat(
                                   "go.run_id: \"", absl::CEscape(next.run_id().substr(0, 128)),
                                   "\" is not the run ", go.run_id()));
  v1::RankTimings timings;
  timings.mutable_round()->set_group_id(request.group_id);
  timings.set_run_id(go.run_id());
  timings.set_continues(true);
  timings.set_pass(pass.pass());
  const bool numbered = pass.pass() > 0 && pass.pass() < kMaxCrossPasses;
  int64_t base = 0;
  for (int m = 0; m < go.problems_size(); ++m) {
    const ValidProblem& p = request.problems[go.problems(m)];
    auto transport = [&](int c, int n) -> std::shared_ptr<RunTransport> {
      return std::make_shared<crossrun::FollowerTransport>(
          client_, request.leader, go.run_id(), crossrun::CrossStep(base, c, n, total));
    };
    std::vector<std::vector<RankOutcome>> outcomes(p.candidates.size());
    if (refused.ok()) {
      const std::vector<int> order(pass.problems(m).candidates().begin(),
                                   pass.problems(m).candidates().end());
      std::vector<std::vector<RankOutcome>> by_order = engine_->MeasurePartPass(
          p.spec, p.candidates, options, local, go.backend_token(), pass.pass(), order,
          CrossPassSchedule(options, pass), transport);
      for (size_t i = 0; i < order.size(); ++i) outcomes[order[i]] = std::move(by_order[i]);
    } else {
      // Every candidate fails on this daemon's ranks; the steps it can name
      // end at once on the other daemons.
      for (size_t c = 0; c < p.candidates.size(); ++c) {
        if (numbered && m < pass.problems_size() &&
            std::find(pass.problems(m).candidates().begin(), pass.problems(m).candidates().end(),
                      static_cast<int>(c)) != pass.problems(m).candidates().end()) {
          transport(static_cast<int>(c), pass.pass())->Abort(refused);
        }
        outcomes[c].assign(local.size(), RankOutcome{refused, {}});
      }
    }
    for (const std::vector<RankOutcome>& ranks : outcomes) {
      v1::StepTimings* s = timings.add_steps();
      for (size_t i = 0; i < ranks.size() && i < local.size(); ++i) {
        RankOutcomeToWire(local[i], ranks[i], s->add_ranks());
      }
    }
    base += static_cast<int64_t>(p.candidates.size());
  }
  if (refused.ok()) {
    *last = pass.pass();
  } else {
    spdlog::warn("run={} group={}: the leader's continuation is refused: {}", go.run_id(),
                 absl::CEscape(request.group_id), refused.ToString());
  }
  return timings;
}

absl::StatusOr<v1::RankTimings> Follower::MeasurePart(const ValidRequest& request,
                                                      const v1::CrossRun& go) {
  const std::vector<int> local = request.local_ranks();
  EngineOptions options = request.engine;
  if (go.candidate_timeout_ms() > 0) {
    options.timeout = absl::Milliseconds(go.candidate_timeout_ms());
  }
  absl::Status refused;
  // Each pass times at least one of the request's iterations.
  const int max_passes = std::min(kMaxCrossPasses, std::max(1, options.schedule.iterations));
  if (go.passes() < 0 || go.passes() > max_passes) {
    refused = absl::InvalidArgumentError(absl::StrCat(
        "go.passes: ", go.passes(), " is outside 0..", max_passes,
        " (at most the request's timed iterations)"));
  } else if (go.catalogue_version() != backend_->catalogue().Version()) {
    refused = absl::FailedPreconditionError(absl::StrCat(
        "daemon ", self_, " has catalogue ", backend_->catalogue().Version(), ", the leader ",
        go.catalogue_version()));
  }
  v1::RankTimings timings;
  timings.mutable_round()->set_group_id(request.group_id);
  timings.set_run_id(go.run_id());
  timings.set_continues(true);
  const absl::StatusOr<int64_t> total = RunCandidates(request, go);
  if (!total.ok()) return total.status();
  int64_t step = 0;
  for (int index : go.problems()) {
    const ValidProblem& p = request.problems[index];
    auto transport = [&](int c, int pass) -> std::shared_ptr<RunTransport> {
      return std::make_shared<crossrun::FollowerTransport>(
          client_, request.leader, go.run_id(), crossrun::CrossStep(step, c, pass, *total));
    };
    std::vector<std::vector<RankOutcome>> outcomes;
    if (refused.ok()) {
      outcomes = engine_->MeasurePart(p.spec, p.candidates, options, local,
                                      go.backend_token(), go.passes(), transport);
    } else {
      // Every other daemon's ranks fail the first pass at its first
      // barrier, so none runs a later one.
      for (size_t c = 0; c < p.candidates.size(); ++c) {
        transport(static_cast<int>(c), 0)->Abort(refused);
        outcomes.emplace_back(local.size(), RankOutcome{refused, {}});
      }
    }
    for (const std::vector<RankOutcome>& ranks : outcomes) {
      v1::StepTimings* s = timings.add_steps();
      for (size_t i = 0; i < ranks.size() && i < local.size(); ++i) {
        RankOutcomeToWire(local[i], ranks[i], s->add_ranks());
      }
    }
    step += static_cast<int64_t>(p.candidates.size());
  }
  return timings;
}

}  // namespace autotuned::leadership
