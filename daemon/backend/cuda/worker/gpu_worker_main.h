// The GPU worker process's entry point in the daemon binary
// (autotuned --gpu_worker): serves the real GpuNode (cuda_gpu_node.h) over
// the worker protocol (../gpu_worker.h) to the supervisor that started it
// (../cuda_backend.h).
#pragma once

namespace autotuned::cuda {

// Returns the process exit code. `test_faults` adds the test fault kernels
// (GpuNodeOptions::test_faults).
int GpuWorkerMain(bool test_faults);

}  // namespace autotuned::cuda
