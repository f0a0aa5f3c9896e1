// The NCCL tuner plugin (client/nccl_tuner, docs/nccl_tuner.md) as the GPU
// worker uses it: to run an NCCL candidate with the algorithm, protocol and
// channel count its parameters name, instead of NCCL's own choice.
//
// LoadNcclTuner, once at the worker's start (one thread, before any NCCL
// call), loads the library and points NCCL at the same file
// (NCCL_TUNER_PLUGIN), so that both hold one copy; it also turns the
// plugin's table off in this process (the daemon measures NCCL's own choice
// and forced ones, never a host's table). The library is the first of
// $AUTOTUNED_NCCL_TUNER_PLUGIN, <dir of the executable>/libautotuned_nccl_tuner.so
// and <dir of the executable>/../lib/autotuned/libautotuned_nccl_tuner.so.
// Without it the worker runs as before, and a candidate that names a choice
// fails with the reason.
//
// A choice is forced for the calling thread only, around one enqueue: NCCL
// consults the plugin on the thread that makes the call (blocking
// communicators). RunWithChoice says when NCCL did not consult it, or does
// not offer the combination for that call.
//
// Thread-safety: LoadNcclTuner before any other thread uses NCCL;
// RunWithChoice from any thread.
#pragma once

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace autotuned::cuda {

// An NCCL candidate's parameters (cuda_catalogue.h): NCCL's numbering,
// -1 (algo, proto) and 0 (channels) = NCCL's own choice.
struct NcclChoice {
  int algo = -1;
  int proto = -1;
  int channels = 0;

  bool forced() const { return algo >= 0 || proto >= 0 || channels > 0; }
  // "ring/ll128, 8 channels", for reasons.
  std::string ToString() const;
};

// OK when loaded; otherwise why not (and the worker goes on without it).
absl::Status LoadNcclTuner();

// `enqueue` (one NCCL collective on this thread) with `choice` forced;
// without a forced choice, just `enqueue`. FAILED_PRECONDITION when the
// plugin is not loaded or NCCL did not consult it; INVALID_ARGUMENT when
// NCCL does not offer the algorithm and protocol for this call.
absl::Status RunWithChoice(const NcclChoice& choice, const char* call,
                           absl::FunctionRef<absl::Status()> enqueue);

}  // namespace autotuned::cuda
