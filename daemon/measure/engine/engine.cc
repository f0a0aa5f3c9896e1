#include "daemon/measure/engine/engine.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

// One candidate's runs so far: every rank's samples of every pass, or the
// first failed pass.
struct Runs {
  std::vector<RankOutcome> ranks;
  std::vector<int> pass_sizes;  // the timed iterations of each pass, in order
  std::vector<int> pass_ids;    // the round's number of each of those passes
  int passes = 0;
  absl::Duration spent;
};

bool AllOk(const std::vector<RankOutcome>& ranks) {
  for (const RankOutcome& r : ranks) {
    if (!r.status.ok()) return false;
  }
  return !ranks.empty();
}

// Why a candidate whose outcome on `local_ranks` is `ranks` is not run
// again, as the other daemons' ranks get it: ABORTED, so that their outcome
// does not pass for a failure of their own (Summarize); OK to run it.
absl::Status NotAgain(const std::vector<RankOutcome>& ranks, const std::vector<int>& local_ranks) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    const absl::Status& s = ranks[i].status;
    if (s.ok()) continue;
    if (s.code() == absl::StatusCode::kAborted || i >= local_ranks.size()) return s;
    return absl::AbortedError(
        absl::StrCat("rank ", local_ranks[i], " failed in an earlier pass: ", s.message()));
  }
  return ranks.empty() ? absl::UnknownError("no rank reported") : absl::OkStatus();
}

// Whether `candidate` may run `problem` on `backend`: its catalogue entry
// supports it, and it fits the memory cap (`cap`, 0: none) per
// Backend::MemoryNeed.
absl::Status Runnable(const Backend& backend, const ProblemSpec& problem,
                      const CandidateSpec& candidate, int64_t cap) {
  absl::Status s = backend.catalogue().Supports(problem, candidate.impl, "candidate");
  if (!s.ok() || cap <= 0) return s;
  const int64_t need = backend.MemoryNeed(problem, candidate);
  if (need <= cap) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "candidate: needs ", need, " bytes, over the memory cap of ", cap,
      " bytes per GPU (limits.max_buffer_bytes, limits.gpu_memory_fraction)"));
}

void Add(Runs& runs, std::vector<RankOutcome> pass, absl::Duration spent, int pass_id) {
  ++runs.passes;
  runs.spent += spent;
  const int size = pass.empty() ? 0 : static_cast<int>(pass[0].iteration_us.size());
  if (runs.ranks.empty() || !AllOk(pass) || runs.ranks.size() != pass.size()) {
    runs.ranks = std::move(pass);
    runs.pass_sizes = {size};
    runs.pass_ids = {pass_id};
    return;
  }
  runs.pass_sizes.push_back(size);
  runs.pass_ids.push_back(pass_id);
  for (size_t r = 0; r < pass.size(); ++r) {
    std::vector<double>& into = runs.ranks[r].iteration_us;
    into.insert(into.end(), pass[r].iteration_us.begin(), pass[r].iteration_us.end());
  }
}

CandidateOutcome RuledOut(int index, const CandidateSpec& candidate, const absl::Status& why) {
  CandidateOutcome out;
  out.index = index;
  out.candidate = candidate;
  out.reason = std::string(why.message());
  out.stats = ComputeStats({});
  return out;
}

}  // namespace

int FixedPasses(const EngineOptions& options) {
  const PassOptions& passes = options.passes;
  return std::max(1, std::min({passes.min_passes, passes.max_passes,
                               options.schedule.iterations}));
}

int PassIterations(const EngineOptions& options, int pass) {
  const int fixed = FixedPasses(options);
  if (pass >= fixed) return options.passes.iterations;
  return options.schedule.iterations / fixed + (pass < options.schedule.iterations % fixed ? 1 : 0);
}

ScheduleOptions PassSchedule(const EngineOptions& options, int pass) {
  ScheduleOptions schedule = options.schedule;
  if (pass > 0) {
    schedule.verify = false;
    schedule.warmup = options.passes.warmup;
  }
  schedule.iterations = PassIterations(options, pass);
  return schedule;
}

std::vector<int> PassOrder(const std::vector<int>& positions, int pass) {
  std::vector<int> order = positions;
  if (!order.empty()) {
    std::rotate(order.begin(), order.begin() + pass % static_cast<int>(order.size()), order.end());
  }
  return order;
}

int TimedBy(const EngineOptions& options) {
  return options.schedule.cuda_graph ? v1::CUDA_GRAPH : v1::EVENT_LOOP;
}

std::vector<int> NextPass(const std::vector<CandidateOutcome>& ranked,
                          const EngineOptions& options) {
  std::vector<int> next = Contenders(ranked, options.rule);
  for (const CandidateOutcome& o : ranked) {
    const bool contends = std::find(next.begin(), next.end(), o.index) != next.end();
    if (contends && o.iterations + options.passes.iterations > options.passes.max_iterations) {
      return {};
    }
  }
  return next;
}

absl::Duration MeasureBound(const EngineOptions& options, int candidates) {
  const PassOptions& passes = options.passes;
  const int fixed = FixedPasses(options);
  const absl::Duration pass = candidates * options.timeout;
  return fixed * pass + (passes.max_passes > fixed ? pass + passes.budget : absl::ZeroDuration());
}

std::vector<CandidateOutcome> Engine::Measure(
    const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
    const EngineOptions& requested, const DeviceLease::Token* held) {
  EngineOptions options = requested;
  absl::StatusOr<DeviceLease::Token> own = DeviceLease::Token();
  if (held == nullptr) {
    own = lease_.Acquire(options.lease_deadline, absl::InfiniteFuture(), options.abandoned);
  }
  const absl::Time measuring_from = absl::Now();
  // Checked before each run: once no one waits, nothing more is run.
  bool abandoned = false;
  auto stop = [&] {
    abandoned = abandoned || (options.abandoned && options.abandoned());
    return abandoned;
  };
  std::vector<Runs> runs(candidates.size());
  std::vector<CandidateOutcome> refused;  // never run
  std::vector<int> working;               // request positions still working
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].client()) continue;
    const absl::Status supported =
        !own.ok() ? own.status()
                  : Runnable(*backend_, problem, candidates[i], options.memory_cap_bytes);
    if (supported.ok()) {
      working.push_back(static_cast<int>(i));
    } else {
      refused.push_back(RuledOut(static_cast<int>(i), candidates[i], supported));
    }
  }
  // One candidate has nothing to be compared with: one block. (Candidates
  // the ranks run are compared with these by pass, so they count.)
  const auto clients = std::count_if(candidates.begin(), candidates.end(),
                                     [](const CandidateSpec& c) { return c.client(); });
  if (working.size() + clients <= 1) options.passes.min_passes = options.passes.max_passes = 1;
  // Pass `pass` of the candidates at `positions` (in PassOrder).
  auto run_pass = [&](const std::vector<int>& positions, int pass) {
    const ScheduleOptions schedule = PassSchedule(options, pass);
    for (int i : PassOrder(positions, pass)) {
      if (pass > 0 && !AllOk(runs[i].ranks)) continue;  // ruled out earlier
      if (stop()) {
        if (runs[i].passes == 0) {
          Add(runs[i],
              {RankOutcome{absl::CancelledError("abandoned: every caller went away before "
                                                "it ran"),
                           {}}},
              absl::ZeroDuration(), pass);
        }
        continue;
      }
      const absl::Time start = absl::Now();
      std::vector<RankOutcome> ranks =
          backend_->RunCandidate(problem, candidates[i], schedule, start + options.timeout);
      Add(runs[i], std::move(ranks), absl::Now() - start, pass);
    }
  };
  const int fixed = FixedPasses(options);
  // Pass 0 always (a candidate not run is ruled out there), then while
  // someone waits.
  for (int pass = 0; pass < fixed && (pass == 0 || !stop()); ++pass) run_pass(working, pass);
  auto ranking = [&] {
    std::vector<CandidateOutcome> outcomes = refused;
    for (int i : working) {
      outcomes.push_back(Summarize(i, candidates[i], runs[i].ranks, runs[i].pass_sizes,
                                   runs[i].pass_ids));
      outcomes.back().passes = runs[i].passes;
      outcomes.back().measuring_us = absl::ToDoubleMicroseconds(runs[i].spent);
      outcomes.back().timed_by = TimedBy(options);
    }
    return Rank(std::move(outcomes), options.rule);
  };
  const absl::Time adaptive_start = absl::Now();
  for (int pass = fixed; pass < options.passes.max_passes && !stop(); ++pass) {
    if (absl::Now() - adaptive_start >= options.passes.budget) break;
    const std::vector<int> next = NextPass(ranking(), options);
    if (next.empty()) break;
    run_pass(next, pass);
  }
  if (own.ok() && !abandoned) Record(absl::Now() - measuring_from);
  return ranking();
}

void Engine::Record(absl::Duration took) {
  absl::MutexLock lock(&mu_);
  recent_.push_back(took);
  if (recent_.size() > static_cast<size_t>(kRecentMeasurements)) recent_.pop_front();
}

absl::Duration Engine::RecentMeasureTime() const {
  absl::MutexLock lock(&mu_);
  absl::Duration longest;
  for (absl::Duration d : recent_) longest = std::max(longest, d);
  return longest;
}

std::vector<std::vector<RankOutcome>> Engine::MeasurePart(
    const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
    const EngineOptions& options, const std::vector<int>& local_ranks,
    const std::string& backend_token, int passes, const PartTransportFn& transport) {
  EngineOptions fixed = options;
  fixed.passes.min_passes = fixed.passes.max_passes = std::max(1, passes);
  std::vector<Runs> runs(candidates.size());
  std::vector<int> positions(candidates.size());
  std::iota(positions.begin(), positions.end(), 0);
  absl::StatusOr<DeviceLease::Token> lease = lease_.Acquire(options.lease_deadline);
  for (int pass = 0; pass < FixedPasses(fixed); ++pass) {
    const ScheduleOptions schedule = PassSchedule(fixed, pass);
    for (int c : PassOrder(positions, pass)) {
      PartialRun part;
      part.local_ranks = local_ranks;
      part.transport = transport(c, pass);
      part.backend_token = backend_token;
      absl::Status skip =
          !lease.ok() ? lease.status()
          : pass == 0 ? Runnable(*backend_, problem, candidates[c], options.memory_cap_bytes)
                      : NotAgain(runs[c].ranks, local_ranks);
      if (!skip.ok()) {
        // As a backend refusing the run: the other daemons' ranks stop too.
        if (part.transport != nullptr) part.transport->Abort(skip);
        if (pass == 0) {
          Add(runs[c], std::vector<RankOutcome>(std::max<size_t>(local_ranks.size(), 1),
                                                RankOutcome{skip, {}}),
              absl::ZeroDuration(), pass);
        }
        continue;
      }
      const absl::Time start = absl::Now();
      Add(runs[c],
          backend_->RunPartial(problem, candidates[c], schedule, part, start + options.timeout),
          absl::Now() - start, pass);
    }
  }
  std::vector<std::vector<RankOutcome>> out;
  out.reserve(runs.size());
  for (Runs& r : runs) out.push_back(std::move(r.ranks));
  return out;
}

std::vector<std::vector<RankOutcome>> Engine::MeasurePartPass(
    const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
    const EngineOptions& options, const std::vector<int>& local_ranks,
    const std::string& backend_token, int pass, const std::vector<int>& order,
    const ScheduleOptions& schedule, const PartTransportFn& transport) {
  std::vector<std::vector<RankOutcome>> out;
  out.reserve(order.size());
  absl::StatusOr<DeviceLease::Token> lease = lease_.Acquire(options.lease_deadline);
  for (int c : order) {
    PartialRun part;
    part.local_ranks = local_ranks;
    part.transport = transport(c, pass);
    part.backend_token = backend_token;
    if (!lease.ok() || c < 0 || c >= static_cast<int>(candidates.size())) {
      const absl::Status why =
          !lease.ok() ? lease.status()
                      : absl::InvalidArgumentError(absl::StrCat("candidate ", c, " is not one of the ",
                                                                candidates.size()));
      if (part.transport != nullptr) part.transport->Abort(why);
      out.emplace_back(std::max<size_t>(local_ranks.size(), 1), RankOutcome{why, {}});
      continue;
    }
    const absl::Time start = absl::Now();
    out.push_back(
        backend_->RunPartial(problem, candidates[c], schedule, part, start + options.timeout));
  }
  return out;
}

}  // namespace autotuned
