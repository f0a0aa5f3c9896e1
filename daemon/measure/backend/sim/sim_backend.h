// The sim backend: the CPU stand-in for GPUs. Each of `gpus` virtual GPUs is
// a thread, buffers live in host memory, and the collectives are real CPU
// algorithms (algorithms.h) with real timings: a test double of the hardware,
// not of the logic. Config faults add catalogue entries that misbehave on
// purpose (faults.h).
//
// RunCandidate starts one thread per rank, each running the engine's
// RunRankSchedule over a SimRankRun, all sharing one Group. A rank that fails
// aborts the group, so its peers stop at their next wait (ABORTED, naming the
// failed rank) instead of waiting for the deadline. At `deadline` the run is
// aborted with DEADLINE_EXCEEDED ("cut off at the timeout"); ranks that have
// not stopped kAbortGrace later are abandoned (their threads detached; they
// share only reference-counted state with nothing of the backend) and report
// DEADLINE_EXCEEDED. Nothing is shared between runs, so an abandoned rank
// never affects a later run. RunCandidate never blocks past deadline +
// kAbortGrace once its threads have started.
//
// RunPartial runs only the local ranks of a group spread over daemons, over a
// Group whose Barrier exchanges the buffers with the other daemons through
// the transport (group.h): the data really crosses, and verification checks
// the exact result. The world size is then bounded by kMaxRanks, the local
// ranks by the sim's GPUs. A run that is refused here (bad shape, unknown
// implementation, too many local ranks) aborts the transport with the
// reason, so the other daemons stop at once.
//
// Thread-safety: as Backend. node(), catalogue() and max_world_size() are
// constant; RunCandidate is called from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.pb.h"
#include "daemon/measure/backend/backend.h"
#include "daemon/measure/backend/sim/algorithms.h"

namespace autotuned::sim {

class SimBackend : public Backend {
 public:
  // How long RunCandidate waits for ranks once a run is aborted at its
  // deadline.
  static constexpr absl::Duration kAbortGrace = absl::Milliseconds(500);

  // INVALID_ARGUMENT naming the field: "sim.gpus" outside [1, 1024], or a
  // bad fault ("sim.faults[i].<field>", see faults.h).
  static absl::StatusOr<std::unique_ptr<SimBackend>> Create(
      const config::SimConfig& config);

  // backend "sim"; one GpuDescription per virtual GPU (name "sim-cpu",
  // memory_bytes 0, pci_bus_id ""); topology "X" on the diagonal and "SHM"
  // elsewhere; versions "n/a".
  const NodeDescription& node() const override { return node_; }
  // Built-in algorithms (algorithms.h), then one entry per config fault.
  const Catalogue& catalogue() const override { return catalogue_; }
  // The number of virtual GPUs.
  int max_world_size() const override {
    return static_cast<int>(node_.gpus.size());
  }

  // One outcome per rank (a single one when problem.world_size < 1). Every
  // rank reports NOT_FOUND for an implementation missing from the catalogue
  // and INVALID_ARGUMENT for a problem or candidate the sim cannot run
  // (world size outside [1, max_world_size()], malformed splits, bad root,
  // or anything Catalogue::Canonicalize rejects, or a placement that
  // CheckPlacement rejects). ScheduleOptions::cuda_graph is ignored: on the
  // sim it is the same as the event loop; so is the placement once checked
  // (the virtual GPUs are alike).
  std::vector<RankOutcome> RunCandidate(const ProblemSpec& problem,
                                        const CandidateSpec& candidate,
                                        const ScheduleOptions& options,
                                        absl::Time deadline) override;
  std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                      const CandidateSpec& candidate,
                                      const ScheduleOptions& options,
                                      const PartialRun& part,
                                      absl::Time deadline) override;

  // The memory cap protects the host's memory, which the virtual GPUs
  // share: a candidate needs every rank's buffers together (input, output
  // and the algorithm's scratch, in float32 whatever the dtype, as the sim
  // holds them), and the free memory is the host's available memory
  // (/proc/meminfo MemAvailable) when the backend was made.
  int64_t MemoryNeed(const ProblemSpec& problem, const CandidateSpec& candidate) const override;
  int64_t memory_free_bytes() const override { return host_available_bytes_; }

 private:
  SimBackend(NodeDescription node, std::vector<Algorithm> algorithms);

  // The algorithm for `candidate` with its canonical form, or why the run
  // cannot start.
  absl::StatusOr<const Algorithm*> Prepare(const ProblemSpec& problem,
                                           const CandidateSpec& candidate, int max_world,
                                           CandidateSpec* canonical) const;
  // Runs `ranks` (outcomes in that order); across daemons when `transport`.
  std::vector<RankOutcome> Run(const ProblemSpec& problem, const Algorithm& algorithm,
                               const CandidateSpec& canonical,
                               const ScheduleOptions& options, absl::Time deadline,
                               const std::vector<int>& ranks,
                               std::shared_ptr<RunTransport> transport);

  const NodeDescription node_;
  const std::vector<Algorithm> algorithms_;
  Catalogue catalogue_;
  absl::flat_hash_map<std::string, const Algorithm*> by_name_;
  const int64_t host_available_bytes_;
};

}  // namespace autotuned::sim
