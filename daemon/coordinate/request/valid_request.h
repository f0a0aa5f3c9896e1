// A validated request: what daemon/coordinate/request/validate.h makes of a wire
// request (proto/autotuned.proto), and the only form in which the parts below
// the service (solver, rounds, leadership, client runs) see one. Everything in
// it has been checked: problems and candidates are canonical (every parameter
// present), the group's shape and placement are known, and the options are
// resolved against the configuration's defaults and limits.
//
// Thread-safety: plain values; a const ValidRequest may be read from any
// thread.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/engine/engine.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

struct ValidProblem {
  ProblemSpec spec;
  std::vector<CandidateSpec> candidates;  // canonical: every param present
  v1::Problem canonical;                  // the wire form of the above
  // Its cache key text on this node (key_text.h, ProblemKeyText), set by
  // ValidateTune when its context keys; "" otherwise (Solver::KeyText then
  // computes it).
  std::string key_text;
  // Whether some candidate is one the ranks run.
  bool has_client() const {
    for (const CandidateSpec& c : candidates) {
      if (c.client()) return true;
    }
    return false;
  }
};

struct ValidRequest {
  int world_size = 1;
  std::string group_id;
  std::vector<ValidProblem> problems;
  EngineOptions engine;
  bool refresh = false;
  bool cuda_graph = false;
  // ValidateSweep only: why this size is left out ("skipped: " and what it
  // needs against the memory cap); "" when it runs. A skipped size is
  // answered without a round: FAILED, ProblemResult.skipped.
  std::string skipped;
  // The timing mode as the wire and the cache key name it.
  int timing_mode() const { return cuda_graph ? v1::CUDA_GRAPH : v1::EVENT_LOOP; }
  // A rank asking for itself (members given, whole_group false): its round
  // waits for the group's other ranks (daemon/coordinate/rendezvous). Otherwise the
  // caller asks for the whole group and nothing waits.
  bool per_rank = false;
  int rank = 0;
  std::string members_text;  // CanonicalMembers(group)
  // Per rank, members on several daemons: the leader's name (members[rank
  // 0].daemon) when it is another daemon, else "" (this daemon leads or the
  // group is local). `wire` is the request as the leader must see it (group,
  // options, canonical problems with their labels); set only with `leader`.
  std::string leader;
  v1::TuneRequest wire;
  // Per rank (per_rank with members): "" when the rank is on this daemon,
  // else its daemon's name. Ranks on several daemons: a cross-daemon group.
  std::vector<std::string> rank_daemons;
  bool spread() const {
    for (const std::string& d : rank_daemons) {
      if (!d.empty()) return true;
    }
    return false;
  }
  bool has_client() const {
    for (const ValidProblem& p : problems) {
      if (p.has_client()) return true;
    }
    return false;
  }
  // The ranks on this daemon, ascending.
  std::vector<int> local_ranks() const {
    std::vector<int> out;
    for (size_t r = 0; r < rank_daemons.size(); ++r) {
      if (rank_daemons[r].empty()) out.push_back(static_cast<int>(r));
    }
    return out;
  }
  absl::Duration presync_window = absl::Milliseconds(5);
  // When the call reached the daemon (its handler began), for the
  // rendezvous overhead figures; InfinitePast when not set.
  absl::Time received = absl::InfinitePast();
};

}  // namespace autotuned
