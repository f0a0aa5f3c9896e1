#include "daemon/common/grpc_status.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace {

TEST_CASE("statuses cross between absl and gRPC with their code and message") {
  CHECK(ToGrpcStatus(absl::OkStatus()).ok());
  CHECK(FromGrpcStatus(grpc::Status::OK).ok());
  for (int code = 1; code <= 16; ++code) {
    const absl::Status a(static_cast<absl::StatusCode>(code), "why");
    const grpc::Status g = ToGrpcStatus(a);
    CHECK(static_cast<int>(g.error_code()) == code);
    CHECK(g.error_message() == "why");
    CHECK(FromGrpcStatus(g) == a);
  }
}

TEST_CASE("a code from the wire is range-checked: unknown codes are UNKNOWN, named") {
  CHECK(StatusFromWire(0, "ignored").ok());
  CHECK(StatusFromWire(5, "no such run") == absl::NotFoundError("no such run"));
  CHECK(StatusCodeToWire(absl::NotFoundError("x")) == 5);
  CHECK(StatusCodeToWire(absl::OkStatus()) == 0);
  for (int64_t code : {int64_t{17}, int64_t{-1}, int64_t{1} << 40}) {
    const absl::Status s = StatusFromWire(code, "the peer's text");
    CHECK(s.code() == absl::StatusCode::kUnknown);
    CHECK(s.message() == absl::StrCat("status code ", code,
                                      " is not a known code (0 to 16); the message: "
                                      "the peer's text"));
  }
  // A gRPC status whose code came off the wire unchecked.
  const absl::Status s =
      FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(99), "odd"));
  CHECK(s.code() == absl::StatusCode::kUnknown);
  CHECK(s.message() == "status code 99 is not a known code (0 to 16); the message: odd");
  CHECK(ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(99), "odd")).error_code() ==
        grpc::StatusCode::UNKNOWN);
}

}  // namespace
}  // namespace autotuned
