// libFuzzer target: request validation (daemon/coordinate/request/validate.h).
//
// The input is a serialized autotuned.v1.TuneRequest (protobuf wire format;
// the seeds in fuzz/seeds/validate/*.txtpb are encoded by fuzz/run.sh).
// ValidateTune runs on it; then the same group, options and first problem,
// with the first problem's split_counts as the sizes, go through
// ValidateSweep. Beyond "no crash, no sanitizer report", the fuzzer checks
// the validation contract and aborts when it is broken:
//   - an error is INVALID_ARGUMENT or UNIMPLEMENTED, and its message starts
//     with the path of a request field;
//   - an accepted problem fits the memory cap and has canonical candidates.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config_loader.h"
#include "daemon/coordinate/request/validate.h"
#include "daemon/measure/catalogue/catalogue.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace {

ImplInfo Impl(const char* name, Collective c, std::vector<ParamInfo> params,
              int64_t alignment = 1, int max_world = 1 << 20) {
  ImplInfo info;
  info.name = name;
  info.collective = c;
  info.description = name;
  info.params = std::move(params);
  info.dtypes = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  if (c == Collective::kAllReduce || c == Collective::kReduceScatter) {
    info.ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
  }
  info.alignment_bytes = alignment;
  info.max_world_size = max_world;
  return info;
}

// A catalogue shaped like the sim backend's: every collective, parameters
// with ranges, an alignment and a world-size limit.
const Catalogue& FuzzCatalogue() {
  static const Catalogue* catalogue = [] {
    auto* c = new Catalogue;
    c->Add(Impl("all_reduce/ring", Collective::kAllReduce,
                {{"chunk_kib", 64, 1, 1 << 20, "chunk size"}}));
    c->Add(Impl("all_reduce/one_shot", Collective::kAllReduce, {}, 16, 8));
    c->Add(Impl("all_reduce/two_shot", Collective::kAllReduce,
                {{"blocks", 4, 1, 64, "blocks"}, {"threads", 256, 32, 1024, "threads"}}));
    c->Add(Impl("all_gather/ring", Collective::kAllGather, {}));
    c->Add(Impl("reduce_scatter/ring", Collective::kReduceScatter, {}));
    c->Add(Impl("all_to_all/pairwise", Collective::kAllToAll, {}));
    c->Add(Impl("broadcast/binomial_tree", Collective::kBroadcast,
                {{"root", 0, 0, 1023, "root"}}));
    return c;
  }();
  return *catalogue;
}

[[noreturn]] void Broken(const std::string& what) {
  fprintf(stderr, "validation contract broken: %s\n", what.c_str());
  abort();
}

void CheckError(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument &&
      s.code() != absl::StatusCode::kUnimplemented) {
    Broken("unexpected code: " + s.ToString());
  }
  const std::string msg(s.message());
  for (const char* field : {"group.", "problems", "options.", "counts", "problem."}) {
    if (msg.rfind(field, 0) == 0) return;
  }
  Broken("message does not start with a field path: " + msg);
}

// The node the fuzzer validates for: 8 GPUs, no peers.
constexpr int kGpus = 8;

void CheckAccepted(const ValidRequest& r, const config::Limits& limits) {
  if (r.problems.empty()) Broken("accepted a request without problems");
  // The placement a backend gets: one distinct GPU of this node per rank.
  const std::vector<int>& devices = r.engine.schedule.devices;
  std::vector<bool> used(kGpus, false);
  for (int d : devices) {
    if (d < 0 || d >= kGpus || used[d]) Broken("placement: a GPU off the node or given twice");
    used[d] = true;
  }
  if (!devices.empty() && static_cast<int>(devices.size()) != r.world_size) {
    Broken("placement: not one GPU per rank");
  }
  for (const ValidProblem& p : r.problems) {
    // Only a sweep size left out (skipped) may be over the memory cap.
    if (p.spec.MaxRankBytes() > limits.max_buffer_bytes() && r.skipped.empty()) {
      Broken("over the memory cap");
    }
    if (p.spec.MaxRankBytes() > kNoCap) Broken("over any memory cap");
    if (p.candidates.empty()) Broken("accepted a problem without candidates");
    if (p.canonical.candidates_size() != static_cast<int>(p.candidates.size())) {
      Broken("canonical candidates differ from the internal ones");
    }
  }
}

}  // namespace
}  // namespace autotuned

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autotuned;
  static const config::DaemonConfig* config = [] {
    auto* c = new config::DaemonConfig(*config::DefaultConfig());
    c->mutable_limits()->set_max_buffer_bytes(64 << 20);  // keep runs cheap
    return c;
  }();
  // By member, so that a field added to the context keeps its default.
  static const ValidationContext ctx = [] {
    ValidationContext c;
    c.catalogue = &FuzzCatalogue();
    c.limits = &config->limits();
    c.defaults = &config->defaults();
    c.max_world_size = kGpus;
    c.backend_name = "fuzz";
    return c;
  }();
  v1::TuneRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;

  absl::StatusOr<ValidRequest> tune = ValidateTune(request, ctx);
  if (tune.ok()) {
    CheckAccepted(*tune, config->limits());
  } else {
    CheckError(tune.status());
  }

  v1::SweepRequest sweep;
  *sweep.mutable_group() = request.group();
  *sweep.mutable_options() = request.options();
  if (request.problems_size() > 0) {
    v1::Problem p = request.problems(0);
    for (int64_t c : p.split_counts()) sweep.add_counts(c);
    p.clear_split_counts();
    *sweep.mutable_problem() = p;
  }
  absl::StatusOr<std::vector<ValidRequest>> sizes = ValidateSweep(sweep, ctx);
  if (sizes.ok()) {
    if (static_cast<int>(sizes->size()) != sweep.counts_size()) Broken("sweep sizes lost");
    for (const ValidRequest& r : *sizes) CheckAccepted(r, config->limits());
  } else {
    CheckError(sizes.status());
  }
  return 0;
}
