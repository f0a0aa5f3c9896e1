#include "daemon/measure/backend/fake_backend.h"

#include <thread>

#include "daemon/measure/backend/schedule.h"

namespace autotuned {
namespace {

class FakeRankRun : public RankRun {
 public:
  FakeRankRun(int rank, const FakeBackend::Script& script, absl::Time deadline)
      : rank_(rank), script_(script), deadline_(deadline) {}

  int rank() const override { return rank_; }
  absl::Status RunAndVerify() override { return Step("verify"); }
  absl::Status Barrier() override {
    steps_.push_back("barrier");
    return absl::OkStatus();
  }
  absl::Status Run(int iterations, std::vector<double>* iteration_us) override {
    absl::Status s = Step(iteration_us ? "timed" : "warmup");
    if (!s.ok()) return s;
    const auto& t = script_.iteration_us;
    const double us = t[std::min<size_t>(rank_, t.size() - 1)];
    for (int i = 0; iteration_us && i < iterations; ++i) {
      iteration_us->push_back(us);
    }
    return absl::OkStatus();
  }
  const std::vector<std::string>& steps() const { return steps_; }

 private:
  absl::Status Step(const std::string& name) {
    steps_.push_back(name);
    if (rank_ != script_.fail_rank || name != script_.fail_step) {
      return absl::OkStatus();
    }
    if (script_.hang) {
      absl::SleepFor(deadline_ - absl::Now());
      return absl::DeadlineExceededError("scripted hang cut off");
    }
    return script_.failure;
  }

  const int rank_;
  const FakeBackend::Script script_;
  const absl::Time deadline_;
  std::vector<std::string> steps_;
};

}  // namespace

FakeBackend::FakeBackend(int gpus, std::map<std::string, Script> scripts)
    : gpus_(gpus), scripts_(std::move(scripts)) {
  node_.backend = "fake";
  for (int i = 0; i < gpus; ++i) node_.gpus.push_back({i, "fake-gpu", 0, ""});
  for (int i = 0; i < gpus; ++i) {
    for (int j = 0; j < gpus; ++j) {
      node_.topology.push_back(i == j ? "X" : i / 2 == j / 2 ? "NV4" : "SYS");
    }
  }
  for (const auto& [name, script] : scripts_) {
    ImplInfo info;
    info.name = name;
    info.collective = Collective::kAllReduce;
    info.description = "scripted";
    info.dtypes = {DType::kFloat32};
    info.ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
    info.params = {{"knob", 1, 0, 100, "a parameter that changes nothing"}};
    info.min_world_size = script.min_world_size;
    catalogue_.Add(info);
  }
}

std::vector<RankOutcome> FakeBackend::RunCandidate(
    const ProblemSpec& problem, const CandidateSpec& candidate,
    const ScheduleOptions& options, absl::Time deadline) {
  std::vector<RankOutcome> out(problem.world_size);
  auto it = scripts_.find(candidate.impl);
  const absl::Status placed = CheckPlacement(options, problem.world_size, gpus_);
  if (it == scripts_.end() || !placed.ok()) {
    for (auto& o : out) o.status = placed.ok() ? absl::NotFoundError(candidate.impl) : placed;
    return out;
  }
  FakeBackend::Script script = it->second;
  {
    absl::MutexLock lock(&mu_);
    const size_t n = static_cast<size_t>(impl_runs_[candidate.impl]++);
    const double extra = n < script.run_extra_us.size() ? script.run_extra_us[n] : 0.0;
    for (double& us : script.iteration_us) us += extra;
  }
  std::vector<FakeRankRun> runs;
  for (int r = 0; r < problem.world_size; ++r) {
    runs.emplace_back(r, script, deadline);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < problem.world_size; ++r) {
    threads.emplace_back(
        [&, r] { out[r] = RunRankSchedule(runs[r], options); });
  }
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&mu_);
  last_steps_ = runs[0].steps();
  last_devices_ = options.devices;
  ++runs_;
  run_order_.push_back(candidate.impl);
  return out;
}

std::vector<RankOutcome> FakeBackend::RunPartial(const ProblemSpec& problem,
                                                 const CandidateSpec& candidate,
                                                 const ScheduleOptions& options,
                                                 const PartialRun& part, absl::Time deadline) {
  const size_t n = part.local_ranks.size();
  std::vector<RankOutcome> out(n);
  auto it = scripts_.find(candidate.impl);
  if (it == scripts_.end()) {
    for (auto& o : out) o.status = absl::NotFoundError(candidate.impl);
    return out;
  }
  (void)problem;
  std::vector<FakeRankRun> runs;
  for (int r : part.local_ranks) runs.emplace_back(r, it->second, deadline);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { out[i] = RunRankSchedule(runs[i], options); });
  }
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&mu_);
  if (!runs.empty()) last_steps_ = runs[0].steps();
  last_devices_ = options.devices;
  ++runs_;
  run_order_.push_back(candidate.impl);
  return out;
}

std::vector<int> FakeBackend::last_devices() const {
  absl::MutexLock lock(&mu_);
  return last_devices_;
}

std::vector<std::string> FakeBackend::last_steps() const {
  absl::MutexLock lock(&mu_);
  return last_steps_;
}

std::vector<std::string> FakeBackend::run_order() const {
  absl::MutexLock lock(&mu_);
  return run_order_;
}

int FakeBackend::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

}  // namespace autotuned
