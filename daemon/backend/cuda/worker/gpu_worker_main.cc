#include "daemon/backend/cuda/worker/gpu_worker_main.h"

#include <unistd.h>

#include "daemon/backend/cuda/gpu_worker.h"
#include "daemon/backend/cuda/worker/cuda_gpu_node.h"

namespace autotuned::cuda {

int GpuWorkerMain(bool test_faults) {
  // Whatever a library prints to stdout (NCCL_DEBUG does) goes to stderr.
  dup2(STDERR_FILENO, STDOUT_FILENO);
  GpuNodeOptions options;
  options.test_faults = test_faults;
  return ServeGpuWorker([&] { return CreateCudaGpuNode(options); });
}

bool GpuWorkerBuilt() { return true; }

}  // namespace autotuned::cuda
