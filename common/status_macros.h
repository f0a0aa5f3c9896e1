// Small helpers for absl::Status plumbing. Debian's abseil (20220623) has no
// ABSL_RETURN_IF_ERROR / ASSIGN_OR_RETURN, so they are defined once here.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define AT_CONCAT_INNER_(a, b) a##b
#define AT_CONCAT_(a, b) AT_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define AT_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status at_status_ = (expr);           \
    if (!at_status_.ok()) return at_status_;      \
  } while (0)

// `lhs = value of expr`, or returns its status when `expr` holds an error.
#define AT_ASSIGN_OR_RETURN(lhs, expr) \
  AT_ASSIGN_OR_RETURN_IMPL_(AT_CONCAT_(at_statusor_, __LINE__), lhs, expr)
#define AT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
