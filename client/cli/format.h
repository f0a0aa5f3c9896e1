// Human-readable renderings of the daemon's answers, and the --json form.
// Every function returns complete lines, each ending in '\n', except
// DescribeProblem, WinnerLabel and FormatSweepProgress (one line, no '\n').
//
// Conventions: times in microseconds with one decimal ("-" where there is no
// value: a ruled-out candidate), bandwidths in GB/s, sizes via FormatBytes,
// candidates as on the command line ("all_reduce/ring:chunk_kib=64").
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// "all_reduce float32 sum, 1 MiB (262144 elements)"; broadcasts name the
// root, uneven all_to_all lists its splits, a label is put in front.
std::string DescribeProblem(const v1::Problem& problem);

// The winner of `result` with its parameters when they are known (from
// ranked[0] or the problem's candidate list at winner_index), else the bare
// `winner` name; "" when there is none (FAILED).
std::string WinnerLabel(const v1::ProblemResult& result);

// A header line "<problem>: <STATUS>, winner <candidate>" (with the reason
// when there is one), then the ranked table: rank, implementation, mean,
// median, min, max (us), spread (%), busbw (GB/s), status; ruled-out
// candidates last with "-" for rank and times and "ruled out: <reason>".
std::string FormatProblemResult(const v1::ProblemResult& result);

// A line naming the round and the backend, then every result, blank lines
// between.
std::string FormatTuneResponse(const v1::TuneResponse& response);

// For a size_result update: "[3/17] 4 KiB: winner all_reduce/one_shot
// 12.3 us" (or the status when nothing won); "" for other updates.
std::string FormatSweepProgress(const v1::SweepUpdate& update);

// One row per size (the problem's count in bytes), one column per candidate
// with its median time, the winner's marked with '*', the winner's algbw and
// busbw (GB/s, two decimals, as nccl-tests prints them) and the winner's
// name last. Columns are the candidates of the first result's problem; names
// drop a "<collective>/" prefix they all share.
std::string FormatSweepTable(const std::vector<v1::ProblemResult>& sizes);

// CSV (RFC 4180) of tune results or a sweep's sizes: a header row, then one
// row per candidate of every result in ranked order (a FALLBACK's one row
// for the default candidate): bytes (the sweep table's axis), collective,
// dtype, candidate, rank (1 = best; empty when ruled out), won and ok (1 or
// 0), mean/median/min/max_us, spread (a fraction), algbw/busbw_gbps (GB/s),
// iterations, the result's status, the candidate's reason. Numbers are
// plain, 3 decimals, no units; empty where there is none.
std::string FormatCsv(const std::vector<v1::ProblemResult>& results);

// The candidates' names of a sweep, indexed by their position in the
// request: from the first result's problem, filled in from the ranked
// entries; a "<collective>/" prefix they all share dropped. The columns of
// FormatSweepTable and the lines of the sweep chart.
std::vector<std::string> SweepCandidateNames(const std::vector<v1::ProblemResult>& sizes);

// One row per range: from, to, elements, winner. Sizes are the counts in
// bytes of `problem`'s dtype (the axis of --from/--to and of the sweep
// table), or the range's own min/max_bytes when the dtype is unset.
// `problem`'s candidates (may be empty) supply the winner's parameters by
// winner_index.
std::string FormatDispatchTable(const v1::DispatchTable& table,
                                const v1::Problem& problem);

std::string FormatImplementations(
    const v1::ListImplementationsResponse& response);
std::string FormatNodeInfo(const v1::NodeInfoResponse& info);
std::string FormatCacheList(const v1::ListCacheResponse& response);
std::string FormatClearCache(const v1::ClearCacheResponse& response);

// The proto3 JSON mapping of `message` with field names as in the .proto
// and default values printed. `multiline`: indented, else one line. Ends in
// '\n'.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool multiline);

}  // namespace cli
}  // namespace autotuned
