// The autotunectl commands: each asks the daemon through a connected Client
// and prints the answer (human-readable, JSON with Output::json, or CSV with
// Output::csv).
//
// Errors: the daemon's or the transport's status unchanged; a few of the
// CLI's own (FAILED_PRECONDITION when the node reports no GPUs and --world
// was not given, what SelectCandidates returns). Notes (implementations left
// out, sweep progress) go to Output::err.
#pragma once

#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli/args.h"
#include "client/cli/nccl_table.h"
#include "client/cpp/client.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// The full help text (--help) and the short one printed after usage errors.
extern const char kUsage[];
extern const char kShortUsage[];

struct Output {
  bool json = false;
  bool csv = false;  // tune, sweep: FormatCsv instead of the tables

  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

// The target to connect to: "unix:" + socket (kept as is when it already
// starts with "unix:"), or address, or DefaultTarget() when both are empty.
// INVALID_ARGUMENT when both are given.
absl::StatusOr<std::string> ResolveTarget(const std::string& socket,
                                          const std::string& address);

// What autotunectl prints after "autotunectl: " for an error of the daemon or
// the transport: "CODE: message", and where the message does not say which
// option decided it, that option: for a connection that failed
// (`connecting`), where the target came from; for gRPC's bare "Deadline
// Exceeded" of a tune, sweep or tune-nccl, --deadline and its value.
std::string DescribeRpcError(const absl::Status& status, Command command, bool connecting,
                             absl::Duration deadline);

// What a tune or a sweep decided: kTuned when every problem (every size)
// is TUNED or CACHED, kNotTuned when one is FALLBACK or FAILED (autotunectl
// then exits with status 3).
enum class Outcome { kTuned, kNotTuned };

// tune: world from the plan or the node's GPU count, candidates from the
// plan or the catalogue (SelectCandidates), then one Tune call. JSON: the
// TuneResponse.
absl::StatusOr<Outcome> RunTune(Client& client, const Plan& plan, const Output& output);

// sweep: as tune, then one Sweep call; a progress line per size to err,
// then the sweep table and the dispatch table (also the part measured
// before a failure). JSON: every SweepUpdate as one line, as it arrives.
absl::StatusOr<Outcome> RunSweep(Client& client, const Plan& plan, const Output& output);

// tune-nccl: each collective's sweep (progress lines to err), then the
// table file written whole to plan.out and printed (JSON: its path).
// kNotTuned when some size is FALLBACK or FAILED.
absl::StatusOr<Outcome> RunTuneNccl(Client& client, const NcclTablePlan& plan,
                                    const Output& output);

// list: the catalogue, of `only` (COLLECTIVE_UNSPECIFIED: all).
absl::Status RunList(Client& client, v1::Collective only, const Output& output);
absl::Status RunInfo(Client& client, const Output& output);
absl::Status RunCacheList(Client& client, const Output& output);
absl::Status RunCacheClear(Client& client, const Output& output);

}  // namespace cli
}  // namespace autotuned
