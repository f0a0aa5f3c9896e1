// p2p_bench: one process drives every visible GPU (2..8) and times bf16
// all-reduce with NCCL and with each P2P all-reduce of autotuned_kernels.h
// (one-shot, push one-shot, two-shot, push two-shot, chunked two-shot, copy
// engine and pipelined push; the copy engine and the pipelined push at each
// --chunk_elems, the chunked two-shot at each one below the message) over
// each launch shape of --shapes, for sizes from --min_bytes to --max_bytes.
// Per size it prints each column's fastest correct figure with its shape,
// the busbw of the fastest column, and the winner. --columns names the P2P
// columns to time (the others print "-"); --spin_limit makes a P2P wait give
// up after that many polls instead of hanging: the error word is printed,
// the group reset, and the candidate left out as a wrong output.
//
// Timing: barrier (cudaDeviceSynchronize on every GPU), --warmup
// iterations, then CUDA events around a loop of --iters iterations on every
// GPU's stream; time = max over GPUs of elapsed / iters. With --graph,
// --graph_iters iterations (at most --iters) are captured into one CUDA
// graph per GPU, and the graph is replayed back to back on the GPU's legacy
// default stream (where a PyTorch rank replays its graphs; docs/gpu.md#timing)
// until at least --iters iterations ran; time = elapsed / iterations run. (A graph of every
// iteration was thousands of nodes for the chunked kernels at large sizes:
// its instantiation, not the collectives, took the minutes.) With
// --nccl_threads (eager only), NCCL is timed with one host thread per GPU,
// as nccl-tests' -t N -g 1 does, instead of grouped launches from one thread.
// Inputs hold the predictable pattern, so every candidate's output is also
// checked exactly: a wrong NCCL output marks its cell BAD, a wrong P2P one
// is left out of its column; each is listed at the end ("# BAD output: ...")
// and the exit status is then 3.
//
//   p2p_bench [--min_bytes=1024] [--max_bytes=268435456] [--step=2]
//             [--iters=20] [--warmup=5] [--graph] [--graph_iters=10] [--nccl_threads]
//             [--shapes=8x512,16x512,32x512,64x512,64x1024,132x1024]
//             [--chunk_elems=131072,1048576] [--nccl_only] [--columns=two_shot,push_pipelined]
//             [--spin_limit=0]
//
// --nccl_only times NCCL alone (the P2P columns print "-"): the quick
// independent NCCL measurement that bench/gpu_run.sh repeats.
//
// nccl_symm_us: ncclAllReduce on buffers from ncclMemAlloc registered as
// symmetric windows (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC,
// NCCL 2.27 and later), where NCCL runs its symmetric-memory kernels; "-"
// when the allocation or the registration fails (said in a '#' line), and
// with --nccl_only. Launched grouped from one thread in both modes.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/autotuned_kernels.h"
#include "kernels/cuda_check.h"
#include "kernels/pattern_kernels.h"
#include "kernels/types.h"

namespace autotuned::kernels {
namespace {

struct Shape {
  int blocks;
  int threads;
};

struct Flags {
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t step = 2;
  int iters = 20;
  int warmup = 5;
  bool graph = false;
  int graph_iters = 10;  // iterations per captured graph (--graph)
  // NCCL timed with one host thread per GPU (nccl-tests' -t N -g 1) instead
  // of grouped launches from one thread; eager mode only.
  bool nccl_threads = false;
  bool nccl_only = false;  // skip the P2P implementations
  // The P2P columns to time (their names in the table's header, without
  // "_us"); empty: all of them.
  std::vector<std::string> columns;
  // The P2P kernels' spin limit (at_p2p_args.spin_limit; 0 = wait forever).
  int64_t spin_limit = 0;
  std::vector<Shape> shapes = {{8, 512}, {16, 512}, {32, 512}, {64, 512}, {64, 1024}, {132, 1024}};
  std::vector<int64_t> chunks = {int64_t{1} << 17, int64_t{1} << 20};
};

[[noreturn]] void Usage(const char* bad) {
  std::fprintf(stderr,
               "bad flag: %s\nusage: p2p_bench [--min_bytes=N] [--max_bytes=N] [--step=2|4] "
               "[--iters=N] [--warmup=N] [--graph] [--graph_iters=N] [--nccl_threads] [--shapes=BxT,...] "
               "[--chunk_elems=N,...] [--nccl_only] [--columns=one_shot,two_shot,...] "
               "[--spin_limit=N]\n",
               bad);
  std::exit(2);
}

int64_t ParseInt(const std::string& v, const char* arg) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') Usage(arg);
  return x;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The table column of a P2P all-reduce: its ABI name without
// "all_reduce_" ("one_shot", "two_shot_chunked", ...).
std::string Column(int algo) {
  const std::string name = at_p2p_algo_name(algo);
  const std::string prefix = "all_reduce_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Usage(argv[i]);
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "graph" || name == "nccl_threads" || name == "nccl_only") {
      value = "1";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Usage(argv[i]);
    }
    if (name == "nccl_threads") {
      f.nccl_threads = value == "1";
    } else if (name == "nccl_only") {
      f.nccl_only = value == "1";
    } else if (name == "spin_limit") {
      f.spin_limit = ParseInt(value, argv[i]);
    } else if (name == "columns") {
      f.columns = Split(value);
    } else if (name == "min_bytes") {
      f.min_bytes = ParseInt(value, argv[i]);
    } else if (name == "max_bytes") {
      f.max_bytes = ParseInt(value, argv[i]);
    } else if (name == "step") {
      f.step = ParseInt(value, argv[i]);
    } else if (name == "iters") {
      f.iters = static_cast<int>(ParseInt(value, argv[i]));
    } else if (name == "warmup") {
      f.warmup = static_cast<int>(ParseInt(value, argv[i]));
    } else if (name == "graph") {
      f.graph = ParseInt(value, argv[i]) != 0;
    } else if (name == "graph_iters") {
      f.graph_iters = static_cast<int>(ParseInt(value, argv[i]));
      if (f.graph_iters < 1) Usage(argv[i]);
    } else if (name == "shapes") {
      f.shapes.clear();
      for (const std::string& s : Split(value)) {
        const size_t x = s.find('x');
        if (x == std::string::npos) Usage(argv[i]);
        f.shapes.push_back({static_cast<int>(ParseInt(s.substr(0, x), argv[i])),
                            static_cast<int>(ParseInt(s.substr(x + 1), argv[i]))});
      }
    } else if (name == "chunk_elems") {
      f.chunks.clear();
      for (const std::string& s : Split(value)) f.chunks.push_back(ParseInt(s, argv[i]));
    } else {
      Usage(argv[i]);
    }
  }
  if (f.min_bytes < 2 || f.max_bytes < f.min_bytes || f.step < 2 || f.iters < 1 ||
      f.warmup < 0 || f.shapes.empty()) {
    Usage("(values)");
  }
  return f;
}

class Bench {
 public:
  Bench(const Flags& flags, int world) : flags_(flags), world_(world) {}

  void Setup() {
    std::vector<int> devs(world_);
    for (int r = 0; r < world_; ++r) devs[r] = r;
    const int64_t max_count = flags_.max_bytes / 2;
    // Every chunk size the flags name; the copy engine and the push
    // one-shot up to the largest message.
    at_p2p_group_sizes sizes{};
    int64_t scratch = 0;
    for (int64_t chunk : flags_.chunks.empty() ? std::vector<int64_t>{0} : flags_.chunks) {
      AT_CUDA_CHECK(at_p2p_group_sizes_for(world_, flags_.max_bytes, chunk * 2,
                                           flags_.max_bytes, flags_.max_bytes, &sizes));
      scratch = std::max(scratch, sizes.scratch_bytes);
    }
    AT_CUDA_CHECK(at_p2p_group_create(world_, devs.data(), scratch, &group_));
    AT_CUDA_CHECK(at_p2p_group_set_push_bytes(group_, sizes.push_bytes));
    comms_.resize(world_);
    AT_NCCL_CHECK(ncclCommInitAll(comms_.data(), world_, devs.data()));
    stream_.resize(world_);
    start_.resize(world_);
    stop_.resize(world_);
    in_.resize(world_);
    out_.resize(world_);
    bad_.resize(world_);
    first_.resize(world_);
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_[r], cudaStreamNonBlocking));
      AT_CUDA_CHECK(cudaEventCreate(&start_[r]));
      AT_CUDA_CHECK(cudaEventCreate(&stop_[r]));
      AT_CUDA_CHECK(cudaMalloc(&in_[r], flags_.max_bytes));
      AT_CUDA_CHECK(cudaMalloc(&out_[r], flags_.max_bytes));
      AT_CUDA_CHECK(cudaMalloc(&bad_[r], sizeof(unsigned long long)));
      AT_CUDA_CHECK(cudaMalloc(&first_[r], sizeof(long long)));
    }
    FillInputs(max_count, &in_);
  }

  // The pattern into every rank's buffer of `bufs`, and wait.
  void FillInputs(int64_t count, const std::vector<void*>* bufs) {
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      FillPatternArgs fill;
      fill.data = (*bufs)[r];
      fill.dtype = DType::kBFloat16;
      fill.count = count;
      fill.rank = r;
      AT_CUDA_CHECK(LaunchFillPattern(fill, stream_[r]));
    }
    SyncAll();
  }

  // The symmetric windows: one input and one output buffer per rank from
  // ncclMemAlloc, each registered in one group over the ranks. False (why
  // printed) when NCCL cannot: the column stays empty.
  bool SetupSymmetric() {
#if NCCL_VERSION_CODE >= 22700
    sym_in_.assign(world_, nullptr);
    sym_out_.assign(world_, nullptr);
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      if (ncclMemAlloc(&sym_in_[r], flags_.max_bytes) != ncclSuccess ||
          ncclMemAlloc(&sym_out_[r], flags_.max_bytes) != ncclSuccess) {
        std::printf("# nccl_symm: ncclMemAlloc failed\n");
        return false;
      }
    }
    for (std::vector<void*>* bufs : {&sym_in_, &sym_out_}) {
      std::vector<ncclWindow_t> wins(world_, nullptr);
      AT_NCCL_CHECK(ncclGroupStart());
      ncclResult_t rc = ncclSuccess;
      for (int r = 0; r < world_ && rc == ncclSuccess; ++r) {
        rc = ncclCommWindowRegister(comms_[r], (*bufs)[r], flags_.max_bytes, &wins[r],
                                    NCCL_WIN_COLL_SYMMETRIC);
      }
      const ncclResult_t end = ncclGroupEnd();
      if (rc != ncclSuccess || end != ncclSuccess) {
        std::printf("# nccl_symm: ncclCommWindowRegister failed: %s\n",
                    ncclGetErrorString(rc != ncclSuccess ? rc : end));
        return false;
      }
      wins_.insert(wins_.end(), wins.begin(), wins.end());
    }
    FillInputs(flags_.max_bytes / 2, &sym_in_);
    return true;
#else
    std::printf("# nccl_symm: NCCL %d has no symmetric windows (2.27 and later)\n",
                NCCL_VERSION_CODE);
    return false;
#endif
  }

  void Teardown() {
    SyncAll();
#if NCCL_VERSION_CODE >= 22700
    for (size_t i = 0; i < wins_.size(); ++i) {
      ncclCommWindowDeregister(comms_[i % world_], wins_[i]);
    }
    for (int r = 0; r < static_cast<int>(sym_in_.size()); ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      if (sym_in_[r] != nullptr) ncclMemFree(sym_in_[r]);
      if (sym_out_[r] != nullptr) ncclMemFree(sym_out_[r]);
    }
#endif
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      ncclCommDestroy(comms_[r]);
      cudaFree(in_[r]);
      cudaFree(out_[r]);
      cudaFree(bad_[r]);
      cudaFree(first_[r]);
      cudaEventDestroy(start_[r]);
      cudaEventDestroy(stop_[r]);
      cudaStreamDestroy(stream_[r]);
    }
    at_p2p_group_destroy(group_);
  }

  void SyncAll() {
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

  // Microseconds per iteration: max over GPUs.
  double Time(const std::function<void()>& iteration) {
    SyncAll();
    for (int i = 0; i < flags_.warmup; ++i) iteration();
    SyncAll();
    std::vector<cudaGraphExec_t> exec;
    const int per_graph = std::max(1, std::min(flags_.graph_iters, flags_.iters));
    const int replays = (flags_.iters + per_graph - 1) / per_graph;
    const int ran = flags_.graph ? replays * per_graph : flags_.iters;
    if (flags_.graph) {
      exec.resize(world_);
      for (int r = 0; r < world_; ++r) {
        AT_CUDA_CHECK(cudaSetDevice(r));
        AT_CUDA_CHECK(cudaStreamBeginCapture(stream_[r], cudaStreamCaptureModeThreadLocal));
      }
      for (int i = 0; i < per_graph; ++i) iteration();
      // Every capture ends before any graph is instantiated: instantiation
      // is not permitted while a stream of this thread is still capturing.
      std::vector<cudaGraph_t> graphs(world_, nullptr);
      for (int r = 0; r < world_; ++r) {
        AT_CUDA_CHECK(cudaSetDevice(r));
        AT_CUDA_CHECK(cudaStreamEndCapture(stream_[r], &graphs[r]));
      }
      for (int r = 0; r < world_; ++r) {
        AT_CUDA_CHECK(cudaSetDevice(r));
        AT_CUDA_CHECK(cudaGraphInstantiate(&exec[r], graphs[r], 0));
        AT_CUDA_CHECK(cudaGraphDestroy(graphs[r]));
        AT_CUDA_CHECK(cudaGraphUpload(exec[r], stream_[r]));
      }
      SyncAll();
    }
    // Graphs are replayed on each GPU's legacy default stream, as a PyTorch
    // rank replays them (and the daemon's worker: cuda_rank_run.h).
    auto timed = [&](int r) { return flags_.graph ? cudaStreamLegacy : stream_[r]; };
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaEventRecord(start_[r], timed(r)));
    }
    if (flags_.graph) {
      for (int k = 0; k < replays; ++k) {
        for (int r = 0; r < world_; ++r) {
          AT_CUDA_CHECK(cudaSetDevice(r));
          AT_CUDA_CHECK(cudaGraphLaunch(exec[r], timed(r)));
        }
      }
    } else {
      for (int i = 0; i < flags_.iters; ++i) iteration();
    }
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaEventRecord(stop_[r], timed(r)));
    }
    SyncAll();
    double worst = 0;
    for (int r = 0; r < world_; ++r) {
      float ms = 0;
      AT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_[r], stop_[r]));
      worst = std::max(worst, 1000.0 * ms / ran);
      if (flags_.graph) AT_CUDA_CHECK(cudaGraphExecDestroy(exec[r]));
    }
    return worst;
  }

  // Checks every rank's output (out_, or `outs`) against the all-reduce of
  // the pattern.
  bool Check(int64_t count, const std::vector<void*>* outs = nullptr) {
    const std::vector<void*>& out = outs != nullptr ? *outs : out_;
    static const long long kNone = INT64_MAX;
    bool ok = true, failed_wait = false;
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaMemsetAsync(bad_[r], 0, sizeof(unsigned long long), stream_[r]));
      AT_CUDA_CHECK(
          cudaMemcpyAsync(first_[r], &kNone, sizeof(kNone), cudaMemcpyHostToDevice, stream_[r]));
      CheckPatternArgs c;
      c.data = out[r];
      c.dtype = DType::kBFloat16;
      c.count = count;
      c.expect.world = world_;
      c.expect.rank = r;
      c.expect.count = count;
      c.mismatches = bad_[r];
      c.first_bad = first_[r];
      AT_CUDA_CHECK(LaunchCheckPattern(c, stream_[r]));
      AT_CUDA_CHECK(cudaStreamSynchronize(stream_[r]));
      unsigned long long n = 0;
      AT_CUDA_CHECK(cudaMemcpy(&n, bad_[r], sizeof(n), cudaMemcpyDeviceToHost));
      uint32_t error = 0;
      AT_CUDA_CHECK(at_p2p_group_error(group_, r, &error));
      ok = ok && n == 0 && error == 0;
      if (error != 0) {
        std::printf("# rank %d: error word 0x%08x (a wait gave up: --spin_limit)\n", r, error);
        failed_wait = true;
      }
    }
    // A wait that gave up leaves stale flags: the next candidate starts clean.
    if (failed_wait) AT_CUDA_CHECK(at_p2p_group_reset(group_));
    // Garbage in the outputs, so the next candidate cannot pass on stale data.
    for (int r = 0; r < world_; ++r) {
      AT_CUDA_CHECK(cudaSetDevice(r));
      AT_CUDA_CHECK(cudaMemsetAsync(out[r], 0xff, count * 2, stream_[r]));
    }
    SyncAll();
    return ok;
  }

  // One host thread per GPU, each timing its own back-to-back loop between
  // two events after a host barrier; max over GPUs.
  double NcclThreaded(int64_t count) {
    std::vector<double> us(world_, 0.0);
    std::atomic<int> arrived{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < world_; ++r) {
      threads.emplace_back([&, r] {
        AT_CUDA_CHECK(cudaSetDevice(r));
        auto once = [&] {
          AT_NCCL_CHECK(
              ncclAllReduce(in_[r], out_[r], count, ncclBfloat16, ncclSum, comms_[r], stream_[r]));
        };
        for (int i = 0; i < flags_.warmup; ++i) once();
        AT_CUDA_CHECK(cudaStreamSynchronize(stream_[r]));
        arrived.fetch_add(1);
        while (arrived.load() < world_) std::this_thread::yield();
        AT_CUDA_CHECK(cudaEventRecord(start_[r], stream_[r]));
        for (int i = 0; i < flags_.iters; ++i) once();
        AT_CUDA_CHECK(cudaEventRecord(stop_[r], stream_[r]));
        AT_CUDA_CHECK(cudaStreamSynchronize(stream_[r]));
        float ms = 0;
        AT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_[r], stop_[r]));
        us[r] = 1000.0 * ms / flags_.iters;
      });
    }
    for (std::thread& t : threads) t.join();
    return *std::max_element(us.begin(), us.end());
  }

  double Nccl(int64_t count, bool* ok) {
    if (flags_.nccl_threads && !flags_.graph) {
      const double us = NcclThreaded(count);
      *ok = Check(count);
      return us;
    }
    auto iteration = [&] {
      AT_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < world_; ++r) {
        AT_NCCL_CHECK(
            ncclAllReduce(in_[r], out_[r], count, ncclBfloat16, ncclSum, comms_[r], stream_[r]));
      }
      AT_NCCL_CHECK(ncclGroupEnd());
    };
    const double us = Time(iteration);
    *ok = Check(count);
    return us;
  }

  // NCCL on the symmetric windows (grouped launches from one thread).
  double NcclSymmetric(int64_t count, bool* ok) {
    auto iteration = [&] {
      AT_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < world_; ++r) {
        AT_NCCL_CHECK(ncclAllReduce(sym_in_[r], sym_out_[r], count, ncclBfloat16, ncclSum,
                                    comms_[r], stream_[r]));
      }
      AT_NCCL_CHECK(ncclGroupEnd());
    };
    const double us = Time(iteration);
    *ok = Check(count, &sym_out_);
    return us;
  }

  // Negative when the arguments are rejected (e.g. a chunk that does not fit).
  // The in-place two-shot reduces into the inputs: it is timed so (the
  // values grow, the time does not), then checked on a fresh pattern, which
  // stays for the next candidates.
  double P2p(int algo, int64_t count, Shape shape, int64_t chunk, bool* ok) {
    const bool in_place = algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE;
    std::vector<at_p2p_args> args(world_);
    std::vector<const void*> inputs(in_.begin(), in_.end());
    for (int r = 0; r < world_; ++r) {
      at_p2p_args& a = args[r];
      AT_CUDA_CHECK(at_p2p_group_init_algo_args(group_, algo, r, &a));
      a.dtype = AT_DTYPE_BFLOAT16;
      a.op = AT_OP_SUM;
      a.count = count;
      a.peer_inputs = inputs.data();
      a.output = in_place ? in_[r] : out_[r];
      a.blocks = shape.blocks;
      a.threads = shape.threads;
      a.chunk_elems = chunk;
      a.spin_limit = flags_.spin_limit;
      if (at_p2p_check_args(algo, &a, nullptr, 0) != AT_OK) return -1;
    }
    auto iteration = [&] {
      for (int r = 0; r < world_; ++r) {
        AT_CUDA_CHECK(cudaSetDevice(r));
        AT_CUDA_CHECK(at_p2p_launch(algo, &args[r], stream_[r]));
      }
    };
    const double us = Time(iteration);
    if (in_place) {
      FillInputs(count, &in_);
      iteration();
      *ok = Check(count, &in_);
      FillInputs(count, &in_);
    } else {
      *ok = Check(count);
    }
    return us;
  }

 private:
  const Flags flags_;
  const int world_;
  at_p2p_group* group_ = nullptr;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> stream_;
  std::vector<cudaEvent_t> start_, stop_;
  std::vector<void*> in_, out_;
  std::vector<unsigned long long*> bad_;
  std::vector<long long*> first_;
  std::vector<void*> sym_in_, sym_out_;  // symmetric windows (nccl_symm)
#if NCCL_VERSION_CODE >= 22700
  std::vector<ncclWindow_t> wins_;
#endif
};

struct Best {
  double us = -1;
  std::string how;
  bool ok = true;
};

std::string Cell(const Best& b) {
  if (b.us < 0) return "-";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.1f (%s)%s", b.us, b.how.c_str(), b.ok ? "" : " BAD");
  return buf;
}

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  if (n < 2) {
    std::fprintf(stderr, "p2p_bench: needs at least 2 GPUs, found %d\n", n);
    return 1;
  }
  const int world = std::min(n, AT_P2P_MAX_WORLD);
  cudaDeviceProp prop;
  AT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int nccl_version = 0;
  AT_NCCL_CHECK(ncclGetVersion(&nccl_version));
  const std::string graph_iters =
      flags.graph ? " (" + std::to_string(flags.graph_iters) + " per graph)" : "";
  std::printf("# p2p_bench: %d x %s, NCCL %d, autotuned kernels %d, %s mode%s, iters %d%s, "
              "warmup %d, bf16 sum%s\n",
              world, prop.name, nccl_version, at_kernels_version(),
              flags.graph ? "graph" : "eager",
              flags.nccl_threads && !flags.graph ? " (nccl: one thread per GPU)" : "",
              flags.iters, graph_iters.c_str(), flags.warmup,
              flags.nccl_only ? ", NCCL only" : "");
  Bench bench(flags, world);
  bench.Setup();
  const bool symm = !flags.nccl_only && bench.SetupSymmetric();
  std::printf("%12s %14s %14s %26s %26s %26s %26s %26s %34s %34s %34s %34s %34s %12s %s\n",
              "bytes", "nccl_us", "nccl_symm_us", "one_shot_us", "one_shot_push_us", "two_shot_us",
              "two_shot_push_us", "two_shot_in_place_us", "two_shot_chunked_us", "copy_engine_us",
              "push_pipelined_us",
              "ring_us", "ce_ring_us", "busbw_GB/s", "winner");
  const auto wanted = [&](const std::string& column) {
    return flags.columns.empty() ||
           std::find(flags.columns.begin(), flags.columns.end(), column) != flags.columns.end();
  };
  std::vector<std::string> bad;  // candidates whose output was wrong
  for (int64_t bytes = flags.min_bytes; bytes <= flags.max_bytes; bytes *= flags.step) {
    const int64_t count = bytes / 2;
    Best nccl, one, one_push, two, push, in_place, chunked, ce, pipe, ring, ce_ring;
    nccl.how = "nccl";
    nccl.us = bench.Nccl(count, &nccl.ok);
    Best nsym;
    if (symm) nsym.us = bench.NcclSymmetric(count, &nsym.ok);
    for (const Shape& s : flags.nccl_only ? std::vector<Shape>{} : flags.shapes) {
      char how[64];
      std::snprintf(how, sizeof(how), "%dx%d", s.blocks, s.threads);
      // Keeps the fastest correct candidate per column; a wrong one is listed.
      auto run = [&](int algo, int64_t chunk, const std::string& label, Best* best) {
        if (!wanted(Column(algo))) return;
        bool ok = true;
        const double us = bench.P2p(algo, count, s, chunk, &ok);
        if (us < 0) return;
        if (!ok) {
          bad.push_back(std::to_string(bytes) + " " + at_p2p_algo_name(algo) + " " + label);
          return;
        }
        if (best->us < 0 || us < best->us) *best = {us, label, ok};
      };
      run(AT_ALGO_ALL_REDUCE_ONE_SHOT, 0, how, &one);
      run(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, 0, how, &one_push);
      run(AT_ALGO_ALL_REDUCE_TWO_SHOT, 0, how, &two);
      run(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, 0, how, &push);
      run(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, 0, how, &in_place);
      run(AT_ALGO_ALL_REDUCE_RING, 0, how, &ring);
      for (int64_t chunk : flags.chunks) {  // parts of a shard
        if (chunk >= count / world) continue;  // one part: the column above
        run(AT_ALGO_ALL_REDUCE_RING, chunk, std::string(how) + " c" + std::to_string(chunk), &ring);
      }
      for (int64_t chunk : flags.chunks) {
        if (chunk >= count) continue;  // one chunk: the plain two-shot
        run(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, chunk,
            std::string(how) + " c" + std::to_string(chunk), &chunked);
      }
      for (int64_t chunk : flags.chunks) {  // one chunk too: its own figure
        run(AT_ALGO_ALL_REDUCE_COPY_ENGINE, chunk,
            std::string(how) + " c" + std::to_string(chunk), &ce);
        run(AT_ALGO_ALL_REDUCE_PUSH_PIPELINED, chunk,
            std::string(how) + " c" + std::to_string(chunk), &pipe);
        if (s.blocks < AT_P2P_MAX_BLOCKS) {  // row 0 is the copy engine's
          run(AT_ALGO_ALL_REDUCE_CE_RING, chunk,
              std::string(how) + " c" + std::to_string(chunk), &ce_ring);
        }
      }
    }
    const Best* winner = &nccl;
    const char* winner_name = "nccl";
    const std::pair<const Best*, const char*> candidates[] = {
        {&nsym, "nccl_symm"}, {&one, "one_shot"}, {&one_push, "one_shot_push"}, {&two, "two_shot"},
        {&push, "two_shot_push"}, {&in_place, "two_shot_in_place"}, {&ce, "copy_engine"},
        {&chunked, "two_shot_chunked"}, {&pipe, "push_pipelined"}, {&ring, "ring"},
        {&ce_ring, "ce_ring"}};
    for (const auto& c : candidates) {
      if (c.first->us >= 0 && c.first->ok && (!winner->ok || c.first->us < winner->us)) {
        winner = c.first;
        winner_name = c.second;
      }
    }
    const double busbw = static_cast<double>(bytes) / (winner->us * 1e3) * 2.0 * (world - 1) / world;
    char nccl_cell[32];
    std::snprintf(nccl_cell, sizeof(nccl_cell), "%.2f%s", nccl.us, nccl.ok ? "" : " BAD");
    char symm_cell[32] = "-";
    if (nsym.us >= 0) {
      std::snprintf(symm_cell, sizeof(symm_cell), "%.2f%s", nsym.us, nsym.ok ? "" : "_BAD");
    }
    std::printf("%12lld %14s %14s %26s %26s %26s %26s %26s %34s %34s %34s %34s %34s %12.1f %s\n",
                static_cast<long long>(bytes), nccl_cell, symm_cell, Cell(one).c_str(),
                Cell(one_push).c_str(), Cell(two).c_str(), Cell(push).c_str(),
                Cell(in_place).c_str(), Cell(chunked).c_str(), Cell(ce).c_str(),
                Cell(pipe).c_str(), Cell(ring).c_str(),
                Cell(ce_ring).c_str(), busbw, winner_name);
    std::fflush(stdout);
    if (!nccl.ok) bad.push_back(std::to_string(bytes) + " nccl");
    if (nsym.us >= 0 && !nsym.ok) bad.push_back(std::to_string(bytes) + " nccl_symm");
  }
  bench.Teardown();
  for (const std::string& b : bad) std::printf("# BAD output: %s\n", b.c_str());
  return bad.empty() ? 0 : 3;
}

}  // namespace
}  // namespace autotuned::kernels

int main(int argc, char** argv) { return autotuned::kernels::Main(argc, argv); }
