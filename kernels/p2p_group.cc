// Host runtime part of the C ABI: error strings, signal buffer helpers and
// the single-process group (peer access + per-GPU signal and scratch
// buffers). Uses the CUDA runtime; no logging, no absl, no protobuf.
#include <cuda_runtime.h>
#include <stdint.h>

#include <new>

#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_layout.h"

static_assert(AT_ERR_INVALID_VALUE == static_cast<int>(cudaErrorInvalidValue),
              "AT_ERR_INVALID_VALUE must be cudaErrorInvalidValue");

struct at_p2p_group {
  int world = 0;
  int devices[autotuned::kernels::p2p::kMaxWorld] = {};
  int64_t scratch_bytes = 0;
  void* scratch[autotuned::kernels::p2p::kMaxWorld] = {};
  int64_t push_bytes = 0;  // the push one-shot's own buffers
  void* push[autotuned::kernels::p2p::kMaxWorld] = {};
  void* signals[autotuned::kernels::p2p::kMaxWorld] = {};
  // Non-blocking, so an error read does not wait for the caller's streams.
  cudaStream_t control[autotuned::kernels::p2p::kMaxWorld] = {};
};

namespace {

using autotuned::kernels::p2p::kMaxWorld;
using autotuned::kernels::p2p::kMinWorld;
using autotuned::kernels::p2p::Signal;

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  DeviceGuard() { ok_ = cudaGetDevice(&device_) == cudaSuccess; }
  ~DeviceGuard() {
    if (ok_) cudaSetDevice(device_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_ = 0;
  bool ok_ = false;
};

void FreeGroup(at_p2p_group* g) {
  for (int r = 0; r < g->world; ++r) {
    if (cudaSetDevice(g->devices[r]) != cudaSuccess) continue;
    if (g->scratch[r] != nullptr) cudaFree(g->scratch[r]);
    if (g->push[r] != nullptr) cudaFree(g->push[r]);
    if (g->signals[r] != nullptr) cudaFree(g->signals[r]);
    if (g->control[r] != nullptr) cudaStreamDestroy(g->control[r]);
  }
  delete g;
}

int EnablePeers(int world, const int* devices) {
  for (int i = 0; i < world; ++i) {
    cudaError_t e = cudaSetDevice(devices[i]);
    if (e != cudaSuccess) return e;
    for (int j = 0; j < world; ++j) {
      if (devices[i] == devices[j]) continue;  // itself, or ranks sharing a GPU
      int can = 0;
      e = cudaDeviceCanAccessPeer(&can, devices[i], devices[j]);
      if (e != cudaSuccess) return e;
      if (!can) return cudaErrorPeerAccessUnsupported;
      e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // not an error here; clear it
      } else if (e != cudaSuccess) {
        return e;
      }
    }
  }
  return cudaSuccess;
}

}  // namespace

extern "C" {

const char* at_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

int at_p2p_signal_init(void* signal, void* stream) {
  if (signal == nullptr) return cudaErrorInvalidValue;
  return cudaMemsetAsync(signal, 0, sizeof(Signal), static_cast<cudaStream_t>(stream));
}

int at_p2p_signal_error(const void* signal, void* stream, uint32_t* error) {
  if (signal == nullptr || error == nullptr) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Signal* sig = static_cast<const Signal*>(signal);
  cudaError_t e = cudaMemcpyAsync(error, &sig->error, sizeof(*error), cudaMemcpyDeviceToHost, s);
  if (e != cudaSuccess) return e;
  return cudaStreamSynchronize(s);
}

int at_p2p_group_create(int world, const int* devices, int64_t scratch_bytes,
                        at_p2p_group** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (world < kMinWorld || world > kMaxWorld || devices == nullptr || scratch_bytes < 0) {
    return cudaErrorInvalidValue;
  }
  DeviceGuard guard;
  int rc = EnablePeers(world, devices);
  for (int r = 0; r < world && rc == cudaSuccess; ++r) {
    rc = cudaSetDevice(devices[r]);
    if (rc == cudaSuccess) rc = at_p2p_preload_kernels();
  }
  if (rc != cudaSuccess) return rc;
  at_p2p_group* g = new (std::nothrow) at_p2p_group;
  if (g == nullptr) return cudaErrorMemoryAllocation;
  g->world = world;
  g->scratch_bytes = scratch_bytes;
  for (int r = 0; r < world; ++r) g->devices[r] = devices[r];
  for (int r = 0; r < world && rc == cudaSuccess; ++r) {
    rc = cudaSetDevice(devices[r]);
    if (rc == cudaSuccess) rc = cudaMalloc(&g->signals[r], sizeof(Signal));
    if (rc == cudaSuccess) rc = cudaMemset(g->signals[r], 0, sizeof(Signal));
    if (rc == cudaSuccess && scratch_bytes > 0) {
      rc = cudaMalloc(&g->scratch[r], static_cast<size_t>(scratch_bytes));
    }
    if (rc == cudaSuccess) rc = cudaStreamCreateWithFlags(&g->control[r], cudaStreamNonBlocking);
    if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
  }
  if (rc != cudaSuccess) {
    FreeGroup(g);
    return rc;
  }
  *out = g;
  return cudaSuccess;
}

void at_p2p_group_destroy(at_p2p_group* group) {
  if (group == nullptr) return;
  DeviceGuard guard;
  FreeGroup(group);
}

int at_p2p_group_world(const at_p2p_group* group) {
  return group == nullptr ? 0 : group->world;
}

int at_p2p_group_device(const at_p2p_group* group, int rank) {
  if (group == nullptr || rank < 0 || rank >= group->world) return -1;
  return group->devices[rank];
}

int64_t at_p2p_group_scratch_bytes(const at_p2p_group* group) {
  return group == nullptr ? 0 : group->scratch_bytes;
}

void* const* at_p2p_group_scratch(const at_p2p_group* group) {
  return group == nullptr ? nullptr : group->scratch;
}

void* const* at_p2p_group_signals(const at_p2p_group* group) {
  return group == nullptr ? nullptr : group->signals;
}

int at_p2p_group_init_args(const at_p2p_group* group, int rank, at_p2p_args* args) {
  if (group == nullptr || args == nullptr || rank < 0 || rank >= group->world) {
    return cudaErrorInvalidValue;
  }
  args->world = group->world;
  args->rank = rank;
  args->peer_scratch = group->scratch_bytes > 0 ? group->scratch : nullptr;
  args->scratch_bytes = group->scratch_bytes;
  args->peer_signals = group->signals;
  return cudaSuccess;
}

int at_p2p_group_set_push_bytes(at_p2p_group* group, int64_t bytes) {
  if (group == nullptr || bytes < 0 || (bytes > 0 && bytes < at_p2p_scratch_bytes(
                                                        AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                                                        AT_DTYPE_BFLOAT16, group->world, 1, 0))) {
    return cudaErrorInvalidValue;
  }
  DeviceGuard guard;
  for (int r = 0; r < group->world; ++r) {
    cudaError_t e = cudaSetDevice(group->devices[r]);
    if (e == cudaSuccess && group->push[r] != nullptr) e = cudaFree(group->push[r]);
    group->push[r] = nullptr;
    if (e != cudaSuccess) return e;
  }
  group->push_bytes = 0;
  if (bytes == 0) return cudaSuccess;
  for (int r = 0; r < group->world; ++r) {
    cudaError_t e = cudaSetDevice(group->devices[r]);
    if (e == cudaSuccess) e = cudaMalloc(&group->push[r], static_cast<size_t>(bytes));
    if (e == cudaSuccess) {
      e = static_cast<cudaError_t>(
          at_p2p_scratch_init(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, group->push[r], bytes, nullptr));
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      at_p2p_group_set_push_bytes(group, 0);
      return e;
    }
  }
  group->push_bytes = bytes;
  return cudaSuccess;
}

int64_t at_p2p_group_push_bytes(const at_p2p_group* group) {
  return group == nullptr ? 0 : group->push_bytes;
}

int at_p2p_group_init_algo_args(const at_p2p_group* group, int algo, int rank,
                                at_p2p_args* args) {
  const int rc = at_p2p_group_init_args(group, rank, args);
  if (rc != cudaSuccess || algo != AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) return rc;
  args->peer_scratch = group->push_bytes > 0 ? group->push : nullptr;
  args->scratch_bytes = group->push_bytes;
  return cudaSuccess;
}

int at_p2p_group_reset(at_p2p_group* group) {
  if (group == nullptr) return cudaErrorInvalidValue;
  DeviceGuard guard;
  for (int r = 0; r < group->world; ++r) {
    cudaError_t e = cudaSetDevice(group->devices[r]);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return e;
  }
  for (int r = 0; r < group->world; ++r) {
    cudaError_t e = cudaSetDevice(group->devices[r]);
    if (e == cudaSuccess) e = cudaMemset(group->signals[r], 0, sizeof(Signal));
    if (e == cudaSuccess && group->push[r] != nullptr) {
      e = static_cast<cudaError_t>(at_p2p_scratch_init(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                                                       group->push[r], group->push_bytes, nullptr));
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

int at_p2p_group_error(const at_p2p_group* group, int rank, uint32_t* error) {
  if (group == nullptr || rank < 0 || rank >= group->world) return cudaErrorInvalidValue;
  DeviceGuard guard;
  const cudaError_t e = cudaSetDevice(group->devices[rank]);
  if (e != cudaSuccess) return e;
  return at_p2p_signal_error(group->signals[rank], group->control[rank], error);
}

}  // extern "C"
