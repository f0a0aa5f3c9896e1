// GPU test of the P2P collectives: one process drives every visible GPU
// (world = all of them, 2..8) through at_p2p_group. Inputs come from the
// predictable pattern (pattern.h), outputs are checked on the device with
// LaunchCheckPattern. With one GPU, two ranks share it (each its own stream
// and buffers, launch shapes capped so that both ranks' blocks fit at once):
// the protocols and the data are checked, NVLink is not. Without a GPU it
// reports that it skipped and passes. To look into one algo:
// AT_P2P_TEST_ALGO=<algo number> keeps the cases of that algo only, and
// AT_P2P_TEST_SPIN_LIMIT=<polls> replaces the spin limit (a wait that runs
// out then fails its case with the error word instead of hanging).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/autotuned_kernels.h"
#include "kernels/pattern_kernels.h"
#include "kernels/types.h"

namespace autotuned::kernels {
namespace {

constexpr int64_t kMaxCount = 1 << 20;
constexpr int64_t kCounts[] = {1, 7, 8, 1000, 4096 + 3, 1 << 20};
constexpr int kAlgos[] = {AT_ALGO_ALL_REDUCE_ONE_SHOT, AT_ALGO_ALL_REDUCE_TWO_SHOT,
                          AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_ALGO_ALL_GATHER,
                          AT_ALGO_REDUCE_SCATTER, AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                          AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, AT_ALGO_ALL_REDUCE_COPY_ENGINE,
                          AT_ALGO_ALL_TO_ALL, AT_ALGO_BROADCAST,
                          AT_ALGO_ALL_REDUCE_PUSH_PIPELINED, AT_ALGO_BROADCAST_PUSH_PIPELINED,
                          AT_ALGO_ALL_REDUCE_RING, AT_ALGO_ALL_REDUCE_CE_RING,
                          AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE};
// The all-reduces: they share the signal buffer, and all but the push
// one-shot (its own buffers) one scratch buffer per rank.
constexpr int kAllReduces[] = {AT_ALGO_ALL_REDUCE_ONE_SHOT, AT_ALGO_ALL_REDUCE_TWO_SHOT,
                               AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED,
                               AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                               AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                               AT_ALGO_ALL_REDUCE_COPY_ENGINE,
                               AT_ALGO_ALL_REDUCE_PUSH_PIPELINED,
                               AT_ALGO_ALL_REDUCE_RING,
                               AT_ALGO_ALL_REDUCE_CE_RING,
                               AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE};
constexpr int kDtypes[] = {AT_DTYPE_FLOAT32, AT_DTYPE_BFLOAT16, AT_DTYPE_FLOAT16};
struct Shape {
  int blocks;
  int threads;
};
// Consecutive launches rotate through these: block counts that differ from
// launch to launch exercise the per-block sequence numbers.
constexpr Shape kShapes[] = {{8, 256}, {1, 32}, {64, 1024}, {3, 96}, {128, 1024}, {132, 512}};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);
// Generous: a wait that is this long is a bug, and the test fails (error
// word set) instead of hanging.
const int64_t kSpinLimit = [] {
  const char* v = std::getenv("AT_P2P_TEST_SPIN_LIMIT");
  return v != nullptr ? std::strtoll(v, nullptr, 10) : int64_t{1} << 24;
}();
// Scratch per rank: the copy engine's world copies of kMaxCount fp32
// elements.
constexpr int64_t kScratchBytes = AT_P2P_MAX_WORLD * kMaxCount * 4;

int64_t ElemBytes(int dtype) { return dtype == AT_DTYPE_FLOAT32 ? 4 : 2; }

bool IsBroadcast(int algo) {
  return algo == AT_ALGO_BROADCAST || algo == AT_ALGO_BROADCAST_PUSH_PIPELINED;
}

bool Reduces(int algo) {
  return algo != AT_ALGO_ALL_GATHER && algo != AT_ALGO_ALL_TO_ALL && !IsBroadcast(algo);
}

// What an algo runs: the push one-shot takes 16-bit types only.
bool Runs(int algo, int dtype) {
  return algo != AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH || dtype != AT_DTYPE_FLOAT32;
}

#define REQUIRE_CUDA(expr)                                       \
  do {                                                           \
    const int rc_ = static_cast<int>(expr);                      \
    INFO(#expr << " -> " << rc_ << " " << at_error_string(rc_)); \
    REQUIRE(rc_ == 0);                                           \
  } while (0)

class Env {
 public:
  // nullptr (after printing why) when this machine cannot run the test.
  static std::unique_ptr<Env> Create() {
    // Ranks sharing a GPU share its context: a kernel loaded lazily at its
    // first launch (the pattern kernels) would wait for a running collective
    // that waits for the other rank (the library preloads its own kernels).
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    bool p2p = n >= 2;
    for (int i = 0; p2p && i < n && i < AT_P2P_MAX_WORLD; ++i) {
      for (int j = 0; p2p && j < n && j < AT_P2P_MAX_WORLD; ++j) {
        int can = 0;
        if (i != j && (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess || !can)) p2p = false;
      }
    }
    std::unique_ptr<Env> env(new Env);
    if (p2p) {
      env->world = n < AT_P2P_MAX_WORLD ? n : AT_P2P_MAX_WORLD;
      for (int r = 0; r < env->world; ++r) env->dev.push_back(r);
    } else if (n == 1) {
      env->world = 2;
      env->dev = {0, 0};
      int sms = 0;
      REQUIRE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      env->max_blocks = sms / env->world;
      static bool said = false;
      if (!said) {
        std::fprintf(stderr, "NOTE: one GPU: 2 ranks share GPU 0 (at most %d blocks each); "
                     "protocols and data checked, not NVLink\n", env->max_blocks);
        said = true;
      }
    } else {
      std::fprintf(stderr, "SKIPPED: needs a GPU (2 with P2P for NVLink), found %d\n", n);
      return nullptr;
    }
    REQUIRE_CUDA(at_p2p_group_create(env->world, env->dev.data(), kScratchBytes, &env->group));
    const int64_t push_bytes = at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                                                    AT_DTYPE_BFLOAT16, env->world, kMaxCount, 0);
    REQUIRE_CUDA(at_p2p_group_set_push_bytes(env->group, push_bytes));
    for (int algo : kAlgos) {
      for (int dtype : kDtypes) {
        if (!Runs(algo, dtype) || algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH) continue;
        REQUIRE(at_p2p_scratch_bytes(algo, dtype, env->world, kMaxCount, 1 << 17) <=
                kScratchBytes);
      }
    }
    const size_t bytes = AT_P2P_MAX_WORLD * kMaxCount * 4;
    env->stream.resize(env->world);
    env->in.resize(env->world);
    env->out.resize(env->world);
    env->bad.resize(env->world);
    env->first.resize(env->world);
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(cudaStreamCreateWithFlags(&env->stream[r], cudaStreamNonBlocking));
      REQUIRE_CUDA(cudaMalloc(&env->in[r], bytes));
      REQUIRE_CUDA(cudaMalloc(&env->out[r], bytes));
      REQUIRE_CUDA(cudaMalloc(&env->bad[r], sizeof(unsigned long long)));
      REQUIRE_CUDA(cudaMalloc(&env->first[r], sizeof(long long)));
    }
    return env;
  }

  ~Env() {
    for (int r = 0; r < world; ++r) {
      cudaSetDevice(dev[r]);
      cudaStreamSynchronize(stream[r]);
      cudaStreamDestroy(stream[r]);
      cudaFree(in[r]);
      cudaFree(out[r]);
      cudaFree(bad[r]);
      cudaFree(first[r]);
    }
    at_p2p_group_destroy(group);
  }

  void SyncAll() {
    for (int r = 0; r < world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(dev[r]));
      REQUIRE_CUDA(cudaStreamSynchronize(stream[r]));
    }
  }

  void ResetCounters() {
    static const long long kNone = INT64_MAX;
    for (int r = 0; r < world; ++r) {  // on the stream the checks run on
      REQUIRE_CUDA(cudaSetDevice(dev[r]));
      REQUIRE_CUDA(cudaMemsetAsync(bad[r], 0, sizeof(unsigned long long), stream[r]));
      REQUIRE_CUDA(cudaMemcpyAsync(first[r], &kNone, sizeof(kNone), cudaMemcpyHostToDevice,
                                   stream[r]));
    }
  }

  // Mismatches on every rank since ResetCounters, and no error word set.
  void ExpectClean() {
    SyncAll();
    for (int r = 0; r < world; ++r) {
      unsigned long long n = 0;
      long long first_bad = 0;
      uint32_t error = 0;
      REQUIRE_CUDA(cudaSetDevice(dev[r]));
      REQUIRE_CUDA(cudaMemcpy(&n, bad[r], sizeof(n), cudaMemcpyDeviceToHost));
      REQUIRE_CUDA(cudaMemcpy(&first_bad, first[r], sizeof(first_bad), cudaMemcpyDeviceToHost));
      REQUIRE_CUDA(at_p2p_group_error(group, r, &error));
      INFO("rank " << r << " mismatches " << n << " first at " << first_bad << " error word 0x"
                   << std::hex << error);
      CHECK(n == 0);
      CHECK(error == 0);
    }
  }

  // A valid launch shape capped at max_blocks blocks (ranks sharing a GPU);
  // an invalid one as it is, for the kernels to reject.
  Shape Fit(Shape s) const {
    if (s.blocks > max_blocks && s.blocks <= AT_P2P_MAX_BLOCKS) s.blocks = max_blocks;
    return s;
  }

  int world = 0;
  std::vector<int> dev;
  int max_blocks = AT_P2P_MAX_BLOCKS;
  at_p2p_group* group = nullptr;
  std::vector<cudaStream_t> stream;
  std::vector<void*> in, out;
  std::vector<unsigned long long*> bad;
  std::vector<long long*> first;

 private:
  Env() = default;
};

struct Case {
  int algo = AT_ALGO_ALL_REDUCE_ONE_SHOT;
  int dtype = AT_DTYPE_FLOAT32;
  int op = AT_OP_SUM;
  int64_t count = 0;
  bool in_place = false;

  // The in-place two-shot runs in place only.
  bool InPlace() const { return in_place || algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE; }
  int64_t Chunk() const { return count <= 4099 ? 256 : (1 << 17); }
  // Broadcast: a root that moves with the count, so that rank 0 is not
  // always the one read.
  int Root(int world) const { return static_cast<int>((count + 1) % world); }
  std::string Name() const {
    return std::string(at_p2p_algo_name(algo)) + " dtype " + std::to_string(dtype) + " op " +
           std::to_string(op) + " count " + std::to_string(count) +
           (InPlace() ? " in place" : "");
  }
};

// Where every rank's input and output are for a case.
struct Layout {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  int64_t in_count = 0;
  int64_t out_count = 0;
  Collective collective = Collective::kAllReduce;
};

Layout MakeLayout(const Env& env, const Case& c) {
  Layout l;
  const int64_t stride = c.count * ElemBytes(c.dtype);
  for (int r = 0; r < env.world; ++r) {
    char* in = static_cast<char*>(env.in[r]);
    char* out = static_cast<char*>(env.out[r]);
    switch (c.algo) {
      case AT_ALGO_ALL_GATHER:
        l.inputs.push_back(c.InPlace() ? out + r * stride : in);
        l.outputs.push_back(out);
        break;
      case AT_ALGO_REDUCE_SCATTER:
        l.inputs.push_back(in);
        l.outputs.push_back(c.InPlace() ? in + r * stride : out);
        break;
      default:
        l.inputs.push_back(in);
        l.outputs.push_back(c.InPlace() ? in : out);
    }
  }
  const bool a2a = c.algo == AT_ALGO_ALL_TO_ALL;
  l.in_count = c.algo == AT_ALGO_REDUCE_SCATTER || a2a ? env.world * c.count : c.count;
  l.out_count = c.algo == AT_ALGO_ALL_GATHER || a2a ? env.world * c.count : c.count;
  l.collective = c.algo == AT_ALGO_ALL_GATHER       ? Collective::kAllGather
                 : c.algo == AT_ALGO_REDUCE_SCATTER ? Collective::kReduceScatter
                 : a2a                              ? Collective::kAllToAll
                 : IsBroadcast(c.algo)              ? Collective::kBroadcast
                                                    : Collective::kAllReduce;
  return l;
}

// Pattern input (or, with garbage, other values) into rank r's input. The
// garbage is rank r + 1's pattern: InputValue differs from rank r's by 5
// (mod 16) at every element, so an overwrite that a kernel still reads is
// seen.
int Fill(Env& env, const Case& c, const Layout& l, int r, bool garbage = false) {
  FillPatternArgs f;
  f.data = const_cast<void*>(l.inputs[r]);
  f.dtype = static_cast<DType>(c.dtype);
  f.count = l.in_count;
  f.rank = garbage ? r + 1 : r;
  return LaunchFillPattern(f, env.stream[r]);
}

int Check(Env& env, const Case& c, const Layout& l, int r) {
  CheckPatternArgs k;
  k.data = l.outputs[r];
  k.dtype = static_cast<DType>(c.dtype);
  k.count = l.out_count;
  k.expect.collective = l.collective;
  k.expect.op = static_cast<ReduceOp>(c.op);
  k.expect.world = env.world;
  k.expect.rank = r;
  k.expect.root = c.Root(env.world);
  k.expect.count = c.count;
  k.mismatches = env.bad[r];
  k.first_bad = env.first[r];
  return LaunchCheckPattern(k, env.stream[r]);
}

at_p2p_args Args(Env& env, const Case& c, const Layout& l, int r, Shape shape,
                 int64_t spin_limit = kSpinLimit) {
  at_p2p_args a = {};
  at_p2p_group_init_algo_args(env.group, c.algo, r, &a);
  a.dtype = c.dtype;
  a.op = c.op;
  a.count = c.count;
  a.peer_inputs = l.inputs.data();
  a.output = l.outputs[r];
  shape = env.Fit(shape);
  // The ring beside the copy engine leaves signal row 0 to the copy engine.
  if (c.algo == AT_ALGO_ALL_REDUCE_CE_RING && shape.blocks == AT_P2P_MAX_BLOCKS) --shape.blocks;
  a.blocks = shape.blocks;
  a.threads = shape.threads;
  a.chunk_elems = c.Chunk();
  a.spin_limit = spin_limit;
  a.root = c.Root(env.world);
  return a;
}

int Launch(Env& env, const Case& c, const Layout& l, int r, Shape shape) {
  const at_p2p_args a = Args(env, c, l, r, shape);
  return at_p2p_launch(c.algo, &a, env.stream[r]);
}

// fill, collective, check (on every rank, each on its own stream).
void RunOnce(Env& env, const Case& c, Shape shape) {
  const Layout l = MakeLayout(env, c);
  for (int r = 0; r < env.world; ++r) {
    REQUIRE_CUDA(cudaSetDevice(env.dev[r]));
    REQUIRE_CUDA(Fill(env, c, l, r));
    REQUIRE_CUDA(Launch(env, c, l, r, shape));
    REQUIRE_CUDA(Check(env, c, l, r));
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const char* only = std::getenv("AT_P2P_TEST_ALGO");
  for (int algo : kAlgos) {
    if (only != nullptr && algo != std::atoi(only)) continue;
    for (int dtype : kDtypes) {
      if (!Runs(algo, dtype)) continue;
      for (int64_t count : kCounts) {
        Case c;
        c.algo = algo;
        c.dtype = dtype;
        c.count = count;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

TEST_CASE("p2p collectives produce the pattern's results", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (Case c : AllCases()) {
    const bool reduces = Reduces(c.algo);
    for (int op : {AT_OP_SUM, AT_OP_MAX, AT_OP_MIN}) {
      if (!reduces && op != AT_OP_SUM) continue;
      c.op = op;
      for (int s = 0; s < kNumShapes; ++s) {
        if (op != AT_OP_SUM && s > 0) break;  // other ops: one shape
        INFO(c.Name() << " shape " << kShapes[s].blocks << "x" << kShapes[s].threads);
        env->ResetCounters();
        RunOnce(*env, c, kShapes[s]);
        env->ExpectClean();
      }
    }
  }
}

TEST_CASE("p2p collectives in place", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (Case c : AllCases()) {
    // Not supported.
    if (c.algo == AT_ALGO_ALL_REDUCE_ONE_SHOT || c.algo == AT_ALGO_ALL_REDUCE_COPY_ENGINE ||
        c.algo == AT_ALGO_ALL_REDUCE_CE_RING || c.algo == AT_ALGO_ALL_TO_ALL) {
      continue;
    }
    c.in_place = true;
    const Layout l = MakeLayout(*env, c);
    bool valid = true;
    for (int r = 0; r < env->world; ++r) {
      at_p2p_args a = Args(*env, c, l, r, kShapes[0]);
      valid = valid && at_p2p_check_args(c.algo, &a, nullptr, 0) == AT_OK;
    }
    if (!valid) {
      // Only all-gather / reduce-scatter with a per-rank block that is not a
      // multiple of 16 bytes: the in-place pointers are misaligned.
      CHECK((c.algo == AT_ALGO_ALL_GATHER || c.algo == AT_ALGO_REDUCE_SCATTER));
      CHECK(c.count * ElemBytes(c.dtype) % AT_P2P_ALIGNMENT != 0);
      continue;
    }
    INFO(c.Name());
    env->ResetCounters();
    RunOnce(*env, c, kShapes[0]);
    env->ExpectClean();
  }
}

TEST_CASE("p2p collectives back to back", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (Case c : AllCases()) {
    // In place, each launch reduces the previous one's result: max leaves it
    // as it was.
    if (c.InPlace()) c.op = AT_OP_MAX;
    INFO(c.Name());
    const Layout l = MakeLayout(*env, c);
    env->ResetCounters();
    // 200 launches with nothing in between, then check the last output.
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(Fill(*env, c, l, r));
    }
    for (int i = 0; i < 200; ++i) {
      for (int r = 0; r < env->world; ++r) {
        REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
        REQUIRE_CUDA(Launch(*env, c, l, r, kShapes[i % kNumShapes]));
      }
    }
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(Check(*env, c, l, r));
    }
    // Each rank overwrites its input right after its launch completes: a
    // peer still reading it would produce a mismatch.
    for (int i = 0; i < 50; ++i) {
      for (int r = 0; r < env->world; ++r) {
        REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
        REQUIRE_CUDA(Fill(*env, c, l, r));
        REQUIRE_CUDA(Launch(*env, c, l, r, kShapes[i % kNumShapes]));
        REQUIRE_CUDA(Check(*env, c, l, r));
        REQUIRE_CUDA(Fill(*env, c, l, r, /*garbage=*/true));
      }
    }
    env->ExpectClean();
  }
}

// The all-reduces one after the other, each launch a different algo and
// shape: they share the signal buffer (epochs) and the scratch (the push
// two-shot writes the peers' scratch, the pull ones read it), so a launch that
// wrote or read scratch while a peer's previous launch still used it shows
// up as a mismatch. In place on odd launches.
TEST_CASE("p2p all-reduces interleaved back to back", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  constexpr int kN = sizeof(kAllReduces) / sizeof(kAllReduces[0]);
  for (int dtype : {AT_DTYPE_FLOAT32, AT_DTYPE_BFLOAT16}) {
    for (int64_t count : {int64_t{4096 + 3}, int64_t{1} << 20}) {
      env->ResetCounters();
      for (int i = 0; i < 60; ++i) {
        Case c;
        c.algo = kAllReduces[(i * 3 + i / kN) % kN];
        if (!Runs(c.algo, dtype)) continue;
        c.dtype = dtype;
        c.count = count;
        c.in_place = i % 2 == 1 && c.algo != AT_ALGO_ALL_REDUCE_ONE_SHOT &&
                     c.algo != AT_ALGO_ALL_REDUCE_COPY_ENGINE &&
                     c.algo != AT_ALGO_ALL_REDUCE_CE_RING;
        INFO(c.Name() << " launch " << i);
        const Layout l = MakeLayout(*env, c);
        for (int r = 0; r < env->world; ++r) {
          REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
          REQUIRE_CUDA(Fill(*env, c, l, r));
          REQUIRE_CUDA(Launch(*env, c, l, r, kShapes[i % kNumShapes]));
          REQUIRE_CUDA(Check(*env, c, l, r));
          REQUIRE_CUDA(Fill(*env, c, l, r, /*garbage=*/true));
        }
      }
      INFO("dtype " << dtype << " count " << count);
      env->ExpectClean();
    }
  }
}

// Captures, per rank, ten iterations of `step(r, i)` (fill, launch with
// shape i, check, garbage) into one CUDA graph, replays every rank's graph 20
// times, checks that no counter or error word is set, then runs `eager()`
// (one eager launch on every rank: the sequence numbers still agree after the
// replays) and checks again.
template <typename Step, typename Eager>
void ReplayCaptured(Env& env, const Step& step, const Eager& eager) {
  std::vector<cudaGraphExec_t> exec(env.world, nullptr);
  for (int r = 0; r < env.world; ++r) {
    REQUIRE_CUDA(cudaSetDevice(env.dev[r]));
    REQUIRE_CUDA(cudaStreamBeginCapture(env.stream[r], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 10; ++i) step(r, i);
    cudaGraph_t graph = nullptr;
    REQUIRE_CUDA(cudaStreamEndCapture(env.stream[r], &graph));
    REQUIRE_CUDA(cudaGraphInstantiate(&exec[r], graph, 0));
    REQUIRE_CUDA(cudaGraphDestroy(graph));
  }
  for (int replay = 0; replay < 20; ++replay) {
    for (int r = 0; r < env.world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env.dev[r]));
      REQUIRE_CUDA(cudaGraphLaunch(exec[r], env.stream[r]));
    }
  }
  env.ExpectClean();
  eager();
  env.ExpectClean();
  for (int r = 0; r < env.world; ++r) {
    REQUIRE_CUDA(cudaSetDevice(env.dev[r]));
    REQUIRE_CUDA(cudaGraphExecDestroy(exec[r]));
  }
}

TEST_CASE("p2p collectives under CUDA graph capture and replay", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (const Case& c : AllCases()) {
    INFO(c.Name());
    const Layout l = MakeLayout(*env, c);
    env->ResetCounters();
    ReplayCaptured(
        *env,
        [&](int r, int i) {
          REQUIRE_CUDA(Fill(*env, c, l, r));
          REQUIRE_CUDA(Launch(*env, c, l, r, kShapes[i % kNumShapes]));
          REQUIRE_CUDA(Check(*env, c, l, r));
          REQUIRE_CUDA(Fill(*env, c, l, r, /*garbage=*/true));
        },
        [&] { RunOnce(*env, c, kShapes[2]); });
  }
}

// ---- all_to_all_v: uneven splits ------------------------------------------
// Piece (s -> d) of rank s's input holds the pattern of rank Tag(s, d), so
// the check of each piece of rank d's output (a broadcast's expectation:
// InputValue(root, i), root = Tag(s, d)) tells whose piece landed where.
// Entries stay below 1e6 elements: a row of 8 of them in fp32 fits the
// Env's buffers (8 x 2^20 elements) with room for the guard after it.

using Splits = std::vector<int64_t>;

int Tag(int src, int dst) { return src * AT_P2P_MAX_WORLD + dst; }
// Elements after rank r's column that the kernel must leave alone.
constexpr int64_t kGuard = 64;
constexpr int kGuardTag = 99;

int64_t ColumnSum(const Splits& s, int w, int r) {
  int64_t n = 0;
  for (int src = 0; src < w; ++src) n += s[src * w + r];
  return n;
}
// Offset of piece (src -> dst) in src's input, and in dst's output.
int64_t InOffset(const Splits& s, int w, int src, int dst) {
  int64_t n = 0;
  for (int q = 0; q < dst; ++q) n += s[src * w + q];
  return n;
}
int64_t OutOffset(const Splits& s, int w, int dst, int src) {
  int64_t n = 0;
  for (int q = 0; q < src; ++q) n += s[q * w + dst];
  return n;
}

// Deterministic matrices (an LCG: the same on every run).
struct Lcg {
  uint64_t x;
  int64_t Below(int64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(n));
  }
};

// Entries in [0, max_entry], about a quarter of them 0.
Splits RandomSplits(int w, int64_t max_entry, uint64_t seed) {
  Lcg g{seed};
  Splits s(static_cast<size_t>(w) * w);
  for (int64_t& c : s) c = g.Below(4) == 0 ? 0 : g.Below(max_entry + 1);
  return s;
}

struct VCase {
  std::string what;
  int dtype = AT_DTYPE_FLOAT32;
  Splits splits;
  std::string Name() const { return what + " dtype " + std::to_string(dtype); }
};

// The matrices every dtype runs: random ones with zeros, small to large;
// a rank that sends nothing and one that receives nothing; odd lengths
// (misaligned pieces, 2, 4 and 8-byte units, scalar heads and tails); even
// splits; a single piece.
std::vector<VCase> VCases(int w) {
  std::vector<Splits> m;
  m.push_back(RandomSplits(w, 40, 1));
  m.push_back(RandomSplits(w, 5000, 2));
  m.push_back(RandomSplits(w, 999999, 3));
  Splits quiet = RandomSplits(w, 3000, 4);
  for (int d = 0; d < w; ++d) quiet[d] = 0;                  // rank 0 sends nothing
  for (int s = 0; s < w; ++s) quiet[s * w + (w - 1)] = 0;   // the last receives nothing
  quiet[1 * w + 0] = 4097;
  m.push_back(quiet);
  Splits odd(static_cast<size_t>(w) * w);
  for (int i = 0; i < w * w; ++i) odd[i] = (i * 37 + 11) % 29 * 2 + 1 + (i % 3 == 0 ? 4096 : 0);
  m.push_back(odd);
  m.push_back(Splits(static_cast<size_t>(w) * w, 1000));
  Splits one(static_cast<size_t>(w) * w, 0);
  one[(w - 1) * w + 0] = 12345;
  m.push_back(one);
  const char* what[] = {"random <= 40", "random <= 5000", "random <= 999999",
                        "rank 0 sends nothing, the last receives nothing", "odd lengths",
                        "even 1000", "one piece"};
  std::vector<VCase> cases;
  for (int dtype : kDtypes) {
    for (size_t i = 0; i < m.size(); ++i) cases.push_back(VCase{what[i], dtype, m[i]});
  }
  return cases;
}

char* At(void* base, int64_t elems, int dtype) {
  return static_cast<char*>(base) + elems * ElemBytes(dtype);
}

// Rank r's input, piece by piece (with `garbage`, other values), and, unless
// garbage, the guard after its output's column.
int FillV(Env& env, const VCase& c, int r, bool garbage = false) {
  const int w = env.world;
  for (int d = 0; d < w; ++d) {
    FillPatternArgs f;
    f.data = At(env.in[r], InOffset(c.splits, w, r, d), c.dtype);
    f.dtype = static_cast<DType>(c.dtype);
    f.count = c.splits[r * w + d];
    f.rank = Tag(r, d) + (garbage ? 1 : 0);  // another rank: 5 apart mod 16, never equal
    if (f.count == 0) continue;
    const int rc = LaunchFillPattern(f, env.stream[r]);
    if (rc != 0) return rc;
  }
  if (garbage) return 0;
  FillPatternArgs g;
  g.data = At(env.out[r], ColumnSum(c.splits, w, r), c.dtype);
  g.dtype = static_cast<DType>(c.dtype);
  g.count = kGuard;
  g.rank = kGuardTag;
  return LaunchFillPattern(g, env.stream[r]);
}

// Rank r's output, piece by piece, and the guard after it.
int CheckV(Env& env, const VCase& c, int r) {
  const int w = env.world;
  for (int s = 0; s <= w; ++s) {
    CheckPatternArgs k;
    k.dtype = static_cast<DType>(c.dtype);
    k.expect.collective = Collective::kBroadcast;
    if (s < w) {
      k.data = At(env.out[r], OutOffset(c.splits, w, r, s), c.dtype);
      k.count = c.splits[s * w + r];
      k.expect.root = Tag(s, r);
    } else {
      k.data = At(env.out[r], ColumnSum(c.splits, w, r), c.dtype);
      k.count = kGuard;
      k.expect.root = kGuardTag;
    }
    if (k.count == 0) continue;
    k.mismatches = env.bad[r];
    k.first_bad = env.first[r];
    const int rc = LaunchCheckPattern(k, env.stream[r]);
    if (rc != 0) return rc;
  }
  return 0;
}

at_p2p_args VArgs(Env& env, int dtype, int r, Shape shape, int64_t spin_limit = kSpinLimit) {
  at_p2p_args a = {};
  at_p2p_group_init_args(env.group, r, &a);
  a.dtype = dtype;
  a.count = -1;  // ignored
  a.peer_inputs = env.in.data();
  a.output = env.out[r];
  shape = env.Fit(shape);
  a.blocks = shape.blocks;
  a.threads = shape.threads;
  a.spin_limit = spin_limit;
  return a;
}

int LaunchV(Env& env, const VCase& c, int r, Shape shape) {
  const at_p2p_args a = VArgs(env, c.dtype, r, shape);
  return at_p2p_all_to_all_v(&a, c.splits.data(), env.stream[r]);
}

// Output garbage, fill, all_to_all_v, check, on every rank.
void RunOnceV(Env& env, const VCase& c, Shape shape) {
  for (int r = 0; r < env.world; ++r) {
    REQUIRE_CUDA(cudaSetDevice(env.dev[r]));
    REQUIRE_CUDA(cudaMemsetAsync(env.out[r], 0xff,
                                 ColumnSum(c.splits, env.world, r) * ElemBytes(c.dtype),
                                 env.stream[r]));
    REQUIRE_CUDA(FillV(env, c, r));
    REQUIRE_CUDA(LaunchV(env, c, r, shape));
    REQUIRE_CUDA(CheckV(env, c, r));
  }
}

TEST_CASE("all_to_all_v moves every uneven piece to its place", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (const VCase& c : VCases(env->world)) {
    for (int s = 0; s < kNumShapes; ++s) {
      INFO(c.Name() << " shape " << kShapes[s].blocks << "x" << kShapes[s].threads);
      env->ResetCounters();
      RunOnceV(*env, c, kShapes[s]);
      env->ExpectClean();
    }
  }
}

// Back to back, alone and between the other collectives (which share the
// signal buffer's epochs): each rank overwrites its input right after its
// launch completes, so a peer still reading it shows up as a mismatch.
TEST_CASE("all_to_all_v back to back, and between other collectives", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (const VCase& c : VCases(env->world)) {
    INFO(c.Name());
    env->ResetCounters();
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(FillV(*env, c, r));
    }
    for (int i = 0; i < 100; ++i) {
      for (int r = 0; r < env->world; ++r) {
        REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
        REQUIRE_CUDA(LaunchV(*env, c, r, kShapes[i % kNumShapes]));
      }
    }
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(CheckV(*env, c, r));
    }
    for (int i = 0; i < 30; ++i) {
      for (int r = 0; r < env->world; ++r) {
        REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
        REQUIRE_CUDA(FillV(*env, c, r));
        REQUIRE_CUDA(LaunchV(*env, c, r, kShapes[i % kNumShapes]));
        REQUIRE_CUDA(CheckV(*env, c, r));
        REQUIRE_CUDA(FillV(*env, c, r, /*garbage=*/true));
      }
      if (i % 3 != 2) continue;
      Case other;  // another collective on the same signals
      other.algo = i % 2 == 0 ? AT_ALGO_ALL_TO_ALL : AT_ALGO_ALL_REDUCE_TWO_SHOT;
      other.dtype = c.dtype;
      other.count = 4096 + 3;
      RunOnce(*env, other, kShapes[(i + 1) % kNumShapes]);
    }
    env->ExpectClean();
  }
}

TEST_CASE("all_to_all_v under CUDA graph capture and replay", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (const VCase& c : VCases(env->world)) {
    INFO(c.Name());
    env->ResetCounters();
    ReplayCaptured(
        *env,
        [&](int r, int i) {
          REQUIRE_CUDA(FillV(*env, c, r));
          REQUIRE_CUDA(LaunchV(*env, c, r, kShapes[i % kNumShapes]));
          REQUIRE_CUDA(CheckV(*env, c, r));
          REQUIRE_CUDA(FillV(*env, c, r, /*garbage=*/true));
        },
        [&] { RunOnceV(*env, c, kShapes[2]); });
  }
}

TEST_CASE("all_to_all_v: zeros launch nothing, bad arguments nothing, a rank alone gives up",
          "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  const int w = env->world;
  REQUIRE_CUDA(cudaSetDevice(env->dev[0]));
  // A matrix of zeros: no launch, so rank 0 alone neither waits nor fails.
  const Splits zeros(static_cast<size_t>(w) * w, 0);
  at_p2p_args a = VArgs(*env, AT_DTYPE_BFLOAT16, 0, kShapes[0], /*spin_limit=*/1 << 16);
  REQUIRE_CUDA(at_p2p_all_to_all_v(&a, zeros.data(), env->stream[0]));
  // Rejected arguments: nothing launched.
  const Splits splits = RandomSplits(w, 5000, 5);
  a.blocks = 0;
  CHECK(at_p2p_all_to_all_v(&a, splits.data(), env->stream[0]) ==
        static_cast<int>(cudaErrorInvalidValue));
  CHECK(at_p2p_all_to_all_v(&a, nullptr, env->stream[0]) ==
        static_cast<int>(cudaErrorInvalidValue));
  a.blocks = 4;
  CHECK(at_p2p_launch(AT_ALGO_ALL_TO_ALL_V, &a, env->stream[0]) ==
        static_cast<int>(cudaErrorInvalidValue));
  CHECK(cudaGetLastError() == cudaSuccess);
  REQUIRE_CUDA(cudaStreamSynchronize(env->stream[0]));
  uint32_t error = 0;
  REQUIRE_CUDA(at_p2p_group_error(env->group, 0, &error));
  CHECK(error == 0);
  // Any other matrix is a collective: rank 0 launched alone waits at the
  // start barrier for the others, then gives up.
  a.threads = 128;
  REQUIRE_CUDA(at_p2p_all_to_all_v(&a, splits.data(), env->stream[0]));
  REQUIRE_CUDA(cudaStreamSynchronize(env->stream[0]));  // returns: no hang
  REQUIRE_CUDA(at_p2p_group_error(env->group, 0, &error));
  CHECK((error & 0xffu) == AT_SIGNAL_ERR_TIMEOUT);
  CHECK(((error >> 8) & 0xffu) == 1u);  // the start barrier
  const uint32_t peer = (error >> 16) & 0xffu;
  CHECK(peer >= 1);
  CHECK(peer < static_cast<uint32_t>(w));
  // Reset, then the group works again, all_to_all_v and the others.
  REQUIRE_CUDA(at_p2p_group_reset(env->group));
  env->ResetCounters();
  RunOnceV(*env, VCase{"random <= 5000", AT_DTYPE_BFLOAT16, splits}, kShapes[0]);
  Case c;
  c.count = 1000;
  RunOnce(*env, c, kShapes[0]);
  env->ExpectClean();
}

// -0.0 is the push one-shot's empty marker: an input of -0.0 must still
// arrive (sent as +0.0) rather than leave its reader waiting.
TEST_CASE("push one-shot: inputs of -0.0 arrive as +0.0", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (int dtype : {AT_DTYPE_BFLOAT16, AT_DTYPE_FLOAT16}) {
    Case c;
    c.algo = AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH;
    c.dtype = dtype;
    c.count = 4096 + 3;  // whole vectors and a tail
    INFO(c.Name());
    const Layout l = MakeLayout(*env, c);
    const std::vector<uint16_t> minus_zero(c.count, 0x8000);
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(cudaMemcpy(const_cast<void*>(l.inputs[r]), minus_zero.data(), c.count * 2,
                              cudaMemcpyHostToDevice));
      REQUIRE_CUDA(cudaMemset(l.outputs[r], 0xff, c.count * 2));
    }
    for (int r = 0; r < env->world; ++r) {
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(Launch(*env, c, l, r, kShapes[0]));
    }
    env->SyncAll();
    for (int r = 0; r < env->world; ++r) {
      std::vector<uint16_t> out(c.count, 1);
      REQUIRE_CUDA(cudaSetDevice(env->dev[r]));
      REQUIRE_CUDA(cudaMemcpy(out.data(), l.outputs[r], c.count * 2, cudaMemcpyDeviceToHost));
      int64_t wrong = 0;
      for (uint16_t v : out) wrong += v != 0;
      INFO("rank " << r);
      CHECK(wrong == 0);
      uint32_t error = 0;
      REQUIRE_CUDA(at_p2p_group_error(env->group, r, &error));
      CHECK(error == 0);
    }
    env->ResetCounters();
    RunOnce(*env, c, kShapes[1]);
    env->ExpectClean();
  }
}

TEST_CASE("bad launch shapes are rejected without a launch", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  Case c;
  c.count = 1000;
  const Layout l = MakeLayout(*env, c);
  REQUIRE_CUDA(cudaSetDevice(env->dev[0]));
  for (int algo : kAlgos) {
    for (Shape s : {Shape{0, 256}, Shape{AT_P2P_MAX_BLOCKS + 1, 256}, Shape{8, 0}, Shape{8, 48}, Shape{8, 2048},
                    Shape{-1, 32}}) {
      INFO(at_p2p_algo_name(algo) << " shape " << s.blocks << "x" << s.threads);
      at_p2p_args a = Args(*env, c, l, 0, s);
      CHECK(at_p2p_launch(algo, &a, env->stream[0]) == static_cast<int>(cudaErrorInvalidValue));
    }
  }
  CHECK(cudaGetLastError() == cudaSuccess);
  // Nothing was launched, so a normal collective still works.
  env->ResetCounters();
  RunOnce(*env, c, kShapes[0]);
  env->ExpectClean();
}

TEST_CASE("a rank launched alone gives up after the spin limit", "[gpu]") {
  std::unique_ptr<Env> env = Env::Create();
  if (!env) return;
  for (int algo : kAlgos) {
    INFO(at_p2p_algo_name(algo));
    Case c;
    c.algo = algo;
    c.dtype = AT_DTYPE_BFLOAT16;
    c.count = 4099;
    const Layout l = MakeLayout(*env, c);
    REQUIRE_CUDA(cudaSetDevice(env->dev[0]));
    at_p2p_args a = Args(*env, c, l, 0, Shape{4, 128}, /*spin_limit=*/1 << 16);
    REQUIRE_CUDA(at_p2p_launch(algo, &a, env->stream[0]));
    REQUIRE_CUDA(cudaStreamSynchronize(env->stream[0]));  // returns: no hang
    uint32_t error = 0;
    REQUIRE_CUDA(at_p2p_group_error(env->group, 0, &error));
    CHECK((error & 0xffu) == AT_SIGNAL_ERR_TIMEOUT);
    // The start barrier, or the push one-shot's data.
    CHECK(((error >> 8) & 0xffu) == (algo == AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH ? 4u : 1u));
    const uint32_t peer = (error >> 16) & 0xffu;
    CHECK(peer >= 1);
    CHECK(peer < static_cast<uint32_t>(env->world));
    CHECK((error >> 24) <= 4);  // a signal row: 4 blocks, from row 1 for the ring beside the CE
    REQUIRE_CUDA(at_p2p_group_error(env->group, 1, &error));
    CHECK(error == 0);
    // Reset, then the group works again.
    REQUIRE_CUDA(at_p2p_group_reset(env->group));
    env->ResetCounters();
    RunOnce(*env, c, kShapes[0]);
    env->ExpectClean();
  }
}

}  // namespace
}  // namespace autotuned::kernels
