#include "daemon/measure/backend/cuda/worker/collective_launcher.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/measure/backend/cuda/cuda_memory.h"
#include "daemon/measure/backend/cuda/worker/cuda_status.h"
#include "common/status_macros.h"

namespace autotuned::cuda {
namespace {

struct Entry {
  const char* name;
  Collective collective;
  Method::Kind kind;
  bool test_fault;
};

// The names of cuda_catalogue.cc; a P2P entry's algo is P2pAlgo's
// (cuda_memory.h).
constexpr Entry kEntries[] = {
    {"all_reduce/nccl", Collective::kAllReduce, Method::kNccl, false},
    {"all_reduce/one_shot", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/two_shot", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/two_shot_push", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/one_shot_push", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/copy_engine", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/two_shot_chunked", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/push_pipelined", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/p2p_ring", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/ce_ring", Collective::kAllReduce, Method::kP2p, false},
    {"all_reduce/two_shot_in_place", Collective::kAllReduce, Method::kP2p, false},
    {"all_gather/nccl", Collective::kAllGather, Method::kNccl, false},
    {"all_gather/p2p", Collective::kAllGather, Method::kP2p, false},
    {"reduce_scatter/nccl", Collective::kReduceScatter, Method::kNccl, false},
    {"reduce_scatter/p2p", Collective::kReduceScatter, Method::kP2p, false},
    {"all_to_all/nccl", Collective::kAllToAll, Method::kNccl, false},
    {"all_to_all/p2p", Collective::kAllToAll, Method::kP2p, false},
    {"broadcast/nccl", Collective::kBroadcast, Method::kNccl, false},
    {"broadcast/p2p", Collective::kBroadcast, Method::kP2p, false},
    {"broadcast/push_pipelined", Collective::kBroadcast, Method::kP2p, false},
    {"all_reduce/hang_test", Collective::kAllReduce, Method::kHangTest, true},
    {"all_reduce/nccl_hang_test", Collective::kAllReduce, Method::kNcclHangTest, true},
};

int ToInt(int64_t v) {
  return static_cast<int>(std::clamp<int64_t>(v, INT_MIN, INT_MAX));
}

ncclDataType_t NcclType(DType d) {
  switch (d) {
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat16: return ncclFloat16;
    case DType::kFloat32:
    default: return ncclFloat32;
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kSum:
    default: return ncclSum;
  }
}

char* At(void* base, int64_t elements, DType d) {
  return static_cast<char*>(base) + elements * DTypeSize(d);
}

}  // namespace

absl::StatusOr<Method> ResolveMethod(const std::string& impl, Collective collective,
                                     bool test_faults) {
  for (const Entry& e : kEntries) {
    if (impl != e.name || (e.test_fault && !test_faults)) continue;
    if (e.collective != collective) {
      return absl::InvalidArgumentError(absl::StrCat(
          "implementation \"", impl, "\" is not a ", CollectiveName(collective)));
    }
    return Method{e.kind, P2pAlgo(impl)};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown implementation \"", impl, "\" on the cuda backend"));
}

int64_t P2pScratchBytes(const ProblemSpec& problem, const CandidateSpec& candidate,
                        Method method) {
  if (method.nccl()) return 0;
  const int64_t bytes =
      at_p2p_scratch_bytes(method.algo, static_cast<int>(problem.dtype), problem.world_size,
                           problem.count, ChunkElems(problem, candidate));
  return std::max<int64_t>(bytes, 0);
}

CollectiveLauncher::CollectiveLauncher(const ProblemSpec& problem, Method method,
                                       Resources resources)
    : problem_(problem), method_(method), resources_(std::move(resources)) {}

absl::StatusOr<std::unique_ptr<CollectiveLauncher>> CollectiveLauncher::Create(
    const ProblemSpec& problem, const CandidateSpec& candidate, Method method,
    Resources resources) {
  const int world = problem.world_size;
  if (static_cast<int>(resources.inputs.size()) != world ||
      static_cast<int>(resources.outputs.size()) != world) {
    return absl::InternalError("launcher: buffers for the wrong number of ranks");
  }
  std::unique_ptr<CollectiveLauncher> l(
      new CollectiveLauncher(problem, method, std::move(resources)));
  if (method.nccl()) {
    if (l->resources_.comms == nullptr || l->resources_.comms->world() != world) {
      return absl::InternalError("launcher: no NCCL communicators for this world");
    }
    // The catalogue's numbering is NCCL's plus one (0 = NCCL's choice).
    l->nccl_choice_.algo = ToInt(candidate.Param("algo", 0)) - 1;
    l->nccl_choice_.proto = ToInt(candidate.Param("proto", 0)) - 1;
    l->nccl_choice_.channels = ToInt(candidate.Param("channels", 0));
    return l;
  }
  if (l->resources_.group == nullptr || l->resources_.group->world() != world) {
    return absl::InternalError("launcher: no P2P group for this world");
  }
  // all_to_all/p2p: even splits (a count, or a matrix of equal entries)
  // through AT_ALGO_ALL_TO_ALL with that count, uneven ones through
  // at_p2p_all_to_all_v with the matrix.
  int64_t count = problem.count;
  if (method.kind == Method::kP2p &&
      P2pAlgoFor(problem, candidate.impl) == AT_ALGO_ALL_TO_ALL_V) {
    l->split_counts_ = problem.split_counts;
  } else if (problem.collective == Collective::kAllToAll && !problem.split_counts.empty()) {
    count = problem.split_counts[0];
  }
  l->peer_inputs_.assign(l->resources_.inputs.begin(), l->resources_.inputs.end());
  l->p2p_args_.resize(world);
  for (int r = 0; r < world; ++r) {
    at_p2p_args& a = l->p2p_args_[r];
    a = at_p2p_args{};
    AT_RETURN_IF_ERROR(l->resources_.group->InitArgs(method.algo, r, &a));
    a.dtype = static_cast<int>(problem.dtype);
    a.op = static_cast<int>(problem.op);
    a.count = count;
    a.root = problem.root;
    a.peer_inputs = l->peer_inputs_.data();
    a.output = l->Output(r);
    a.blocks = ToInt(candidate.Param("blocks", 0));
    a.threads = ToInt(candidate.Param("threads", 0));
    a.chunk_elems = ChunkElems(problem, candidate);
    a.spin_limit = method.kind == Method::kHangTest ? 0 : l->resources_.spin_limit;
    char reason[256];
    const int rc = l->split_counts_.empty()
                       ? at_p2p_check_args(method.algo, &a, reason, sizeof(reason))
                       : at_p2p_check_all_to_all_v(&a, l->split_counts_.data(), reason,
                                                   sizeof(reason));
    if (rc != AT_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("P2P kernel arguments rejected for rank ", r, ": ", reason));
    }
  }
  return l;
}

bool CollectiveLauncher::InPlace() const {
  return method_.kind == Method::kP2p && method_.algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE;
}

void* CollectiveLauncher::Output(int rank) const {
  return InPlace() ? resources_.inputs[rank] : resources_.outputs[rank];
}

bool CollectiveLauncher::Participates(int rank) const {
  const bool alone = method_.kind == Method::kHangTest || method_.kind == Method::kNcclHangTest;
  return !alone || rank == 0;
}

P2pGroup* CollectiveLauncher::p2p_group() const {
  return method_.nccl() ? nullptr : resources_.group;
}

const NcclComms* CollectiveLauncher::nccl_comms() const {
  return method_.nccl() ? resources_.comms : nullptr;
}

absl::Status CollectiveLauncher::Launch(int rank, cudaStream_t stream) const {
  if (!Participates(rank)) return absl::OkStatus();
  if (method_.nccl()) return LaunchNccl(rank, stream);
  if (!split_counts_.empty()) {
    return CudaToStatus(at_p2p_all_to_all_v(&p2p_args_[rank], split_counts_.data(), stream),
                        "at_p2p_all_to_all_v");
  }
  return CudaToStatus(at_p2p_launch(method_.algo, &p2p_args_[rank], stream),
                      "at_p2p_launch");
}

absl::Status CollectiveLauncher::LaunchNccl(int rank, cudaStream_t stream) const {
  const ncclComm_t comm = resources_.comms->comm(rank);
  // Non-blocking communicators: ncclInProgress means the call is still being
  // enqueued; the next call (and any event recorded after it) must wait.
  auto Enqueued = [&](ncclResult_t r, const char* call, ncclComm_t c = nullptr) {
    if (r == ncclInProgress) return resources_.comms->WaitReady(rank, resources_.deadline);
    return cuda::NcclToStatus(r, call, c);
  };
  void* in = resources_.inputs[rank];
  void* out = resources_.outputs[rank];
  const ProblemSpec& p = problem_;
  const size_t count = static_cast<size_t>(p.count);
  const ncclDataType_t type = NcclType(p.dtype);
  // The candidate's algorithm, protocol and channels, forced around the call.
  auto Chosen = [&](const char* call, auto enqueue) {
    return RunWithChoice(nccl_choice_, call, [&] { return Enqueued(enqueue(), call, comm); });
  };
  switch (p.collective) {
    case Collective::kAllReduce:
      return Chosen("ncclAllReduce", [&] {
        return ncclAllReduce(in, out, count, type, NcclOp(p.op), comm, stream);
      });
    case Collective::kAllGather:
      return Chosen("ncclAllGather",
                    [&] { return ncclAllGather(in, out, count, type, comm, stream); });
    case Collective::kReduceScatter:
      return Chosen("ncclReduceScatter", [&] {
        return ncclReduceScatter(in, out, count, type, NcclOp(p.op), comm, stream);
      });
    case Collective::kBroadcast:
      return Chosen("ncclBroadcast", [&] {
        return ncclBroadcast(in, out, count, type, p.root, comm, stream);
      });
    case Collective::kAllToAll: {
      absl::Status status = Enqueued(ncclGroupStart(), "ncclGroupStart");
      if (!status.ok()) return status;
      for (int peer = 0; peer < p.world_size && status.ok(); ++peer) {
        const int64_t send = p.SplitCount(rank, peer);
        const int64_t recv = p.SplitCount(peer, rank);
        if (send > 0) {
          status = Enqueued(ncclSend(At(in, p.InputOffset(rank, peer), p.dtype),
                                     static_cast<size_t>(send), type, peer, comm, stream),
                            "ncclSend", comm);
        }
        if (status.ok() && recv > 0) {
          status = Enqueued(ncclRecv(At(out, p.OutputOffset(rank, peer), p.dtype),
                                     static_cast<size_t>(recv), type, peer, comm, stream),
                            "ncclRecv", comm);
        }
      }
      // The group is closed whatever happened inside it.
      const absl::Status end = Enqueued(ncclGroupEnd(), "ncclGroupEnd", comm);
      return status.ok() ? end : status;
    }
  }
  return absl::InternalError("launcher: unknown collective");
}

}  // namespace autotuned::cuda
