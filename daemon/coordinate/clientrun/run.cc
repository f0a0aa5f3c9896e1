#include "daemon/coordinate/clientrun/run.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/escape.h"
#include "daemon/coordinate/request/labels.h"

namespace autotuned::clientrun {
namespace {

constexpr char kAlreadyDecided[] = "the run was already decided";

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

int64_t RequestBytes(const ValidRequest& request) {
  int64_t bytes = sizeof(ValidRequest) + request.group_id.size() + request.members_text.size();
  for (const ValidProblem& p : request.problems) {
    bytes += sizeof(ValidProblem) + static_cast<int64_t>(p.canonical.ByteSizeLong()) +
             static_cast<int64_t>(p.candidates.size() * sizeof(CandidateSpec));
  }
  return bytes;
}

const char* PhaseName(int phase) {
  return phase == v1::VERIFIED ? "verified" : phase == v1::WARMED_UP ? "warmed up" : "?";
}

Run::Run(v1::ClientRun schedule, RunPlan plan, DeviceLease::Token lease, absl::Time opened,
         absl::Time first_call_by, absl::Duration report_grace, Solver* solver,
         metrics::DaemonMetrics* metrics)
    : schedule_(std::move(schedule)),
      plan_(std::move(plan)),
      world_size_(plan_.request->world_size),
      candidate_timeout_(absl::Milliseconds(schedule_.candidate_timeout_ms())),
      report_grace_(report_grace),
      kept_silent_(2 * candidate_timeout_ + report_grace),
      first_call_by_(first_call_by),
      solver_(solver),
      metrics_(metrics),
      lease_(std::move(lease)),
      steps_(schedule_.steps().begin(), schedule_.steps().end()),
      continuations_(1),
      bound_(opened + absl::Milliseconds(schedule_.report_within_ms())),
      missed_(world_size_, false),
      rank_requests_(world_size_) {
  lease_.HoldUntil(first_call_by_);
  Segment first;
  first.end = schedule_.steps_size();
  first.iterations = schedule_.iterations();
  first.report_within_ms = schedule_.report_within_ms();
  first.bound = bound_;
  first.reports.resize(world_size_);
  segments_.push_back(std::move(first));
  int64_t bytes = sizeof(Run) + static_cast<int64_t>(schedule_.ByteSizeLong()) +
                  static_cast<int64_t>(plan_.answer.ByteSizeLong()) +
                  RequestBytes(*plan_.request);
  for (const std::vector<CandidateOutcome>& outcomes : plan_.catalogue) {
    bytes += static_cast<int64_t>(outcomes.size() * sizeof(CandidateOutcome));
  }
  bytes_ = bytes;
}

absl::Time Run::bound() const {
  absl::MutexLock lock(&mu_);
  return bound_;
}

absl::Time Run::HoldBound(absl::Time now) const {
  return std::min(bound_, now + kept_silent_);
}

bool Run::Called(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (called_) {
    // Every call keeps the devices held a while longer: ranks that all
    // stopped calling (dead, or stuck in a candidate) free them well
    // before the schedule's bound. A run whose hold lapsed and was taken
    // goes on unheld: its ranks were all silent past any step's length.
    if (decision_ == nullptr && !lease_.HoldUntil(HoldBound(now))) {
      spdlog::warn("run={}: a rank called after every rank was silent for {} ms; the devices "
                   "were taken by another measurement meanwhile",
                   schedule_.run_id(),
                   absl::ToInt64Milliseconds(kept_silent_));
    }
    return true;
  }
  if (now >= first_call_by_ || !lease_.HoldUntil(HoldBound(now))) return false;
  called_ = true;
  return true;
}

bool Run::Idle(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return !called_ && now >= first_call_by_;
}

void Run::Attach(int rank, std::shared_ptr<const ValidRequest> request) {
  absl::MutexLock lock(&mu_);
  if (rank < 0 || rank >= world_size_ || request == nullptr) return;
  // A rank's own request (another object than the plan's): counted.
  if (request != plan_.request) bytes_ += RequestBytes(*request);
  if (rank_requests_[rank] != nullptr && rank_requests_[rank] != plan_.request) {
    bytes_ -= RequestBytes(*rank_requests_[rank]);
  }
  rank_requests_[rank] = std::move(request);
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

absl::StatusOr<int> Run::CheckReport(const v1::RunReport& report) const {
  int k = 0;
  while (k < static_cast<int>(segments_.size()) && segments_[k].first != report.first_step()) ++k;
  if (k == static_cast<int>(segments_.size())) {
    std::string firsts;
    for (const Segment& s : segments_)
      absl::StrAppend(&firsts, firsts.empty() ? "" : ", ", s.first);
    return Invalid("first_step",
                   absl::StrCat("run \"", schedule_.run_id(), "\" has no schedule from step ",
                                report.first_step(), " (its schedules start at ", firsts, ")"));
  }
  const Segment& seg = segments_[k];
  const int steps = seg.end - seg.first;
  if (report.steps_size() != steps) {
    return Invalid("steps", absl::StrCat("run \"", schedule_.run_id(), "\" has ", steps, " steps",
                                         k == 0 ? "" : absl::StrCat(" from step ", seg.first),
                                         ", got ", report.steps_size()));
  }
  // No time the schedule's ranks measure lasts longer than the schedule may
  // (a report later than that is not used): a longer one is not a time.
  const double bound_us = 1e3 * static_cast<double>(seg.report_within_ms);
  auto too_long = [&](const std::string& field, double us) {
    return Invalid(field, absl::StrCat(us, " us is longer than the schedule's bound of ",
                                       seg.report_within_ms, " ms (report_within_ms)"));
  };
  for (int i = 0; i < report.steps_size(); ++i) {
    const v1::StepTimes& s = report.steps(i);
    if (s.ok() && s.times_us_size() != seg.iterations) {
      return Invalid(absl::StrCat("steps[", i, "].times_us"),
                     absl::StrCat("the run times ", seg.iterations, " iterations, got ",
                                  s.times_us_size(), " times"));
    }
    for (int t = 0; t < s.times_us_size(); ++t) {
      if (s.times_us(t) > bound_us) {
        return too_long(absl::StrCat("steps[", i, "].times_us[", t, "]"), s.times_us(t));
      }
    }
    if (s.host_us() > bound_us) {
      return too_long(absl::StrCat("steps[", i, "].host_us"), s.host_us());
    }
  }
  return k;
}

int Run::SegmentOf(int step) const {
  int k = static_cast<int>(segments_.size()) - 1;
  while (k > 0 && step < segments_[k].first) --k;
  return k;
}

const v1::StepTimes& Run::TimesOf(int rank, int step) const {
  const Segment& seg = segments_[SegmentOf(step)];
  return seg.reports[rank]->steps(step - seg.first);
}

int64_t Run::BarrierOverhead() const {
  // The map's node and the barrier's own allocation, besides.
  return 96 + static_cast<int64_t>(sizeof(Barrier)) +
         int64_t{world_size_} * static_cast<int64_t>(sizeof(std::optional<Arrived>));
}

std::shared_ptr<Run::Barrier> Run::BarrierOf(int step, int phase) {
  std::shared_ptr<Barrier>& b = barriers_[{step, phase}];
  if (b == nullptr) {
    b = std::make_shared<Barrier>();
    b->ranks.resize(world_size_);
    KeepBarrierBytes(BarrierOverhead());
  }
  return b;
}

void Run::KeepBarrierBytes(int64_t n) {
  barrier_bytes_ += n;
  bytes_ += n;
}

int64_t Run::MostStepBytes(const v1::StepRequest& request) const {
  // The answer's reason is at most "rank R: " and a rank's reason.
  return BarrierOverhead() + 2 * static_cast<int64_t>(request.reason().size()) + 32;
}

void Run::DecideBarrier(Barrier& barrier, bool proceed, std::string reason) {
  KeepBarrierBytes(static_cast<int64_t>(reason.size()));
  barrier.decided = true;
  barrier.reply.set_proceed(proceed);
  barrier.reply.set_reason(std::move(reason));
}

void Run::DecideArrived(Barrier& barrier) {
  std::string note;  // the lowest rank's note, when every rank is ok
  for (int r = 0; r < world_size_; ++r) {
    const Arrived& a = *barrier.ranks[r];
    if (!a.ok) {
      DecideBarrier(barrier, false,
                    absl::StrCat("rank ", r, ": ", a.reason.empty() ? "failed" : a.reason));
      return;
    }
    if (note.empty() && !a.reason.empty()) note = absl::StrCat("rank ", r, ": ", a.reason);
  }
  DecideBarrier(barrier, true, std::move(note));
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
    lost_in_ = SegmentOf(step);
    spdlog::warn("run={} group={}: {}; the rank is lost for the run", schedule_.run_id(),
                 absl::CEscape(plan_.request->group_id), LogEscaped(reason));
  }
  DecideBarrier(barrier, false, reason);
}

absl::StatusOr<v1::StepReply> Run::Step(const v1::StepRequest& request, absl::Time deadline) {
  if (absl::Status s = CheckMember(request.group_id(), request.rank()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (request.step() >= static_cast<int>(steps_.size())) {
    return Invalid("step", absl::StrCat("run \"", schedule_.run_id(), "\" has ", steps_.size(),
                                        " steps, got ", request.step()));
  }
  if (decision_ != nullptr) {
    // The barriers were let go at the decision; nothing is kept for this one.
    v1::StepReply decided;
    decided.set_proceed(false);
    decided.set_reason(kAlreadyDecided);
    return decided;
  }
  const std::shared_ptr<Barrier> shared = BarrierOf(request.step(), request.phase());
  Barrier& b = *shared;
  const absl::Time now = absl::Now();
  if (!b.decided && !lost_.empty()) {
    DecideBarrier(b, false, lost_);
  } else if (!b.decided && now >= bound_) {
    DecideBarrier(b, false, "the run's bound passed");
  } else if (!b.decided && (request.phase() == v1::VERIFIED ||
                            barriers_.find({request.step(), v1::VERIFIED}) == barriers_.end())) {
    // A step's first barrier: VERIFIED, or WARMED_UP alone for a candidate
    // verified in an earlier pass (docs/protocol.md).
    std::string earlier = RuledOutBefore(request.step());
    if (!earlier.empty()) DecideBarrier(b, false, std::move(earlier));
  }
  if (b.decided) return b.reply;
  if (!b.ranks[request.rank()]) {
    b.ranks[request.rank()] = Arrived{request.ok(), request.reason()};
    KeepBarrierBytes(static_cast<int64_t>(request.reason().size()));
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
  // The run's decision decides every barrier still waiting (Decide).
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
  absl::MutexLock lock(&mu_);
  absl::StatusOr<int> checked = CheckReport(report);
  if (!checked.ok()) return checked.status();
  const int k = *checked;
  if (decision_ == nullptr && absl::Now() >= bound_) Decide();  // too late: without it
  if (decision_ != nullptr) return Answer(report.rank());
  Segment& seg = segments_[k];
  if (k + 1 < static_cast<int>(segments_.size()) || seg.reports[report.rank()]) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", report.rank(), " already reported for run \"", schedule_.run_id(),
                     "\"", k == 0 ? "" : absl::StrCat(" from step ", seg.first)));
  }
  seg.reports[report.rank()] = report;
  ++seg.reported;
  bytes_ += static_cast<int64_t>(report.ByteSizeLong());
  const absl::Time bound = seg.bound;  // Settle may move segments_
  // Every rank that is not lost: settled now, not at the bound; a lost
  // rank that reports later gets the decision.
  if (AllIn(k)) Settle();
  auto settled = [this, k]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return decision_ != nullptr || k + 1 < static_cast<int>(segments_.size());
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), std::min(bound, deadline));
  if (!settled() && absl::Now() >= bound) Decide();
  if (decision_ != nullptr) return Answer(report.rank());
  if (k + 1 < static_cast<int>(segments_.size())) return continuations_[k + 1];
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", report.rank(),
                   " waited for the other ranks' reports until its own "
                   "deadline (its report is counted)"));
}

bool Run::AllIn(int segment) const {
  for (int r = 0; r < world_size_; ++r) {
    if (!segments_[segment].reports[r] && !missed_[r]) return false;
  }
  return true;
}

bool Run::SameCandidate(int a, int b) const {
  return steps_[a].problem() == steps_[b].problem() &&
         steps_[a].candidate() == steps_[b].candidate();
}

std::string Run::RuledOutBefore(int step) const {
  for (int earlier = 0; earlier < step; ++earlier) {
    if (!SameCandidate(earlier, step)) continue;
    for (int phase : {v1::VERIFIED, v1::WARMED_UP}) {
      auto it = barriers_.find({earlier, phase});
      if (it != barriers_.end() && it->second->decided && !it->second->reply.proceed()) {
        return absl::StrCat("ruled out in pass ", steps_[earlier].pass(), ": ",
                            it->second->reply.reason());
      }
    }
  }
  return "";
}

std::optional<CandidateOutcome> Run::StepFailure(int step,
                                                 std::vector<RankOutcome>* ranks) const {
  const v1::ClientStep& s = steps_[step];
  const CandidateSpec& candidate =
      plan_.request->problems[s.problem()].candidates[s.candidate()];
  for (int phase : {v1::VERIFIED, v1::WARMED_UP}) {
    auto it = barriers_.find({step, phase});
    if (it != barriers_.end() && it->second->decided && !it->second->reply.proceed()) {
      return RuledOut(s.candidate(), candidate, it->second->reply.reason());
    }
  }
  const Segment& seg = segments_[SegmentOf(step)];
  for (int r = 0; r < world_size_; ++r) {
    if (!seg.reports[r]) {
      // A rank lost at a later barrier: why it never reported.
      return RuledOut(s.candidate(), candidate,
                      missed_[r] && !lost_.empty()
                          ? absl::StrCat("rank ", r, " sent no report (lost for the run: ",
                                         lost_, ")")
                          : absl::StrCat("rank ", r, " sent no report within ",
                                         seg.report_within_ms, " ms"));
    }
  }
  for (int r = 0; r < world_size_; ++r) {
    const v1::StepTimes& t = TimesOf(r, step);
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
  if (warmed == barriers_.end() || !warmed->second->decided) {
    return RuledOut(s.candidate(), candidate, "the ranks did not pass the step's barriers");
  }
  for (int r = 0; r < world_size_; ++r) {
    const v1::StepTimes& t = TimesOf(r, step);
    std::vector<double>& into = (*ranks)[r].iteration_us;
    into.insert(into.end(), t.times_us().begin(), t.times_us().end());
  }
  return std::nullopt;
}

void Run::TimingOf(int first_step, int end, CandidateOutcome* out) const {
  bool event_loop = schedule_.timing_mode() != v1::CUDA_GRAPH;
  double host_us = 0;
  for (int r = 0; r < world_size_; ++r) {
    std::vector<double> host;
    for (int step = first_step; step < end; ++step) {
      if (!SameCandidate(step, first_step)) continue;
      const v1::StepTimes& t = TimesOf(r, step);
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

CandidateOutcome Run::CandidateOutcomeOf(int first_step, int end) const {
  const v1::ClientStep& s = steps_[first_step];
  std::vector<RankOutcome> ranks(world_size_);
  std::vector<int> pass_sizes;
  std::vector<int> pass_ids;
  for (int step = first_step; step < end; ++step) {
    if (!SameCandidate(step, first_step)) continue;
    if (std::optional<CandidateOutcome> failed = StepFailure(step, &ranks)) {
      failed->passes = static_cast<int>(pass_sizes.size()) + 1;
      return *std::move(failed);
    }
    pass_sizes.push_back(segments_[SegmentOf(step)].iterations);
    pass_ids.push_back(steps_[step].pass());
  }
  CandidateOutcome out =
      Summarize(s.candidate(), plan_.request->problems[s.problem()].candidates[s.candidate()],
                ranks, pass_sizes, pass_ids);
  out.passes = static_cast<int>(pass_sizes.size());
  TimingOf(first_step, end, &out);
  return out;
}

std::vector<CandidateOutcome> Run::Ranked(size_t i, int end) const {
  const int p = plan_.problems[i];
  std::vector<CandidateOutcome> outcomes = plan_.catalogue[i];
  std::set<int> done;  // client candidates of the problem
  for (int step = 0; step < end; ++step) {
    const v1::ClientStep& s = steps_[step];
    if (s.problem() != p || !done.insert(s.candidate()).second) continue;
    outcomes.push_back(CandidateOutcomeOf(step, end));
  }
  return Rank(std::move(outcomes), plan_.request->engine.rule);
}

std::optional<v1::ClientRun> Run::Continuation() const {
  const Segment& last = segments_.back();
  if (!lost_.empty() || last.reported < world_size_) return std::nullopt;
  for (const std::optional<v1::RunReport>& r : last.reports) {
    if (!r->continues()) return std::nullopt;  // a client that cannot continue
  }
  const EngineOptions& engine = plan_.request->engine;
  const PassOptions& passes = engine.passes;
  const int pass = FixedPasses(engine) + static_cast<int>(segments_.size()) - 1;
  if (pass >= passes.max_passes) return std::nullopt;
  // Each problem has the engine's budget for its later passes (checked
  // before each, the first included); they run side by side here.
  const absl::Duration spent =
      continued_at_ == absl::InfiniteFuture() ? absl::ZeroDuration() : absl::Now() - continued_at_;
  if (spent >= passes.budget * static_cast<int64_t>(plan_.problems.size())) {
    return std::nullopt;
  }
  v1::ClientRun next;
  next.set_run_id(schedule_.run_id());
  next.set_first_step(static_cast<int>(steps_.size()));
  for (size_t i = 0; i < plan_.problems.size(); ++i) {
    const int p = plan_.problems[i];
    const std::vector<CandidateOutcome> ranked = Ranked(i, static_cast<int>(steps_.size()));
    const std::vector<int> contenders = Contenders(ranked, engine.rule);
    // The client contenders run the pass; it is worth running when it pairs
    // two contenders (a catalogue contender pairs by pass id only where the
    // engine ran that pass) and none would pass the iteration cap.
    std::vector<int> client;
    int paired = 0;
    bool room = true;
    for (const CandidateOutcome& o : ranked) {
      if (std::find(contenders.begin(), contenders.end(), o.index) == contenders.end()) continue;
      if (o.candidate.client()) {
        client.push_back(o.index);
        ++paired;
        room &= o.iterations + passes.iterations <= passes.max_iterations;
      } else if (pass < static_cast<int>(o.pass_median_us.size()) &&
                 !std::isnan(o.pass_median_us[pass])) {
        ++paired;
      }
    }
    if (client.empty() || paired < 2 || !room) continue;
    std::sort(client.begin(), client.end());
    int reference = client.front();
    for (const v1::ClientStep& s : steps_) {
      if (s.problem() == p) {
        reference = s.reference();
        break;
      }
    }
    for (int c : PassOrder(client, pass)) {
      v1::ClientStep* step = next.add_steps();
      step->set_problem(p);
      step->set_candidate(c);
      step->set_reference(reference);
      step->set_pass(pass);
    }
  }
  if (next.steps_size() == 0) return std::nullopt;
  next.set_warmup(passes.warmup);
  next.set_iterations(passes.iterations);
  next.set_timing_mode(schedule_.timing_mode());
  next.set_candidate_timeout_ms(schedule_.candidate_timeout_ms());
  next.set_report_within_ms(
      absl::ToInt64Milliseconds(report_grace_ + next.steps_size() * candidate_timeout_));
  return next;
}

void Run::Settle() {
  std::optional<v1::ClientRun> next = Continuation();
  if (!next) return Decide();
  const absl::Time now = absl::Now();
  if (continued_at_ == absl::InfiniteFuture()) continued_at_ = now;
  Segment seg;
  seg.first = next->first_step();
  seg.end = seg.first + next->steps_size();
  seg.iterations = next->iterations();
  seg.report_within_ms = next->report_within_ms();
  seg.bound = now + absl::Milliseconds(seg.report_within_ms);
  seg.reports.resize(world_size_);
  steps_.insert(steps_.end(), next->steps().begin(), next->steps().end());
  bound_ = seg.bound;
  lease_.HoldUntil(HoldBound(now));
  segments_.push_back(std::move(seg));
  v1::TuneResponse answer = plan_.answer;
  answer.clear_results();
  *answer.mutable_run() = *std::move(next);
  spdlog::info("run={} group={} continued: pass {}, {} steps, report within {} ms",
               schedule_.run_id(), absl::CEscape(plan_.request->group_id),
               answer.run().steps(0).pass(), answer.run().steps_size(),
               answer.run().report_within_ms());
  bytes_ += static_cast<int64_t>(2 * answer.ByteSizeLong());  // and its steps
  continuations_.push_back(std::move(answer));
}

void Run::Decide() {
  // The schedules every rank completed: the first one always (its missing
  // reports rule the client candidates out), a continuation when every rank
  // reported it and none was lost during it.
  int used = 1;
  while (used < static_cast<int>(segments_.size()) && segments_[used].reported == world_size_ &&
         lost_in_ != used) {
    ++used;
  }
  const int end = segments_[used - 1].end;
  const bool everyone =
      segments_[0].reported == world_size_ && used == static_cast<int>(segments_.size());
  v1::TuneResponse answer = plan_.answer;
  int ruled_out = 0;
  int client = 0;
  for (size_t i = 0; i < plan_.problems.size(); ++i) {
    const int p = plan_.problems[i];
    std::vector<CandidateOutcome> ranked = Ranked(i, end);
    for (const CandidateOutcome& o : ranked) {
      if (!o.candidate.client()) continue;
      ++client;
      ruled_out += o.ok ? 0 : 1;
    }
    *answer.mutable_results(p) =
        solver_->Measured(plan_.request->problems[p], *plan_.request, ranked, everyone);
  }
  decision_ = std::make_shared<const v1::TuneResponse>(std::move(answer));
  decided_at_ = absl::Now();
  lease_.Release();
  // The barriers are no longer read: a rank still waiting at one gets the
  // answer every barrier of a decided run gets.
  for (auto& [key, barrier] : barriers_) {
    if (!barrier->decided) DecideBarrier(*barrier, false, kAlreadyDecided);
  }
  barriers_.clear();
  bytes_ -= barrier_bytes_;
  barrier_bytes_ = 0;
  // The reports are no longer read (a late report is checked against its
  // schedule's steps alone, then answered the decision).
  for (Segment& seg : segments_) {
    for (std::optional<v1::RunReport>& r : seg.reports) {
      if (r) bytes_ -= static_cast<int64_t>(r->ByteSizeLong());
      r.reset();
    }
  }
  bytes_ += static_cast<int64_t>(decision_->ByteSizeLong());
  metrics_->runs_decided->Increment();
  metrics_->client_candidates_ruled_out->Increment(ruled_out);
  spdlog::info(
      "run={} group={} decided: {} of {} ranks reported, {} of {} client "
      "candidates ruled out, {} of {} schedules used{}",
      schedule_.run_id(), absl::CEscape(plan_.request->group_id), segments_.back().reported,
      world_size_, ruled_out, client, used, segments_.size(), everyone ? "" : " (nothing stored)");
}

v1::TuneResponse Run::Answer(int rank) const {
  v1::TuneResponse out = *decision_;
  const ValidRequest* own = rank_requests_[rank] ? rank_requests_[rank].get() : nullptr;
  RestoreLabels(own != nullptr ? *own : *plan_.request, &out);
  return out;
}

}  // namespace autotuned::clientrun
