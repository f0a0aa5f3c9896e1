// torch.ops.autotuned.{all_reduce, all_gather, reduce_scatter}: the schemas
// (the same as autotuned/ops.py's Python ops) and their CUDA kernels. The
// fake implementations and the other devices' kernel stay in Python
// (autotuned.ops.register_ops registers them after loading this library).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "client/torch_ops/groups.h"

namespace autotuned::torch_ops {
namespace {

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

int DtypeCode(const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kFloat: return AT_DTYPE_FLOAT32;
    case at::kBFloat16: return AT_DTYPE_BFLOAT16;
    case at::kHalf: return AT_DTYPE_FLOAT16;
    default:
      TORCH_CHECK(false, "dtype ", x.scalar_type(),
                  ": the P2P kernels take float32, bfloat16, float16");
  }
}

int OpCode(std::string_view op) {
  if (op == "sum") return AT_OP_SUM;
  if (op == "max") return AT_OP_MAX;
  if (op == "min") return AT_OP_MIN;
  TORCH_CHECK(false, "op ", Quoted(op), ": one of sum, max, min");
}

std::vector<int64_t> GatherShape(const at::Tensor& x, int world) {
  std::vector<int64_t> shape = x.dim() ? x.sizes().vec() : std::vector<int64_t>{1};
  shape[0] *= world;
  return shape;
}

std::vector<int64_t> ScatterShape(const at::Tensor& x, int world) {
  std::vector<int64_t> shape = x.dim() ? x.sizes().vec() : std::vector<int64_t>{1};
  TORCH_CHECK(shape[0] % world == 0, "reduce_scatter: dim 0 (", shape[0],
              ") is not a multiple of the world size ", world);
  shape[0] /= world;
  return shape;
}

// torch.distributed's collective on the group's process group, by its c10d
// name, through the functional collectives (what Inductor's own NCCL calls
// run), waited for on the current stream as dist.all_reduce's would be.
at::Tensor RunNccl(std::string_view collective, const at::Tensor& x, const Group& g,
                   std::string_view op) {
  TORCH_CHECK(!g.process_group.empty(), "group ", Quoted(g.name),
              " has no process group name: ", collective, "/nccl cannot run in it");
  const at::Tensor in = x.dim() ? x.contiguous() : x.reshape({1});
  auto& dispatcher = c10::Dispatcher::singleton();
  torch::jit::Stack stack;
  if (collective == "all_reduce") {
    static const auto handle = dispatcher.findSchemaOrThrow("_c10d_functional::all_reduce", "");
    stack = {in, std::string(op), g.process_group};
    handle.callBoxed(stack);
  } else if (collective == "all_gather") {
    static const auto handle =
        dispatcher.findSchemaOrThrow("_c10d_functional::all_gather_into_tensor", "");
    stack = {in, static_cast<int64_t>(g.world), g.process_group};
    handle.callBoxed(stack);
  } else {
    static const auto handle =
        dispatcher.findSchemaOrThrow("_c10d_functional::reduce_scatter_tensor", "");
    stack = {in, std::string(op), static_cast<int64_t>(g.world), g.process_group};
    handle.callBoxed(stack);
  }
  static const auto wait = dispatcher.findSchemaOrThrow("_c10d_functional::wait_tensor", "");
  at::Tensor out = stack.at(0).toTensor();
  stack = {out};
  wait.callBoxed(stack);
  return x.dim() || collective != "all_reduce" ? out : out.reshape({});
}

// One launch of a P2P kernel into a new tensor of `out_shape`: the staging
// copy unless the kernel reads a 16-byte aligned x itself, at_p2p_args, and
// at_p2p_launch on the current stream. Errors as P2PGroup.launch's.
at::Tensor RunP2p(const Impl& impl, const at::Tensor& x, const Group& g,
                  const std::vector<int64_t>& out_shape, int64_t blocks, int64_t threads,
                  int64_t chunk_kib, std::string_view op) {
  TORCH_CHECK(g.launch != nullptr, "group ", Quoted(g.name), " has no P2P buffers: ", impl.name,
              " cannot run in it");
  // The checks that need no device come first (the op, dtype and size
  // errors are then testable without a GPU); each message is P2PGroup.launch's.
  const int op_code = OpCode(op);
  const int dtype = DtypeCode(x);
  const int64_t nbytes = x.numel() * static_cast<int64_t>(x.element_size());
  TORCH_CHECK(nbytes <= impl.max_bytes, "P2PGroup ", g.name, ": ", nbytes, " bytes > ",
              impl.max_bytes, ", the largest ", impl.name, " runs on in this group (",
              impl.max_bytes_name, ")");
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(g.device));
  TORCH_CHECK(x.device() == device, "P2PGroup ", g.name, ": tensors on ", x.device(),
              ", the group is on ", device);
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty(out_shape, in.options());
  const c10::cuda::CUDAGuard guard(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();

  const int64_t size = static_cast<int64_t>(in.element_size());
  const int64_t vec = 16 / size;
  at_p2p_args a{};
  a.world = g.world;
  a.rank = g.rank;
  a.dtype = dtype;
  a.op = op_code;
  a.count = impl.collective == "reduce_scatter" ? in.numel() / g.world : in.numel();
  a.output = out.data_ptr();
  const bool direct =
      (impl.flags & kReadsOwnInput) && reinterpret_cast<uintptr_t>(in.data_ptr()) % 16 == 0;
  std::array<const void*, AT_P2P_MAX_WORLD> own{};
  if (direct) {
    TORCH_CHECK(g.world <= AT_P2P_MAX_WORLD, "world ", g.world);
    own[g.rank] = in.data_ptr();
    a.peer_inputs = own.data();
  } else {
    a.peer_inputs = g.inputs.data();
  }
  if (impl.flags & kUsesScratch) {
    a.peer_scratch = g.scratch.data();
    a.scratch_bytes = g.scratch_bytes;
  } else if (impl.flags & kUsesPush) {
    a.peer_scratch = g.push.data();
    a.scratch_bytes = g.push_bytes;
  }
  a.peer_signals = g.signals.data();
  a.blocks = static_cast<int>(blocks ? blocks : impl.blocks);
  a.threads = static_cast<int>(threads ? threads : impl.threads);
  if (impl.flags & kChunked) {
    const int64_t kib = chunk_kib ? chunk_kib : impl.chunk_kib;
    a.chunk_elems = kib > 0 ? std::max(vec, kib * 1024 / size / vec * vec) : 0;  // 0: whole shards
  }
  a.spin_limit = g.spin_limit;

  if (nbytes && !direct) {
    const cudaError_t rc =
        cudaMemcpyAsync(const_cast<void*>(g.inputs[g.rank]), in.data_ptr(),
                        static_cast<size_t>(nbytes), cudaMemcpyDeviceToDevice, stream);
    TORCH_CHECK(rc == cudaSuccess, "cudaMemcpyAsync (staging): ", cudaGetErrorString(rc), " (",
                static_cast<int>(rc), ")");
  }
  const int rc = g.launch(impl.algo, &a, stream);
  if (rc != AT_OK) {
    // The library's reason for rejected arguments, else the code's string.
    std::array<char, 256> why{};
    const char* code = g.error_string(rc);
    std::string reason = code ? code : "error " + std::to_string(rc);
    if (rc == AT_ERR_INVALID_VALUE &&
        g.check_args(impl.algo, &a, why.data(), why.size()) != AT_OK && why[0] != '\0') {
      reason = why.data();
    }
    TORCH_CHECK(false, "at_p2p_launch(", impl.name, "): ", reason);
  }
  return out;
}

at::Tensor AllReduceCuda(const at::Tensor& x, c10::string_view impl_name, c10::string_view group,
                         int64_t blocks, int64_t threads, int64_t chunk_kib, c10::string_view op) {
  const std::shared_ptr<const Group> g = FindGroup(group);
  const Impl& impl = g->Find(impl_name, "all_reduce");
  if (impl.algo == 0) return RunNccl("all_reduce", x, *g, op);
  return RunP2p(impl, x, *g, x.sizes().vec(), blocks, threads, chunk_kib, op);
}

at::Tensor AllGatherCuda(const at::Tensor& x, c10::string_view impl_name, c10::string_view group,
                         int64_t blocks, int64_t threads) {
  const std::shared_ptr<const Group> g = FindGroup(group);
  const std::vector<int64_t> shape = GatherShape(x, g->world);
  const Impl& impl = g->Find(impl_name, "all_gather");
  if (impl.algo == 0) return RunNccl("all_gather", x, *g, "sum");
  return RunP2p(impl, x, *g, shape, blocks, threads, 0, "sum");
}

at::Tensor ReduceScatterCuda(const at::Tensor& x, c10::string_view impl_name,
                             c10::string_view group, int64_t blocks, int64_t threads,
                             c10::string_view op) {
  const std::shared_ptr<const Group> g = FindGroup(group);
  const std::vector<int64_t> shape = ScatterShape(x, g->world);
  const Impl& impl = g->Find(impl_name, "reduce_scatter");
  if (impl.algo == 0) return RunNccl("reduce_scatter", x, *g, op);
  return RunP2p(impl, x, *g, shape, blocks, threads, 0, op);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(autotuned, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  m.def(
      "all_reduce(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
      "int chunk_kib=0, str op=\"sum\") -> Tensor",
      tags);
  m.def("all_gather(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0) -> Tensor",
        tags);
  m.def(
      "reduce_scatter(Tensor x, str impl, str group=\"\", int blocks=0, int threads=0, "
      "str op=\"sum\") -> Tensor",
      tags);
}

TORCH_LIBRARY_IMPL(autotuned, CUDA, m) {
  m.impl("all_reduce", &AllReduceCuda);
  m.impl("all_gather", &AllGatherCuda);
  m.impl("reduce_scatter", &ReduceScatterCuda);
}

}  // namespace autotuned::torch_ops
