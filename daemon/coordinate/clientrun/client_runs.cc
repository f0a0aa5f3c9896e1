#include "daemon/coordinate/clientrun/client_runs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "daemon/coordinate/solver/result.h"
#include "daemon/state/cache/key.h"

namespace autotuned::clientrun {
namespace {

// 128 random bits as 32 hex digits.
std::string NewRunId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

// The request positions of the problem's client candidates, ascending.
std::vector<int> ClientPositions(const ValidProblem& p) {
  std::vector<int> out;
  for (size_t c = 0; c < p.candidates.size(); ++c) {
    if (p.candidates[c].client()) out.push_back(static_cast<int>(c));
  }
  return out;
}

}  // namespace

absl::Duration ReportWithin(int steps, absl::Duration candidate_timeout,
                            absl::Duration report_grace) {
  return report_grace + steps * candidate_timeout;
}

absl::Duration FirstCallWithin(absl::Duration candidate_timeout, absl::Duration report_grace) {
  return ReportWithin(1, candidate_timeout, report_grace);
}

ClientRuns::ClientRuns(Solver* solver, Engine* engine, metrics::DaemonMetrics* metrics,
                       const ClientRunsOptions& options)
    : solver_(solver), engine_(engine), metrics_(metrics), options_(options) {}

std::optional<v1::TuneResponse> ClientRuns::Start(const ValidRequest& request,
                                                  const std::string& round_id,
                                                  absl::Time round_deadline,
                                                  absl::Duration rendezvous,
                                                  const std::function<bool()>& abandoned) {
  RunPlan plan;
  plan.request = std::make_shared<const ValidRequest>(request);
  plan.answer = solver_->NewResponse(round_id);
  std::vector<bool> hit(request.problems.size(), false);
  int steps = 0;
  for (size_t i = 0; i < request.problems.size(); ++i) {
    const ValidProblem& p = request.problems[i];
    std::optional<v1::ProblemResult> cached = solver_->Cached(p, request);
    hit[i] = cached.has_value();
    *plan.answer.add_results() =
        cached ? *std::move(cached)
               : FallbackResult(p, CacheKeyDigest(solver_->KeyText(p, request)));
    if (!hit[i] && p.has_client()) {
      plan.problems.push_back(static_cast<int>(i));
      steps += static_cast<int>(ClientPositions(p).size()) * FixedPasses(request.engine);
    }
  }
  if (plan.problems.empty()) return std::nullopt;
  const absl::Duration within = ReportWithin(steps, request.engine.timeout, options_.report_grace);
  absl::StatusOr<DeviceLease::Token> lease =
      engine_->lease().Acquire(round_deadline, round_deadline + within, abandoned);
  auto not_measured = [&](absl::string_view why) {
    v1::TuneResponse busy = plan.answer;
    for (int i = 0; i < busy.results_size(); ++i) {
      if (hit[i]) continue;
      busy.mutable_results(i)->set_reason(absl::StrCat("not measured: ", why));
    }
    return busy;
  };
  if (!lease.ok()) return not_measured(lease.status().message());
  EngineOptions options = request.engine;
  options.abandoned = abandoned;
  for (size_t i = 0; i < request.problems.size(); ++i) {
    const ValidProblem& p = request.problems[i];
    if (hit[i]) continue;
    metrics_->rendezvous_latency->Observe(absl::ToDoubleSeconds(rendezvous));
    std::vector<CandidateOutcome> catalogue =
        engine_->Measure(p.spec, p.candidates, options, &*lease);
    if (abandoned && abandoned()) return not_measured("every rank's caller went away");
    if (p.has_client()) {
      plan.catalogue.push_back(std::move(catalogue));
    } else {
      *plan.answer.mutable_results(i) = solver_->Measured(p, request, catalogue, true);
    }
  }
  v1::ClientRun schedule = Schedule(plan);
  const absl::Time opened = absl::Now();
  const absl::Time first_call_by =
      opened + FirstCallWithin(request.engine.timeout, options_.report_grace);
  v1::TuneResponse answer = solver_->NewResponse(round_id);
  *answer.mutable_run() = schedule;
  Keep(std::make_shared<Run>(std::move(schedule), std::move(plan), *std::move(lease), opened,
                             first_call_by, options_.report_grace, solver_, metrics_));
  metrics_->runs_opened->Increment();
  spdlog::info("run={} group={} opened: {} steps, report within {} ms", answer.run().run_id(),
               absl::CEscape(request.group_id), answer.run().steps_size(),
               answer.run().report_within_ms());
  return answer;
}

v1::ClientRun ClientRuns::Schedule(const RunPlan& plan) const {
  const ValidRequest& request = *plan.request;
  const int passes = FixedPasses(request.engine);
  v1::ClientRun run;
  run.set_run_id(NewRunId());
  for (int p : plan.problems) {
    const std::vector<int> client = ClientPositions(request.problems[p]);
    for (int pass = 0; pass < passes; ++pass) {
      for (int c : PassOrder(client, pass)) {
        v1::ClientStep* step = run.add_steps();
        step->set_problem(p);
        step->set_candidate(c);
        step->set_reference(client.front());
        step->set_pass(pass);
      }
    }
  }
  run.set_warmup(request.engine.schedule.warmup);
  // One count for every step, so that a client that just follows the steps
  // times every pass alike.
  const int iterations = request.engine.schedule.iterations;
  run.set_iterations(std::max(1, (iterations + passes - 1) / passes));
  run.set_timing_mode(static_cast<v1::TimingMode>(request.timing_mode()));
  run.set_candidate_timeout_ms(absl::ToInt64Milliseconds(request.engine.timeout));
  run.set_report_within_ms(absl::ToInt64Milliseconds(
      ReportWithin(run.steps_size(), request.engine.timeout, options_.report_grace)));
  return run;
}

void ClientRuns::Keep(std::shared_ptr<Run> run) {
  absl::MutexLock lock(&mu_);
  Expire(absl::Now());
  const std::string id = run->schedule().run_id();
  uncalled_.emplace(run->first_call_by(), id);
  runs_[id] = std::move(run);
  order_.push_back(id);
  while (static_cast<int>(runs_.size()) > options_.max_runs_kept && !order_.empty()) {
    runs_.erase(order_.front());
    order_.pop_front();
  }
  Trim(0);
}

void ClientRuns::Trim(int64_t room) {
  int64_t total = 0;
  for (const auto& [id, run] : runs_) total += run->bytes();
  for (const bool decided : {true, false}) {
    for (auto id = order_.begin(); id != order_.end() && total + room > options_.max_kept_bytes;) {
      auto it = runs_.find(*id);
      if (it == runs_.end()) {
        id = order_.erase(id);
        continue;
      }
      if (it->second->decided_at().has_value() != decided) {
        ++id;
        continue;
      }
      spdlog::warn("run={}: forgotten {}: the runs kept hold {} bytes, over "
                   "rendezvous.max_kept_bytes = {}",
                   *id, decided ? "after its decision" : "undecided", total + room,
                   options_.max_kept_bytes);
      total -= it->second->bytes();
      runs_.erase(it);
      id = order_.erase(id);
    }
  }
}

void ClientRuns::Expire(absl::Time now) {
  while (!uncalled_.empty() && now >= uncalled_.begin()->first) {
    auto it = runs_.find(uncalled_.begin()->second);
    if (it != runs_.end() && it->second->Idle(now)) ForgetIdle(it);
    uncalled_.erase(uncalled_.begin());
  }
  while (!order_.empty()) {
    auto it = runs_.find(order_.front());
    if (it != runs_.end()) {
      const std::optional<absl::Time> decided = it->second->decided_at();
      const absl::Time since = decided ? *decided : it->second->bound();
      if (now < since + options_.decision_ttl) break;
      runs_.erase(it);
    }
    order_.pop_front();
  }
}

void ClientRuns::ForgetIdle(absl::flat_hash_map<std::string, std::shared_ptr<Run>>::iterator it) {
  const absl::Duration within = FirstCallWithin(
      absl::Milliseconds(it->second->schedule().candidate_timeout_ms()), options_.report_grace);
  spdlog::warn("run={}: forgotten undecided: no rank called it (RunStep, Report) within {} ms "
               "of its opening; its hold of the devices ended then",
               it->first, absl::ToInt64Milliseconds(within));
  runs_.erase(it);
}

absl::StatusOr<std::shared_ptr<Run>> ClientRuns::Find(const std::string& run_id,
                                                      bool rank_call) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  Expire(now);
  auto it = runs_.find(run_id);
  if (it != runs_.end() && rank_call && !it->second->Called(now)) {
    ForgetIdle(it);
    it = runs_.end();
  }
  if (it == runs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run \"", absl::CEscape(run_id),
                     "\" is unknown to this daemon (forgotten, or opened before a restart)"));
  }
  return it->second;
}

void ClientRuns::Attach(const std::string& run_id, int rank,
                        std::shared_ptr<const ValidRequest> request) {
  absl::StatusOr<std::shared_ptr<Run>> run = Find(run_id, false);
  if (run.ok()) (*run)->Attach(rank, std::move(request));
}

absl::StatusOr<v1::StepReply> ClientRuns::Step(const v1::StepRequest& request,
                                               absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Run>> run = Find(request.run_id(), true);
  if (!run.ok()) return run.status();
  {
    // Room for what the barrier may keep (its sender knows the run's id).
    absl::MutexLock lock(&mu_);
    Trim((*run)->MostStepBytes(request));
  }
  return (*run)->Step(request, deadline);
}

absl::StatusOr<v1::TuneResponse> ClientRuns::Report(const v1::RunReport& report,
                                                    absl::Time deadline) {
  absl::StatusOr<std::shared_ptr<Run>> run = Find(report.run_id(), true);
  if (!run.ok()) return run.status();
  {
    // Room for this report among the kept runs' bytes first (its sender
    // knows the run's id: one of its ranks).
    absl::MutexLock lock(&mu_);
    Trim(static_cast<int64_t>(report.ByteSizeLong()));
  }
  return (*run)->Report(report, deadline);
}

int64_t ClientRuns::kept_bytes() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [id, run] : runs_) total += run->bytes();
  return total;
}

int ClientRuns::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(runs_.size());
}

}  // namespace autotuned::clientrun
