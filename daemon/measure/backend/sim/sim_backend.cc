#include "daemon/measure/backend/sim/sim_backend.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/measure/backend/schedule.h"
#include "daemon/measure/backend/sim/faults.h"
#include "daemon/measure/backend/sim/group.h"
#include "daemon/measure/backend/sim/rank_run.h"
#include "common/status_macros.h"

namespace autotuned::sim {
namespace {

NodeDescription MakeNode(int gpus) {
  NodeDescription node;
  node.backend = "sim";
  for (int i = 0; i < gpus; ++i) {
    node.gpus.push_back(GpuDescription{i, "sim-cpu", 0, ""});
  }
  node.topology.reserve(static_cast<size_t>(gpus) * gpus);
  for (int i = 0; i < gpus; ++i) {
    for (int j = 0; j < gpus; ++j) node.topology.push_back(i == j ? "X" : "SHM");
  }
  node.driver_version = "n/a";
  node.cuda_version = "n/a";
  node.nccl_version = "n/a";
  return node;
}

// The host's available memory (/proc/meminfo MemAvailable; else the free
// pages), in bytes; 0 when neither is known.
int64_t HostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

// Shared by RunCandidate and the rank threads; outlives RunCandidate when a
// rank has to be abandoned.
struct RunState {
  explicit RunState(int n) : outcomes(n), done(n, false), running(n) {}

  absl::Mutex mu;
  std::vector<RankOutcome> outcomes ABSL_GUARDED_BY(mu);
  std::vector<bool> done ABSL_GUARDED_BY(mu);
  int running ABSL_GUARDED_BY(mu);
};

}  // namespace

absl::StatusOr<std::unique_ptr<SimBackend>> SimBackend::Create(
    const config::SimConfig& config) {
  if (config.gpus() < 1 || config.gpus() > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim.gpus: ", config.gpus(), " is outside [1, ", kMaxRanks, "]"));
  }
  std::vector<Algorithm> algorithms = BuiltinAlgorithms();
  AT_RETURN_IF_ERROR(AddFaults(config, &algorithms));
  return std::unique_ptr<SimBackend>(
      new SimBackend(MakeNode(config.gpus()), std::move(algorithms)));
}

SimBackend::SimBackend(NodeDescription node, std::vector<Algorithm> algorithms)
    : node_(std::move(node)),
      algorithms_(std::move(algorithms)),
      host_available_bytes_(HostAvailableBytes()) {
  for (const Algorithm& a : algorithms_) {
    catalogue_.Add(a.info);
    by_name_[a.info.name] = &a;
  }
}

int64_t SimBackend::MemoryNeed(const ProblemSpec& problem,
                               const CandidateSpec& candidate) const {
  auto it = by_name_.find(candidate.impl);
  const int64_t scratch =
      it != by_name_.end() && it->second->scratch ? it->second->scratch(problem) : 0;
  int64_t elements = 0;
  for (int r = 0; r < problem.world_size; ++r) {
    elements += problem.InputCount(r) + problem.OutputCount(r) + scratch;
  }
  return elements * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<const Algorithm*> SimBackend::Prepare(
    const ProblemSpec& problem, const CandidateSpec& candidate, int max_world,
    CandidateSpec* canonical) const {
  auto it = by_name_.find(candidate.impl);
  if (it == by_name_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "unknown implementation \"", candidate.impl, "\" on the sim backend"));
  }
  const Algorithm* algorithm = it->second;
  AT_RETURN_IF_ERROR(CheckShape(problem, max_world));
  AT_ASSIGN_OR_RETURN(*canonical,
                      catalogue_.Canonicalize(problem, candidate, "candidate"));
  if (algorithm->check != nullptr) {
    AT_RETURN_IF_ERROR(algorithm->check(problem, *canonical));
  }
  return algorithm;
}

std::vector<RankOutcome> SimBackend::RunCandidate(
    const ProblemSpec& problem, const CandidateSpec& candidate,
    const ScheduleOptions& options, absl::Time deadline) {
  CandidateSpec canonical;
  absl::StatusOr<const Algorithm*> prepared =
      Prepare(problem, candidate, max_world_size(), &canonical);
  if (prepared.ok()) {
    const absl::Status placed =
        CheckPlacement(options, problem.world_size, max_world_size());
    if (!placed.ok()) prepared = placed;
  }
  if (!prepared.ok()) {
    return std::vector<RankOutcome>(std::max(problem.world_size, 1),
                                    RankOutcome{prepared.status(), {}});
  }
  std::vector<int> ranks;
  for (int r = 0; r < problem.world_size; ++r) ranks.push_back(r);
  return Run(problem, **prepared, canonical, options, deadline, ranks, nullptr);
}

std::vector<RankOutcome> SimBackend::RunPartial(const ProblemSpec& problem,
                                                const CandidateSpec& candidate,
                                                const ScheduleOptions& options,
                                                const PartialRun& part, absl::Time deadline) {
  CandidateSpec canonical;
  absl::StatusOr<const Algorithm*> prepared =
      Prepare(problem, candidate, kMaxRanks, &canonical);
  absl::Status refused = prepared.status();
  std::vector<char> seen(std::max(problem.world_size, 0), 0);
  for (int r : part.local_ranks) {
    if (!refused.ok()) break;
    if (r < 0 || r >= problem.world_size || seen[r]) {
      refused = absl::InvalidArgumentError(absl::StrCat(
          "local_ranks: rank ", r, " is outside [0, ", problem.world_size, ") or repeated"));
    } else {
      seen[r] = 1;
    }
  }
  if (refused.ok() && static_cast<int>(part.local_ranks.size()) > max_world_size()) {
    refused = absl::InvalidArgumentError(
        absl::StrCat("local_ranks: ", part.local_ranks.size(), " ranks here, but the sim has ",
                     max_world_size(), " GPUs"));
  }
  if (refused.ok()) {
    refused = CheckPlacement(options, static_cast<int>(part.local_ranks.size()),
                             max_world_size());
  }
  if (refused.ok() && (part.transport == nullptr || part.local_ranks.empty())) {
    refused = absl::InvalidArgumentError("a partial run needs local ranks and a transport");
  }
  if (!refused.ok()) {
    if (part.transport != nullptr) part.transport->Abort(refused);
    return std::vector<RankOutcome>(std::max<size_t>(part.local_ranks.size(), 1),
                                    RankOutcome{refused, {}});
  }
  return Run(problem, **prepared, canonical, options, deadline, part.local_ranks,
             part.transport);
}

std::vector<RankOutcome> SimBackend::Run(const ProblemSpec& problem,
                                         const Algorithm& algorithm,
                                         const CandidateSpec& canonical,
                                         const ScheduleOptions& options,
                                         absl::Time deadline, const std::vector<int>& ranks,
                                         std::shared_ptr<RunTransport> transport) {
  const int n = static_cast<int>(ranks.size());
  const int64_t scratch = algorithm.scratch ? algorithm.scratch(problem) : 0;
  auto group = transport == nullptr
                   ? std::make_shared<Group>(problem, deadline, scratch)
                   : std::make_shared<Group>(problem, deadline, scratch, ranks, transport);
  auto state = std::make_shared<RunState>(n);

  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int r = ranks[i];
    auto run = std::make_unique<SimRankRun>(group, r, algorithm.run, canonical);
    threads.emplace_back([state, group, options, i, r, run = std::move(run)] {
      RankOutcome outcome = RunRankSchedule(*run, options);
      if (!outcome.status.ok()) {
        // Release the peers now rather than at the deadline.
        group->Abort(outcome.status.code() == absl::StatusCode::kDeadlineExceeded
                         ? CutOffStatus()
                         : absl::AbortedError(absl::StrCat(
                               "rank ", r, " failed: ", outcome.status.ToString())));
      }
      absl::MutexLock lock(&state->mu);
      state->outcomes[i] = std::move(outcome);
      state->done[i] = true;
      --state->running;
    });
  }

  auto all_done = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
    return state->running == 0;
  };
  bool finished;
  {
    absl::MutexLock lock(&state->mu);
    finished = state->mu.AwaitWithDeadline(absl::Condition(&all_done), deadline);
  }
  if (!finished) {
    group->Abort(CutOffStatus());
    absl::MutexLock lock(&state->mu);
    state->mu.AwaitWithTimeout(absl::Condition(&all_done), kAbortGrace);
  }

  std::vector<RankOutcome> outcomes(n);
  std::vector<bool> done;
  {
    absl::MutexLock lock(&state->mu);
    done = state->done;
    for (int i = 0; i < n; ++i) {
      if (done[i]) outcomes[i] = std::move(state->outcomes[i]);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (done[i]) {
      threads[i].join();  // it has nothing left to do but return
      continue;
    }
    threads[i].detach();
    outcomes[i].status = absl::DeadlineExceededError(absl::StrCat(
        "cut off at the timeout: rank ", ranks[i], " did not stop within ",
        absl::FormatDuration(kAbortGrace), " of the abort and was abandoned"));
  }
  return outcomes;
}

}  // namespace autotuned::sim
