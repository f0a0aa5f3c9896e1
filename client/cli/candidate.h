// Candidates on the command line: "all_reduce/ring" or
// "all_reduce/ring:chunk_kib=64,threads=2" (parameters are int64).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// One candidate. INVALID_ARGUMENT quoting the text for an empty or malformed
// name, a parameter without "=", a non-integer value or a repeated name.
absl::StatusOr<v1::Candidate> ParseCandidate(absl::string_view text);

// A comma-separated list of candidates, in order. Since parameters are
// comma-separated too, a piece of the form "name=value" (no ':') continues
// the previous candidate's parameters:
//   "all_reduce/ring:chunk_kib=64,threads=2,all_reduce/one_shot"
//   -> ring{chunk_kib=64, threads=2}, one_shot.
// Empty text gives an empty list.
absl::StatusOr<std::vector<v1::Candidate>> ParseCandidateList(
    absl::string_view text);

// The inverse of ParseCandidate, parameters sorted by name:
// "all_reduce/ring:chunk_kib=64,threads=2".
std::string FormatCandidate(const v1::Candidate& candidate);

}  // namespace cli
}  // namespace autotuned
