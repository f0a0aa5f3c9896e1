// Status conversion and version strings: runs anywhere, no GPU (these CUDA
// and NCCL calls are table lookups).
#include "daemon/measure/backend/cuda/worker/cuda_status.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "daemon/measure/backend/cuda/worker/node_discovery.h"

namespace autotuned::cuda {
namespace {

absl::Status FailingCall() {
  AT_CUDA_RETURN_IF_ERROR(cudaErrorMemoryAllocation);
  return absl::OkStatus();
}

TEST_CASE("CUDA errors become statuses naming the call") {
  CHECK(CudaToStatus(cudaSuccess, "cudaMalloc").ok());
  const absl::Status s = CudaToStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 10)");
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
  CHECK(absl::StartsWith(s.message(), "cudaMalloc: "));
  CHECK(absl::StrContains(s.message(), "cudaErrorMemoryAllocation"));
  CHECK(CudaToStatus(1, "at_p2p_launch").code() == absl::StatusCode::kInvalidArgument);
  CHECK(CudaToStatus(cudaErrorNoDevice, "x").code() == absl::StatusCode::kNotFound);
  CHECK(CudaToStatus(cudaErrorIllegalAddress, "x").code() == absl::StatusCode::kInternal);
  CHECK(FailingCall().code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("NCCL errors become statuses naming the call") {
  CHECK(NcclToStatus(ncclSuccess, "ncclAllReduce").ok());
  const absl::Status s = NcclToStatus(ncclInvalidArgument, "ncclAllReduce(a, b)");
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(s.message(), "ncclAllReduce: "));
  CHECK(NcclToStatus(ncclRemoteError, "ncclSend").code() == absl::StatusCode::kUnavailable);
  CHECK(NcclToStatus(ncclSystemError, "ncclSend").code() == absl::StatusCode::kInternal);
}

TEST_CASE("versions are formatted as the tools print them") {
  CHECK(CudaVersionString(13000) == "13.0");
  CHECK(CudaVersionString(12080) == "12.8");
  CHECK(NcclVersionString(22809) == "2.28.9");
  CHECK(NcclVersionString(21903) == "2.19.3");
}

}  // namespace
}  // namespace autotuned::cuda
