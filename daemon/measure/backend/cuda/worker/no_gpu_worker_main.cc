// The GPU worker's entry point in a build without CUDA: no GPU node to serve.
#include <cstdio>

#include "daemon/measure/backend/cuda/worker/gpu_worker_main.h"

namespace autotuned::cuda {

int GpuWorkerMain(bool /*test_faults*/) {
  std::fputs("autotuned --gpu_worker: built without the cuda backend\n", stderr);
  return 1;
}

bool GpuWorkerBuilt() { return false; }

}  // namespace autotuned::cuda
