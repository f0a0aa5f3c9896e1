// The launch floor of the event loop: how long one iteration of a loop of
// back-to-back kernel launches takes when the kernel itself runs for a fixed
// time (0, 2, 4 or 6 us of spinning on the GPU's global timer), launched one
// by one from the host (as the daemon's EVENT_LOOP timing and nccl-tests do)
// or replayed as one captured CUDA graph (CUDA_GRAPH). The eager figure minus
// the graph figure is what a small collective timed in the event loop pays on
// top of its own work. The loop also runs from two host threads at once on
// one GPU (each with its own stream), and with more than one GPU on every GPU
// at once, one host thread per GPU as in the daemon's GPU worker; the slowest
// thread counts.
//
//   launch_floor [iterations=2000]
//
// Per host threads x GPUs, launch shape (blocks x threads) and kernel time:
// the mean per iteration in eager and in graph mode, from CUDA events around the
// whole loop after a warm-up loop. Needs no peer access and no NCCL.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/cuda_check.h"

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every thread spins until `ns` nanoseconds have passed since it started.
__global__ void Spin(unsigned long long ns) {
  if (ns == 0) return;
  const unsigned long long start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

namespace {

struct Shape {
  int blocks;
  int threads;
};

// One GPU's loop of `iterations` launches, eager or as a graph replay; the
// microseconds per iteration.
double TimeLoop(int gpu, const Shape& shape, unsigned long long ns, int iterations,
                bool graph) {
  AT_CUDA_CHECK(cudaSetDevice(gpu));
  cudaStream_t stream;
  AT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  AT_CUDA_CHECK(cudaEventCreate(&start));
  AT_CUDA_CHECK(cudaEventCreate(&stop));
  auto launch_all = [&] {
    for (int i = 0; i < iterations; ++i) {
      Spin<<<shape.blocks, shape.threads, 0, stream>>>(ns);
    }
  };
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    AT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    launch_all();
    AT_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    AT_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    AT_CUDA_CHECK(cudaGraphDestroy(g));
    AT_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  } else {
    launch_all();  // warm-up
  }
  AT_CUDA_CHECK(cudaStreamSynchronize(stream));
  AT_CUDA_CHECK(cudaEventRecord(start, stream));
  if (graph) {
    AT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  } else {
    launch_all();
  }
  AT_CUDA_CHECK(cudaEventRecord(stop, stream));
  AT_CUDA_CHECK(cudaStreamSynchronize(stream));
  float ms = 0;
  AT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  if (exec != nullptr) AT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  AT_CUDA_CHECK(cudaEventDestroy(start));
  AT_CUDA_CHECK(cudaEventDestroy(stop));
  AT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 1000.0 * ms / iterations;
}

// The loop from `threads` host threads at once, thread t on GPU t % gpus,
// started together; the slowest thread's microseconds per iteration.
double TimeOnGpus(int threads, int gpus, const Shape& shape, unsigned long long ns,
                  int iterations, bool graph) {
  std::vector<double> us(threads, 0);
  std::atomic<int> ready{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      AT_CUDA_CHECK(cudaSetDevice(t % gpus));
      AT_CUDA_CHECK(cudaFree(nullptr));  // the context exists before the start line
      ready.fetch_add(1);
      while (ready.load() < threads) {
      }
      us[t] = TimeLoop(t % gpus, shape, ns, iterations, graph);
    });
  }
  for (std::thread& t : running) t.join();
  return *std::max_element(us.begin(), us.end());
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (iterations < 1) {
    std::fprintf(stderr, "usage: launch_floor [iterations=2000]\n");
    return 2;
  }
  int n = 0;
  AT_CUDA_CHECK(cudaGetDeviceCount(&n));
  cudaDeviceProp prop;
  AT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  AT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  AT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("# launch_floor: %d x %s, driver %d, runtime %d, %d iterations per loop\n", n,
              prop.name, driver, runtime, iterations);
  std::printf("%12s %9s %10s %9s %9s %13s\n", "threads/gpus", "shape", "kernel_us",
              "eager_us", "graph_us", "eager-graph");
  struct Setup {
    int threads, gpus;
  };
  std::vector<Setup> setups = {{1, 1}, {2, 1}};
  if (n > 1) setups.push_back({n, n});
  const Shape shapes[] = {{1, 32}, {16, 512}, {64, 1024}};
  const unsigned long long kernel_ns[] = {0, 2000, 4000, 6000};
  for (const Setup& setup : setups) {
    for (const Shape& shape : shapes) {
      for (unsigned long long ns : kernel_ns) {
        const double eager =
            TimeOnGpus(setup.threads, setup.gpus, shape, ns, iterations, false);
        const double graph = TimeOnGpus(setup.threads, setup.gpus, shape, ns, iterations, true);
        char who[32], name[32];
        std::snprintf(who, sizeof(who), "%d/%d", setup.threads, setup.gpus);
        std::snprintf(name, sizeof(name), "%dx%d", shape.blocks, shape.threads);
        std::printf("%12s %9s %10.1f %9.2f %9.2f %13.2f\n", who, name, ns / 1000.0, eager,
                    graph, eager - graph);
      }
    }
  }
  return 0;
}
