// Rounds measured in the background after they fell back, so that the next
// round of their group is answered from the cache: one worker thread
// (started at the first Add), at most kMaxQueued rounds waiting.
//
// Ownership: `solve` is called on the worker thread; what it uses must
// outlive the measurer.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/coordinate/request/valid_request.h"
#include "proto/autotuned.pb.h"

namespace autotuned::rounds {

class BackgroundMeasurer {
 public:
  static constexpr size_t kMaxQueued = 16;

  // Answers one problem of a request (Solver::Solve: the cache, else a
  // measurement, stored).
  using SolveFn =
      std::function<v1::ProblemResult(const ValidProblem& problem, const ValidRequest& request)>;

  explicit BackgroundMeasurer(SolveFn solve);
  // Stop, then waits for the problem being measured.
  ~BackgroundMeasurer();

  BackgroundMeasurer(const BackgroundMeasurer&) = delete;
  BackgroundMeasurer& operator=(const BackgroundMeasurer&) = delete;

  // Queues every problem of `request`; false (logged) when kMaxQueued rounds
  // wait already, or after Stop.
  bool Add(const ValidRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the queued rounds and takes no more; the worker ends after the
  // problem it is measuring. Does not wait.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds waiting for the worker now.
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool stopped() const ABSL_LOCKS_EXCLUDED(mu_);

  const SolveFn solve_;

  mutable absl::Mutex mu_;
  std::deque<ValidRequest> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autotuned::rounds
