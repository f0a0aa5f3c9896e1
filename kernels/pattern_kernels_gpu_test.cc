// GPU test: fills a device buffer with the pattern and checks it on the
// device. Without a GPU it reports that it skipped and passes.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/pattern.h"
#include "kernels/pattern_kernels.h"

namespace autotuned::kernels {
namespace {

bool HaveGpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "SKIPPED: no CUDA device on this machine\n");
    return false;
  }
  return true;
}

TEST_CASE("pattern fill and device check agree", "[gpu]") {
  if (!HaveGpu()) return;
  const int64_t count = 100000;
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    void* buf = nullptr;
    unsigned long long* bad = nullptr;
    long long* first = nullptr;
    REQUIRE(cudaMalloc(&buf, count * 4) == cudaSuccess);
    REQUIRE(cudaMalloc(&bad, sizeof(*bad)) == cudaSuccess);
    REQUIRE(cudaMalloc(&first, sizeof(*first)) == cudaSuccess);
    const long long kMax = INT64_MAX;
    cudaMemset(bad, 0, sizeof(*bad));
    cudaMemcpy(first, &kMax, sizeof(kMax), cudaMemcpyHostToDevice);
    // A broadcast from root 2 expects rank 2's input everywhere.
    REQUIRE(LaunchFillPattern({buf, t, count, 2, 0}, nullptr) == 0);
    CheckPatternArgs check;
    check.data = buf;
    check.dtype = t;
    check.count = count;
    check.expect.collective = Collective::kBroadcast;
    check.expect.root = 2;
    check.expect.count = count;
    check.mismatches = bad;
    check.first_bad = first;
    REQUIRE(LaunchCheckPattern(check, nullptr) == 0);
    unsigned long long host_bad = 1;
    REQUIRE(cudaMemcpy(&host_bad, bad, sizeof(host_bad), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    CHECK(host_bad == 0);
    // Against root 1 every element differs somewhere: mismatches are found.
    check.expect.root = 1;
    REQUIRE(LaunchCheckPattern(check, nullptr) == 0);
    REQUIRE(cudaMemcpy(&host_bad, bad, sizeof(host_bad), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    CHECK(host_bad > 0);
    cudaFree(buf);
    cudaFree(bad);
    cudaFree(first);
  }
}

}  // namespace
}  // namespace autotuned::kernels
