// Size -> implementation dispatch tables: the compressed form of a sweep.
#pragma once

#include <vector>

#include "proto/autotuned.pb.h"

namespace autotuned {

// Merges consecutive sizes (in the given order, normally ascending) with the
// same winner into one range. A size without a winner (FAILED) is a range of
// its own with an empty winner. Pure.
v1::DispatchTable BuildDispatchTable(const std::vector<v1::ProblemResult>& sizes);

}  // namespace autotuned
