#include <unistd.h>

#include "daemon/backend/cuda/gpu_node.h"
#include "daemon/backend/cuda/gpu_worker.h"

namespace autotuned::cuda {

int GpuWorkerMain(bool test_faults) {
  // Whatever a library prints to stdout (NCCL_DEBUG does) goes to stderr.
  dup2(STDERR_FILENO, STDOUT_FILENO);
  GpuNodeOptions options;
  options.test_faults = test_faults;
  return ServeGpuWorker([&] { return GpuNode::Create(options); });
}

}  // namespace autotuned::cuda
