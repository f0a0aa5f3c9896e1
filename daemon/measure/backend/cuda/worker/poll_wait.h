// Bounded waits for things that can only be polled: a CUDA stream or event
// (cudaStreamQuery), an NCCL communicator's state (ncclCommGetAsyncError).
// The GPU worker never blocks in cudaStreamSynchronize on a stream that may
// hold a kernel that never finishes; it polls with a short sleep until the
// run's deadline, so that it can report the overrun and recover (abort the
// NCCL communicators) or say that it cannot (a hung P2P kernel).
//
// No CUDA here: the poll is a callback, and the clock is injected so that
// the deadline logic is tested without a GPU and without sleeping.
//
// Thread-safety: PollUntil may run on many threads at once; RealPollClock is
// stateless.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace autotuned::cuda {

class PollClock {
 public:
  virtual ~PollClock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration d) = 0;
  // absl::Now / absl::SleepFor; never destroyed.
  static PollClock* Real();
};

// Between polls. Short: a finished kernel is noticed within this much, and a
// host thread sleeping this long costs nothing measurable.
inline constexpr absl::Duration kPollInterval = absl::Microseconds(20);

// Calls `poll` until it returns true (done: OK), an error (returned as is) or
// `deadline` passes on `clock` with `poll` still false: DEADLINE_EXCEEDED
// "cut off at the timeout: <what> did not finish by the deadline". `poll` is
// always called at least once, and once more at or after the deadline, so a
// wait that ends just in time is not reported as late.
absl::Status PollUntil(const std::function<absl::StatusOr<bool>()>& poll,
                       absl::Time deadline, absl::string_view what,
                       PollClock* clock = PollClock::Real(),
                       absl::Duration interval = kPollInterval);

}  // namespace autotuned::cuda
