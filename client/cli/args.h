// From autotunectl's flag values to the requests it sends. Everything here
// is pure: the daemon's answers it needs (the GPU count, the catalogue) are
// passed in.
//
// Errors: INVALID_ARGUMENT with a message naming the flag; the caller treats
// errors of the Parse*/CheckFlagsApply functions as usage errors.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

enum class Command {
  kTune, kSweep, kTuneNccl, kList, kInfo, kCacheList, kCacheClear, kCompletion
};

// The positional arguments after the program name: "tune", "sweep",
// "tune-nccl", "list", "info", "cache list", "cache clear", "completion bash".
absl::StatusOr<Command> ParseCommand(const std::vector<std::string>& words);

// The words of `command` as ParseCommand takes them ("cache list").
std::string CommandName(Command command);

// The flags (names without dashes) that apply to every command: the
// connection and output ones. And those that apply to `command` only.
const std::set<std::string>& GlobalFlags();
const std::set<std::string>& CommandFlags(Command command);

// The flag values as given (strings where the CLI does its own parsing) and
// the names of the flags that were on the command line.
struct RawFlags {
  std::string collective;
  std::string dtype = "float32";
  std::string bytes;
  std::string candidates;
  std::string op;
  std::string splits;
  std::string timing;
  std::string from = "1KiB";
  std::string to = "64MiB";
  int64_t factor = 2;
  int32_t world = 0;
  std::string gpus;
  int32_t root = 0;
  int32_t warmup = 0;
  int32_t iters = 0;
  int64_t timeout_ms = 0;
  double min_speedup = 0;  // sent only when given
  bool refresh = false;
  std::string collectives;  // tune-nccl
  std::string channels;     // tune-nccl
  std::string out;          // tune-nccl
  std::set<std::string> given;
};

// INVALID_ARGUMENT when a flag in `given` means nothing to `command`
// ("--bytes does not apply to sweep"), or when both --json and --csv are
// given. The connection and output flags
// (socket, address, json, connect_timeout, deadline) apply to every command.
absl::Status CheckFlagsApply(Command command, const std::set<std::string>& given);

// What a tune or a sweep asks before the daemon is consulted.
struct Plan {
  // collective, dtype, op (only if given), root (broadcast), count or
  // split_counts (tune), candidates as given (empty: every suitable one).
  v1::Problem problem;
  int world = 0;            // 0: the node's GPU count
  std::vector<int> gpus;    // --gpus: rank r on GPU gpus[r]; empty: GPUs 0..world-1
  v1::Options options;
  std::vector<int64_t> counts;  // sweep only, ascending
};

// --collective (required), --dtype, --op, --root, --candidates (a bare name
// "ring" means "<collective>/ring"), --world or --gpus, --warmup, --iters,
// --timeout_ms, --min_speedup, --timing, --refresh; for tune --bytes or (all_to_all only)
// --splits; for sweep --from, --to, --factor.
absl::StatusOr<Plan> ParseTuneFlags(const RawFlags& flags);
absl::StatusOr<Plan> ParseSweepFlags(const RawFlags& flags);

// Element counts from `from_bytes` to at most `to_bytes`, multiplying by
// `factor` (>= 2). Both bounds must be positive multiples of the dtype size.
absl::StatusOr<std::vector<int64_t>> SweepCounts(int64_t from_bytes,
                                                 int64_t to_bytes,
                                                 int64_t factor, v1::DType dtype);

// Checks what depends on the world size: --splits must hold world * world
// counts, --root must be a rank.
absl::Status CheckWorld(const v1::Problem& problem, int world);

// The implementations of `problem`'s collective in catalogue order that
// declare support for its dtype, op, `world` and (for even sizes) the
// alignment of `problem.count()` elements. `skipped` (may be null) gets one
// "name: why" line per implementation left out. NOT_FOUND when the
// catalogue has none of the collective, FAILED_PRECONDITION (listing the
// reasons) when none is suitable.
absl::StatusOr<std::vector<v1::Candidate>> SelectCandidates(
    const v1::ListImplementationsResponse& catalogue, const v1::Problem& problem,
    int world, std::vector<std::string>* skipped);

// id "autotunectl", world_size `world`, whole_group. Without `gpus`, no
// members: the group is this node's GPUs 0..world-1; with them, one member
// per rank on this daemon, rank r on GPU gpus[r].
v1::Group LocalGroup(int world, const std::vector<int>& gpus = {});

v1::TuneRequest MakeTuneRequest(const Plan& plan, int world,
                                const std::vector<v1::Candidate>& candidates);
// The sweep's problem keeps the first count (the daemon ignores it).
v1::SweepRequest MakeSweepRequest(const Plan& plan, int world,
                                  const std::vector<v1::Candidate>& candidates);

}  // namespace cli
}  // namespace autotuned
