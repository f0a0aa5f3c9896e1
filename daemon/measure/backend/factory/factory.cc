#include "daemon/measure/backend/factory/factory.h"

#include <spdlog/spdlog.h>

#include "daemon/measure/backend/cuda/cuda_backend.h"
#include "daemon/measure/backend/cuda/worker/gpu_worker_main.h"
#include "daemon/measure/backend/sim/sim_backend.h"

namespace autotuned {
namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeCuda(const config::DaemonConfig& c,
                                                  const std::string& self_exe) {
  cuda::CudaBackendOptions o;
  o.worker_argv = {self_exe, "--gpu_worker"};
  if (c.cuda().test_faults()) o.worker_argv.push_back("--gpu_worker_test_faults");
  o.test_faults = c.cuda().test_faults();
  o.start_timeout = absl::Milliseconds(c.cuda().worker_start_timeout_ms());
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> b =
      cuda::CudaBackend::Create(std::move(o));
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const config::DaemonConfig& c,
                                                     const std::string& self_exe) {
  if (!cuda::GpuWorkerBuilt()) {
    constexpr char kNoCuda[] =
        "this autotuned was built without the cuda backend (no CUDA toolkit at "
        "build time: docs/operations.md#building-without-cuda)";
    if (c.backend() == "cuda") return absl::FailedPreconditionError(kNoCuda);
    spdlog::info("backend {}: sim; {}", c.backend(), kNoCuda);
  } else if (c.backend() != "sim") {
    absl::StatusOr<std::unique_ptr<Backend>> gpu = MakeCuda(c, self_exe);
    if (gpu.ok() || c.backend() == "cuda") return gpu;
    spdlog::info("backend auto: sim ({})", gpu.status().ToString());
  }
  absl::StatusOr<std::unique_ptr<sim::SimBackend>> sim =
      sim::SimBackend::Create(c.sim());
  if (!sim.ok()) return sim.status();
  return std::unique_ptr<Backend>(std::move(*sim));
}

}  // namespace autotuned
