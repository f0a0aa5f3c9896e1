// What two GPUs can move between them over NVLink: the ceiling for a 2-GPU
// all_reduce's bus bandwidth. With 2 ranks busbw = algbw, and a two-shot
// all_reduce of S bytes moves S/2 across the link in each direction in each of
// its two phases, both directions at once: busbw can reach at most what one
// direction carries while the other is busy too ("both ways" below).
//
//   nvlink_ceiling [MiB=256] [iterations=20]
//
// Per transfer: copy engine (cudaMemcpyPeerAsync issued by the writer; also in
// 2 MiB chunks, each followed by an 8-byte copy, as all_reduce/copy_engine
// moves data; and issued by the reader, a pull) and SM
// kernels (16-byte loads from the peer's memory into local memory, or stores
// into the peer's, plain or volatile as all_reduce/one_shot_push's), one way
// (GPU 0 -> GPU 1) and both ways at once; GB/s per direction, from CUDA
// events around `iterations` back-to-back transfers after 3 warm-ups.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda_check.h"

__global__ void Copy16(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

// Copy16 with st.volatile (relaxed, system scope) stores.
__global__ void Copy16Volatile(const int4* __restrict__ src, int4* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const int4 v = src[i];
    asm volatile("st.volatile.global.v4.s32 [%0], {%1, %2, %3, %4};" ::"l"(dst + i), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
}

namespace {

constexpr size_t kChunkBytes = size_t{2} << 20;

struct Gpu {
  void* mine = nullptr;   // source of its reads and writes
  void* inbox = nullptr;  // what the peer writes into
  void* out = nullptr;    // local destination of remote reads
  cudaStream_t stream{};
  cudaEvent_t start{}, stop{};
};

enum class Kind {
  kCopyEngine,
  kCopyEngineChunks,
  kCopyEnginePull,
  kRemoteRead,
  kRemoteWrite,
  kRemoteWriteVolatile,
};

// One transfer of `bytes` by GPU `g` (to or from GPU `1 - g`).
void Launch(Kind kind, Gpu* gpus, int g, size_t bytes, int blocks, int threads) {
  Gpu& me = gpus[g];
  Gpu& peer = gpus[1 - g];
  AT_CUDA_CHECK(cudaSetDevice(g));
  const size_t n = bytes / sizeof(int4);
  switch (kind) {
    case Kind::kCopyEngine:
      AT_CUDA_CHECK(cudaMemcpyPeerAsync(peer.inbox, 1 - g, me.mine, g, bytes, me.stream));
      break;
    case Kind::kCopyEnginePull:  // issued by the reader: its copy engine reads the peer
      AT_CUDA_CHECK(cudaMemcpyPeerAsync(me.out, g, peer.mine, 1 - g, bytes, me.stream));
      break;
    case Kind::kRemoteRead:
      Copy16<<<blocks, threads, 0, me.stream>>>(static_cast<const int4*>(peer.mine),
                                                static_cast<int4*>(me.out), n);
      break;
    case Kind::kCopyEngineChunks:
      for (size_t off = 0; off < bytes; off += kChunkBytes) {
        const size_t len = std::min(kChunkBytes, bytes - off);
        AT_CUDA_CHECK(cudaMemcpyPeerAsync(static_cast<char*>(peer.inbox) + off, 1 - g,
                                          static_cast<const char*>(me.mine) + off, g, len,
                                          me.stream));
        AT_CUDA_CHECK(cudaMemcpyPeerAsync(peer.out, 1 - g, me.mine, g, 8, me.stream));  // the flag
      }
      break;
    case Kind::kRemoteWrite:
      Copy16<<<blocks, threads, 0, me.stream>>>(static_cast<const int4*>(me.mine),
                                                static_cast<int4*>(peer.inbox), n);
      break;
    case Kind::kRemoteWriteVolatile:
      Copy16Volatile<<<blocks, threads, 0, me.stream>>>(static_cast<const int4*>(me.mine),
                                                        static_cast<int4*>(peer.inbox), n);
      break;
  }
  AT_CUDA_CHECK(cudaGetLastError());
}

// GB/s per direction: bytes per transfer / the slowest GPU's time per transfer.
double Measure(Kind kind, Gpu* gpus, bool both, size_t bytes, int iters, int blocks,
               int threads) {
  const int active = both ? 2 : 1;
  for (int g = 0; g < active; ++g) {
    for (int i = 0; i < 3; ++i) Launch(kind, gpus, g, bytes, blocks, threads);
  }
  for (int g = 0; g < 2; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (int g = 0; g < active; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventRecord(gpus[g].start, gpus[g].stream));
    for (int i = 0; i < iters; ++i) Launch(kind, gpus, g, bytes, blocks, threads);
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventRecord(gpus[g].stop, gpus[g].stream));
  }
  float worst_ms = 0;
  for (int g = 0; g < active; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventSynchronize(gpus[g].stop));
    float ms = 0;
    AT_CUDA_CHECK(cudaEventElapsedTime(&ms, gpus[g].start, gpus[g].stop));
    worst_ms = std::max(worst_ms, ms);
  }
  return static_cast<double>(bytes) * iters / (worst_ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  int count = 0;
  AT_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "nvlink_ceiling: needs 2 GPUs, found %d\n", count);
    return 1;
  }
  const size_t bytes = mib << 20;
  Gpu gpus[2];
  int sms = 0;
  for (int g = 0; g < 2; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    int can = 0;
    AT_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, g, 1 - g));
    if (!can) {
      std::fprintf(stderr, "nvlink_ceiling: GPU %d cannot access GPU %d\n", g, 1 - g);
      return 1;
    }
    AT_CUDA_CHECK(cudaDeviceEnablePeerAccess(1 - g, 0));
    AT_CUDA_CHECK(cudaMalloc(&gpus[g].mine, bytes));
    AT_CUDA_CHECK(cudaMalloc(&gpus[g].inbox, bytes));
    AT_CUDA_CHECK(cudaMalloc(&gpus[g].out, bytes));
    AT_CUDA_CHECK(cudaMemset(gpus[g].mine, 1 + g, bytes));
    AT_CUDA_CHECK(cudaStreamCreateWithFlags(&gpus[g].stream, cudaStreamNonBlocking));
    AT_CUDA_CHECK(cudaEventCreate(&gpus[g].start));
    AT_CUDA_CHECK(cudaEventCreate(&gpus[g].stop));
    cudaDeviceProp prop{};
    AT_CUDA_CHECK(cudaGetDeviceProperties(&prop, g));
    sms = prop.multiProcessorCount;
    if (g == 0) std::printf("# %s x 2, %d SMs each; %zu MiB per transfer, %d iterations\n",
                            prop.name, sms, mib, iters);
  }
  std::printf("%-34s %8s %8s %14s %14s\n", "transfer", "blocks", "threads", "one way GB/s",
              "both ways GB/s");
  const struct {
    const char* name;
    Kind kind;
  } kinds[] = {{"copy engine (cudaMemcpyPeerAsync)", Kind::kCopyEngine},
               {"copy engine, 2 MiB chunks + flags", Kind::kCopyEngineChunks},
               {"copy engine, pull (reader's engine)", Kind::kCopyEnginePull},
               {"SM kernel, 16 B loads from peer", Kind::kRemoteRead},
               {"SM kernel, 16 B stores to peer", Kind::kRemoteWrite},
               {"SM kernel, 16 B volatile stores", Kind::kRemoteWriteVolatile}};
  for (const auto& k : kinds) {
    const int shapes[][2] = {{sms, 512}, {2 * sms, 512}, {4 * sms, 256}};
    const bool copy = k.kind == Kind::kCopyEngine || k.kind == Kind::kCopyEngineChunks ||
                      k.kind == Kind::kCopyEnginePull;
    const int n_shapes = copy ? 1 : 3;  // a copy has no shape
    for (int i = 0; i < n_shapes; ++i) {
      const int* s = shapes[i];
      const double one = Measure(k.kind, gpus, false, bytes, iters, s[0], s[1]);
      const double two = Measure(k.kind, gpus, true, bytes, iters, s[0], s[1]);
      if (copy) {
        std::printf("%-34s %8s %8s %14.1f %14.1f\n", k.name, "-", "-", one, two);
      } else {
        std::printf("%-34s %8d %8d %14.1f %14.1f\n", k.name, s[0], s[1], one, two);
      }
    }
  }
  return 0;
}
