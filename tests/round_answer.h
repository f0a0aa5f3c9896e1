// What every rank of one round must receive alike, for tests that compare
// the answers of several ranks: the Tune response without each rank's own
// problem labels, serialized; or, for a failed call, its status as text.
// And the small whole-group request those tests ask.
#pragma once

#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "proto/autotuned.pb.h"

namespace autotuned {
namespace testing {

std::string SharedAnswer(const grpc::Status& status, const v1::TuneResponse& response);

// A whole-group Tune of `world_size` ranks: one float32 all_reduce of
// `count` elements, candidates ring and one_shot, 1 warmup and 3 timed
// iterations.
v1::TuneRequest WholeGroupAllReduce(int world_size, int64_t count);

}  // namespace testing
}  // namespace autotuned
