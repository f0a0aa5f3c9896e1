#include "daemon/measure/backend/cuda/worker/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace autotuned::cuda {
namespace {

absl::string_view CallName(const char* call) {
  absl::string_view s = call == nullptr ? "" : call;
  const size_t paren = s.find('(');
  return paren == absl::string_view::npos ? s : s.substr(0, paren);
}

absl::StatusCode CudaCode(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::StatusCode::kNotFound;
    case cudaErrorPeerAccessUnsupported:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode NcclCode(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclRemoteError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CudaToStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::Status(CudaCode(error),
                      absl::StrCat(CallName(call), ": ", cudaGetErrorString(error),
                                   " (", cudaGetErrorName(error), ")"));
}

absl::Status CudaToStatus(int error, const char* call) {
  return CudaToStatus(static_cast<cudaError_t>(error), call);
}

absl::Status NcclToStatus(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(CallName(call), ": ", ncclGetErrorString(result), " (nccl ",
                   static_cast<int>(result), ")");
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, ": ", last);
  }
  return absl::Status(NcclCode(result), message);
}

}  // namespace autotuned::cuda
