// Size -> implementation dispatch tables: the compressed form of a sweep.
// The rule is the Python client's (client/python/autotuned/merge.py,
// table_picks), so that a sweep's table and the vLLM helper's agree for the
// same answers; docs/protocol.md ("Sweeps") states it.
#pragma once

#include <vector>

#include "proto/autotuned.pb.h"

namespace autotuned {

// The candidates (request positions, ascending) that are not measurably
// slower than another working candidate at the size of `result`. Each
// working candidate's time over the winner's is an interval: paired
// (vs_winner_low..vs_winner_high, when `paired` > 0), else from the two
// candidates' own median intervals ([low / winner's high, high / winner's
// low]), else the ratio of the medians alone; the winner's is [1, 1]. One
// whose interval lies wholly above another's is measurably slower. Empty
// for a size not measured (FALLBACK, FAILED, no working winner). Pure.
std::vector<int> AllowedAt(const v1::ProblemResult& result);

// The candidate the table uses at each size (in the given order, normally
// ascending); -1 for a size without a winner (FAILED). A measured size uses
// one of AllowedAt, preferring candidates that win some size (or that are
// the best estimate where a size's own winner is not allowed); a size not
// measured (FALLBACK) uses its answer's winner. Of the assignments, between
// sizes without a winner, the one with the fewest changes of candidate,
// then the nearest to the estimates (the sum of log(point / the size's best
// point)), then the smallest positions. So a winner that alternates with a
// tied neighbour (A B A B) is one range, a change of winner beyond the noise
// stays, and a range's candidate is never measurably slower than another
// at a size inside it. Pure.
std::vector<int> TablePicks(const std::vector<v1::ProblemResult>& sizes);

// TablePicks as ranges: consecutive sizes with the same pick (position and
// name) merged; a size without a winner is a range of its own with an empty
// winner. Pure.
v1::DispatchTable BuildDispatchTable(const std::vector<v1::ProblemResult>& sizes);

}  // namespace autotuned
