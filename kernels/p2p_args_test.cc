// Host-only checks of the P2P C ABI: validation, limits and sizes. No GPU and
// no CUDA call: the pointers below are made-up addresses, never dereferenced.
#include <stdint.h>

#include <string>

#include <catch2/catch.hpp>

#include "kernels/autotuned_kernels.h"
#include "kernels/p2p_layout.h"

namespace autotuned::kernels::p2p {
namespace {

void* Fake(uintptr_t addr) { return reinterpret_cast<void*>(addr); }

// A valid 2-rank all-reduce setup at made-up, well aligned addresses.
struct Setup {
  const void* inputs[kMaxWorld];
  void* scratch[kMaxWorld];
  void* signals[kMaxWorld];
  at_p2p_args args = {};

  explicit Setup(int world = 2, int rank = 0) {
    for (int p = 0; p < kMaxWorld; ++p) {
      inputs[p] = Fake(0x10000000u * (p + 1));
      scratch[p] = Fake(0x10000000u * (p + 1) + 0x4000000u);
      signals[p] = Fake(0x10000000u * (p + 1) + 0x8000000u);
    }
    args.world = world;
    args.rank = rank;
    args.dtype = AT_DTYPE_BFLOAT16;
    args.op = AT_OP_SUM;
    args.count = 1000;
    args.peer_inputs = inputs;
    args.output = Fake(0x90000000u);
    args.peer_scratch = scratch;
    args.scratch_bytes = 1 << 20;
    args.peer_signals = signals;
    args.blocks = 8;
    args.threads = 512;
    args.chunk_elems = 256;
  }
};

std::string Reason(int algo, const at_p2p_args& args) {
  char buf[256];
  buf[0] = 'x';
  const int rc = at_p2p_check_args(algo, &args, buf, sizeof(buf));
  return rc == AT_OK ? std::string("OK") : std::string(buf);
}

constexpr int kAlgos[] = {AT_ALGO_ALL_REDUCE_ONE_SHOT, AT_ALGO_ALL_REDUCE_TWO_SHOT,
                          AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_ALGO_ALL_GATHER,
                          AT_ALGO_REDUCE_SCATTER};

TEST_CASE("version, names, limits and struct size") {
  CHECK(at_kernels_version() == AT_KERNELS_VERSION);
  CHECK(at_p2p_args_size() == sizeof(at_p2p_args));
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_TWO_SHOT)) == "all_reduce_two_shot");
  CHECK(at_p2p_algo_name(0) == nullptr);
  CHECK(at_p2p_algo_name(99) == nullptr);
  at_p2p_limits l;
  at_p2p_get_limits(&l);
  CHECK(l.min_world == 2);
  CHECK(l.max_world == 8);
  CHECK(l.max_blocks == AT_P2P_MAX_BLOCKS);
  CHECK(l.max_threads == 1024);
  CHECK(l.alignment == 16);
  CHECK(l.signal_alignment == 128);
  CHECK(l.pipeline_depth == 2);
  CHECK(l.signal_bytes == at_p2p_signal_bytes());
}

TEST_CASE("signal buffer size and layout") {
  const int64_t bytes = at_p2p_signal_bytes();
  CHECK(bytes > 0);
  CHECK(bytes % kSignalAlignment == 0);
  CHECK(bytes >= 3 * kMaxBlocks * kMaxWorld * 8);
  CHECK(bytes <= 64 * 1024);  // 3 x 132 rows of 128 bytes + epochs
  CHECK(Flag(2, 1) > Flag(1, 1000));
  // Wrap-safe comparison the kernels use: the epoch after 2^32 - 1 is newer.
  CHECK(static_cast<int64_t>(Flag(0, 1) - Flag(0xffffffffu, 5)) > 0);
}

TEST_CASE("valid arguments pass for every algo") {
  Setup s;
  for (int algo : kAlgos) {
    INFO(at_p2p_algo_name(algo));
    CHECK(Reason(algo, s.args) == "OK");
    CHECK(at_p2p_is_vectorized(algo, &s.args) == 1);
  }
}

TEST_CASE("launch shape bounds") {
  Setup s;
  for (int blocks : {1, 64, 128, AT_P2P_MAX_BLOCKS}) {
    s.args.blocks = blocks;
    CHECK(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args) == "OK");
  }
  for (int blocks : {0, -1, AT_P2P_MAX_BLOCKS + 1, 1000}) {
    s.args.blocks = blocks;
    CHECK(at_p2p_check_args(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args, nullptr, 0) ==
          AT_ERR_INVALID_VALUE);
    CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("blocks"));
  }
  s.args.blocks = 8;
  for (int threads : {32, 64, 1024}) {
    s.args.threads = threads;
    CHECK(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args) == "OK");
  }
  for (int threads : {0, 16, 33, 100, 1056, 2048}) {
    s.args.threads = threads;
    CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("threads"));
  }
}

TEST_CASE("world, rank, dtype, op, count, spin limit") {
  for (int world = 2; world <= 8; ++world) {
    Setup s(world, world - 1);
    CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");
  }
  Setup s;
  s.args.world = 1;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("world"));
  s.args.world = 9;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("world"));
  s.args.world = 2;
  s.args.rank = 2;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("rank"));
  s.args.rank = -1;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("rank"));
  s.args.rank = 0;
  s.args.dtype = 4;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("dtype"));
  s.args.dtype = AT_DTYPE_FLOAT16;
  s.args.op = 0;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("op"));
  CHECK(Reason(AT_ALGO_ALL_GATHER, s.args) == "OK");  // all-gather ignores op
  s.args.op = AT_OP_MIN;
  s.args.count = -1;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("count"));
  s.args.count = 1000;
  s.args.spin_limit = -5;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("spin_limit"));
  CHECK(at_p2p_check_args(0, &s.args, nullptr, 0) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_check_args(AT_ALGO_ALL_GATHER, nullptr, nullptr, 0) == AT_ERR_INVALID_VALUE);
}

TEST_CASE("declared alignment: every data pointer 16 bytes, signals 128") {
  Setup s;
  s.args.output = Fake(0x90000008u);
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("output not 16-byte"));
  s.args.output = Fake(0x90000000u);
  s.inputs[1] = Fake(0x20000002u);
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("peer_inputs[1] not 16-byte"));
  s.inputs[1] = Fake(0x20000000u);
  s.scratch[1] = Fake(0x24000004u);
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args),
             Catch::Contains("peer_scratch[1] not 16-byte"));
  CHECK(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args) == "OK");  // no scratch used
  s.scratch[1] = Fake(0x24000000u);
  s.signals[0] = Fake(0x18000040u);
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("not 128-byte"));
  s.signals[0] = Fake(0x18000000u);
  s.inputs[0] = nullptr;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("peer_inputs[0] is NULL"));
  s.args.count = 0;  // a no-op needs no data pointers
  CHECK(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args) == "OK");
}

TEST_CASE("any count is accepted; vectorization as declared") {
  Setup s;
  for (int64_t count : {1, 7, 8, 1000, 4099, 1 << 20}) {
    s.args.count = count;
    s.args.dtype = AT_DTYPE_BFLOAT16;
    for (int algo : kAlgos) CHECK(Reason(algo, s.args) == "OK");
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args) == 1);
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_TWO_SHOT, &s.args) == 1);
    CHECK(at_p2p_is_vectorized(AT_ALGO_REDUCE_SCATTER, &s.args) == (count % 8 == 0 ? 1 : 0));
    s.args.dtype = AT_DTYPE_FLOAT32;
    s.args.chunk_elems = 256;
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_GATHER, &s.args) == (count % 4 == 0 ? 1 : 0));
  }
  s.args.count = int64_t{1} << 50;
  CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args) == -1);
}

TEST_CASE("scratch sizes") {
  // Two-shot: one slice, rounded up to 16 bytes (500 -> 504 elements).
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_DTYPE_BFLOAT16, 2, 1000, 0) ==
        504 * 2);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_DTYPE_BFLOAT16, 2, 1, 0) == 16);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_DTYPE_FLOAT32, 8, 4099, 0) ==
        516 * 4);
  // Chunked: depth slots of one chunk slice, however long the message.
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_DTYPE_BFLOAT16, 2,
                             1 << 28, 1 << 16) == 2 * (1 << 15) * 2);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_DTYPE_BFLOAT16, 2, 100,
                             1 << 16) == 56 * 2);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_ONE_SHOT, AT_DTYPE_BFLOAT16, 2, 1000, 0) == 0);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_GATHER, AT_DTYPE_BFLOAT16, 8, 1000, 0) == 0);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_DTYPE_BFLOAT16, 2, 100, 7) ==
        -1);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_DTYPE_BFLOAT16, 9, 100, 0) == -1);

  Setup s;
  s.args.scratch_bytes = 999;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args), Catch::Contains("scratch_bytes 999"));
  s.args.scratch_bytes = 1008;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");
  s.args.peer_scratch = nullptr;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args), Catch::Contains("peer_scratch is NULL"));
}

TEST_CASE("chunk must be a positive multiple of the vector width") {
  Setup s;
  for (int64_t chunk : {0, -8, 7, 12}) {
    s.args.chunk_elems = chunk;
    CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, s.args), Catch::Contains("chunk_elems"));
  }
  s.args.chunk_elems = 8;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, s.args) == "OK");
  s.args.dtype = AT_DTYPE_FLOAT32;
  s.args.chunk_elems = 4;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, s.args) == "OK");
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");  // plain two-shot ignores it
}

TEST_CASE("in place and overlap rules") {
  Setup s(4, 1);
  s.args.dtype = AT_DTYPE_FLOAT32;
  // All-reduce in place: two-shot yes, one-shot no.
  s.args.output = const_cast<void*>(s.inputs[1]);
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, s.args) == "OK");
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("in place"));
  // Partial overlap: never.
  s.args.output = static_cast<char*>(const_cast<void*>(s.inputs[1])) + 64;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args), Catch::Contains("overlaps"));
  // All-gather in place: own input at output + rank * count.
  char* out = static_cast<char*>(Fake(0x90000000u));
  s.args.output = out;
  s.inputs[1] = out + 1 * 1000 * 4;
  CHECK(Reason(AT_ALGO_ALL_GATHER, s.args) == "OK");
  s.inputs[1] = out + 2 * 1000 * 4;
  CHECK_THAT(Reason(AT_ALGO_ALL_GATHER, s.args), Catch::Contains("overlaps"));
  // Reduce-scatter in place: output at own input + rank * count.
  s.inputs[1] = out;
  s.args.output = out + 1 * 1000 * 4;
  CHECK(Reason(AT_ALGO_REDUCE_SCATTER, s.args) == "OK");
  s.args.output = out + 2 * 1000 * 4;
  CHECK_THAT(Reason(AT_ALGO_REDUCE_SCATTER, s.args), Catch::Contains("overlaps"));
  // Scratch must not overlap this rank's output.
  s.args.output = Fake(0x90000000u);
  s.inputs[1] = Fake(0x20000000u);
  s.scratch[1] = Fake(0x90000000u);
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args), Catch::Contains("scratch overlaps"));
}

TEST_CASE("reason buffer is optional and truncated") {
  Setup s;
  s.args.blocks = 0;
  CHECK(at_p2p_check_args(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args, nullptr, 0) ==
        AT_ERR_INVALID_VALUE);
  char tiny[4] = {'a', 'b', 'c', 'd'};
  CHECK(at_p2p_check_args(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args, tiny, sizeof(tiny)) ==
        AT_ERR_INVALID_VALUE);
  CHECK(std::string(tiny) == "blo");
}

}  // namespace
}  // namespace autotuned::kernels::p2p
