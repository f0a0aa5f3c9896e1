#include "daemon/measure/backend/cuda/worker/nccl_comms.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/measure/backend/cuda/worker/cuda_handles.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"
#include "daemon/measure/backend/cuda/worker/poll_wait.h"

namespace autotuned::cuda {
namespace {

// How long the destructor waits for ncclCommFinalize (which flushes the
// communicators' outstanding work) before it aborts them instead.
constexpr absl::Duration kFinalizeTimeout = absl::Seconds(5);

// Polls until `comm` has nothing in progress. ncclSuccess: ready.
absl::Status WaitComm(ncclComm_t comm, absl::Time deadline, const char* what) {
  return PollUntil(
      [&]() -> absl::StatusOr<bool> {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return NcclToStatus(r, "ncclCommGetAsyncError", comm);
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) return NcclToStatus(state, what, comm);
        return true;
      },
      deadline, what);
}

}  // namespace

absl::StatusOr<NcclComms> NcclComms::Create(const std::vector<int>& devices,
                                            absl::Time deadline, bool nonblocking) {
  const int world = static_cast<int>(devices.size());
  ncclUniqueId id;
  absl::Status s = NcclToStatus(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (!s.ok()) return s;
  NcclComms c;
  c.comms_.assign(world, nullptr);
  {
    ScopedDevice restore(devices.empty() ? 0 : devices[0]);  // the loop changes it
    s = NcclToStatus(ncclGroupStart(), "ncclGroupStart");
    if (!s.ok()) return s;
    for (int r = 0; r < world && s.ok(); ++r) {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = nonblocking ? 0 : 1;
      s = CudaToStatus(cudaSetDevice(devices[r]), "cudaSetDevice");
      if (s.ok()) {
        const ncclResult_t rc = ncclCommInitRankConfig(&c.comms_[r], world, id, r, &config);
        if (rc != ncclSuccess && rc != ncclInProgress) {
          s = NcclToStatus(rc, "ncclCommInitRankConfig");
        }
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (s.ok() && end != ncclSuccess && end != ncclInProgress) {
      s = NcclToStatus(end, "ncclGroupEnd (communicator init)");
    }
  }
  for (int r = 0; r < world && s.ok(); ++r) {
    if (c.comms_[r] == nullptr) {
      s = absl::InternalError(absl::StrCat("ncclCommInitRankConfig: no communicator for rank ", r));
    } else {
      s = WaitComm(c.comms_[r], deadline, "ncclCommInitRankConfig");
    }
  }
  if (!s.ok()) {
    c.Abort();
    return s;
  }
  return c;
}

absl::StatusOr<NcclComms> NcclComms::CreatePart(int world, const ncclUniqueId& id,
                                                const std::vector<int>& ranks,
                                                const std::vector<int>& devices) {
  NcclComms c;
  c.comms_.assign(world, nullptr);
  absl::Status s;
  {
    ScopedDevice restore(devices.empty() ? 0 : devices[0]);
    s = NcclToStatus(ncclGroupStart(), "ncclGroupStart");
    if (!s.ok()) return s;
    for (size_t i = 0; i < ranks.size() && s.ok(); ++i) {
      s = CudaToStatus(cudaSetDevice(devices[i]), "cudaSetDevice");
      if (s.ok()) {
        s = NcclToStatus(ncclCommInitRank(&c.comms_[ranks[i]], world, id, ranks[i]),
                         "ncclCommInitRank");
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (s.ok() && end != ncclSuccess) {
      s = NcclToStatus(end, "ncclGroupEnd (communicator init across daemons)");
    }
  }
  for (size_t i = 0; i < ranks.size() && s.ok(); ++i) {
    if (c.comms_[ranks[i]] == nullptr) {
      s = absl::InternalError(
          absl::StrCat("ncclCommInitRank: no communicator for rank ", ranks[i]));
    }
  }
  if (!s.ok()) {
    c.Abort();
    return s;
  }
  return c;
}

NcclComms::NcclComms(NcclComms&& other) noexcept
    : comms_(std::exchange(other.comms_, {})) {}

NcclComms& NcclComms::operator=(NcclComms&& other) noexcept {
  if (this != &other) {
    Release();
    comms_ = std::exchange(other.comms_, {});
  }
  return *this;
}

absl::Status NcclComms::WaitReady(int rank, absl::Time deadline) const {
  return WaitComm(comms_[rank], deadline, "NCCL call");
}

absl::Status NcclComms::AsyncError(int rank) const {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comms_[rank], &state);
  if (r != ncclSuccess) return NcclToStatus(r, "ncclCommGetAsyncError", comms_[rank]);
  if (state == ncclSuccess || state == ncclInProgress) return absl::OkStatus();
  return NcclToStatus(state, "NCCL (asynchronous error)", comms_[rank]);
}

void NcclComms::Abort() {
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommAbort(c);
  }
  comms_.clear();
}

void NcclComms::Release() {
  if (comms_.empty()) return;
  // Several communicators finalized from one thread: one group (NCCL's rule).
  bool ok = ncclGroupStart() == ncclSuccess;
  for (ncclComm_t c : comms_) {
    if (c != nullptr) {
      const ncclResult_t r = ncclCommFinalize(c);
      ok = ok && (r == ncclSuccess || r == ncclInProgress);
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  ok = ok && (end == ncclSuccess || end == ncclInProgress);
  const absl::Time deadline = absl::Now() + kFinalizeTimeout;
  for (ncclComm_t c : comms_) {
    if (ok && c != nullptr) ok = WaitComm(c, deadline, "ncclCommFinalize").ok();
  }
  if (!ok) {
    Abort();
    return;
  }
  for (ncclComm_t c : comms_) {
    if (c != nullptr) ncclCommDestroy(c);
  }
  comms_.clear();
}

}  // namespace autotuned::cuda
