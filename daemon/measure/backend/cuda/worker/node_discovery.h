// What a GpuNode reports about its machine (NodeDescription, backend.h):
// every visible GPU's name, memory and PCI bus id; the link matrix ("X" on
// the diagonal, "P2P" where peer access works both ways, "SYS" otherwise:
// the NVLink count would need NVML, which this build does not use); the
// driver and CUDA runtime versions ("13.0") and NCCL's ("2.28.9").
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/measure/backend/backend.h"

namespace autotuned::cuda {

// NOT_FOUND, with CUDA's reason, when there is no usable GPU.
absl::StatusOr<NodeDescription> DescribeNode();

// Enables peer access between every ordered pair of GPUs 0..gpus-1 that
// supports it (already enabled is fine); restores the current device.
absl::Status EnablePeerAccess(int gpus);

// "13.0" for 13000 (cudaDriverGetVersion / cudaRuntimeGetVersion encoding).
std::string CudaVersionString(int version);
// "2.28.9" for 22809 (ncclGetVersion encoding since 2.9).
std::string NcclVersionString(int version);

}  // namespace autotuned::cuda
