// The daemon's figures: one place that names every metric, its meaning and
// its help text. The service updates them; the HTTP endpoint renders the
// registry (Prometheus text) and NodeInfo copies them into NodeMetrics
// (proto/autotuned.proto), so both report the same numbers.
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
//   rounds_in_flight                    gauge
//   draining                            gauge, 1 once SIGTERM arrived
//   cache_entries                       gauge
//   start_time_seconds                  gauge, Unix time the daemon started
//   client_runs_total{event}            runs of candidates the ranks run:
//                                       opened, decided
//   client_candidates_ruled_out_total   client candidates a run ruled out
//
// Thread-safety: as registry.h (every member is safe to update concurrently).
#pragma once

#include "daemon/metrics/registry.h"

namespace autotuned::metrics {

struct DaemonMetrics {
  // Registers every series in `registry` (which must outlive this and hold
  // no autotuned_ series yet).
  explicit DaemonMetrics(Registry* registry);

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
  Gauge* rounds_in_flight;
  Gauge* draining;
  Gauge* cache_entries;
  Gauge* start_time_seconds;
  Counter* runs_opened;
  Counter* runs_decided;
  Counter* client_candidates_ruled_out;
};

}  // namespace autotuned::metrics
