#include "daemon/common/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

// The largest code both enums define (UNAUTHENTICATED).
constexpr int64_t kMaxCode = 16;
static_assert(static_cast<int64_t>(absl::StatusCode::kUnauthenticated) == kMaxCode,
              "absl and gRPC status codes must agree");
static_assert(static_cast<int64_t>(grpc::StatusCode::UNAUTHENTICATED) == kMaxCode,
              "absl and gRPC status codes must agree");

}  // namespace

absl::Status StatusFromWire(int64_t code, absl::string_view message) {
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > kMaxCode) {
    return absl::UnknownError(
        absl::StrCat("status code ", code, " is not a known code (0 to ", kMaxCode,
                     "); the message: ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

int32_t StatusCodeToWire(const absl::Status& status) {
  return static_cast<int32_t>(status.code());
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::Status::code() already maps a code it does not know to kUnknown.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return StatusFromWire(static_cast<int64_t>(status.error_code()), status.error_message());
}

}  // namespace autotuned
