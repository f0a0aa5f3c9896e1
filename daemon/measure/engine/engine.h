// The engine: the lockstep schedule of one problem on one daemon, and the
// pure functions that turn per-rank timings into a ranking.
//
// For every candidate, in request order, the backend runs RunRankSchedule
// (daemon/measure/backend/schedule.h) on every rank (verify against the reference,
// barrier, warmup, barrier, timed iterations); then, in interleaved passes
// (PassOptions), the candidates still contending again, shorter and without
// verify. The time of one iteration is the maximum over ranks (the slowest
// rank is the time of a collective); statistics are taken over iterations
// (ranking.h). A candidate that fails on any rank, or is cut off at its
// timeout, in any pass, is ruled out with a reason and ranked after every
// working one.
//
// Across daemons (a group whose ranks live on several daemons): each daemon
// runs, for its own ranks only (MeasurePart, through Backend::RunPartial),
// the same fixed interleaved passes as the first passes of Measure, every
// candidate in every pass; the leader gathers every rank's outcomes and
// ranks them by Summarize and Rank as for one daemon: the same max over
// ranks, the same order. Then, as Measure does, the leader takes the
// adaptive later passes that NextPass finds worth running, and every daemon
// runs each of them for its own ranks (MeasurePartPass) as the leader
// handed it out (daemon/coordinate/leadership, docs/protocol.md
// "Continuations across daemons").
//
// Candidates the ranks run (CandidateSpec::client) are never run here: the
// engine measures a problem's catalogue candidates, and the run of the
// ranks (daemon/coordinate/clientrun) schedules its own in the same fixed passes
// (PassOrder) and ranks them with the catalogue's by Summarize and Rank.
//
// Thread-safety: Engine::Measure and MeasurePart may be called from many
// threads; each takes the Engine's DeviceLease (lease.h) for its problem,
// so an Engine runs one measurement at a time on its backend, whichever
// devices it uses (measurements on disjoint devices wait for each other
// too), and none while a run of the ranks holds the lease. The free
// functions are pure and thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/engine/lease.h"
#include "daemon/measure/engine/ranking.h"

namespace autotuned {

// Interleaved passes (docs/protocol.md, "How a decision is made"). The
// first passes (FixedPasses) run every working candidate, sharing
// options.schedule.iterations (PassIterations): the first pass its whole
// schedule, the others with verify off and `warmup`. Each later pass runs
// only the contenders (Contenders), with verify off, `warmup` and
// `iterations`. Every pass runs its candidates in PassOrder. Samples add
// up per candidate. Later passes stop when no candidate contends, at
// `max_passes` passes in all, when the next pass would take a candidate
// past `max_iterations` timed iterations, or once `budget` of wall time has
// been spent on them. max_passes 1: one block per candidate; so is a
// problem with one working candidate and none the ranks run in Measure
// (nothing to compare it with).
struct PassOptions {
  int min_passes = 1;
  int max_passes = 1;
  int warmup = 1;
  int iterations = 10;
  int max_iterations = 200;
  absl::Duration budget = absl::Seconds(2);
};

struct EngineOptions {
  ScheduleOptions schedule;
  PassOptions passes;
  // How the winner is picked (Rank).
  RankRule rule;
  absl::Duration timeout = absl::Seconds(10);  // per candidate
  // How long a measurement waits for the devices (the lease): past it,
  // every candidate is ruled out with the reason. Every holder's hold is
  // bounded, so the default ends too.
  absl::Time lease_deadline = absl::InfiniteFuture();
  // The memory cap (daemon/measure/backend/backend.h, MemoryCap): a candidate whose
  // Backend::MemoryNeed exceeds it is ruled out with the reason without
  // running. 0: no cap.
  int64_t memory_cap_bytes = 0;
  // Whether no one waits for this measurement any more (every caller went
  // away); null: someone always does. Asked while waiting for the lease
  // (every DeviceLease::kGonePoll) and before each candidate's run, on the
  // measuring thread; once true (it must stay true), nothing more is run
  // and the candidates not run are ruled out "abandoned: ...". A run under
  // way is not interrupted.
  std::function<bool()> abandoned;
};

// How many passes run every candidate: min_passes, at most max_passes and
// the request's iterations, at least 1.
int FixedPasses(const EngineOptions& options);

// The timed iterations of pass `pass` (from 0): of the first FixedPasses,
// options.schedule.iterations shared evenly (the earlier passes take the
// remainder); of a later pass, passes.iterations.
int PassIterations(const EngineOptions& options, int pass);

// What every rank runs in pass `pass` (from 0): pass 0 options.schedule,
// a later one without verify and with passes.warmup warmup iterations;
// PassIterations timed iterations.
ScheduleOptions PassSchedule(const EngineOptions& options, int pass);

// The order in which pass `pass` (from 0) runs the candidates at `positions`
// (request positions, ascending): rotated left by `pass`, so that no
// candidate always runs first, or always after the same other one. The same
// on every rank and every daemon.
std::vector<int> PassOrder(const std::vector<int>& positions, int pass);

// The candidates of the adaptive pass after `ranked` (from Rank with
// options.rule, over every pass so far): the Contenders (the winner and at
// least one candidate that could still take its place), request positions
// ascending, when none of them would pass options.passes.max_iterations
// timed iterations with options.passes.iterations more; else empty: no pass
// is worth running. The pass's other limits (max_passes, the budget) are
// the caller's. Pure; Measure and the leader of a cross-daemon run decide
// by it alike.
std::vector<int> NextPass(const std::vector<CandidateOutcome>& ranked,
                          const EngineOptions& options);

// CandidateOutcome::timed_by of what the daemons' ranks measured under
// `options`: v1::CUDA_GRAPH or v1::EVENT_LOOP. Measure and the leader of a
// cross-daemon run say it alike.
int TimedBy(const EngineOptions& options);

// The longest Measure measures (after the lease): the first min_passes
// passes, the budget of the later ones, and the pass under way when the
// budget ends.
absl::Duration MeasureBound(const EngineOptions& options, int candidates);

class Engine {
 public:
  explicit Engine(Backend* backend) : backend_(backend) {}

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Measures every catalogue candidate (canonical, validated by the caller)
  // and returns them ranked; candidates the ranks run get no outcome. A
  // candidate the backend's catalogue says cannot run the problem
  // (Catalogue::Supports), or that needs more than options.memory_cap_bytes
  // (Backend::MemoryNeed), is ruled out with that reason without running.
  // Takes the lease until options.lease_deadline, unless the caller passes
  // the one it holds (`held`). Blocks for at most the lease wait plus about
  // MeasureBound.
  std::vector<CandidateOutcome> Measure(const ProblemSpec& problem,
                                        const std::vector<CandidateSpec>& candidates,
                                        const EngineOptions& options,
                                        const DeviceLease::Token* held = nullptr);

  // The transport of candidate `candidate` in pass `pass` (from 0).
  using PartTransportFn =
      std::function<std::shared_ptr<RunTransport>(int candidate, int pass)>;

  // This daemon's part of a cross-daemon measurement: `passes` interleaved
  // passes (0 or 1: one block per candidate), pass p running every
  // candidate in PassOrder(every position, p) with PassIterations timed
  // iterations (of `options` with that many fixed passes), pass 0 the whole
  // schedule, later ones without verify and with options.passes.warmup;
  // each run with its own deadline (now + options.timeout at its start), on
  // `local_ranks` through Backend::RunPartial with transport(c, p). A
  // candidate that failed on this daemon (any local rank) is not run again:
  // its later passes' transports are aborted (ABORTED "rank R failed in an
  // earlier pass: ...", or the abort that failed it), so the other daemons'
  // ranks stop at their first barrier. Returns per candidate
  // one outcome per local rank: the samples of every pass in pass order, or
  // the failed pass's outcome.
  std::vector<std::vector<RankOutcome>> MeasurePart(
      const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
      const EngineOptions& options, const std::vector<int>& local_ranks,
      const std::string& backend_token, int passes, const PartTransportFn& transport);

  // One adaptive pass of a cross-daemon measurement on this daemon's part:
  // the candidates at `order` (request positions, run in that order), each
  // with `schedule` (the caller's: no verify) and its own deadline, on
  // `local_ranks` through Backend::RunPartial with transport(c, pass).
  // Takes the lease until options.lease_deadline (past it, every candidate
  // fails with the lease's status and its transport is aborted). Returns
  // per entry of `order` one outcome per local rank.
  std::vector<std::vector<RankOutcome>> MeasurePartPass(
      const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
      const EngineOptions& options, const std::vector<int>& local_ranks,
      const std::string& backend_token, int pass, const std::vector<int>& order,
      const ScheduleOptions& schedule, const PartTransportFn& transport);

  // The devices' lease: held by each measurement, and by runs of the ranks.
  DeviceLease& lease() { return lease_; }

  // The longest of the last kRecentMeasurements measurements (Measure,
  // after the lease was had); zero before the first. What a caller with a
  // deadline keeps free for its own measurement (daemon/coordinate/solver).
  absl::Duration RecentMeasureTime() const ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr int kRecentMeasurements = 16;

 private:
  void Record(absl::Duration took) ABSL_LOCKS_EXCLUDED(mu_);

  Backend* const backend_;  // not owned; outlives the engine
  DeviceLease lease_;

  mutable absl::Mutex mu_;
  std::deque<absl::Duration> recent_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace autotuned
