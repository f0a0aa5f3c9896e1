// `autotunectl tune-nccl`: the sweeps that measure NCCL's own algorithms,
// protocols and channel counts (the daemon's `<collective>/nccl` candidates
// with parameters), and the table file the NCCL tuner plugin steers from
// (client/nccl_tuner; format in docs/nccl_tuner.md). Pure: the sweeps'
// answers are passed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/args.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// The collectives a table covers by default.
const std::vector<v1::Collective>& NcclTableCollectives();

// The candidates of one collective's sweep: NCCL's own choice first (the
// default), then each algorithm and protocol NCCL runs on one node with
// NVLink multicast off (all_reduce: tree and ring; the others: ring) with
// ll, ll128 and simple, at NCCL's channel count and at each of `channels`.
std::vector<v1::Candidate> NcclCandidates(v1::Collective collective,
                                          const std::vector<int>& channels);

// tune-nccl's flags: --collectives (comma-separated; default
// NcclTableCollectives), --channels (extra channel counts, 1..64), --out
// (default /var/lib/autotuned/nccl_tuner.table), and those of sweep but
// --candidates and --collective (when not given: --dtype `default_dtype`,
// --to 256MiB, --factor 4; the command parses again with float32 when the
// catalogue's NCCL entries do not take bfloat16, as the sim's). One sweep
// plan per collective.
struct NcclTablePlan {
  std::vector<Plan> sweeps;
  std::string out;
  RawFlags flags;  // as given, for a parse with another default dtype
};
absl::StatusOr<NcclTablePlan> ParseTuneNcclFlags(const RawFlags& flags,
                                                 const std::string& default_dtype = "bfloat16");

// One collective's sweep as answered.
struct NcclSweep {
  v1::Collective collective = v1::COLLECTIVE_UNSPECIFIED;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<v1::Candidate> candidates;  // as sent, in order
  v1::DispatchTable table;
};

// The table file for a group of `world` ranks on one node: per collective,
// one row per range of the sweep's dispatch table, in NCCL's bytes (the
// larger of a rank's send and receive buffers); a range's bounds extend to
// the geometric middle of the gap to the next one, the first from 0, the
// last to the largest size. Its identity is a digest of `fingerprint` (the
// daemon's node fingerprint) and the rows. INVALID_ARGUMENT when a winner is
// not one of NcclCandidates' shape.
// `existing`: the table file already at the path (may be empty); its rows
// for other world sizes are kept after the new ones, so that one file holds
// every shape the host serves.
absl::StatusOr<std::string> NcclTableText(int world, const std::vector<NcclSweep>& sweeps,
                                          const std::string& fingerprint,
                                          const std::string& existing = "");

}  // namespace cli
}  // namespace autotuned
