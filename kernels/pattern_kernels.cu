#include "kernels/pattern_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/pattern.h"

namespace autotuned::kernels {
namespace {

constexpr int kThreads = 256;

__device__ float Load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kFloat16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ void Store(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kBFloat16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v); break;
    case DType::kFloat16: static_cast<__half*>(p)[i] = __float2half(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

__device__ float Expected(const ExpectArgs& e, int64_t i) {
  switch (e.collective) {
    case Collective::kAllGather: return pattern::AllGatherExpected(e.count, i);
    case Collective::kReduceScatter:
      return pattern::ReduceScatterExpected(e.op, e.world, e.rank, e.count, i);
    case Collective::kBroadcast: return pattern::BroadcastExpected(e.root, i);
    case Collective::kAllToAll: return pattern::AllToAllEvenExpected(e.rank, e.count, i);
    default: return pattern::AllReduceExpected(e.op, e.world, i);
  }
}

__global__ void FillKernel(FillPatternArgs a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < a.count;
       i += int64_t(gridDim.x) * blockDim.x) {
    Store(a.data, a.dtype, i, pattern::InputValue(a.rank, a.offset + i));
  }
}

__global__ void CheckKernel(CheckPatternArgs a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < a.count;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (Load(a.data, a.dtype, i) != Expected(a.expect, i)) {
      atomicAdd(a.mismatches, 1ull);
      atomicMin(a.first_bad, static_cast<long long>(i));
    }
  }
}

__global__ void SpinKernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int Blocks(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

}  // namespace

int LaunchFillPattern(const FillPatternArgs& args, void* stream) {
  FillKernel<<<Blocks(args.count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

int LaunchCheckPattern(const CheckPatternArgs& args, void* stream) {
  CheckKernel<<<Blocks(args.count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

int LaunchSpin(int64_t cycles, void* stream) {
  SpinKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace autotuned::kernels
