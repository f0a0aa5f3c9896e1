#include "daemon/ops/metrics/daemon_metrics.h"

namespace autotuned::metrics {
namespace {

constexpr char kResults[] =
    "Problem results answered, by decision status: one per problem of a Tune "
    "call, one per size of a Sweep.";
constexpr char kRejected[] =
    "Tune and Sweep calls refused before any round ran: invalid (bad input, "
    "INVALID_ARGUMENT or UNIMPLEMENTED), draining (UNAVAILABLE, the daemon is "
    "stopping), overloaded (RESOURCE_EXHAUSTED, limits.max_concurrent_rounds). "
    "Messages over limits.max_request_bytes are refused by gRPC before the "
    "service sees them and are not counted.";
constexpr char kLookups[] =
    "Cache lookups by result; a request with options.refresh, or a daemon "
    "with the cache disabled, makes none.";

constexpr char kFleetLookups[] =
    "Lookups in the fleet cache (Redis) after a local miss: hit, miss, error (Redis "
    "down, slow or refusing; or skipped during an outage), corrupt (a value that "
    "does not decode, ignored).";
constexpr char kFleetPublishes[] =
    "Measured TUNED results published to the fleet cache by this daemon, by result.";
constexpr char kRemakes[] =
    "Listeners made anew in place after three failed probes (e.g. gRPC stopped "
    "accepting after running out of file descriptors): the client listener, the "
    "peer port.";
constexpr char kRuns[] =
    "Runs of candidates the ranks run: opened by a round, decided once every "
    "rank reported or at the run's bound.";

}  // namespace

DaemonMetrics::DaemonMetrics(Registry* r)
    : registry(r),
      rounds(r->AddCounter("autotuned_rounds_total",
                           "Rounds served: one per Tune call, one per Sweep size.")),
      results_tuned(r->AddCounter("autotuned_round_results_total", kResults,
                                  {{"status", "tuned"}})),
      results_cached(r->AddCounter("autotuned_round_results_total", kResults,
                                   {{"status", "cached"}})),
      results_fallback(r->AddCounter("autotuned_round_results_total", kResults,
                                     {{"status", "fallback"}})),
      results_failed(r->AddCounter("autotuned_round_results_total", kResults,
                                   {{"status", "failed"}})),
      rejected_invalid(r->AddCounter("autotuned_requests_rejected_total", kRejected,
                                     {{"reason", "invalid"}})),
      rejected_draining(r->AddCounter("autotuned_requests_rejected_total",
                                      kRejected, {{"reason", "draining"}})),
      rejected_overloaded(r->AddCounter("autotuned_requests_rejected_total",
                                        kRejected, {{"reason", "overloaded"}})),
      candidate_timeouts(r->AddCounter(
          "autotuned_candidate_timeouts_total",
          "Candidates cut off at their timeout (DEADLINE_EXCEEDED on a rank) in "
          "rounds measured by this daemon.")),
      cache_hits(r->AddCounter("autotuned_cache_lookups_total", kLookups,
                               {{"result", "hit"}})),
      cache_misses(r->AddCounter("autotuned_cache_lookups_total", kLookups,
                                 {{"result", "miss"}})),
      rendezvous_latency(r->AddHistogram(
          "autotuned_rendezvous_latency_seconds",
          "Time from a round's first arrival to the decision to measure, for "
          "ranks asking one by one (observed by the daemon that measures: the "
          "leader of a multi-daemon group); a call for the whole group waits "
          "for nothing and observes 0.",
          LatencyBucketsSeconds())),
      round_latency(r->AddHistogram(
          "autotuned_round_latency_seconds",
          "Rounds from admission to the answer, cache hits included (a Sweep "
          "observes one per size).",
          LatencyBucketsSeconds())),
      round_overhead(r->AddHistogram(
          "autotuned_round_overhead_seconds",
          "Per-rank rounds measured on this daemon's ranks alone: time from the "
          "last rank's request reaching the daemon to the answer published to "
          "every rank, minus the measuring; the rendezvous' own cost.",
          LatencyBucketsSeconds())),
      gpu_memory_held_bytes(r->AddGauge(
          "autotuned_gpu_memory_held_bytes",
          "Device memory held for benchmark buffers, as the backend reports "
          "it; the sim backend holds none (host threads) and stays at 0.")),
      gpu_worker_restarts(r->AddCounter(
          "autotuned_gpu_worker_restarts_total",
          "GPU worker processes the cuda backend replaced: killed at a run's "
          "deadline, dead during a run, or left with a kernel that cannot be "
          "stopped (the runs affected fail; the next run gets a fresh worker).")),
      nccl_aborts(r->AddCounter(
          "autotuned_nccl_aborts_total",
          "NCCL communicators aborted by the GPU worker after a failed or "
          "overrunning run, or a peer daemon lost (the watchdog); new ones serve "
          "the next run.")),
      listener_remakes_client(r->AddCounter("autotuned_listener_remakes_total", kRemakes,
                                            {{"listener", "client"}})),
      listener_remakes_peer(r->AddCounter("autotuned_listener_remakes_total", kRemakes,
                                          {{"listener", "peer"}})),
      rounds_in_flight(r->AddGauge(
          "autotuned_rounds_in_flight",
          "Tune and Sweep calls being served now (measuring, queued for the "
          "devices, or ranks waiting in the rendezvous); whole-group calls "
          "answered wholly from the cache are not counted.")),
      draining(r->AddGauge("autotuned_draining",
                           "1 once SIGTERM arrived: no new rounds are taken.")),
      cache_entries(r->AddGauge("autotuned_cache_entries",
                                "Rankings held in the result cache.")),
      cache_evictions(r->AddCounter(
          "autotuned_cache_evictions_total",
          "Oldest cache entries evicted to keep the cache within cache.max_entries "
          "and cache.max_bytes (each renews NodeInfo.cache_epoch).")),
      start_time_seconds(r->AddGauge("autotuned_start_time_seconds",
                                     "Unix time at which the daemon started.")),
      process_start_time_seconds(r->AddGauge(
          "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.")),
      runs_opened(r->AddCounter("autotuned_client_runs_total", kRuns, {{"event", "opened"}})),
      runs_decided(r->AddCounter("autotuned_client_runs_total", kRuns, {{"event", "decided"}})),
      client_candidates_ruled_out(r->AddCounter(
          "autotuned_client_candidates_ruled_out_total",
          "Candidates the ranks run that a decided run ruled out (failed or "
          "skipped at a barrier, timed out, or a rank's report missing).")),
      fleet_hits(r->AddCounter("autotuned_fleet_cache_lookups_total", kFleetLookups,
                               {{"result", "hit"}})),
      fleet_misses(r->AddCounter("autotuned_fleet_cache_lookups_total", kFleetLookups,
                                 {{"result", "miss"}})),
      fleet_errors(r->AddCounter("autotuned_fleet_cache_lookups_total", kFleetLookups,
                                 {{"result", "error"}})),
      fleet_corrupt(r->AddCounter("autotuned_fleet_cache_lookups_total", kFleetLookups,
                                  {{"result", "corrupt"}})),
      fleet_published(r->AddCounter("autotuned_fleet_cache_publishes_total", kFleetPublishes,
                                    {{"result", "ok"}})),
      fleet_publish_errors(r->AddCounter("autotuned_fleet_cache_publishes_total",
                                         kFleetPublishes, {{"result", "error"}})),
      fleet_outages(r->AddCounter(
          "autotuned_fleet_cache_outages_total",
          "Outages of the fleet cache's Redis begun (unreachable, slow, refusing or "
          "answering garbage); rounds use the local cache only during one.")),
      fleet_outage(r->AddGauge("autotuned_fleet_cache_outage",
                               "1 while the fleet cache's Redis is in an outage.")) {}

void DaemonMetrics::SetBuildInfo(const std::string& version, const std::string& backend) {
  registry
      ->AddGauge("autotuned_build_info",
                 "Always 1; the labels say the daemon's version (as NodeInfo's "
                 "daemon_version) and its backend.",
                 {{"version", version}, {"backend", backend}})
      ->Set(1);
}

void DaemonMetrics::SetStartTime(int64_t unix_seconds) {
  start_time_seconds->Set(unix_seconds);
  process_start_time_seconds->Set(unix_seconds);
}

void DaemonMetrics::SetBackendFigures(int64_t gpu_memory_held, int64_t worker_restarts,
                                      int64_t nccl_aborts_total) {
  gpu_memory_held_bytes->Set(gpu_memory_held);
  gpu_worker_restarts->RaiseTo(worker_restarts);
  nccl_aborts->RaiseTo(nccl_aborts_total);
}

}  // namespace autotuned::metrics
