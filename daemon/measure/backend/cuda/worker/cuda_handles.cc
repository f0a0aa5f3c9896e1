#include "daemon/measure/backend/cuda/worker/cuda_handles.h"

#include <algorithm>
#include <utility>

#include "daemon/measure/backend/cuda/worker/cuda_status.h"

namespace autotuned::cuda {

ScopedDevice::ScopedDevice(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  error_ = cudaSetDevice(device);
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

absl::Status ScopedDevice::status() const { return CudaToStatus(error_, "cudaSetDevice"); }

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(int device, int64_t bytes) {
  ScopedDevice scoped(device);
  AT_RETURN_IF_ERROR(scoped.status());
  DeviceBuffer b;
  const int64_t size = std::max<int64_t>(bytes, 1);
  AT_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.ptr_, static_cast<size_t>(size)));
  b.device_ = device;
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (ptr_ == nullptr) return;
  ScopedDevice scoped(device_);
  cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<CudaStream> CudaStream::Create(int device) {
  ScopedDevice scoped(device);
  AT_RETURN_IF_ERROR(scoped.status());
  CudaStream s;
  AT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  s.device_ = device;
  return s;
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::Release() {
  if (stream_ == nullptr) return;
  ScopedDevice scoped(device_);
  cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

absl::StatusOr<CudaEvent> CudaEvent::Create(int device) {
  ScopedDevice scoped(device);
  AT_RETURN_IF_ERROR(scoped.status());
  CudaEvent e;
  AT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, cudaEventDefault));
  e.device_ = device;
  return e;
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::Release() {
  if (event_ == nullptr) return;
  ScopedDevice scoped(device_);
  cudaEventDestroy(event_);
  event_ = nullptr;
}

absl::StatusOr<GraphExec> GraphExec::Instantiate(int device, cudaGraph_t graph) {
  ScopedDevice scoped(device);
  GraphExec g;
  absl::Status s = scoped.status();
  if (s.ok()) s = CudaToStatus(cudaGraphInstantiate(&g.exec_, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  AT_RETURN_IF_ERROR(s);
  g.device_ = device;
  return g;
}

GraphExec::GraphExec(GraphExec&& other) noexcept
    : device_(other.device_), exec_(std::exchange(other.exec_, nullptr)) {}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void GraphExec::Release() {
  if (exec_ == nullptr) return;
  ScopedDevice scoped(device_);
  cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

}  // namespace autotuned::cuda
