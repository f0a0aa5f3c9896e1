// What every rank of one round must receive alike, for tests that compare
// the answers of several ranks: the Tune response without each rank's own
// problem labels, serialized; or, for a failed call, its status as text.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "proto/autotuned.pb.h"

namespace autotuned {
namespace testing {

std::string SharedAnswer(const grpc::Status& status, const v1::TuneResponse& response);

}  // namespace testing
}  // namespace autotuned
