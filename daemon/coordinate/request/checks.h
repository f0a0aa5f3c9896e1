// What the validation units of this package (validate*.cc, enums.cc) share:
// the form of every error and the checks more than one of them makes. Private
// to daemon/coordinate/request; its contract to the rest of the daemon is validate.h.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/coordinate/request/validate.h"

namespace autotuned::request_internal {

// INVALID_ARGUMENT "field: why".
absl::Status Invalid(const std::string& field, const std::string& why);

// `value` of `field` is at most `max` bytes (and printable ASCII when
// `printable`).
absl::Status CheckString(const std::string& field, const std::string& value, size_t max,
                         bool printable);

// The memory cap of `ctx`, in bytes (ValidationContext::memory_cap_bytes,
// else limits.max_buffer_bytes).
int64_t CapOf(const ValidationContext& ctx);

// The cap as errors and skipped sizes name it.
std::string CapText(int64_t cap);

}  // namespace autotuned::request_internal
