// Helpers of the host-side argument checks (p2p_args.cc,
// all_to_all_v_args.cc): the reason of a rejection and pointer arithmetic.
// Plain C++, no CUDA header.
#pragma once

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/autotuned_kernels.h"

namespace autotuned::kernels::p2p {

// Writes the reason (printf format, truncated to reason_len, NUL
// terminated; nothing when reason is NULL) and returns AT_ERR_INVALID_VALUE.
inline int Fail(char* reason, size_t reason_len, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

inline int Fail(char* reason, size_t reason_len, const char* fmt, ...) {
  if (reason != nullptr && reason_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, reason_len, fmt, ap);
    va_end(ap);
  }
  return AT_ERR_INVALID_VALUE;
}

inline uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline bool Aligned(const void* p, uintptr_t a) { return Addr(p) % a == 0; }
// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool Overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  return Addr(a) < Addr(b) + static_cast<uintptr_t>(b_bytes) &&
         Addr(b) < Addr(a) + static_cast<uintptr_t>(a_bytes);
}

}  // namespace autotuned::kernels::p2p
