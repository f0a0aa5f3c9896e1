#include "daemon/measure/backend/cuda/cuda_backend.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/measure/backend/cuda/cuda_catalogue.h"
#include "daemon/measure/backend/cuda/cuda_memory.h"
#include "daemon/common/grpc_status.h"
#include "daemon/measure/backend/cuda/gpu_worker.h"

namespace autotuned::cuda {

CudaBackend::CudaBackend(CudaBackendOptions options)
    : options_(std::move(options)), catalogue_(CudaCatalogue(options_.test_faults)) {}

CudaBackend::~CudaBackend() {
  absl::MutexLock lock(&mu_);
  KillWorker();
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    CudaBackendOptions options) {
  // A write to a worker that just died must fail with EPIPE, not kill the
  // daemon with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<CudaBackend> b(new CudaBackend(std::move(options)));
  absl::MutexLock lock(&b->mu_);
  Hello hello;
  absl::Status s = b->StartWorker(&hello);
  if (!s.ok()) return s;
  if (hello.code() != 0) {
    b->KillWorker();
    return StatusFromWire(hello.code(), absl::StrCat("GPU worker: ", hello.message()));
  }
  b->node_ = FromHello(hello);
  if (b->node_.gpus.empty()) {
    b->KillWorker();
    return absl::NotFoundError("GPU worker: no GPU");
  }
  return b;
}

absl::Status CudaBackend::StartWorker(Hello* hello) {
  int to_worker[2], from_worker[2];
  if (pipe2(to_worker, O_CLOEXEC) != 0) return absl::UnavailableError("pipe");
  if (pipe2(from_worker, O_CLOEXEC) != 0) {
    close(to_worker[0]);
    close(to_worker[1]);
    return absl::UnavailableError("pipe");
  }
  std::vector<char*> argv;
  for (const std::string& a : options_.worker_argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    // The child: requests on kRequestFd, replies on kReplyFd (dup2 clears
    // O_CLOEXEC on the new descriptors).
    // Move both ends above the target numbers first: a pipe end may already
    // sit on 3 or 4, where a dup2 onto itself would keep O_CLOEXEC.
    const int in = fcntl(to_worker[0], F_DUPFD, 10);
    const int out = fcntl(from_worker[1], F_DUPFD, 10);
    dup2(in, kRequestFd);
    dup2(out, kReplyFd);
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(to_worker[0]);
  close(from_worker[1]);
  if (pid < 0) {
    close(to_worker[1]);
    close(from_worker[0]);
    return absl::UnavailableError("fork of the GPU worker failed");
  }
  pid_ = pid;
  request_fd_ = to_worker[1];
  reply_fd_ = from_worker[0];
  ++started_;
  absl::Status s = ReadFrame(reply_fd_, absl::Now() + options_.start_timeout, hello);
  if (!s.ok()) {
    KillWorker();
    return absl::UnavailableError(
        absl::StrCat("the GPU worker (", options_.worker_argv[0],
                     ") did not report its GPUs: ", s.message()));
  }
  spdlog::info("GPU worker {} started ({} GPUs)", pid_, hello->gpus_size());
  return absl::OkStatus();
}

void CudaBackend::ReplaceWorker() {
  if (pid_ > 0) restarts_.fetch_add(1);
  KillWorker();
}

void CudaBackend::KillWorker() {
  nccl_aborts_seen_ = 0;
  {
    absl::MutexLock held(&held_mu_);
    held_bytes_ = 0;
  }
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (request_fd_ >= 0) close(request_fd_);
  if (reply_fd_ >= 0) close(reply_fd_);
  request_fd_ = reply_fd_ = -1;
}

int64_t CudaBackend::MemoryNeed(const ProblemSpec& problem,
                                const CandidateSpec& candidate) const {
  return CudaMemoryNeed(problem, candidate);
}

std::vector<RankOutcome> CudaBackend::RunCandidate(const ProblemSpec& problem,
                                                   const CandidateSpec& candidate,
                                                   const ScheduleOptions& options,
                                                   absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return Ask(ToRunRequest(problem, candidate, options, deadline),
             std::max(problem.world_size, 1), candidate.impl, deadline);
}

absl::Status CudaBackend::EnsureWorker() {
  if (pid_ >= 0) return absl::OkStatus();
  Hello hello;
  absl::Status s = StartWorker(&hello);
  if (!s.ok()) return s;
  if (hello.code() != 0) {
    KillWorker();
    return absl::UnavailableError(absl::StrCat("GPU worker: ", hello.message()));
  }
  return absl::OkStatus();
}

std::string CudaBackend::CrossRunToken() {
  absl::MutexLock lock(&mu_);
  absl::Status s = EnsureWorker();
  RunRequest req;
  req.set_unique_id_request(true);
  if (s.ok()) s = WriteFrame(request_fd_, req);
  RunReply reply;
  if (s.ok()) s = ReadFrame(reply_fd_, absl::Now() + options_.start_timeout, &reply);
  if (!s.ok()) {
    const pid_t pid = pid_;
    ReplaceWorker();
    spdlog::warn("GPU worker {}: no NCCL unique id for a cross-daemon run: {}", pid,
                 s.ToString());
    return std::string();
  }
  if (reply.unique_id().empty()) {
    spdlog::warn("GPU worker {}: no NCCL unique id for a cross-daemon run: {}", pid_,
                 reply.ranks_size() > 0 ? reply.ranks(0).message() : "(no reason given)");
  }
  return reply.unique_id();
}

std::vector<RankOutcome> CudaBackend::RunPartial(const ProblemSpec& problem,
                                                 const CandidateSpec& candidate,
                                                 const ScheduleOptions& options,
                                                 const PartialRun& part, absl::Time deadline) {
  const int n = static_cast<int>(std::max<size_t>(part.local_ranks.size(), 1));
  std::vector<RankOutcome> out;
  if (part.transport == nullptr || part.local_ranks.empty()) {
    out.assign(n, RankOutcome{absl::InvalidArgumentError(
                                  "a partial run needs local ranks and a transport"),
                              {}});
  } else if (part.backend_token.empty()) {
    out.assign(n, RankOutcome{absl::FailedPreconditionError(
                                  "no NCCL unique id from the leader's GPU worker: the "
                                  "ranks of several daemons cannot be connected"),
                              {}});
  } else {
    RunRequest req = ToRunRequest(problem, candidate, options, deadline);
    for (int r : part.local_ranks) req.add_local_ranks(r);
    req.set_backend_token(part.backend_token);
    absl::MutexLock lock(&mu_);
    out = Ask(req, n, candidate.impl, deadline);
  }
  // The other daemons' ranks stop too (they would wait for ours in NCCL
  // until their deadline).
  for (const RankOutcome& o : out) {
    if (!o.status.ok()) {
      if (part.transport != nullptr) part.transport->Abort(o.status);
      break;
    }
  }
  return out;
}

std::vector<RankOutcome> CudaBackend::Ask(const RunRequest& request, int n,
                                          const std::string& impl, absl::Time deadline) {
  const CandidateSpec candidate{impl, {}};
  auto all = [n](absl::Status s) {
    return std::vector<RankOutcome>(n, RankOutcome{std::move(s), {}});
  };
  {
    absl::Status started = EnsureWorker();
    if (!started.ok()) return all(started);
  }
  absl::Status s = WriteFrame(request_fd_, request);
  RunReply reply;
  if (s.ok()) s = ReadFrame(reply_fd_, deadline + options_.grace, &reply);
  if (!s.ok()) {
    const pid_t pid = pid_;
    ReplaceWorker();
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      spdlog::warn("GPU worker {} killed: {} did not finish by its deadline", pid,
                   candidate.impl);
      return all(absl::DeadlineExceededError(
          "cut off at the timeout: the GPU worker was killed (a kernel did not "
          "finish) and is restarted for the next run"));
    }
    spdlog::warn("GPU worker {} lost during {}: {}", pid, candidate.impl, s.ToString());
    return all(absl::UnavailableError(
        absl::StrCat("the GPU worker died during the run: ", s.message())));
  }
  if (reply.ranks_size() != n) {
    return all(absl::InternalError(absl::StrCat("the GPU worker answered ",
                                                reply.ranks_size(), " ranks for ", n)));
  }
  std::vector<RankOutcome> out(n);
  for (int r = 0; r < n; ++r) {
    const RankReport& rep = reply.ranks(r);
    out[r].status = StatusFromWire(rep.code(), rep.message());
    out[r].iteration_us.assign(rep.iteration_us().begin(), rep.iteration_us().end());
  }
  if (reply.nccl_aborts() > nccl_aborts_seen_) {
    nccl_aborts_total_.fetch_add(reply.nccl_aborts() - nccl_aborts_seen_);
    spdlog::warn("GPU worker {} aborted its NCCL communicators after {} ({} so far); new "
                 "ones for the next run",
                 pid_, candidate.impl, reply.nccl_aborts());
  }
  nccl_aborts_seen_ = reply.nccl_aborts();
  {
    absl::MutexLock held(&held_mu_);
    held_bytes_ = reply.restart_required() ? 0 : reply.gpu_memory_held_bytes();
    held_since_ = absl::Now();
  }
  if (reply.restart_required()) {
    // The worker exits after this reply; reap it (or kill it, if it is slow
    // to go) and start a fresh one on the next run.
    const pid_t pid = pid_;
    ReplaceWorker();
    spdlog::warn("GPU worker {} killed: {} left a kernel that cannot be stopped; a fresh "
                 "worker serves the next run",
                 pid, candidate.impl);
    for (RankOutcome& o : out) {
      if (!o.status.ok()) {
        o.status = absl::Status(o.status.code(),
                                absl::StrCat(o.status.message(), " (the GPU worker was killed "
                                             "and is restarted for the next run)"));
      }
    }
  }
  return out;
}

int64_t CudaBackend::gpu_memory_held_bytes() const {
  absl::MutexLock held(&held_mu_);
  return absl::Now() - held_since_ >= kIdleRelease ? 0 : held_bytes_;
}

int CudaBackend::workers_started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

}  // namespace autotuned::cuda
