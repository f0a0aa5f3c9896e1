// What the tests of the daemon's request-serving parts share (request,
// solver, rounds, leadership, service): one scripted node, its
// configuration, and the requests they ask of it. Validating those requests
// is daemon/coordinate/request/validate_testing.h; the Solver over the node is
// daemon/coordinate/solver/solver_testing.h.
//
// The node (ScriptedBackend) has 4 fake GPUs and these all_reduce float32
// implementations: "a", "b" and "c" take 30, 10 and 20 us per iteration on
// every rank; "broken" fails on rank 1 (DATA_LOSS); "hang" blocks rank 1
// until the candidate's timeout; "four_or_more" (1 us) runs on 4 or more
// ranks only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.pb.h"
#include "daemon/measure/backend/fake_backend.h"
#include "proto/autotuned.pb.h"

namespace autotuned::testing {

std::unique_ptr<FakeBackend> ScriptedBackend();

// The embedded default configuration with a 1 MiB buffer cap.
config::DaemonConfig TestConfig();

// `name` under the test's temporary directory.
std::string TempDir(const std::string& name);

// A whole-group request of 4 ranks: one float32 all_reduce problem of
// `count` elements with `impls` as its candidates, 3 iterations, 1 warmup.
v1::TuneRequest Request(const std::vector<std::string>& impls, int64_t count = 1024);

// Rank `rank` of group `group` asking for itself: Request({a, b, c}) with
// members 0..world-1 on GPUs 0..world-1, the pre-sync window `window_us`,
// and the problem labelled "op-of-rank-<rank>".
v1::TuneRequest RankRequest(const std::string& group, int rank, int world = 4,
                            int64_t window_us = 2000000);

// RankRequest(group, rank, world) whose problem's candidates are
// `candidates`: catalogue names ("all_reduce/a"), and candidates the ranks
// run given as "client:KEY" (key KEY, name "name of KEY"); a candidate
// timeout of `timeout_ms`.
v1::TuneRequest ClientRankRequest(const std::string& group, int rank, int world,
                                  const std::vector<std::string>& candidates,
                                  int64_t timeout_ms = 300);

// RankRequest with member r on daemon daemons[r].
v1::TuneRequest SpreadRequest(const std::string& group, int rank,
                              const std::vector<std::string>& daemons);

// A response without what is each rank's own (the labels), as bytes: equal
// for every rank of a round.
std::string Shared(v1::TuneResponse response);

}  // namespace autotuned::testing
