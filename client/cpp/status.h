// Conversion of gRPC statuses into absl::Status, the error type used across
// every boundary of this project.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace autotuned {

// The same canonical code (gRPC and absl share the numbering) and exactly the
// same message. OK becomes absl::OkStatus(); a code outside the canonical
// range becomes UNKNOWN, message kept.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace autotuned
