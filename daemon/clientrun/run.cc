#include "daemon/clientrun/run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/escape.h"

namespace autotuned::clientrun {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

CandidateOutcome RuledOut(int index, const CandidateSpec& candidate, std::string reason) {
  CandidateOutcome out;
  out.index = index;
  out.candidate = candidate;
  out.reason = std::move(reason);
  out.stats = ComputeStats({});
  return out;
}

}  // namespace

const char* PhaseName(int phase) {
  return phase == v1::VERIFIED ? "verified" : phase == v1::WARMED_UP ? "warmed up" : "?";
}

Run::Run(v1::ClientRun schedule, RunPlan plan, DeviceLease::Token lease, absl::Time opened,
         Solver* solver, metrics::DaemonMetrics* metrics)
    : schedule_(std::move(schedule)),
      plan_(std::move(plan)),
      world_size_(plan_.request->world_size),
      candidate_timeout_(absl::Milliseconds(schedule_.candidate_timeout_ms())),
      bound_(opened + absl::Milliseconds(schedule_.report_within_ms())),
      solver_(solver),
      metrics_(metrics),
      lease_(std::move(lease)),
      reports_(world_size_),
      missed_(world_size_, false),
      rank_requests_(world_size_) {}

void Run::Attach(int rank, std::shared_ptr<const ValidRequest> request) {
  absl::MutexLock lock(&mu_);
  if (rank >= 0 && rank < world_size_) rank_requests_[rank] = std::move(request);
}

std::optional<absl::Time> Run::decided_at() const {
  absl::MutexLock lock(&mu_);
  if (decision_ == nullptr) return std::nullopt;
  return decided_at_;
}

absl::Status Run::CheckMember(const std::string& group_id, int rank) const {
  if (group_id != plan_.request->group_id) {
    return Invalid("group_id", absl::StrCat("run \"", schedule_.run_id(),
                                            "\" belongs to another group, not \"",
                                            absl::CEscape(group_id), "\""));
  }
  if (rank >= world_size_) {
    return Invalid("rank", absl::StrCat("must be in [0, ", world_size_, ") for run \"",
                                        schedule_.run_id(), "\", got ", rank));
  }
  return absl::OkStatus();
}

absl::Status Run::CheckReport(const v1::RunReport& report) const {
  if (report.steps_size() != schedule_.steps_size()) {
    return Invalid("steps", absl::StrCat("run \"", schedule_.run_id(), "\" has ",
                                         schedule_.steps_size(), " steps, got ",
                                         report.steps_size()));
  }
  for (int i = 0; i < report.steps_size(); ++i) {
    const v1::StepTimes& s = report.steps(i);
    if (s.ok() && s.times_us_size() != schedule_.iterations()) {
      return Invalid(absl::StrCat("steps[", i, "].times_us"),
                     absl::StrCat("the run times ", schedule_.iterations(),
                                  " iterations, got ", s.times_us_size(), " times"));
    }
  }
  return absl::OkStatus();
}

Run::Barrier& Run::BarrierOf(int step, int phase) {
  Barrier& b = barriers_[{step, phase}];
  if (b.ranks.empty()) b.ranks.resize(world_size_);
  return b;
}

void Run::DecideBarrier(Barrier& barrier, bool proceed, std::string reason) {
  barrier.decided = true;
  barrier.reply.set_proceed(proceed);
  barrier.reply.set_reason(std::move(reason));
}

void Run::DecideArrived(Barrier& barrier) {
  for (int r = 0; r < world_size_; ++r) {
    const Arrived& a = *barrier.ranks[r];
    if (!a.ok) {
      DecideBarrier(barrier, false,
                    absl::StrCat("rank ", r, ": ", a.reason.empty() ? "failed" : a.reason));
      return;
    }
  }
  DecideBarrier(barrier, true, "");
}

void Run::DecideMissing(Barrier& barrier, int step, int phase) {
  std::string reason;
  for (int r = 0; r < world_size_; ++r) {
    if (barrier.ranks[r]) continue;
    missed_[r] = true;
    if (reason.empty()) {
      reason = absl::StrCat("rank ", r, " did not reach step ", step, " (", PhaseName(phase),
                            ") within ", absl::ToInt64Milliseconds(candidate_timeout_), " ms");
    }
  }
  if (lost_.empty()) {
    lost_ = reason;
    spdlog::warn("run={} group={}: {}; the rank is lost for the run", schedule_.run_id(),
                 absl::CEscape(plan_.request->group_id), LogEscaped(reason));
  }
  DecideBarrier(barrier, false, reason);
}

absl::StatusOr<v1::StepReply> Run::Step(const v1::StepRequest& request, absl::Time deadline) {
  if (absl::Status s = CheckMember(request.group_id(), request.rank()); !s.ok()) return s;
  if (request.step() >= schedule_.steps_size()) {
    return Invalid("step", absl::StrCat("run \"", schedule_.run_id(), "\" has ",
                                        schedule_.steps_size(), " steps, got ",
                                        request.step()));
  }
  absl::MutexLock lock(&mu_);
  Barrier& b = BarrierOf(request.step(), request.phase());
  const absl::Time now = absl::Now();
  if (!b.decided && decision_ != nullptr) {
    DecideBarrier(b, false, "the run was already decided");
  } else if (!b.decided && !lost_.empty()) {
    DecideBarrier(b, false, lost_);
  } else if (!b.decided && now >= bound_) {
    DecideBarrier(b, false, "the run's bound passed");
  } else if (!b.decided && request.phase() == v1::VERIFIED) {
    std::string earlier = RuledOutBefore(request.step());
    if (!earlier.empty()) DecideBarrier(b, false, std::move(earlier));
  }
  if (b.decided) return b.reply;
  if (!b.ranks[request.rank()]) {
    b.ranks[request.rank()] = Arrived{request.ok(), request.reason()};
    if (b.first == absl::InfiniteFuture()) b.first = now;
  }
  bool all = true;
  for (const auto& a : b.ranks) all = all && a.has_value();
  if (all) {
    DecideArrived(b);
    return b.reply;
  }
  const absl::Time barrier_bound = std::min(b.first + candidate_timeout_, bound_);
  mu_.AwaitWithDeadline(absl::Condition(&b.decided), std::min(barrier_bound, deadline));
  if (!b.decided && absl::Now() >= barrier_bound) {
    DecideMissing(b, request.step(), request.phase());
  }
  if (!b.decided) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", request.rank(), " waited at step ", request.step(), " (",
                     PhaseName(request.phase()), ") until its own deadline"));
  }
  return b.reply;
}

absl::StatusOr<v1::TuneResponse> Run::Report(const v1::RunReport& report,
                                             absl::Time deadline) {
  if (absl::Status s = CheckMember(report.group_id(), report.rank()); !s.ok()) return s;
  if (absl::Status s = CheckReport(report); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (decision_ == nullptr && absl::Now() >= bound_) Decide();  // too late: without it
  if (decision_ != nullptr) return Answer(report.rank());
  if (reports_[report.rank()]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", report.rank(), " already reported for run \"", schedule_.run_id(), "\""));
  }
  reports_[report.rank()] = report;
  ++reported_;
  if (AllIn()) {
    // Every rank that is not lost: decided now, not at the run's bound; a
    // lost rank that reports later gets this decision.
    Decide();
    return Answer(report.rank());
  }
  auto decided = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return decision_ != nullptr; };
  mu_.AwaitWithDeadline(absl::Condition(&decided), std::min(bound_, deadline));
  if (decision_ == nullptr && absl::Now() >= bound_) Decide();
  if (decision_ == nullptr) {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", report.rank(), " waited for the other ranks' reports until its own "
        "deadline (its report is counted)"));
  }
  return Answer(report.rank());
}

bool Run::AllIn() const {
  for (int r = 0; r < world_size_; ++r) {
    if (!reports_[r] && !missed_[r]) return false;
  }
  return true;
}

bool Run::SameCandidate(int a, int b) const {
  return schedule_.steps(a).problem() == schedule_.steps(b).problem() &&
         schedule_.steps(a).candidate() == schedule_.steps(b).candidate();
}

std::string Run::RuledOutBefore(int step) const {
  for (int earlier = 0; earlier < step; ++earlier) {
    if (!SameCandidate(earlier, step)) continue;
    for (int phase : {v1::VERIFIED, v1::WARMED_UP}) {
      auto it = barriers_.find({earlier, phase});
      if (it != barriers_.end() && it->second.decided && !it->second.reply.proceed()) {
        return absl::StrCat("ruled out in pass ", schedule_.steps(earlier).pass(), ": ",
                            it->second.reply.reason());
      }
    }
  }
  return "";
}

std::optional<CandidateOutcome> Run::StepFailure(int step,
                                                 std::vector<RankOutcome>* ranks) const {
  const v1::ClientStep& s = schedule_.steps(step);
  const CandidateSpec& candidate =
      plan_.request->problems[s.problem()].candidates[s.candidate()];
  for (int phase : {v1::VERIFIED, v1::WARMED_UP}) {
    auto it = barriers_.find({step, phase});
    if (it != barriers_.end() && it->second.decided && !it->second.reply.proceed()) {
      return RuledOut(s.candidate(), candidate, it->second.reply.reason());
    }
  }
  for (int r = 0; r < world_size_; ++r) {
    if (!reports_[r]) {
      return RuledOut(s.candidate(), candidate,
                      absl::StrCat("rank ", r, " sent no report within ",
                                   schedule_.report_within_ms(), " ms"));
    }
  }
  for (int r = 0; r < world_size_; ++r) {
    const v1::StepTimes& t = reports_[r]->steps(step);
    if (!t.ok()) {
      CandidateOutcome out = RuledOut(
          s.candidate(), candidate,
          absl::StrCat("rank ", r, ": ",
                       !t.reason().empty() ? t.reason()
                       : t.timed_out()
                           ? absl::StrCat("ran past the candidate timeout of ",
                                          schedule_.candidate_timeout_ms(), " ms")
                           : std::string("failed")));
      out.timed_out = t.timed_out();
      return out;
    }
  }
  auto warmed = barriers_.find({step, v1::WARMED_UP});
  if (warmed == barriers_.end() || !warmed->second.decided) {
    return RuledOut(s.candidate(), candidate, "the ranks did not pass the step's barriers");
  }
  for (int r = 0; r < world_size_; ++r) {
    const v1::StepTimes& t = reports_[r]->steps(step);
    std::vector<double>& into = (*ranks)[r].iteration_us;
    into.insert(into.end(), t.times_us().begin(), t.times_us().end());
  }
  return std::nullopt;
}

void Run::TimingOf(int first_step, CandidateOutcome* out) const {
  bool event_loop = schedule_.timing_mode() != v1::CUDA_GRAPH;
  double host_us = 0;
  for (int r = 0; r < world_size_; ++r) {
    std::vector<double> host;
    for (int step = first_step; step < schedule_.steps_size(); ++step) {
      if (!SameCandidate(step, first_step)) continue;
      const v1::StepTimes& t = reports_[r]->steps(step);
      event_loop |= t.timed_by() == v1::EVENT_LOOP;
      if (t.host_us() > 0 && std::isfinite(t.host_us())) host.push_back(t.host_us());
    }
    if (host.empty()) continue;
    std::nth_element(host.begin(), host.begin() + host.size() / 2, host.end());
    host_us = std::max(host_us, host[host.size() / 2]);
  }
  out->timed_by = event_loop ? v1::EVENT_LOOP : v1::CUDA_GRAPH;
  out->host_us = host_us;
}

CandidateOutcome Run::CandidateOutcomeOf(int first_step) const {
  const v1::ClientStep& s = schedule_.steps(first_step);
  std::vector<RankOutcome> ranks(world_size_);
  std::vector<int> pass_sizes;
  for (int step = first_step; step < schedule_.steps_size(); ++step) {
    if (!SameCandidate(step, first_step)) continue;
    if (std::optional<CandidateOutcome> failed = StepFailure(step, &ranks)) {
      failed->passes = static_cast<int>(pass_sizes.size()) + 1;
      return *std::move(failed);
    }
    pass_sizes.push_back(schedule_.iterations());
  }
  CandidateOutcome out =
      Summarize(s.candidate(), plan_.request->problems[s.problem()].candidates[s.candidate()],
                ranks, pass_sizes);
  out.passes = static_cast<int>(pass_sizes.size());
  TimingOf(first_step, &out);
  return out;
}

void Run::Decide() {
  v1::TuneResponse answer = plan_.answer;
  const bool everyone = reported_ == world_size_;
  int ruled_out = 0;
  int client = 0;
  for (size_t i = 0; i < plan_.problems.size(); ++i) {
    const int p = plan_.problems[i];
    std::vector<CandidateOutcome> outcomes = plan_.catalogue[i];
    std::set<int> done;  // client candidates of the problem
    for (int step = 0; step < schedule_.steps_size(); ++step) {
      const v1::ClientStep& s = schedule_.steps(step);
      if (s.problem() != p || !done.insert(s.candidate()).second) continue;
      outcomes.push_back(CandidateOutcomeOf(step));
      ruled_out += outcomes.back().ok ? 0 : 1;
      ++client;
    }
    *answer.mutable_results(p) = solver_->Measured(plan_.request->problems[p], *plan_.request,
                                                   Rank(std::move(outcomes), plan_.request->engine.rule),
                                                   everyone);
  }
  decision_ = std::make_shared<const v1::TuneResponse>(std::move(answer));
  decided_at_ = absl::Now();
  lease_.Release();
  metrics_->runs_decided->Increment();
  metrics_->client_candidates_ruled_out->Increment(ruled_out);
  spdlog::info("run={} group={} decided: {} of {} ranks reported, {} of {} client "
               "candidates ruled out{}",
               schedule_.run_id(), absl::CEscape(plan_.request->group_id), reported_,
               world_size_, ruled_out, client,
               everyone ? "" : " (nothing stored)");
}

v1::TuneResponse Run::Answer(int rank) const {
  v1::TuneResponse out = *decision_;
  const ValidRequest* own = rank_requests_[rank] ? rank_requests_[rank].get() : nullptr;
  RestoreLabels(own != nullptr ? *own : *plan_.request, &out);
  return out;
}

}  // namespace autotuned::clientrun
