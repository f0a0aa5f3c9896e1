// The daemon's internal description of a collective problem and of a
// candidate implementation, independent of the wire format (proto/). The
// service layer translates requests into these after validation; backends,
// the engine and the catalogue see only these.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/types.h"

namespace autotuned {

const char* CollectiveName(Collective c);  // "all_reduce", ...
const char* DTypeName(DType d);            // "float32", ...
const char* ReduceOpName(ReduceOp op);     // "sum", ...
int64_t DTypeSize(DType d);                // bytes per element

// One collective problem for a group of `world_size` ranks. Counts are per
// rank, in elements (conventions in proto/autotuned.proto, message Problem).
struct ProblemSpec {
  Collective collective = Collective::kAllReduce;
  DType dtype = DType::kFloat32;
  int64_t count = 0;
  // ALL_TO_ALL only: world_size * world_size, [src * world_size + dst].
  std::vector<int64_t> split_counts;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  int world_size = 1;

  // Elements in the input and output buffers of `rank`.
  int64_t InputCount(int rank) const;
  int64_t OutputCount(int rank) const;
  // The largest input + output footprint of any rank, in bytes.
  int64_t MaxRankBytes() const;
  // The message size used for bandwidth figures, as nccl-tests counts it:
  // the larger of one rank's input and output, in bytes.
  int64_t MessageBytes() const;
  // nccl-tests' bus-bandwidth factor for this collective and world size.
  double BusBandwidthFactor() const;
  // ALL_TO_ALL: elements sent from `src` to `dst`, and the offset of that
  // segment in src's input (or in dst's output for OutputOffset).
  int64_t SplitCount(int src, int dst) const;
  int64_t InputOffset(int src, int dst) const;
  int64_t OutputOffset(int dst, int src) const;
};

// Checks what a backend relies on before it allocates anything: world size
// in [1, max_world_size], a count that is not negative, a square split matrix
// of non-negative entries (all_to_all), a root inside the group (broadcast).
// INVALID_ARGUMENT naming what is wrong. (Requests are validated in full by
// the service; this guards a backend's own entry point.)
absl::Status CheckShape(const ProblemSpec& problem, int max_world_size);

// The exact value of element `index` of `rank`'s output after the collective
// on the predictable inputs of kernels/pattern.h; NaN outside the output.
float ExpectedOutput(const ProblemSpec& problem, int rank, int64_t index);

// A candidate: a catalogue name and its parameters (defaults filled in by
// Catalogue::Canonicalize), or a candidate the ranks run in their own
// processes (client_key set, impl and params empty; see docs/protocol.md,
// "Candidates the ranks run"), which the daemon never runs.
struct CandidateSpec {
  CandidateSpec() = default;
  CandidateSpec(std::string impl_name, std::map<std::string, int64_t> impl_params = {})
      : impl(std::move(impl_name)), params(std::move(impl_params)) {}
  static CandidateSpec Client(std::string key, std::string name) {
    CandidateSpec c;
    c.client_key = std::move(key);
    c.client_name = std::move(name);
    return c;
  }

  std::string impl;
  std::map<std::string, int64_t> params;
  std::string client_key;   // the client's content key; part of the cache key
  std::string client_name;  // display only

  bool client() const { return !client_key.empty(); }
  // What answers name it: the implementation, or the client's name.
  const std::string& name() const { return client() ? client_name : impl; }

  int64_t Param(const std::string& name, int64_t fallback) const {
    auto it = params.find(name);
    return it == params.end() ? fallback : it->second;
  }
};

// Human-readable one-liners for logs: "all_reduce float32 x262144 sum w4".
std::string Describe(const ProblemSpec& p);
std::string Describe(const CandidateSpec& c);

}  // namespace autotuned
