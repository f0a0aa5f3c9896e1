#include "daemon/measure/backend/cuda/worker/gpu_worker_main.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "daemon/measure/backend/cuda/gpu_worker.h"
#include "daemon/measure/backend/cuda/worker/cuda_gpu_node.h"
#include "daemon/measure/backend/cuda/worker/nccl_tuner_link.h"

namespace autotuned::cuda {

int GpuWorkerMain(bool test_faults) {
  // Whatever a library prints to stdout (NCCL_DEBUG does) goes to stderr.
  dup2(STDERR_FILENO, STDOUT_FILENO);
  // Before any NCCL call; without the plugin the NCCL candidates that name
  // an algorithm, protocol or channel count fail with the reason.
  const absl::Status tuner = LoadNcclTuner();
  GpuNodeOptions options;
  options.test_faults = test_faults;
  return ServeGpuWorker([&] {
    absl::StatusOr<std::unique_ptr<GpuNode>> node = CreateCudaGpuNode(options);
    if (node.ok() && !tuner.ok()) {  // said where there are GPUs to say it of
      fprintf(stderr, "autotuned gpu worker: NCCL's choices cannot be forced: %s\n",
              std::string(tuner.message()).c_str());
    }
    return node;
  });
}

bool GpuWorkerBuilt() { return true; }

}  // namespace autotuned::cuda
