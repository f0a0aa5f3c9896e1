// The catalogue: the named candidate implementations a backend offers, what
// each supports, and the parameters each takes. Every candidate in a request
// is checked against it before anything runs.
//
// Thread-safety: built once at backend construction (Add), then read-only and
// safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/problem.h"

namespace autotuned {

struct ParamInfo {
  std::string name;
  int64_t default_value = 0;
  int64_t min_value = 0;
  int64_t max_value = 0;
  std::string description;
};

struct ImplInfo {
  std::string name;  // "<collective>/<algorithm>", e.g. "all_reduce/ring"
  Collective collective = Collective::kAllReduce;
  std::string description;
  std::vector<ParamInfo> params;
  std::vector<DType> dtypes;
  std::vector<ReduceOp> ops;  // reducing collectives only
  int min_world_size = 1;
  int max_world_size = 1 << 20;
  int64_t alignment_bytes = 1;  // every rank's buffers, in bytes
  bool needs_p2p = false;
  // Parameters whose values must be given together: either every one of
  // them at its default or none (e.g. NCCL's algorithm and protocol).
  std::vector<std::string> together;
};

class Catalogue {
 public:
  // Registers `info`; a second entry with the same name replaces the first.
  void Add(ImplInfo info);

  // nullptr when unknown.
  const ImplInfo* Find(const std::string& name) const;
  // In registration order; every collective when `only` is null.
  std::vector<const ImplInfo*> List(const Collective* only = nullptr) const;

  // A digest of every entry (names, parameters, limits): part of the node
  // fingerprint, so that cached results die with a catalogue change.
  std::string Version() const;

  // Checks `candidate` for `problem` and returns it with every declared
  // parameter present (defaults filled in). INVALID_ARGUMENT names `field`
  // (e.g. "problems[0].candidates[2]") and the reason: unknown
  // implementation, wrong collective, unknown or out-of-range parameter,
  // parameters of `together` not given together;
  // with `check_support`, also what Supports checks.
  absl::StatusOr<CandidateSpec> Canonicalize(const ProblemSpec& problem,
                                             const CandidateSpec& candidate,
                                             const std::string& field,
                                             bool check_support = true) const;

  // Whether the implementation `impl` (in the catalogue, for
  // problem.collective) can run `problem`: its dtype, reduce op, world size
  // and buffer alignment. INVALID_ARGUMENT naming `field` otherwise.
  absl::Status Supports(const ProblemSpec& problem, const std::string& impl,
                        const std::string& field) const;

 private:
  std::vector<ImplInfo> entries_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace autotuned
