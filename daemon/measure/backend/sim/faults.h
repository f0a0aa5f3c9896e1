// Fault injection for the sim backend. Each SimConfig.faults entry becomes a
// catalogue entry `name` that copies its base's ImplInfo (new name, a
// description naming the fault) and wraps the base's RankFn:
//
//  HANG          on `rank`, every call waits for a signal that never comes
//                (Group::Sleep without end), so the rank hangs in
//                RunAndVerify; the wait still ends when the run is aborted
//                or its deadline passes.
//  FAIL          on `rank`, every call returns INTERNAL "injected failure".
//  WRONG_RESULT  after the base algorithm every rank passes one extra barrier
//                (so that no peer still reads it), then `rank` adds 1 to its
//                output element 0: verification fails with DATA_LOSS. A rank
//                with an empty output has nothing to corrupt.
//  SLOW_RANK     on `rank`, every call first sleeps delay_us (an abortable
//                wait), inside the timed window of Run; with `calls` set,
//                only the first `calls` calls on `rank` since the backend
//                was made (every run of the entry counted together).
//
// A fault whose rank is not in the group (rank >= world size) has no effect.
//
// Thread-safety: AddFaults runs once at backend construction; the wrapped
// RankFns are as thread-safe as the base ones.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "config/config.pb.h"
#include "daemon/measure/backend/sim/algorithms.h"

namespace autotuned::sim {

// Validates config.faults and appends one wrapped Algorithm per fault to
// `algorithms`, in order; a base may be a built-in or an earlier fault.
// INVALID_ARGUMENT naming "sim.faults[i].<field>" for an empty or duplicate
// name, an unknown base, an unspecified kind, a rank outside
// [0, config.gpus()), a negative delay_us or calls; nothing is appended then.
absl::Status AddFaults(const config::SimConfig& config,
                       std::vector<Algorithm>* algorithms);

}  // namespace autotuned::sim
