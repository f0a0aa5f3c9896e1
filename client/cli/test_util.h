// Helpers shared by the CLI's tests.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "absl/status/status.h"

namespace autotuned::cli::testing {

// The message of a status that must be INVALID_ARGUMENT.
inline std::string ErrorOf(const absl::Status& status) {
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

}  // namespace autotuned::cli::testing
