// Each rank's own display strings on a round's shared answer. A round, and
// the cache, key a problem without its label and without the names of the
// candidates the ranks run (daemon/coordinate/solver/solver.cc,
// StoredResult): the ranks of one round may each call them differently.
// Whoever answers a rank from a shared result (daemon/coordinate/rounds,
// daemon/coordinate/leadership, daemon/coordinate/clientrun) puts that
// rank's own back with RestoreLabels.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include "daemon/coordinate/request/valid_request.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// Puts `request`'s own problem labels and client candidates' names on a
// round's shared answer (labels and names are each rank's own display and
// stay out of round and cache keys).
void RestoreLabels(const ValidRequest& request, v1::TuneResponse* response);

}  // namespace autotuned
