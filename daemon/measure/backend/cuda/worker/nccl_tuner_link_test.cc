// LoadNcclTuner and RunWithChoice against the real plugin library, with the
// "enqueue" calling the plugin as NCCL does (ncclTunerPlugin_v5, on the
// calling thread). The cases run in order: the first before the load.
#include "daemon/measure/backend/cuda/worker/nccl_tuner_link.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

namespace autotuned::cuda {
namespace {

// NCCL's tuner ABI, version 5 (client/nccl_tuner/nccl_tuner.h, NCCL's
// src/include/plugin/tuner/tuner_v5.h): what NCCL calls.
constexpr int kAlgos = 7;
constexpr int kProtos = 3;
constexpr int kRing = 1, kTree = 0, kLl128 = 1, kSimple = 2;
constexpr int kAllReduceFunc = 4;
using Init = int (*)(void**, uint64_t, size_t, size_t, void*, void*, void*);
using GetCollInfo = int (*)(void*, int, size_t, int, float**, int, int, int, int*);
using Finalize = int (*)(void*);
struct TunerV5 {
  const char* name;
  Init init;
  GetCollInfo get_coll_info;
  Finalize finalize;
};

std::string Plugin() {
  const char* base = std::getenv("TEST_SRCDIR");
  return std::string(base ? base : ".") +
         "/autotuned/client/nccl_tuner/libautotuned_nccl_tuner.so";
}

// NCCL's side: one communicator's context, and one call's cost table.
struct FakeNccl {
  TunerV5* tuner = nullptr;
  void* context = nullptr;
  float cost[kAlgos][kProtos];
  int channels = 0;

  FakeNccl() {
    void* handle = dlopen(Plugin().c_str(), RTLD_NOW);
    REQUIRE(handle != nullptr);
    tuner = static_cast<TunerV5*>(dlsym(handle, "ncclTunerPlugin_v5"));
    REQUIRE(tuner != nullptr);
    REQUIRE(tuner->init(&context, 1, 2, 1, nullptr, nullptr, nullptr) == 0);
  }
  ~FakeNccl() { tuner->finalize(context); }

  // One call's getCollInfo: every entry costs 10 us but tree/simple, which
  // NCCL does not offer (-1).
  void Call() {
    for (auto& row : cost) {
      for (float& c : row) c = 10.0f;
    }
    cost[kTree][kSimple] = -1.0f;
    channels = 0;
    // As NCCL passes it: the float[algos][protos] array cast to float**.
    tuner->get_coll_info(context, kAllReduceFunc, 1 << 20, 1, reinterpret_cast<float**>(cost),
                         kAlgos, kProtos, 0, &channels);
  }
};

TEST_CASE("before the load, a forced choice fails with the reason; none runs as is") {
  int calls = 0;
  const absl::Status forced = RunWithChoice({kRing, kLl128, 0}, "ncclAllReduce", [&] {
    ++calls;
    return absl::OkStatus();
  });
  CHECK(forced.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(forced.message()), Catch::Contains("needs the NCCL tuner plugin"));
  CHECK(calls == 0);
  CHECK(RunWithChoice({}, "ncclAllReduce", [&] {
          ++calls;
          return absl::OkStatus();
        }).ok());
  CHECK(calls == 1);
}

TEST_CASE("a missing library is NOT_FOUND naming the path") {
  setenv("AUTOTUNED_NCCL_TUNER_PLUGIN", "/nonexistent/libautotuned_nccl_tuner.so", 1);
  const absl::Status s = LoadNcclTuner();
  CHECK(s.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(s.message()), Catch::Contains("/nonexistent/"));
}

TEST_CASE("loaded, the plugin points NCCL at itself and turns the host's table off") {
  setenv("AUTOTUNED_NCCL_TUNER_PLUGIN", Plugin().c_str(), 1);
  REQUIRE(LoadNcclTuner().ok());
  CHECK(std::string(std::getenv("NCCL_TUNER_PLUGIN")) == Plugin());
  CHECK(std::string(std::getenv("AUTOTUNED_NCCL_TABLE")) == "off");
}

TEST_CASE("a forced choice is applied to the call made inside, and only there") {
  FakeNccl nccl;
  REQUIRE(RunWithChoice({kRing, kLl128, 8}, "ncclAllReduce", [&] {
            nccl.Call();
            return absl::OkStatus();
          }).ok());
  CHECK(nccl.cost[kRing][kLl128] == 0.0f);
  CHECK(nccl.cost[kRing][kSimple] == 10.0f);
  CHECK(nccl.channels == 8);
  // After it, NCCL's own choice (the table is off in this process).
  nccl.Call();
  CHECK(nccl.cost[kRing][kLl128] == 10.0f);
  CHECK(nccl.channels == 0);
}

TEST_CASE("a channel count alone keeps NCCL's algorithm and protocol") {
  FakeNccl nccl;
  REQUIRE(RunWithChoice({-1, -1, 16}, "ncclAllReduce", [&] {
            nccl.Call();
            return absl::OkStatus();
          }).ok());
  CHECK(nccl.channels == 16);
  CHECK(nccl.cost[kRing][kLl128] == 10.0f);
}

TEST_CASE("a combination NCCL does not offer is INVALID_ARGUMENT naming it") {
  FakeNccl nccl;
  const absl::Status s = RunWithChoice({kTree, kSimple, 0}, "ncclAllReduce", [&] {
    nccl.Call();
    return absl::OkStatus();
  });
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("tree/simple"));
  CHECK(nccl.cost[kTree][kSimple] == -1.0f);
}

TEST_CASE("a call that never consults the plugin is FAILED_PRECONDITION") {
  const absl::Status s =
      RunWithChoice({kRing, kSimple, 0}, "ncclAllReduce", [] { return absl::OkStatus(); });
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("did not consult"));
}

TEST_CASE("the enqueue's own error wins") {
  FakeNccl nccl;
  const absl::Status s = RunWithChoice({kRing, kSimple, 0}, "ncclAllReduce", [&] {
    nccl.Call();
    return absl::UnavailableError("peer gone");
  });
  CHECK(s.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("names of choices") {
  CHECK(NcclChoice{kRing, kLl128, 0}.ToString() == "ring/ll128");
  CHECK(NcclChoice{-1, -1, 16}.ToString() == "NCCL's algorithm and protocol, 16 channels");
}

}  // namespace
}  // namespace autotuned::cuda
