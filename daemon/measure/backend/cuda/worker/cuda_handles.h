// Move-only owners of CUDA runtime handles (STYLE.md: RAII for every handle,
// made by a static Create returning absl::StatusOr). Each remembers its
// device and makes it current while it releases the handle, restoring the
// caller's device; destructors ignore errors (a broken context is reported
// by the next call that uses it).
//
// Thread-safety: none; a handle belongs to one thread at a time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace autotuned::cuda {

// Makes `device` current for its scope and restores the previous device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  // Whether `device` could be made current (cudaSetDevice).
  absl::Status status() const;

 private:
  int previous_ = -1;
  cudaError_t error_ = cudaSuccess;
};

// cudaMalloc'd memory on one device (at least one byte, so that the pointer
// is never null; cudaMalloc aligns to 256 bytes).
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Create(int device, int64_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer() { Release(); }

  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

 private:
  void Release();
  int device_ = -1;
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// A non-blocking stream (no implicit sync with the legacy default stream).
class CudaStream {
 public:
  static absl::StatusOr<CudaStream> Create(int device);
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  ~CudaStream() { Release(); }

  cudaStream_t get() const { return stream_; }

 private:
  void Release();
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

// A timing event.
class CudaEvent {
 public:
  static absl::StatusOr<CudaEvent> Create(int device);
  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  ~CudaEvent() { Release(); }

  cudaEvent_t get() const { return event_; }

 private:
  void Release();
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

// An instantiated CUDA graph, made from a captured graph (which it destroys).
class GraphExec {
 public:
  static absl::StatusOr<GraphExec> Instantiate(int device, cudaGraph_t graph);
  GraphExec() = default;
  GraphExec(GraphExec&& other) noexcept;
  GraphExec& operator=(GraphExec&& other) noexcept;
  ~GraphExec() { Release(); }

  cudaGraphExec_t get() const { return exec_; }

 private:
  void Release();
  int device_ = -1;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace autotuned::cuda
