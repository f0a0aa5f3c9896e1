// The chart of a sweep (`autotunectl sweep --plot=FILE.png`, `autotunectl
// plot`): median latency against size per candidate, the winner of every
// size marked (client/plot/chart.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/plot/chart.h"
#include "proto/autotuned.pb.h"

namespace autotuned {
namespace cli {

// One point per size result (sizes: the problem's count in bytes, the axis
// of the sweep table), one line per candidate (SweepCandidateNames), the
// median of each candidate that worked; the winner unless the size FAILED.
// Results whose size is not above the previous one are skipped.
// INVALID_ARGUMENT when `sizes` is empty.
absl::StatusOr<plot::LatencyChart> SweepChart(const std::vector<v1::ProblemResult>& sizes);

// SweepChart drawn and written to `path` as PNG.
absl::Status WriteSweepPlot(const std::vector<v1::ProblemResult>& sizes, const std::string& path);

// The size results and the dispatch table of a sweep saved by `autotunectl
// --json sweep` (one SweepUpdate in JSON a line; blank lines skipped).
// INVALID_ARGUMENT naming the line that does not parse.
struct SavedSweep {
  std::vector<v1::ProblemResult> sizes;
  bool has_table = false;
  v1::DispatchTable table;
};
absl::StatusOr<SavedSweep> ParseSweepJsonLines(const std::string& text);

}  // namespace cli
}  // namespace autotuned
