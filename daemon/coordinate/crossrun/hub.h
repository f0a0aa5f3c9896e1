// The leader's side of a cross-daemon run (a GO round whose ranks live on
// several daemons; proto/peer.proto CrossRun): the meeting point of the
// daemons' barriers (Exchange), the inbox of their timings of each pass
// (ReduceTimings), and what answers them: a continuation (the next pass) or
// the round's final decision. See docs/protocol.md
// ("Groups over several daemons") for the protocol.
//
// Contract:
//  - Open(run_id, daemons) before the GO leaves the leader; `daemons` lists
//    every daemon of the run, the leader (`self`) included. Calls naming an
//    unknown run get NOT_FOUND; from a daemon outside the run,
//    PERMISSION_DENIED.
//  - Exchange(step, generation): an all-gather per barrier. It returns the
//    other daemons' data once every daemon has sent its own for that
//    generation of that step; the step's abort reason once any daemon
//    aborted it (Abort), or a daemon was found lost; DEADLINE_EXCEEDED at the
//    caller's deadline. Steps may come in any order of their numbers (a
//    run's passes number theirs apart: transport.h CrossStep); a negative
//    step or generation is INVALID_ARGUMENT naming it. Data of a generation
//    is kept until every daemon has read it, the step's generation two
//    further on begins, the step is aborted, the run is finished, or the
//    call that sent it ends without that barrier (its deadline, a lost
//    daemon): no data outlives its call unless the barrier was met. Once the
//    run is finished, Exchange is ABORTED at once ("... is over") and keeps
//    nothing, and Abort is ignored. A run keeps at most kMaxStepsKept steps
//    (a step is kept while a call waits in it, or once aborted: an honest
//    run aborts each of its candidates' steps at most once, and no request
//    has more than 256 x 32 candidates); a call that would open one more is
//    RESOURCE_EXHAUSTED (an Abort, ignored). An abort's reason is kept cut
//    to kMaxReasonBytes.
//  - Lost daemons. While a wait (Exchange or WaitTimings) misses daemons, it
//    asks `alive` about them every kProbeEvery (outside the lock); a daemon
//    found dead is lost for the whole run: every step aborts at once with
//    UNAVAILABLE "daemon D stopped answering ...", later steps fail at once,
//    and WaitTimings stops waiting for it. So a daemon killed mid-run ends
//    the run on the others within about kProbeEvery plus one probe, not at
//    each candidate's timeout.
//  - Timings, per pass: SubmitTimings stores a daemon's timings of the
//    fixed passes (RankTimings.pass 0) or of a continuation the leader
//    handed out (Continue), once per daemon and pass (a repeat is ignored;
//    another pass is INVALID_ARGUMENT naming `pass`; once the run is
//    finished, nothing is kept). WaitTimings of a pass
//    returns once every other daemon submitted it or is lost, or at its
//    deadline, with what came in.
//  - Continue(run_id, answered, continuation) records the answer to the
//    timings of pass `answered` (0: the fixed passes): the next pass,
//    continuation.go().next(). Finish(run_id, decision) records the final
//    decision. WaitDecision(run_id, pass) returns the answer to the
//    timings of `pass`: its continuation if one was recorded, else the
//    final decision (at once when recorded, else at the deadline:
//    DEADLINE_EXCEEDED). Runs are forgotten kKeep after they were opened.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/peer.pb.h"

namespace autotuned::crossrun {

class Hub {
 public:
  static constexpr absl::Duration kProbeEvery = absl::Milliseconds(500);
  static constexpr absl::Duration kKeep = absl::Minutes(30);
  static constexpr size_t kMaxStepsKept = 32768;
  static constexpr size_t kMaxReasonBytes = 1024;

  // True when `daemon` answers (a Ping with a short deadline); null: every
  // daemon counts as alive.
  using AliveFn = std::function<bool(const std::string& daemon)>;

  Hub(std::string self, AliveFn alive);

  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  const std::string& self() const { return self_; }

  void Open(const std::string& run_id, std::vector<std::string> daemons)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::vector<std::string>> Exchange(const std::string& run_id, int64_t step,
                                                    int64_t generation,
                                                    const std::string& from, std::string data,
                                                    absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The first abort of a step wins; an OK reason becomes ABORTED.
  void Abort(const std::string& run_id, int64_t step, const std::string& from,
             absl::Status reason) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status SubmitTimings(const std::string& run_id, const std::string& from,
                             v1::RankTimings timings) ABSL_LOCKS_EXCLUDED(mu_);
  // Every other daemon's timings of `pass` that came in by `deadline`;
  // `missing` gets the daemons without (each with why: "lost: ..." or "no
  // timings by the run's deadline").
  std::map<std::string, v1::RankTimings> WaitTimings(
      const std::string& run_id, int pass, absl::Time deadline,
      std::map<std::string, std::string>* missing) ABSL_LOCKS_EXCLUDED(mu_);

  void Continue(const std::string& run_id, int answered, v1::Decision continuation)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(const std::string& run_id, v1::Decision decision) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::Decision> WaitDecision(const std::string& run_id, int pass,
                                            absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs known now (tests).
  int runs() const ABSL_LOCKS_EXCLUDED(mu_);
  // What run `run_id` keeps now: its steps, and the bytes of barrier data
  // and abort reasons in them and of the timings submitted (tests).
  struct Kept {
    size_t steps = 0;
    size_t bytes = 0;
  };
  Kept KeptForTesting(const std::string& run_id) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Step {
    std::map<int64_t, std::map<std::string, std::string>> generations;
    std::map<int64_t, std::set<std::string>> read;  // who has read each generation
    absl::Status abort;
  };
  struct Run {
    std::vector<std::string> daemons;
    absl::Time opened;
    std::map<std::string, std::string> lost;  // daemon -> why
    std::map<int64_t, Step> steps;
    // Per pass (0: the fixed passes), per daemon.
    std::map<int, std::map<std::string, v1::RankTimings>> timings;
    // The continuations: the passes handed out, and the answer to each
    // pass's timings (by the pass answered).
    std::set<int> continued;
    std::map<int, v1::Decision> replies;
    bool finished = false;
    v1::Decision decision;
  };

  Run* Find(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Check(const std::string& run_id, const std::string& from, Run** run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Probes `daemons` (unlocked meanwhile) and marks the dead ones lost.
  void Probe(const std::string& run_id, const std::vector<std::string>& daemons)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::Status LostStatus(const Run& run);
  static absl::Status FinishedStatus(const std::string& run_id);

  const std::string self_;
  const AliveFn alive_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace autotuned::crossrun
