// The hardware boundary: a backend owns the node's devices ("GPUs": real
// ones for the cuda backend, threads for the sim backend), offers a catalogue
// of candidate implementations, and runs one candidate on the ranks of a
// group. The engine (daemon/measure/engine) decides what to run and in which order;
// the per-rank steps of a run are RunRankSchedule (schedule.h), which a
// backend calls on each rank's device.
//
// A group may also be spread over several daemons (hosts): then each daemon
// runs only its own ranks of the group (RunPartial) and a RunTransport
// connects them to the ranks of the other daemons.
//
// Thread-safety: node(), catalogue() and max_world_size() are constant after
// construction. RunCandidate and RunPartial may be called from one thread at
// a time; the engine serializes rounds on a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/problem.h"
#include "daemon/measure/catalogue/catalogue.h"

namespace autotuned {

struct GpuDescription {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  std::string pci_bus_id;
  // Free memory when the backend started (0: not known). Not part of the
  // node's identity (the cache fingerprint): it differs from start to start.
  int64_t free_bytes = 0;
};

// What the node is: reported by NodeInfo and hashed into the fingerprint that
// keys the cache.
struct NodeDescription {
  std::string backend;  // "sim" or "cuda"
  std::vector<GpuDescription> gpus;
  // gpus x gpus, row-major link kinds ("X" on the diagonal).
  std::vector<std::string> topology;
  std::string driver_version;
  std::string cuda_version;
  std::string nccl_version;
};

// One rank's handle on a candidate prepared for a problem: its buffers and
// whatever the implementation needs. Used only from that rank's device
// worker; every wait inside honours the run's deadline and abort.
class RankRun {
 public:
  virtual ~RankRun() = default;
  virtual int rank() const = 0;
  // Fills the inputs with the predictable pattern (kernels/pattern.h), runs
  // the collective once and compares every output element with the exact
  // expected value. DATA_LOSS with the first mismatch when they differ.
  virtual absl::Status RunAndVerify() = 0;
  // Returns once every rank of the run has called Barrier.
  virtual absl::Status Barrier() = 0;
  // Runs the collective `iterations` times back to back. When `iteration_us`
  // is not null, appends each iteration's duration in microseconds.
  virtual absl::Status Run(int iterations, std::vector<double>* iteration_us) = 0;
};

// How a candidate is run on each rank (the engine's options, as plain data so
// that a backend can hand them to a worker process).
struct ScheduleOptions {
  int warmup = 5;
  int iterations = 20;
  bool cuda_graph = false;
  // False on the engine's later passes over a candidate (daemon/measure/engine):
  // it was verified on the first, so the schedule starts at its barrier.
  bool verify = true;
  // Placement: devices[i] is the local device (GPU index on this node) of the
  // i-th rank run here (rank i for RunCandidate, part.local_ranks[i] for
  // RunPartial), from the group members' local_gpu. Empty: the i-th rank on
  // device i.
  std::vector<int> devices;
};

// The device of the i-th rank run here under `options` (see devices above),
// or under a placement `devices` given alone.
int DeviceOf(const std::vector<int>& devices, int i);
int DeviceOf(const ScheduleOptions& options, int i);

// INVALID_ARGUMENT unless `options.devices` is empty or names `ranks_here`
// distinct devices, each in [0, devices_on_node).
absl::Status CheckPlacement(const ScheduleOptions& options, int ranks_here,
                            int devices_on_node);

// What one rank reports after the schedule.
struct RankOutcome {
  absl::Status status;                // OK, or why this rank failed
  std::vector<double> iteration_us;   // `iterations` entries when OK
};

// How the daemons of one cross-daemon run of one candidate reach each other
// (daemon/coordinate/crossrun). One transport per candidate run; all of them agree on
// which daemons take part.
//
// Exchange is an all-gather of opaque data between the daemons at one
// barrier: it returns once every daemon has sent its data of `generation`
// (0, 1, ... within the run; a daemon calls it once per generation, from one
// thread), with every other daemon's data; or the run's abort reason (the
// first Abort of any daemon, or a lost daemon), or DEADLINE_EXCEEDED at
// `deadline`. Abort tells every daemon that the run failed here with
// `reason` (their current and later Exchange calls return it); it does not
// block longer than a short, fixed time.
//
// Thread-safety: Exchange and Abort may be called concurrently.
class RunTransport {
 public:
  virtual ~RunTransport() = default;
  virtual absl::StatusOr<std::vector<std::string>> Exchange(int64_t generation,
                                                            std::string data,
                                                            absl::Time deadline) = 0;
  virtual void Abort(const absl::Status& reason) = 0;
};

// This daemon's share of a group spread over daemons.
struct PartialRun {
  // The group's ranks that run here, ascending, each in [0, world_size).
  std::vector<int> local_ranks;
  // Reaches the other daemons' ranks. Shared: a backend keeps it for as
  // long as any of its rank workers may still use it, which may be past the
  // return of RunPartial (a rank abandoned at the deadline).
  std::shared_ptr<RunTransport> transport;
  // From the leader's GO (proto/peer.proto CrossRun.backend_token): what a
  // backend needs to connect its ranks to the others (an NCCL unique id on
  // GPUs); empty on the sim.
  std::string backend_token;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const NodeDescription& node() const = 0;
  virtual const Catalogue& catalogue() const = 0;
  // The most ranks one group may have on this node.
  virtual int max_world_size() const = 0;

  // Runs `candidate` (already canonical) on ranks 0..problem.world_size-1,
  // each rank executing RunRankSchedule, all in parallel. Returns one outcome
  // per rank. At `deadline` the run is aborted: ranks still running report
  // DEADLINE_EXCEEDED, and the backend is ready for the next run when this
  // returns (a backend that cannot reclaim a device says so in the status of
  // every later run rather than hanging). Never blocks past deadline plus a
  // short, fixed grace period.
  virtual std::vector<RankOutcome> RunCandidate(const ProblemSpec& problem,
                                                const CandidateSpec& candidate,
                                                const ScheduleOptions& options,
                                                absl::Time deadline) = 0;

  // The leader's side of a cross-daemon run, before GO: what every daemon's
  // backend needs to connect its ranks to the others', sent to them in the
  // GO (CrossRun.backend_token) and handed to RunPartial as
  // PartialRun::backend_token on every daemon, the leader's included (on
  // GPUs: an NCCL unique id). This default: empty (the sim needs nothing;
  // its data goes through the transport).
  virtual std::string CrossRunToken() { return std::string(); }

  // As RunCandidate, for the ranks `part.local_ranks` of a group whose other
  // ranks run on other daemons at the same time, each with its own
  // RunPartial of the same candidate: one outcome per local rank, in
  // `part.local_ranks` order. The data moves through `part.transport`. A
  // rank failing here aborts the transport, so that the other daemons' ranks
  // stop too. This default answers FAILED_PRECONDITION for every local rank
  // (the backend cannot run a group across daemons).
  virtual std::vector<RankOutcome> RunPartial(const ProblemSpec& problem,
                                              const CandidateSpec& candidate,
                                              const ScheduleOptions& options,
                                              const PartialRun& part,
                                              absl::Time deadline);

  // The bytes `candidate` needs for `problem` where the memory cap applies
  // (MemoryCap below), counted as the backend allocates its buffers. This
  // default: the input and output of the rank that needs the most
  // (ProblemSpec::MaxRankBytes). The cuda backend: the most any one rank
  // needs on its own GPU (input, output, the check's counters, the P2P
  // scratch as allocated); the sim: every rank's buffers together, since its
  // virtual GPUs share the host's memory. Pure; never overflows (problems
  // are validated first: counts far below 2^50).
  virtual int64_t MemoryNeed(const ProblemSpec& problem, const CandidateSpec& candidate) const {
    (void)candidate;
    return problem.MaxRankBytes();
  }
  // The free memory the cap is a fraction of: this default, the smallest
  // GpuDescription::free_bytes of the node's GPUs (0 when one is not known);
  // the sim, the host's available memory when it was made.
  virtual int64_t memory_free_bytes() const;

  // GPU memory the backend holds between runs (0 where it holds none, as on
  // sim); for the autotuned_gpu_memory_held_bytes gauge.
  virtual int64_t gpu_memory_held_bytes() const { return 0; }
  // Totals since the backend was made, for autotuned_gpu_worker_restarts_total
  // and autotuned_nccl_aborts_total: worker processes replaced and NCCL
  // communicator aborts (0 where there are none, as on sim).
  virtual int64_t worker_restarts() const { return 0; }
  virtual int64_t nccl_aborts() const { return 0; }
};

// The memory cap: the most `backend.MemoryNeed` a candidate may have to run.
// The smaller of `max_buffer_bytes` (limits.max_buffer_bytes) and `fraction`
// (limits.gpu_memory_fraction) of backend.memory_free_bytes(); just
// `max_buffer_bytes` when the free memory is not known (0).
int64_t MemoryCap(const Backend& backend, int64_t max_buffer_bytes, double fraction);

}  // namespace autotuned
