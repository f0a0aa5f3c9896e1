// The daemon's figures: one place that names every metric, its meaning and
// its help text. The service updates them; the HTTP endpoint renders the
// registry (Prometheus text) and NodeInfo copies them into NodeMetrics
// (proto/autotuned.proto), so both report the same numbers (build_info, the
// start times, the two GPU worker counters and the listener remakes are on
// the HTTP page only).
//
// Series (all prefixed autotuned_):
//   rounds_total                        Tune calls and Sweep sizes served
//   round_results_total{status}         problem results: tuned, cached,
//                                       fallback, failed
//   requests_rejected_total{reason}     invalid, draining, overloaded
//   candidate_timeouts_total            candidates cut off at their timeout
//   cache_lookups_total{result}         hit, miss
//   rendezvous_latency_seconds          histogram; always 0 for now
//   round_latency_seconds               histogram
//   round_overhead_seconds              histogram: per-rank rounds this
//                                       daemon measured, last arrival to
//                                       answer minus measuring
//   gpu_memory_held_bytes               gauge, set by the service from
//                                       Backend::gpu_memory_held_bytes
//   listener_remakes_total{listener}    client, peer: listeners made anew in
//                                       place after the probe found them gone
//   gpu_worker_restarts_total           GPU worker processes replaced, and
//   nccl_aborts_total                   NCCL communicator aborts: both follow
//                                       the backend's totals (SetBackendFigures)
//   rounds_in_flight                    gauge
//   draining                            gauge, 1 once SIGTERM arrived
//   cache_entries                       gauge
//   cache_evictions_total               oldest entries evicted at the
//                                       cache's bounds
//   start_time_seconds                  gauge, Unix time the daemon started
//   build_info{version,backend}         gauge, always 1 (SetBuildInfo)
// and the standard process_start_time_seconds (the same time as
// start_time_seconds).
//   client_runs_total{event}            runs of candidates the ranks run:
//                                       opened, decided
//   client_candidates_ruled_out_total   client candidates a run ruled out
//   fleet_cache_lookups_total{result}   the fleet cache (daemon/state/fleetcache):
//                                       hit, miss, error, corrupt
//   fleet_cache_publishes_total{result} ok, error
//   fleet_cache_outages_total           outages begun
//   fleet_cache_outage                  gauge, 1 during an outage
//
// Thread-safety: as registry.h (every member is safe to update concurrently).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/ops/metrics/registry.h"

namespace autotuned::metrics {

struct DaemonMetrics {
  // Registers every series in `registry` (which must outlive this and hold
  // no autotuned_ series yet).
  explicit DaemonMetrics(Registry* registry);

  // Registers autotuned_build_info{version,backend} 1; called once, when the
  // backend is known.
  void SetBuildInfo(const std::string& version, const std::string& backend);
  // Sets both start-time gauges (Unix seconds).
  void SetStartTime(int64_t unix_seconds);
  // Copies what the backend reports (Backend::gpu_memory_held_bytes,
  // worker_restarts, nccl_aborts); the two totals only ever go up.
  void SetBackendFigures(int64_t gpu_memory_held, int64_t worker_restarts,
                         int64_t nccl_aborts_total);

  Registry* const registry;

  Counter* rounds;
  Counter* results_tuned;
  Counter* results_cached;
  Counter* results_fallback;
  Counter* results_failed;
  Counter* rejected_invalid;
  Counter* rejected_draining;
  Counter* rejected_overloaded;
  Counter* candidate_timeouts;
  Counter* cache_hits;
  Counter* cache_misses;
  Histogram* rendezvous_latency;
  Histogram* round_latency;
  Histogram* round_overhead;
  Gauge* gpu_memory_held_bytes;
  Counter* gpu_worker_restarts;
  Counter* nccl_aborts;
  Counter* listener_remakes_client;
  Counter* listener_remakes_peer;
  Gauge* rounds_in_flight;
  Gauge* draining;
  Gauge* cache_entries;
  Counter* cache_evictions;
  Gauge* start_time_seconds;
  Gauge* process_start_time_seconds;
  Counter* runs_opened;
  Counter* runs_decided;
  Counter* client_candidates_ruled_out;
  Counter* fleet_hits;
  Counter* fleet_misses;
  Counter* fleet_errors;
  Counter* fleet_corrupt;
  Counter* fleet_published;
  Counter* fleet_publish_errors;
  Counter* fleet_outages;
  Gauge* fleet_outage;
};

}  // namespace autotuned::metrics
