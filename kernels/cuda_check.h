// AT_CUDA_CHECK / AT_NCCL_CHECK: the error check of the standalone programs
// (kernels/p2p_bench.cc, bench/*.cu), which have no absl::Status to return:
// a failed call prints where and why and the program exits 1. Code of the
// daemon returns absl::Status instead, through AT_CUDA_RETURN_IF_ERROR and
// AT_NCCL_RETURN_IF_ERROR (daemon/measure/backend/cuda/worker/cuda_status.h).
//
// AT_CUDA_CHECK takes a cudaError_t or an int holding one (the return codes
// of autotuned_kernels.h). Header-only and free of the project's libraries,
// so that nvcc can build a program from a .cu file alone with -I. (the
// repository root); CUDA's include directory holds nccl.h too.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define AT_CUDA_CHECK(expr)                                                               \
  do {                                                                                    \
    const cudaError_t at_cuda_error_ = static_cast<cudaError_t>(expr);                    \
    if (at_cuda_error_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #expr,             \
                   cudaGetErrorString(at_cuda_error_), cudaGetErrorName(at_cuda_error_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

#define AT_NCCL_CHECK(expr)                                              \
  do {                                                                   \
    const ncclResult_t at_nccl_result_ = (expr);                         \
    if (at_nccl_result_ != ncclSuccess) {                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, \
                   ncclGetErrorString(at_nccl_result_));                 \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)
