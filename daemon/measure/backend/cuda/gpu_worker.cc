#include "daemon/measure/backend/cuda/gpu_worker.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_status.h"

namespace autotuned::cuda {
namespace {

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("pipe write: ", strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("no answer from the GPU worker by the deadline");
    }
    pollfd p{fd, POLLIN, 0};
    const int64_t ms = left == absl::InfiniteDuration()
                           ? -1
                           : std::max<int64_t>(1, absl::ToInt64Milliseconds(left));
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // re-checks the deadline
    ssize_t n = read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return absl::UnavailableError("the GPU worker closed its pipe");
    if (n < 0) return absl::UnavailableError(absl::StrCat("pipe read: ", strerror(errno)));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

constexpr uint32_t kMaxFrame = 64u << 20;

// Whether `fd` has something to read (or was closed) within `timeout`.
bool Readable(int fd, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(until - absl::Now()));
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    return r != 0;  // an error too: the read that follows reports it
  }
}

}  // namespace

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return absl::InternalError("cannot serialize a worker message");
  }
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                       static_cast<char>((n >> 16) & 0xff),
                       static_cast<char>((n >> 24) & 0xff)};
  std::string frame(len, 4);
  frame += bytes;
  return WriteAll(fd, frame.data(), frame.size());
}

absl::Status ReadFrame(int fd, absl::Time deadline,
                       google::protobuf::MessageLite* message) {
  unsigned char len[4];
  absl::Status s = ReadAll(fd, reinterpret_cast<char*>(len), 4, deadline);
  if (!s.ok()) return s;
  const uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) |
                     (static_cast<uint32_t>(len[3]) << 24);
  if (n > kMaxFrame) return absl::DataLossError(absl::StrCat("worker frame of ", n, " bytes"));
  std::string bytes(n, '\0');
  s = ReadAll(fd, bytes.data(), n, deadline);
  if (!s.ok()) return s;
  if (!message->ParseFromString(bytes)) {
    return absl::DataLossError("malformed worker message");
  }
  return absl::OkStatus();
}

RunRequest ToRunRequest(const ProblemSpec& p, const CandidateSpec& c,
                        const ScheduleOptions& o, absl::Time deadline) {
  RunRequest r;
  r.set_collective(static_cast<int32_t>(p.collective));
  r.set_dtype(static_cast<int32_t>(p.dtype));
  r.set_count(p.count);
  for (int64_t s : p.split_counts) r.add_split_counts(s);
  r.set_op(static_cast<int32_t>(p.op));
  r.set_root(p.root);
  r.set_world_size(p.world_size);
  r.set_impl(c.impl);
  r.mutable_params()->insert(c.params.begin(), c.params.end());
  r.set_warmup(o.warmup);
  r.set_iterations(o.iterations);
  r.set_cuda_graph(o.cuda_graph);
  r.set_skip_verify(!o.verify);
  for (int d : o.devices) r.add_devices(d);
  r.set_deadline_unix_us(absl::ToUnixMicros(deadline));
  return r;
}

Hello ToHello(const NodeDescription& node) {
  Hello h;
  h.set_backend(node.backend);
  for (const GpuDescription& g : node.gpus) {
    v1::Gpu* info = h.add_gpus();
    info->set_index(g.index);
    info->set_name(g.name);
    info->set_memory_bytes(g.memory_bytes);
    info->set_pci_bus_id(g.pci_bus_id);
    info->set_free_bytes(g.free_bytes);
  }
  for (const std::string& t : node.topology) h.add_topology(t);
  h.set_driver_version(node.driver_version);
  h.set_cuda_version(node.cuda_version);
  h.set_nccl_version(node.nccl_version);
  return h;
}

NodeDescription FromHello(const Hello& h) {
  NodeDescription node;
  node.backend = h.backend();
  for (const v1::Gpu& g : h.gpus()) {
    node.gpus.push_back(
        {g.index(), g.name(), g.memory_bytes(), g.pci_bus_id(), g.free_bytes()});
  }
  node.topology.assign(h.topology().begin(), h.topology().end());
  node.driver_version = h.driver_version();
  node.cuda_version = h.cuda_version();
  node.nccl_version = h.nccl_version();
  return node;
}

int ServeGpuWorker(
    const std::function<absl::StatusOr<std::unique_ptr<GpuNode>>()>& make_node,
    int request_fd, int reply_fd, absl::Duration idle_release) {
  absl::StatusOr<std::unique_ptr<GpuNode>> node = make_node();
  Hello hello;
  if (node.ok()) {
    hello = ToHello((*node)->node());
  } else {
    hello.set_code(StatusCodeToWire(node.status()));
    hello.set_message(std::string(node.status().message()));
  }
  if (!WriteFrame(reply_fd, hello).ok() || !node.ok()) return 0;
  while (true) {
    if (!Readable(request_fd, idle_release)) (*node)->ReleaseIdle();
    RunRequest req;
    if (!ReadFrame(request_fd, absl::InfiniteFuture(), &req).ok()) return 0;
    if (req.unique_id_request()) {
      RunReply reply;
      absl::StatusOr<std::string> id = (*node)->NewUniqueId();
      if (id.ok()) {
        reply.set_unique_id(*id);
      } else {
        RankReport* r = reply.add_ranks();
        r->set_code(StatusCodeToWire(id.status()));
        r->set_message(std::string(id.status().message()));
      }
      reply.set_nccl_aborts((*node)->nccl_aborts());
      reply.set_gpu_memory_held_bytes((*node)->held_bytes());
      if (!WriteFrame(reply_fd, reply).ok()) return 0;
      continue;
    }
    ProblemSpec p;
    p.collective = static_cast<Collective>(req.collective());
    p.dtype = static_cast<DType>(req.dtype());
    p.count = req.count();
    p.split_counts.assign(req.split_counts().begin(), req.split_counts().end());
    p.op = static_cast<ReduceOp>(req.op());
    p.root = req.root();
    p.world_size = req.world_size();
    CandidateSpec c{req.impl(), {req.params().begin(), req.params().end()}};
    ScheduleOptions o;
    o.warmup = req.warmup();
    o.iterations = req.iterations();
    o.cuda_graph = req.cuda_graph();
    o.verify = !req.skip_verify();
    o.devices.assign(req.devices().begin(), req.devices().end());
    const absl::Time deadline = absl::FromUnixMicros(req.deadline_unix_us());
    std::vector<RankOutcome> outcomes =
        req.local_ranks().empty()
            ? (*node)->Run(p, c, o, deadline)
            : (*node)->RunPartial(p, c, o, {req.local_ranks().begin(), req.local_ranks().end()},
                                  req.backend_token(), deadline);
    RunReply reply;
    for (const RankOutcome& out : outcomes) {
      RankReport* r = reply.add_ranks();
      r->set_code(StatusCodeToWire(out.status));
      r->set_message(std::string(out.status.message()));
      for (double us : out.iteration_us) r->add_iteration_us(us);
    }
    reply.set_restart_required((*node)->restart_required());
    reply.set_nccl_aborts((*node)->nccl_aborts());
    reply.set_gpu_memory_held_bytes((*node)->held_bytes());
    if (!WriteFrame(reply_fd, reply).ok()) return 0;
    // Nothing may wait for the stuck kernel, not even the node's destructor.
    if (reply.restart_required()) _exit(0);
  }
}

}  // namespace autotuned::cuda
