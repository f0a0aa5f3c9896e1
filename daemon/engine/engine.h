// The engine: the lockstep schedule of one problem on one daemon, and the
// pure functions that turn per-rank timings into a ranking.
//
// For every candidate, in request order, the backend runs RunRankSchedule
// (daemon/backend/schedule.h) on every rank (verify against the reference,
// barrier, warmup, barrier, timed iterations). The time of one iteration is the
// maximum over ranks (the slowest rank is the time of a collective); statistics
// are taken over iterations. A candidate that fails on any rank, or is cut off
// at its timeout, is ruled out with a reason and ranked after every working
// one.
//
// Across daemons (a group whose ranks live on several daemons): each daemon
// runs the same schedule, candidate after candidate in request order, for
// its own ranks only (MeasurePart, through Backend::RunPartial); the leader
// gathers every rank's outcomes and ranks them with RankRanks, which is
// Summarize and Rank as for one daemon: the same max over ranks, the same
// order.
//
// Candidates the ranks run (CandidateSpec::client) are never run here: the
// engine measures a problem's catalogue candidates, and the run of the
// ranks (daemon/clientrun) ranks its own with them by Summarize and Rank.
//
// Thread-safety: Engine::Measure and MeasurePart may be called from many
// threads; each takes the Engine's DeviceLease (lease.h) for its problem,
// so an Engine runs one measurement at a time on its backend, whichever
// devices it uses (measurements on disjoint devices wait for each other
// too), and none while a run of the ranks holds the lease. The free
// functions are pure and thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/common/problem.h"
#include "daemon/engine/lease.h"

namespace autotuned {

struct EngineOptions {
  ScheduleOptions schedule;
  absl::Duration timeout = absl::Seconds(10);  // per candidate
  // How long a measurement waits for the devices (the lease): past it,
  // every candidate is ruled out with the reason. Every holder's hold is
  // bounded, so the default ends too.
  absl::Time lease_deadline = absl::InfiniteFuture();
};

// Statistics over per-iteration times, in microseconds.
struct Stats {
  double mean_us = 0;
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  double spread = 0;  // (max - min) / median
};

struct CandidateOutcome {
  int index = 0;               // position in the request
  CandidateSpec candidate;
  bool ok = false;
  std::string reason;          // why it was ruled out (when !ok)
  bool timed_out = false;      // some rank was cut off at the deadline
  Stats stats;                 // +inf everywhere when !ok
  std::vector<double> rank_mean_us;
  int iterations = 0;
};

// Stats of `samples` (empty: all +inf).
Stats ComputeStats(std::vector<double> samples);

// One outcome from the per-rank reports of one candidate: per-iteration max
// across ranks when every rank succeeded; otherwise ruled out with the
// reason of the lowest rank whose failure is its own (not an abort caused by
// another rank), prefixed "rank R: ".
CandidateOutcome Summarize(int index, const CandidateSpec& candidate,
                           const std::vector<RankOutcome>& ranks);

// The ranking, best first: working candidates by median time, ties broken by
// request order; then ruled-out candidates in request order. A pure function
// of its input, so every rank that holds the same timings ranks alike.
std::vector<CandidateOutcome> Rank(std::vector<CandidateOutcome> outcomes);

// Summarize (per candidate, `ranks[i]` the outcomes of every rank of the
// group for candidates[i]) then Rank.
std::vector<CandidateOutcome> RankRanks(const std::vector<CandidateSpec>& candidates,
                                        const std::vector<std::vector<RankOutcome>>& ranks);

class Engine {
 public:
  explicit Engine(Backend* backend) : backend_(backend) {}

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Measures every catalogue candidate (canonical, validated by the caller)
  // and returns them ranked; candidates the ranks run get no outcome. A
  // candidate the backend's catalogue says cannot run the problem
  // (Catalogue::Supports) is ruled out with that reason without running.
  // Takes the lease until options.lease_deadline, unless the caller passes
  // the one it holds (`held`). Blocks for at most the lease wait plus about
  // candidates x timeout.
  std::vector<CandidateOutcome> Measure(const ProblemSpec& problem,
                                        const std::vector<CandidateSpec>& candidates,
                                        const EngineOptions& options,
                                        const DeviceLease::Token* held = nullptr);

  // This daemon's part of a cross-daemon measurement: every candidate in
  // order, each with its own deadline (now + options.timeout at its start),
  // on `local_ranks` through Backend::RunPartial with the transport
  // `transport(i)` gives for candidate i. Returns per candidate one outcome
  // per local rank.
  std::vector<std::vector<RankOutcome>> MeasurePart(
      const ProblemSpec& problem, const std::vector<CandidateSpec>& candidates,
      const EngineOptions& options, const std::vector<int>& local_ranks,
      const std::string& backend_token,
      const std::function<std::shared_ptr<RunTransport>(int candidate)>& transport);

  // The devices' lease: held by each measurement, and by runs of the ranks.
  DeviceLease& lease() { return lease_; }

 private:
  Backend* const backend_;  // not owned; outlives the engine
  DeviceLease lease_;
};

}  // namespace autotuned
