// absl::Status from CUDA runtime and NCCL return codes: the one place where
// either becomes a status (STYLE.md). Every message names the failed call,
// e.g. "cudaMalloc: out of memory (cudaErrorMemoryAllocation)".
//
// Codes: out of memory -> RESOURCE_EXHAUSTED; rejected arguments ->
// INVALID_ARGUMENT; no device / no driver -> NOT_FOUND; peer access
// unsupported -> FAILED_PRECONDITION; a peer that failed (ncclRemoteError)
// -> UNAVAILABLE; everything else -> INTERNAL.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "common/status_macros.h"

namespace autotuned::cuda {

// `call` is the call's name or its source text (cut at the first '(').
absl::Status CudaToStatus(cudaError_t error, const char* call);
// The kernels' C ABI returns cudaError_t values as int.
absl::Status CudaToStatus(int error, const char* call);
// With `comm`, ncclGetLastError(comm) is appended when it says something.
absl::Status NcclToStatus(ncclResult_t result, const char* call,
                          ncclComm_t comm = nullptr);

}  // namespace autotuned::cuda

// Returns from the enclosing function (absl::Status or StatusOr) when the
// CUDA / NCCL call fails.
#define AT_CUDA_RETURN_IF_ERROR(expr) \
  AT_RETURN_IF_ERROR(::autotuned::cuda::CudaToStatus((expr), #expr))
#define AT_NCCL_RETURN_IF_ERROR(expr) \
  AT_RETURN_IF_ERROR(::autotuned::cuda::NcclToStatus((expr), #expr))
