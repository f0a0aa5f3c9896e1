#include "daemon/measure/backend/cuda/worker/node_discovery.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/measure/backend/cuda/worker/cuda_handles.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"
#include "common/status_macros.h"

namespace autotuned::cuda {
namespace {

absl::StatusOr<bool> CanAccessPeer(int a, int b) {
  int can = 0;
  AT_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, a, b));
  return can != 0;
}

absl::StatusOr<GpuDescription> DescribeGpu(int d) {
  cudaDeviceProp prop;
  AT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, d));
  char bus[32] = {};
  AT_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus, sizeof(bus), d));
  GpuDescription g;
  g.index = d;
  g.name = prop.name;
  g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  g.pci_bus_id = bus;
  // What the memory cap is a fraction of (Backend::memory_free_bytes).
  ScopedDevice scoped(d);
  AT_RETURN_IF_ERROR(scoped.status());
  size_t free = 0;
  size_t total = 0;
  AT_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total));
  g.free_bytes = static_cast<int64_t>(free);
  return g;
}

}  // namespace

std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string NcclVersionString(int version) {
  return absl::StrCat(version / 10000, ".", (version % 10000) / 100, ".", version % 100);
}

absl::StatusOr<NodeDescription> DescribeNode() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return absl::NotFoundError(
        absl::StrCat("no usable GPU: ", CudaToStatus(e, "cudaGetDeviceCount").message()));
  }
  if (count == 0) return absl::NotFoundError("no GPU: cudaGetDeviceCount found none");
  NodeDescription node;
  node.backend = "cuda";
  for (int d = 0; d < count; ++d) {
    AT_ASSIGN_OR_RETURN(GpuDescription g, DescribeGpu(d));
    node.gpus.push_back(std::move(g));
  }
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < count; ++j) {
      if (i == j) {
        node.topology.push_back("X");
        continue;
      }
      AT_ASSIGN_OR_RETURN(bool ij, CanAccessPeer(i, j));
      AT_ASSIGN_OR_RETURN(bool ji, CanAccessPeer(j, i));
      node.topology.push_back(ij && ji ? "P2P" : "SYS");
    }
  }
  int driver = 0, runtime = 0, nccl = 0;
  AT_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver));
  AT_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime));
  AT_NCCL_RETURN_IF_ERROR(ncclGetVersion(&nccl));
  node.driver_version = CudaVersionString(driver);
  node.cuda_version = CudaVersionString(runtime);
  node.nccl_version = NcclVersionString(nccl);
  return node;
}

absl::Status EnablePeerAccess(int gpus) {
  for (int i = 0; i < gpus; ++i) {
    ScopedDevice scoped(i);
    AT_RETURN_IF_ERROR(scoped.status());
    for (int j = 0; j < gpus; ++j) {
      if (i == j) continue;
      AT_ASSIGN_OR_RETURN(bool can, CanAccessPeer(i, j));
      if (!can) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // not an error here: clear it
        continue;
      }
      AT_RETURN_IF_ERROR(CudaToStatus(e, "cudaDeviceEnablePeerAccess"));
    }
  }
  return absl::OkStatus();
}

}  // namespace autotuned::cuda
