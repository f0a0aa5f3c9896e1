// The GPU worker process's entry point in the daemon binary
// (autotuned --gpu_worker): serves the real GpuNode (cuda_gpu_node.h) over
// the worker protocol (../gpu_worker.h) to the supervisor that started it
// (../cuda_backend.h). A build without CUDA links no_gpu_worker_main.cc
// instead (docs/operations.md#building-without-cuda).
#pragma once

namespace autotuned::cuda {

// Returns the process exit code. `test_faults` adds the test fault kernels
// (GpuNodeOptions::test_faults).
int GpuWorkerMain(bool test_faults);

// Whether this binary has the GPU worker: false in a build without CUDA, where
// GpuWorkerMain only says so and returns 1.
bool GpuWorkerBuilt();

}  // namespace autotuned::cuda
