#include "daemon/coordinate/rounds/background.h"

#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace autotuned::rounds {

BackgroundMeasurer::BackgroundMeasurer(SolveFn solve) : solve_(std::move(solve)) {}

BackgroundMeasurer::~BackgroundMeasurer() {
  std::thread worker;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
    worker = std::move(worker_);
  }
  if (worker.joinable()) worker.join();
}

bool BackgroundMeasurer::Add(const ValidRequest& request) {
  absl::MutexLock lock(&mu_);
  if (stop_) return false;
  if (queue_.size() >= kMaxQueued) {
    spdlog::warn("background: {} rounds already waiting; group {} not measured after its "
                 "fallback",
                 queue_.size(), request.group_id);
    return false;
  }
  queue_.push_back(request);
  if (!worker_.joinable()) worker_ = std::thread([this] { Loop(); });
  return true;
}

void BackgroundMeasurer::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  queue_.clear();
}

size_t BackgroundMeasurer::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

bool BackgroundMeasurer::stopped() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void BackgroundMeasurer::Loop() {
  for (;;) {
    ValidRequest next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1))) {
      }
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    std::vector<std::string> winners;
    for (const ValidProblem& p : next.problems) {
      if (stopped()) return;
      const v1::ProblemResult r = solve_(p, next);
      winners.push_back(absl::StrCat(v1::DecisionStatus_Name(r.status()), " ",
                                     r.winner().empty() ? "none" : r.winner()));
    }
    spdlog::info("background: group={} world={} measured after its fallback: [{}]",
                 next.group_id, next.world_size, absl::StrJoin(winners, "; "));
  }
}

}  // namespace autotuned::rounds
