// Host-only checks of the P2P C ABI: validation, limits and sizes. No GPU and
// no CUDA call: the pointers below are made-up addresses, never dereferenced.
#include <stdint.h>

#include <algorithm>
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
                          AT_ALGO_REDUCE_SCATTER, AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH,
                          AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH, AT_ALGO_ALL_REDUCE_COPY_ENGINE,
                          AT_ALGO_ALL_TO_ALL, AT_ALGO_BROADCAST,
                          AT_ALGO_ALL_REDUCE_PUSH_PIPELINED, AT_ALGO_BROADCAST_PUSH_PIPELINED,
                          AT_ALGO_ALL_REDUCE_RING, AT_ALGO_ALL_REDUCE_CE_RING,
                          AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE};
// kAlgos: every algo at_p2p_launch takes; the all-to-all with uneven splits
// has functions of its own (its test below).
// `a` laid out as `algo` takes it: the in-place two-shot's output is the own
// input.
at_p2p_args For(int algo, at_p2p_args a) {
  if (algo == AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE) {
    a.output = const_cast<void*>(a.peer_inputs[a.rank]);
  }
  return a;
}
constexpr int kLastAlgo = AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE;
static_assert(kLastAlgo == AT_ALGO_LAST, "every algo listed");

TEST_CASE("version, names, limits and struct size") {
  CHECK(at_kernels_version() == AT_KERNELS_VERSION);
  CHECK(at_p2p_args_size() == sizeof(at_p2p_args));
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_TWO_SHOT)) == "all_reduce_two_shot");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH)) ==
        "all_reduce_two_shot_push");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE)) ==
        "all_reduce_two_shot_in_place");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH)) ==
        "all_reduce_one_shot_push");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_COPY_ENGINE)) ==
        "all_reduce_copy_engine");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_TO_ALL)) == "all_to_all");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_BROADCAST)) == "broadcast");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_PUSH_PIPELINED)) ==
        "all_reduce_push_pipelined");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_BROADCAST_PUSH_PIPELINED)) ==
        "broadcast_push_pipelined");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_TO_ALL_V)) == "all_to_all_v");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_RING)) == "all_reduce_ring");
  CHECK(std::string(at_p2p_algo_name(AT_ALGO_ALL_REDUCE_CE_RING)) == "all_reduce_ce_ring");
  for (int algo : kAlgos) CHECK(at_p2p_algo_name(algo) != nullptr);
  CHECK(at_p2p_algo_name(0) == nullptr);
  CHECK(at_p2p_algo_name(kLastAlgo + 1) == nullptr);
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
    const at_p2p_args a = For(algo, s.args);
    CHECK(Reason(algo, a) == "OK");
    CHECK(at_p2p_is_vectorized(algo, &a) == 1);
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
    CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args) == "OK");
  }
  {
    Setup s;
    CHECK(at_p2p_check_args(kLastAlgo + 1, &s.args, nullptr, 0) == AT_ERR_INVALID_VALUE);
    CHECK_THAT(Reason(kLastAlgo + 1, s.args), Catch::Contains("unknown algo " + std::to_string(kLastAlgo + 1)));
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
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args),
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
  s.args.scratch_bytes = int64_t{1} << 24;  // the push two-shot's, for 2^20 elements
  for (int64_t count : {1, 7, 8, 1000, 4099, 1 << 20}) {
    s.args.count = count;
    s.args.dtype = AT_DTYPE_BFLOAT16;
    s.args.chunk_elems = 4096;  // at most 1024 chunks (the copy engine's limit)
    for (int algo : kAlgos) CHECK(Reason(algo, For(algo, s.args)) == "OK");
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_ONE_SHOT, &s.args) == 1);
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_TWO_SHOT, &s.args) == 1);
    CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, &s.args) == 1);
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

TEST_CASE("a group's buffer sizes: the largest need of each algo, in whole 256-byte units") {
  const auto round = [](int64_t n) { return (n + 255) / 256 * 256; };
  for (int world : {2, 3, 8}) {
    for (int64_t max_bytes : {int64_t{16}, int64_t{1000}, int64_t{1} << 20}) {
      int64_t want = 0;
      for (int dtype : {AT_DTYPE_FLOAT32, AT_DTYPE_BFLOAT16}) {
        const int64_t count = max_bytes / (dtype == AT_DTYPE_FLOAT32 ? 4 : 2);
        for (int algo : {AT_ALGO_ALL_REDUCE_TWO_SHOT, AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH}) {
          want = std::max(want, at_p2p_scratch_bytes(algo, dtype, world, count, 0));
        }
        // 4 KiB chunks: 1024 float32 or 2048 bfloat16 elements.
        for (int algo : {AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED, AT_ALGO_ALL_REDUCE_PUSH_PIPELINED,
                         AT_ALGO_BROADCAST_PUSH_PIPELINED}) {
          want = std::max(want, at_p2p_scratch_bytes(algo, dtype, world, count,
                                                     dtype == AT_DTYPE_FLOAT32 ? 1024 : 2048));
        }
      }
      at_p2p_group_sizes sizes{};
      REQUIRE(at_p2p_group_sizes_for(world, max_bytes, 4096, 0, 0, &sizes) == AT_OK);
      CHECK(sizes.scratch_bytes == round(want));
      CHECK(sizes.push_bytes == 0);
      // The copy engine's world copies of a larger message; the push buffer.
      REQUIRE(at_p2p_group_sizes_for(world, max_bytes, 4096, 4 * max_bytes, max_bytes, &sizes) ==
              AT_OK);
      CHECK(sizes.scratch_bytes ==
            round(std::max(want, at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_COPY_ENGINE,
                                                      AT_DTYPE_BFLOAT16, world,
                                                      2 * max_bytes, 0))));
      CHECK(sizes.push_bytes == round(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH,
                                                           AT_DTYPE_BFLOAT16, world,
                                                           max_bytes / 2, 0)));
    }
  }
  at_p2p_group_sizes sizes{7, 7};
  CHECK(at_p2p_group_sizes_for(1, 1024, 0, 0, 0, &sizes) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_group_sizes_for(9, 1024, 0, 0, 0, &sizes) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_group_sizes_for(2, -1, 0, 0, 0, &sizes) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_group_sizes_for(2, 1024, -1, 0, 0, &sizes) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_group_sizes_for(2, 1024, 0, 0, -5, &sizes) == AT_ERR_INVALID_VALUE);
  CHECK(at_p2p_group_sizes_for(2, 1024, 0, 0, 0, nullptr) == AT_ERR_INVALID_VALUE);
  CHECK(sizes.scratch_bytes == 7);
  CHECK(sizes.push_bytes == 7);
}

TEST_CASE("push two-shot scratch: world slots of one slice, all required") {
  // world slots of SliceElems(count, world, vec) elements (own slot unused).
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 2, 1000, 0) ==
        2 * 504 * 2);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 2, 1, 0) ==
        2 * 8 * 2);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_FLOAT32, 8, 4099, 0) ==
        8 * 516 * 4);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_FLOAT32, 3, 1 << 20, 0) ==
        3 * 349528 * 4);
  // The whole message, not a chunk: chunk_elems is ignored (any value).
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 2, 1 << 28, 7) ==
        int64_t{1} << 29);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 4, 0, 0) == 0);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 9, 100, 0) == -1);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, 7, 2, 100, 0) == -1);
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 2, -1, 0) == -1);

  constexpr int kPush = AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH;
  Setup s;  // bf16, 1000 elements, 2 ranks: 2016 bytes
  s.args.scratch_bytes = 2016;
  CHECK(Reason(kPush, s.args) == "OK");
  s.args.scratch_bytes = 2015;
  CHECK(at_p2p_check_args(kPush, &s.args, nullptr, 0) == AT_ERR_INVALID_VALUE);
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("scratch_bytes 2015 < 2016 needed"));
  // The pull two-shot's one slice is not enough for the push one.
  s.args.scratch_bytes = 1008;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("scratch_bytes 1008 < 2016 needed"));
  s.args.scratch_bytes = 2016;
  s.args.chunk_elems = 0;  // ignored, as by the plain two-shot
  CHECK(Reason(kPush, s.args) == "OK");
  // Peers' scratch is written: every pointer must be there.
  s.scratch[1] = nullptr;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("peer_scratch[1] is NULL"));
  s.scratch[1] = Fake(0x24000000u);
  s.args.peer_scratch = nullptr;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("peer_scratch is NULL"));
  // count 0 is a no-op: no scratch needed.
  s.args.count = 0;
  s.args.scratch_bytes = 0;
  CHECK(Reason(kPush, s.args) == "OK");
}

TEST_CASE("push one-shot: 16-bit types, own input only, a buffer of 3 x world slots") {
  constexpr int kPush = AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH;
  // Header, then 3 phases x world slots of the message rounded up to 16 bytes.
  constexpr int64_t kHeader = 640;  // 132 launch counters, 3 extents, whole lines
  CHECK(kPushHeaderBytes == kHeader);
  CHECK(at_p2p_scratch_bytes(kPush, AT_DTYPE_BFLOAT16, 2, 1000, 0) == kHeader + 3 * 2 * 2000);
  CHECK(at_p2p_scratch_bytes(kPush, AT_DTYPE_FLOAT16, 2, 1, 0) == kHeader + 3 * 2 * 16);
  CHECK(at_p2p_scratch_bytes(kPush, AT_DTYPE_BFLOAT16, 8, 4099, 0) == kHeader + 3 * 8 * 8208);
  CHECK(at_p2p_scratch_bytes(kPush, AT_DTYPE_BFLOAT16, 9, 100, 0) == -1);
  // A slot is what the buffer holds, whatever size it was given.
  CHECK(PushSlotBytes(kHeader + 3 * 2 * 2000, 2) == 2000);
  CHECK(PushSlotBytes(kHeader + 3 * 2 * 2000 + 95, 2) == 2000);
  CHECK(PushSlotBytes(kHeader + 3 * 4 * 2000, 2) == 4000);
  CHECK(PushSlotBytes(100, 2) == 0);

  Setup s;  // bf16, 1000 elements, 2 ranks
  s.args.scratch_bytes = kHeader + 3 * 2 * 2000;
  CHECK(Reason(kPush, s.args) == "OK");
  s.args.scratch_bytes -= 1;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("scratch_bytes 12639 < 12640 needed"));
  s.args.scratch_bytes += 1;
  s.args.dtype = AT_DTYPE_FLOAT32;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("bfloat16 and float16 only"));
  s.args.dtype = AT_DTYPE_FLOAT16;
  CHECK(Reason(kPush, s.args) == "OK");
  // Peers' inputs are never read: they may be missing, this rank's may not.
  s.inputs[1] = nullptr;
  CHECK(Reason(kPush, s.args) == "OK");
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("peer_inputs[1] is NULL"));
  s.inputs[0] = nullptr;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("peer_inputs[0] is NULL"));
  s.inputs[0] = Fake(0x10000000u);
  // In place is allowed, a partial overlap is not.
  s.args.output = const_cast<void*>(s.inputs[0]);
  CHECK(Reason(kPush, s.args) == "OK");
  s.args.output = static_cast<char*>(const_cast<void*>(s.inputs[0])) + 16;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("only the exact in-place layout"));
  s.args.output = Fake(0x90000000u);
  // Every peer's buffer is written.
  s.scratch[1] = nullptr;
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("peer_scratch[1] is NULL"));
  s.scratch[1] = Fake(0x24000000u);
  s.scratch[0] = Fake(0x90000000u - 4000);
  CHECK_THAT(Reason(kPush, s.args), Catch::Contains("scratch overlaps"));
}

TEST_CASE("copy engine: own input only, world slots of the message, at most 1024 chunks") {
  constexpr int kCe = AT_ALGO_ALL_REDUCE_COPY_ENGINE;
  // world slots of the message rounded up to whole vectors; any chunk.
  CHECK(at_p2p_scratch_bytes(kCe, AT_DTYPE_BFLOAT16, 2, 1000, 0) == 2 * 1000 * 2);
  CHECK(at_p2p_scratch_bytes(kCe, AT_DTYPE_BFLOAT16, 2, 1001, 256) == 2 * 1008 * 2);
  CHECK(at_p2p_scratch_bytes(kCe, AT_DTYPE_FLOAT32, 8, 4099, 0) == 8 * 4100 * 4);
  CHECK(at_p2p_scratch_bytes(kCe, AT_DTYPE_FLOAT32, 9, 4099, 0) == -1);

  Setup s;  // bf16, 1000 elements, chunks of 256, 2 ranks
  s.args.scratch_bytes = 4000;
  CHECK(Reason(kCe, s.args) == "OK");
  s.args.scratch_bytes = 3999;
  CHECK_THAT(Reason(kCe, s.args), Catch::Contains("scratch_bytes 3999 < 4000 needed"));
  s.args.scratch_bytes = 4000;
  s.args.dtype = AT_DTYPE_FLOAT32;  // every dtype
  s.args.scratch_bytes = 8000;
  CHECK(Reason(kCe, s.args) == "OK");
  // Chunks: whole vectors, at most 1024 of them.
  s.args.chunk_elems = 6;
  CHECK_THAT(Reason(kCe, s.args), Catch::Contains("positive multiple of 4"));
  s.args.chunk_elems = 0;
  CHECK_THAT(Reason(kCe, s.args), Catch::Contains("chunk_elems 0"));
  s.args.count = 1024 * 4;
  s.args.scratch_bytes = 2 * 4096 * 4;
  s.args.chunk_elems = 4;
  CHECK(Reason(kCe, s.args) == "OK");
  s.args.count = 1024 * 4 + 1;
  s.args.scratch_bytes = 2 * 4100 * 4;
  CHECK_THAT(Reason(kCe, s.args), Catch::Contains("more than 1024 chunks"));
  s.args.count = 1000;
  s.args.chunk_elems = 256;
  // Peers' inputs are never read; in place is not allowed.
  s.inputs[1] = nullptr;
  CHECK(Reason(kCe, s.args) == "OK");
  s.args.output = const_cast<void*>(s.inputs[0]);
  CHECK_THAT(Reason(kCe, s.args), Catch::Contains("copy_engine cannot run in place"));
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
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args) == "OK");
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, s.args) == "OK");
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_ONE_SHOT, s.args), Catch::Contains("in place"));
  // The in-place two-shot needs no scratch, and every peer's input (its
  // peers store into them).
  void* const kept = s.scratch[1];
  s.scratch[1] = nullptr;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, s.args) == "OK");
  s.scratch[1] = kept;
  s.inputs[2] = nullptr;
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, s.args) == "peer_inputs[2] is NULL");
  s.inputs[2] = Fake(0x30000000u);
  // Partial overlap: never.
  s.args.output = static_cast<char*>(const_cast<void*>(s.inputs[1])) + 64;
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args), Catch::Contains("overlaps"));
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args),
             Catch::Contains("only the exact in-place layout"));
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, s.args),
             Catch::Contains("runs in place only"));
  s.args.output = Fake(0x90000000u);  // apart from every input
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE, s.args),
             Catch::Contains("output must be peer_inputs[1]"));
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
  // Push: its scratch is world slices long (4 x 250 fp32 = 4000 bytes, the
  // pull two-shot's 1000), so 2000 bytes before the output it overlaps it.
  s.scratch[1] = Fake(0x90000000u - 2000);
  CHECK(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT, s.args) == "OK");
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args), Catch::Contains("scratch overlaps"));
}

TEST_CASE("all_to_all: world segments in and out, never in place; no op") {
  Setup s(4, 2);
  s.args.op = 0;  // ignored by the copies
  CHECK(Reason(AT_ALGO_ALL_TO_ALL, s.args) == "OK");
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_TO_ALL, AT_DTYPE_BFLOAT16, 4, 1000, 0) == 0);
  // The input is world x count: an output 4 x 1000 x 2 bytes after it
  // starts is clear of it, one byte less overlaps.
  char* in = static_cast<char*>(const_cast<void*>(s.inputs[2]));
  s.args.output = in + 4 * 1000 * 2;
  CHECK(Reason(AT_ALGO_ALL_TO_ALL, s.args) == "OK");
  s.args.output = in + 4 * 1000 * 2 - 16;
  CHECK_THAT(Reason(AT_ALGO_ALL_TO_ALL, s.args), Catch::Contains("all_to_all cannot run in place"));
  s.args.output = in;
  CHECK_THAT(Reason(AT_ALGO_ALL_TO_ALL, s.args), Catch::Contains("all_to_all cannot run in place"));
  // Every peer's input is read.
  s.args.output = Fake(0x90000000u);
  s.inputs[0] = nullptr;
  CHECK_THAT(Reason(AT_ALGO_ALL_TO_ALL, s.args), Catch::Contains("peer_inputs[0] is NULL"));
  // Segments of 2 bytes: not vectorized, still accepted.
  s.inputs[0] = Fake(0x10000000u);
  s.args.count = 7;
  CHECK(Reason(AT_ALGO_ALL_TO_ALL, s.args) == "OK");
  CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_TO_ALL, &s.args) == 0);
}

std::string ReasonV(const at_p2p_args& args, const int64_t* splits) {
  char buf[256];
  buf[0] = 'x';
  const int rc = at_p2p_check_all_to_all_v(&args, splits, buf, sizeof(buf));
  return rc == AT_OK ? std::string("OK") : std::string(buf);
}

TEST_CASE("all_to_all_v: a split matrix instead of count, only the pointers it uses") {
  Setup s(4, 1);  // bf16: 2 bytes an element
  s.args.op = 0;  // ignored, as count, chunk_elems, root and the scratch are
  // Rank 1 receives 3 + 0 + 7 + 0 = 10 elements (nothing from ranks 1 and 3)
  // and sends 5 + 0 + 9 + 1 = 15.
  int64_t splits[16] = {1, 3, 2, 0,   //
                        5, 0, 9, 1,   //
                        0, 7, 0, 4,   //
                        2, 0, 6, 8};
  CHECK(ReasonV(s.args, splits) == "OK");
  for (int64_t count : {int64_t{-1}, int64_t{0}, int64_t{1} << 50}) {
    s.args.count = count;
    CHECK(ReasonV(s.args, splits) == "OK");
  }
  s.args.scratch_bytes = -7;
  s.args.peer_scratch = nullptr;
  s.args.chunk_elems = 3;
  s.args.root = 99;
  CHECK(ReasonV(s.args, splits) == "OK");
  // Not through at_p2p_check_args / at_p2p_launch (no matrix there); no
  // scratch; its copy unit is per piece.
  CHECK_THAT(Reason(AT_ALGO_ALL_TO_ALL_V, s.args),
             Catch::Contains("at_p2p_check_all_to_all_v") &&
                 Catch::Contains("at_p2p_all_to_all_v"));
  CHECK(at_p2p_scratch_bytes(AT_ALGO_ALL_TO_ALL_V, AT_DTYPE_BFLOAT16, 4, 1000, 0) == 0);
  CHECK(at_p2p_is_vectorized(AT_ALGO_ALL_TO_ALL_V, &s.args) == -1);

  // NULLs.
  CHECK(at_p2p_check_all_to_all_v(nullptr, splits, nullptr, 0) == AT_ERR_INVALID_VALUE);
  CHECK_THAT(ReasonV(s.args, nullptr), Catch::Contains("split_counts is NULL"));
  char none[1] = {'x'};
  CHECK(at_p2p_check_all_to_all_v(nullptr, splits, none, sizeof(none)) == AT_ERR_INVALID_VALUE);
  CHECK(none[0] == '\0');
  // The fields it shares with the other algos, checked as theirs.
  s.args.world = 9;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("world 9"));
  s.args.world = 4;
  s.args.rank = 4;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("rank 4"));
  s.args.rank = 1;
  s.args.dtype = 0;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("unknown dtype 0"));
  s.args.dtype = AT_DTYPE_BFLOAT16;
  s.args.blocks = 0;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("blocks 0"));
  s.args.blocks = 8;
  s.args.threads = 48;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("threads 48"));
  s.args.threads = 512;
  s.args.spin_limit = -1;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("spin_limit"));
  s.args.spin_limit = 0;
  s.signals[2] = nullptr;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("peer_signals[2] is NULL"));
  s.signals[2] = Fake(0x38000000u);
  CHECK(ReasonV(s.args, splits) == "OK");

  // Entries: not negative, each and every row and column sum at most 2^44.
  splits[6] = -3;
  CHECK_THAT(ReasonV(s.args, splits),
             Catch::Contains("split_counts[6] (rank 1 to rank 2) is negative: -3"));
  splits[6] = (int64_t{1} << 44) + 1;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("split_counts[6] (rank 1 to rank 2) is "
                                                      "17592186044417, beyond 2^44"));
  splits[6] = int64_t{1} << 43;
  splits[7] = int64_t{1} << 43;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("rank 1 sends 17592186044421 elements"));
  splits[7] = 1;
  splits[14] = int64_t{1} << 43;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("rank 2 receives 17592186044418 elements"));
  splits[6] = 9;
  splits[14] = 6;
  CHECK(ReasonV(s.args, splits) == "OK");
  // A column too large with every row within bounds: rank 0 receives
  // 4 x 2^42 + 1 elements.
  {
    int64_t big[16] = {};
    for (int src = 0; src < 4; ++src) big[src * 4] = int64_t{1} << 42;
    big[4] = (int64_t{1} << 42) + 1;
    CHECK_THAT(ReasonV(s.args, big), Catch::Contains("rank 0 receives 17592186044417 elements"));
  }

  // Pointers: rank 1 reads ranks 0 and 2; its own input is read by its peers.
  s.inputs[1] = nullptr;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("peer_inputs[1] is NULL"));
  s.inputs[1] = Fake(0x20000000u);
  s.inputs[3] = nullptr;  // rank 3 sends rank 1 nothing
  CHECK(ReasonV(s.args, splits) == "OK");
  s.inputs[2] = nullptr;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("peer_inputs[2] is NULL"));
  s.inputs[2] = Fake(0x30000008u);
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("peer_inputs[2] not 16-byte aligned"));
  s.inputs[2] = Fake(0x30000000u);
  s.args.peer_inputs = nullptr;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("peer_inputs is NULL"));
  s.args.peer_inputs = s.inputs;
  s.args.output = nullptr;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("output is NULL"));
  s.args.output = Fake(0x90000004u);
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("output not 16-byte aligned"));
  // The output may not overlap this rank's input (15 elements, 30 bytes).
  char* in = static_cast<char*>(Fake(0x20000000u));
  s.args.output = in + 32;
  CHECK(ReasonV(s.args, splits) == "OK");
  s.args.output = in + 16;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("all_to_all_v cannot run in place"));
  s.args.output = in;
  CHECK_THAT(ReasonV(s.args, splits), Catch::Contains("all_to_all_v cannot run in place"));

  // A rank that receives nothing needs no output; one that sends nothing
  // needs no input of its own; a matrix of zeros needs no data at all.
  int64_t quiet[16] = {1, 0, 2, 0,   //
                       0, 0, 0, 0,   //
                       3, 0, 4, 0,   //
                       0, 0, 0, 5};
  s.args.output = nullptr;
  s.inputs[1] = nullptr;
  CHECK(ReasonV(s.args, quiet) == "OK");
  const int64_t zeros[16] = {};
  s.args.peer_inputs = nullptr;
  CHECK(ReasonV(s.args, zeros) == "OK");
  CHECK_THAT(ReasonV(s.args, quiet), Catch::Contains("peer_inputs is NULL"));
  // An output that overlaps an input of zero elements is no overlap.
  s.args.peer_inputs = s.inputs;
  s.inputs[1] = Fake(0x20000000u);
  s.args.output = Fake(0x20000000u);
  quiet[1] = 6;  // rank 1 receives 6 from rank 0, sends nothing
  CHECK(ReasonV(s.args, quiet) == "OK");
}

TEST_CASE("broadcast: a root in the group, its input alone read, in place allowed") {
  Setup s(4, 1);
  s.args.op = 0;
  s.args.root = 3;
  CHECK(Reason(AT_ALGO_BROADCAST, s.args) == "OK");
  for (int root : {-1, 4, 100}) {
    s.args.root = root;
    CHECK_THAT(Reason(AT_ALGO_BROADCAST, s.args), Catch::Contains("root " + std::to_string(root)));
  }
  // Only the root's input: the others may be NULL, the root's may not.
  s.args.root = 3;
  for (int p : {0, 1, 2}) s.inputs[p] = nullptr;
  CHECK(Reason(AT_ALGO_BROADCAST, s.args) == "OK");
  s.inputs[3] = nullptr;
  CHECK_THAT(Reason(AT_ALGO_BROADCAST, s.args), Catch::Contains("peer_inputs[3] is NULL"));
  // A rank other than the root: its output may be anywhere (its input is
  // not read), the root's own included... but not misaligned.
  s.inputs[3] = Fake(0x40000000u);
  s.args.output = static_cast<char*>(Fake(0x40000000u)) + 64;
  CHECK(Reason(AT_ALGO_BROADCAST, s.args) == "OK");
  s.args.output = static_cast<char*>(Fake(0x40000000u)) + 8;
  CHECK_THAT(Reason(AT_ALGO_BROADCAST, s.args), Catch::Contains("output not 16-byte aligned"));
  // The root: in place, or clear of its input.
  s.args.rank = 3;
  s.args.output = Fake(0x40000000u);
  CHECK(Reason(AT_ALGO_BROADCAST, s.args) == "OK");
  s.args.output = static_cast<char*>(Fake(0x40000000u)) + 64;
  CHECK_THAT(Reason(AT_ALGO_BROADCAST, s.args), Catch::Contains("overlaps"));
  CHECK(at_p2p_scratch_bytes(AT_ALGO_BROADCAST, AT_DTYPE_FLOAT32, 4, 1000, 0) == 0);
}

TEST_CASE("pipelined push: a chunk, its own input alone, six chunks of scratch") {
  constexpr int kAr = AT_ALGO_ALL_REDUCE_PUSH_PIPELINED;
  constexpr int kBc = AT_ALGO_BROADCAST_PUSH_PIPELINED;
  Setup s(4, 1);
  CHECK(Reason(kAr, s.args) == "OK");
  // The chunk: a positive multiple of the vector, at most 2^30 chunks.
  for (int64_t chunk : {0, -8, 12}) {
    s.args.chunk_elems = chunk;
    CHECK_THAT(Reason(kAr, s.args), Catch::Contains("chunk_elems"));
    CHECK_THAT(Reason(kBc, s.args), Catch::Contains("chunk_elems"));
    CHECK(at_p2p_scratch_bytes(kAr, AT_DTYPE_BFLOAT16, 4, 1000, chunk) == -1);
  }
  s.args.chunk_elems = 256;
  // Scratch: 2 regions x 3 slots x parts slices of the longest chunk's
  // slice (whole vectors): 1000 elements in chunks of 256 over 4 ranks:
  // slices of 64; the broadcast's 3 parts: slices of ceil(256 / 3) = 86 ->
  // 88 elements.
  CHECK(at_p2p_scratch_bytes(kAr, AT_DTYPE_BFLOAT16, 4, 1000, 256) == 2 * 3 * 4 * 64 * 2);
  CHECK(at_p2p_scratch_bytes(kBc, AT_DTYPE_BFLOAT16, 4, 1000, 256) == 2 * 3 * 3 * 88 * 2);
  // A message shorter than the chunk: its own length decides.
  CHECK(at_p2p_scratch_bytes(kAr, AT_DTYPE_FLOAT32, 2, 10, 1 << 20) == 2 * 3 * 2 * 8 * 4);
  CHECK(at_p2p_scratch_bytes(kAr, AT_DTYPE_FLOAT32, 2, 0, 64) == 0);
  s.args.scratch_bytes = 2 * 3 * 4 * 64 * 2 - 1;
  CHECK_THAT(Reason(kAr, s.args), Catch::Contains("scratch_bytes"));
  s.args.scratch_bytes = 1 << 20;
  // Only this rank's own input is read: the peers' may be NULL.
  for (int p : {0, 2, 3}) s.inputs[p] = nullptr;
  CHECK(Reason(kAr, s.args) == "OK");
  s.inputs[1] = nullptr;
  CHECK_THAT(Reason(kAr, s.args), Catch::Contains("peer_inputs[1] is NULL"));
  // In place: exactly, or clear of the input.
  s.inputs[1] = Fake(0x20000000u);
  s.args.output = Fake(0x20000000u);
  CHECK(Reason(kAr, s.args) == "OK");
  s.args.output = static_cast<char*>(Fake(0x20000000u)) + 64;
  CHECK_THAT(Reason(kAr, s.args), Catch::Contains("overlaps"));
  // The broadcast: a root in the group; a rank other than the root reads no
  // input at all (its own may be NULL); the root's must be there.
  s.args.op = 0;
  s.args.root = 4;
  CHECK_THAT(Reason(kBc, s.args), Catch::Contains("root 4"));
  s.args.root = 2;
  s.inputs[1] = nullptr;
  CHECK(Reason(kBc, s.args) == "OK");
  s.args.rank = 2;
  s.args.output = Fake(0x90000000u);
  CHECK_THAT(Reason(kBc, s.args), Catch::Contains("peer_inputs[2] is NULL"));
  s.inputs[2] = Fake(0x30000000u);
  CHECK(Reason(kBc, s.args) == "OK");
  // Any dtype (it moves 16-byte vectors, the tail by element).
  s.args.dtype = AT_DTYPE_FLOAT32;
  s.args.count = 7;
  CHECK(Reason(kBc, s.args) == "OK");
  CHECK(at_p2p_is_vectorized(kBc, &s.args) == 1);
  // The group's scratch covers both with chunks of chunk_bytes.
  at_p2p_group_sizes sizes;
  REQUIRE(at_p2p_group_sizes_for(4, 1 << 20, 256 << 10, 0, 0, &sizes) == AT_OK);
  CHECK(sizes.scratch_bytes >= at_p2p_scratch_bytes(kAr, AT_DTYPE_BFLOAT16, 4, 1 << 19, 128 << 10));
  CHECK(sizes.scratch_bytes >= at_p2p_scratch_bytes(kBc, AT_DTYPE_FLOAT32, 4, 1 << 18, 64 << 10));
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

TEST_CASE("the ring: whole shards or parts of whole vectors, its own input only") {
  Setup s(4, 1);
  constexpr int kRing = AT_ALGO_ALL_REDUCE_RING;
  s.args.chunk_elems = 0;  // whole shards
  CHECK(Reason(kRing, s.args) == "OK");
  s.args.chunk_elems = 64;
  CHECK(Reason(kRing, s.args) == "OK");
  s.args.chunk_elems = 12;  // not whole 16-byte vectors of bf16
  CHECK_THAT(Reason(kRing, s.args), Catch::Contains("chunk_elems 12 must be 0"));
  s.args.chunk_elems = -8;
  CHECK_THAT(Reason(kRing, s.args), Catch::Contains("chunk_elems -8 must be 0"));
  // Parts so small that the flag points would pass 2^31.
  s.args.count = int64_t{1} << 40;
  s.args.scratch_bytes = int64_t{1} << 42;
  s.args.chunk_elems = 8;
  CHECK_THAT(Reason(kRing, s.args), Catch::Contains("parts a shard: chunk_elems too small"));
  s.args.chunk_elems = int64_t{1} << 20;  // (the fake buffers overlap at this count)
  CHECK_THAT(Reason(kRing, s.args), !Catch::Contains("chunk_elems"));
  // Reads only its own input: the peers' may be NULL.
  s.args.count = 1000;
  s.args.scratch_bytes = 1 << 20;
  s.inputs[0] = nullptr;
  s.inputs[2] = nullptr;
  CHECK(Reason(kRing, s.args) == "OK");
  CHECK_THAT(Reason(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, s.args),
             Catch::Contains("peer_inputs[0] is NULL"));
  // Scratch: one shard per rank, as the push two-shot.
  CHECK(at_p2p_scratch_bytes(kRing, AT_DTYPE_BFLOAT16, 4, 1000, 0) ==
        at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH, AT_DTYPE_BFLOAT16, 4, 1000, 0));
  CHECK(at_p2p_scratch_bytes(kRing, AT_DTYPE_BFLOAT16, 4, 1000, 0) == 4 * 256 * 2);
}

TEST_CASE("the copy engine beside the ring: the copy engine's checks, blocks for the ring") {
  Setup s(2, 0);
  constexpr int kCeRing = AT_ALGO_ALL_REDUCE_CE_RING;
  s.args.count = 1 << 20;
  s.args.chunk_elems = 1 << 16;
  s.args.scratch_bytes = at_p2p_scratch_bytes(kCeRing, AT_DTYPE_BFLOAT16, 2, 1 << 20, 1 << 16);
  // Half through the copy engine (2 slots), half through the ring (2 shards of a quarter).
  CHECK(s.args.scratch_bytes == (2 * (1 << 19) + 2 * (1 << 18)) * 2);
  CHECK(s.args.scratch_bytes <= at_p2p_scratch_bytes(AT_ALGO_ALL_REDUCE_COPY_ENGINE,
                                                     AT_DTYPE_BFLOAT16, 2, 1 << 20, 1 << 16));
  CHECK(Reason(kCeRing, s.args) == "OK");
  s.args.blocks = AT_P2P_MAX_BLOCKS;  // row 0 is the copy engine's
  CHECK_THAT(Reason(kCeRing, s.args), Catch::Contains("at most 131"));
  s.args.blocks = AT_P2P_MAX_BLOCKS - 1;
  CHECK(Reason(kCeRing, s.args) == "OK");
  s.args.chunk_elems = 0;  // the copy engine's chunk is required
  CHECK_THAT(Reason(kCeRing, s.args), Catch::Contains("chunk_elems 0 must be a positive"));
  s.args.chunk_elems = 512;  // more than 1024 chunks
  CHECK_THAT(Reason(kCeRing, s.args), Catch::Contains("more than 1024 chunks"));
  s.args.chunk_elems = 1 << 16;
  s.args.output = const_cast<void*>(s.inputs[0]);  // not in place
  CHECK_THAT(Reason(kCeRing, s.args), Catch::Contains("cannot run in place"));
  s.args.output = Fake(0x90000000u);
  s.inputs[1] = nullptr;  // its own input only
  CHECK(Reason(kCeRing, s.args) == "OK");
  // A group made for the copy engine's messages holds this algo's scratch.
  at_p2p_group_sizes g{};
  REQUIRE(at_p2p_group_sizes_for(4, 1 << 20, 0, int64_t{256} << 20, 0, &g) == AT_OK);
  CHECK(g.scratch_bytes >= at_p2p_scratch_bytes(kCeRing, AT_DTYPE_BFLOAT16, 4,
                                                int64_t{128} << 20, 1 << 22));
}

}  // namespace
}  // namespace autotuned::kernels::p2p
