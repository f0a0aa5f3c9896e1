// The state of the RoundTable's rounds and keys (round_table.h), shared
// with its retention (retention.h). The package's own: nothing outside
// daemon/coordinate/rendezvous/ includes it. Every field is guarded by the table's
// mutex.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/coordinate/rendezvous/round_table.h"
#include "proto/autotuned.pb.h"
#include "proto/peer.pb.h"

namespace autotuned {
namespace rendezvous {

// One round of one key.
struct Round {
  enum class State { kOpen, kRunning, kDecided };

  uint64_t id = 0;
  RoundKey key;
  std::string key_text;
  int64_t sequence = 0;
  int world_size = 0;
  absl::Time opened;
  absl::Duration window;
  absl::Time window_end;
  std::shared_ptr<const v1::TuneResponse> fallback;

  std::vector<char> asked;    // per rank: counted in this round
  std::vector<char> waiting;  // per rank: a caller is blocked in Arrive
  int asked_count = 0;
  int in_time = 0;

  State state = State::kOpen;
  absl::Duration run_bound;
  absl::Time run_deadline;
  absl::Duration go_waited;
  std::shared_ptr<const v1::CrossRun> go;  // announced cross-daemon run

  Decision decision;
  absl::Time decided_at;
  bool fell_back_at_window = false;
  bool background_given = false;
  bool announced = false;  // some caller was handed the decision
  bool kept = false;       // counted by Retention: decided, missing ranks
  int64_t kept_bytes = 0;  // its decision's size, counted by Retention while kept
  bool dropped = false;    // no longer in its key's rounds

  absl::CondVar cv;
};

// The rounds and sequence counters of one RoundKey.
struct KeyState {
  int world_size = 0;
  std::vector<int64_t> asks;  // per rank: asks counted so far
  std::map<int64_t, std::shared_ptr<Round>> rounds;
  int64_t next_sequence = 0;
  absl::Time last_ask;
  // Rounds in a row decided without every rank in time (a window closed,
  // or an error); reset by a measured round and by a re-sync.
  int missed_in_row = 0;

  // Every rank has asked as many times as the others.
  bool InStep() const {
    return std::all_of(asks.begin(), asks.end(),
                       [&](int64_t a) { return a == asks[0]; });
  }
};

}  // namespace rendezvous
}  // namespace autotuned
