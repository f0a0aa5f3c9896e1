// What two GPUs can move between them over NVLink: the ceiling for a 2-GPU
// all_reduce's bus bandwidth. With 2 ranks busbw = algbw, and a two-shot
// all_reduce of S bytes moves S/2 across the link in each direction in each of
// its two phases, both directions at once: busbw can reach at most what one
// direction carries while the other is busy too ("both ways" below).
//
//   nvlink_ceiling [MiB=256] [iterations=20]
//
// With 3 or more GPUs visible, then every GPU at once sends MiB to the others,
// an equal piece to each (the traffic of a two-shot's reduce-scatter or
// all-gather phase): by copy engine from one stream, by copy engine from a
// stream per peer, and by an SM kernel storing to every peer; GB/s out of
// each GPU (the slowest), the ceiling of a two-shot all_reduce's busbw there.
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

// The slowest of GPUs 0..active-1's milliseconds for `iters` calls of
// launch(g), all GPUs at once, each timed by events on `stream[g]`, after
// three warm-up calls each and a synchronization of GPUs 0..synced-1.
template <typename LaunchFn>
float SlowestMs(int active, int synced, int iters, const cudaStream_t* stream,
                const cudaEvent_t* start, const cudaEvent_t* stop, LaunchFn launch) {
  for (int g = 0; g < active; ++g) {
    for (int i = 0; i < 3; ++i) launch(g);
  }
  for (int g = 0; g < synced; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (int g = 0; g < active; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventRecord(start[g], stream[g]));
    for (int i = 0; i < iters; ++i) launch(g);
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventRecord(stop[g], stream[g]));
  }
  float worst_ms = 0;
  for (int g = 0; g < active; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    AT_CUDA_CHECK(cudaEventSynchronize(stop[g]));
    float ms = 0;
    AT_CUDA_CHECK(cudaEventElapsedTime(&ms, start[g], stop[g]));
    worst_ms = std::max(worst_ms, ms);
  }
  return worst_ms;
}

// GB/s per direction: bytes per transfer / the slowest GPU's time per transfer.
double Measure(Kind kind, Gpu* gpus, bool both, size_t bytes, int iters, int blocks,
               int threads) {
  const cudaStream_t stream[2] = {gpus[0].stream, gpus[1].stream};
  const cudaEvent_t start[2] = {gpus[0].start, gpus[1].start};
  const cudaEvent_t stop[2] = {gpus[0].stop, gpus[1].stop};
  const float ms = SlowestMs(both ? 2 : 1, 2, iters, stream, start, stop,
                             [&](int g) { Launch(kind, gpus, g, bytes, blocks, threads); });
  return static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9;
}

// ---- Every GPU to every other, at once (3 GPUs or more) ----

constexpr int kMaxGpus = 8;

struct Peers {
  int4* dst[kMaxGpus - 1];
};

// Blocks b, b + peers, ... store piece `n` int4s of src into dst[b % peers].
__global__ void StoreToPeers(const int4* __restrict__ src, const __grid_constant__ Peers to,
                             int peers, size_t n) {
  const int p = static_cast<int>(blockIdx.x) % peers;
  const size_t lanes = static_cast<size_t>(gridDim.x / peers) * blockDim.x;
  int4* dst = to.dst[p];
  const int4* from = src + p * n;
  for (size_t i = (blockIdx.x / peers) * size_t{blockDim.x} + threadIdx.x; i < n; i += lanes) {
    dst[i] = from[i];
  }
}

enum class Exchange { kCeOneStream, kCeStreamPerPeer, kStores };

struct XGpu {
  char* mine = nullptr;   // piece q goes to the q-th peer
  char* inbox = nullptr;  // piece from the q-th peer at q
  cudaStream_t stream[kMaxGpus] = {};
  cudaEvent_t start{}, stop{}, fork{};
  cudaEvent_t join[kMaxGpus] = {};
};

// The q-th peer of g (q in [0, n - 1)) and g's index among that peer's peers.
int PeerOf(int g, int q) { return q < g ? q : q + 1; }
int IndexAt(int g, int peer) { return g < peer ? g : g - 1; }

void LaunchExchange(Exchange kind, XGpu* x, int n, int g, size_t piece, int blocks, int threads) {
  XGpu& me = x[g];
  AT_CUDA_CHECK(cudaSetDevice(g));
  if (kind == Exchange::kStores) {
    Peers to{};
    for (int q = 0; q < n - 1; ++q) {
      const int p = PeerOf(g, q);
      to.dst[q] = reinterpret_cast<int4*>(x[p].inbox + IndexAt(g, p) * piece);
    }
    StoreToPeers<<<blocks, threads, 0, me.stream[0]>>>(reinterpret_cast<const int4*>(me.mine), to,
                                                       n - 1, piece / sizeof(int4));
    AT_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const bool spread = kind == Exchange::kCeStreamPerPeer;
  if (spread) {
    AT_CUDA_CHECK(cudaEventRecord(me.fork, me.stream[0]));
    for (int q = 1; q < n - 1; ++q) AT_CUDA_CHECK(cudaStreamWaitEvent(me.stream[q], me.fork, 0));
  }
  for (int q = 0; q < n - 1; ++q) {
    const int p = PeerOf(g, q);
    const cudaStream_t s = spread ? me.stream[q] : me.stream[0];
    AT_CUDA_CHECK(cudaMemcpyPeerAsync(x[p].inbox + IndexAt(g, p) * piece, p, me.mine + q * piece, g,
                                      piece, s));
  }
  if (spread) {
    for (int q = 1; q < n - 1; ++q) {
      AT_CUDA_CHECK(cudaEventRecord(me.join[q], me.stream[q]));
      AT_CUDA_CHECK(cudaStreamWaitEvent(me.stream[0], me.join[q], 0));
    }
  }
}

// GB/s out of each GPU (the slowest): (n - 1) pieces per transfer.
double MeasureExchange(Exchange kind, XGpu* x, int n, size_t piece, int iters, int blocks,
                       int threads) {
  cudaStream_t stream[kMaxGpus];
  cudaEvent_t start[kMaxGpus], stop[kMaxGpus];
  for (int g = 0; g < n; ++g) {
    stream[g] = x[g].stream[0];
    start[g] = x[g].start;
    stop[g] = x[g].stop;
  }
  const float ms = SlowestMs(n, n, iters, stream, start, stop, [&](int g) {
    LaunchExchange(kind, x, n, g, piece, blocks, threads);
  });
  return static_cast<double>(piece) * (n - 1) * iters / (ms * 1e-3) / 1e9;
}

void ExchangeAll(int n, size_t bytes, int iters, int sms) {
  const size_t piece = bytes / (n - 1) / sizeof(int4) * sizeof(int4);
  XGpu x[kMaxGpus];
  for (int g = 0; g < n; ++g) {
    AT_CUDA_CHECK(cudaSetDevice(g));
    for (int p = 0; p < n; ++p) {
      if (p == g) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        AT_CUDA_CHECK(e);
      }
    }
    AT_CUDA_CHECK(cudaMalloc(&x[g].mine, piece * (n - 1)));
    AT_CUDA_CHECK(cudaMalloc(&x[g].inbox, piece * (n - 1)));
    AT_CUDA_CHECK(cudaMemset(x[g].mine, 1 + g, piece * (n - 1)));
    for (int q = 0; q < n - 1; ++q) {
      AT_CUDA_CHECK(cudaStreamCreateWithFlags(&x[g].stream[q], cudaStreamNonBlocking));
      AT_CUDA_CHECK(cudaEventCreateWithFlags(&x[g].join[q], cudaEventDisableTiming));
    }
    AT_CUDA_CHECK(cudaEventCreate(&x[g].start));
    AT_CUDA_CHECK(cudaEventCreate(&x[g].stop));
    AT_CUDA_CHECK(cudaEventCreateWithFlags(&x[g].fork, cudaEventDisableTiming));
  }
  std::printf("# every GPU to the %d others at once, %zu MiB out of each\n", n - 1,
              piece * (n - 1) >> 20);
  std::printf("%-34s %8s %8s %14s\n", "exchange", "blocks", "threads", "out GB/s");
  std::printf("%-34s %8s %8s %14.1f\n", "copy engine, one stream", "-", "-",
              MeasureExchange(Exchange::kCeOneStream, x, n, piece, iters, 0, 0));
  std::printf("%-34s %8s %8s %14.1f\n", "copy engine, a stream per peer", "-", "-",
              MeasureExchange(Exchange::kCeStreamPerPeer, x, n, piece, iters, 0, 0));
  const int per = sms / (n - 1) > 0 ? sms / (n - 1) : 1;  // blocks per peer
  const int shapes[][2] = {{per * (n - 1), 512}, {per * (n - 1), 1024}, {2 * per * (n - 1), 512}};
  for (const auto& s : shapes) {
    std::printf("%-34s %8d %8d %14.1f\n", "SM kernel, 16 B stores to peers", s[0], s[1],
                MeasureExchange(Exchange::kStores, x, n, piece, iters, s[0], s[1]));
  }
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
  if (count >= 3) ExchangeAll(std::min(count, kMaxGpus), bytes, iters, sms);
  return 0;
}
