#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/ops/metrics/daemon_metrics.h"
#include "daemon/ops/metrics/registry.h"

namespace autotuned::metrics {
namespace {

TEST_CASE("counters, gauges and labelled families render as Prometheus text") {
  Registry r;
  Counter* tuned = r.AddCounter("x_results_total", "Results.\nBy status.",
                                {{"status", "tuned"}});
  Counter* cached = r.AddCounter("x_results_total", "ignored", {{"status", "ca\"ched"}});
  Gauge* g = r.AddGauge("x_bytes", "Bytes held.");
  tuned->Increment();
  tuned->Increment(2);
  cached->Increment();
  g->Set(7);
  g->Add(-2);
  CHECK(tuned->value() == 3);
  CHECK(g->value() == 5);
  CHECK(r.RenderText() ==
        "# HELP x_results_total Results.\\nBy status.\n"
        "# TYPE x_results_total counter\n"
        "x_results_total{status=\"tuned\"} 3\n"
        "x_results_total{status=\"ca\\\"ched\"} 1\n"
        "# HELP x_bytes Bytes held.\n"
        "# TYPE x_bytes gauge\n"
        "x_bytes 5\n");
}

TEST_CASE("a histogram renders cumulative buckets, +Inf, sum and count") {
  Registry r;
  Histogram* h = r.AddHistogram("x_seconds", "Latency.", {0.001, 0.1, 1});
  h->Observe(0);
  h->Observe(0.05);
  h->Observe(0.1);
  h->Observe(5);
  const Histogram::Snapshot s = h->snapshot();
  CHECK(s.cumulative_counts == std::vector<int64_t>{1, 3, 3});
  CHECK(s.count == 4);
  CHECK(s.sum == Approx(5.15));
  CHECK(r.RenderText() ==
        "# HELP x_seconds Latency.\n"
        "# TYPE x_seconds histogram\n"
        "x_seconds_bucket{le=\"0.001\"} 1\n"
        "x_seconds_bucket{le=\"0.1\"} 3\n"
        "x_seconds_bucket{le=\"1\"} 3\n"
        "x_seconds_bucket{le=\"+Inf\"} 4\n"
        "x_seconds_sum 5.15\n"
        "x_seconds_count 4\n");
}

TEST_CASE("concurrent updates are all counted") {
  Registry r;
  Counter* c = r.AddCounter("x_total", "n");
  Histogram* h = r.AddHistogram("x_seconds", "t", LatencyBucketsSeconds());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        c->Increment();
        h->Observe(0.002);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(c->value() == 8000);
  CHECK(h->snapshot().count == 8000);
}

TEST_CASE("the daemon's figures are registered once, each with help text") {
  Registry r;
  DaemonMetrics m(&r);
  m.results_tuned->Increment(2);
  m.results_cached->Increment();
  m.rejected_invalid->Increment();
  m.rendezvous_latency->Observe(0);
  const std::string text = r.RenderText();
  CHECK_THAT(text, Catch::Contains("autotuned_round_results_total{status=\"tuned\"} 2\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_round_results_total{status=\"cached\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_round_results_total{status=\"fallback\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_requests_rejected_total{reason=\"invalid\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("autotuned_rendezvous_latency_seconds_count 1\n"));
  CHECK_THAT(text, Catch::Contains("the leader of a multi-daemon group"));
  CHECK_THAT(text, Catch::Contains("# TYPE autotuned_gpu_memory_held_bytes gauge\n"
                                   "autotuned_gpu_memory_held_bytes 0\n"));
  m.SetBuildInfo("1.2.3", "sim");
  m.SetStartTime(1700000000);
  m.SetBackendFigures(5, 2, 3);
  m.SetBackendFigures(0, 1, 3);  // totals never go down
  const std::string more = r.RenderText();
  CHECK_THAT(more, Catch::Contains("# TYPE autotuned_build_info gauge\n"
                                   "autotuned_build_info{version=\"1.2.3\",backend=\"sim\"} 1\n"));
  CHECK_THAT(more, Catch::Contains("# TYPE process_start_time_seconds gauge\n"
                                   "process_start_time_seconds 1700000000\n"));
  CHECK_THAT(more, Catch::Contains("autotuned_start_time_seconds 1700000000\n"));
  CHECK_THAT(more, Catch::Contains("# TYPE autotuned_gpu_worker_restarts_total counter\n"
                                   "autotuned_gpu_worker_restarts_total 2\n"));
  CHECK_THAT(more, Catch::Contains("# TYPE autotuned_nccl_aborts_total counter\n"
                                   "autotuned_nccl_aborts_total 3\n"));
  CHECK_THAT(more, Catch::Contains("autotuned_gpu_memory_held_bytes 0\n"));
  // One HELP line per family.
  size_t helps = 0;
  for (size_t at = text.find("# HELP autotuned_round_results_total");
       at != std::string::npos;
       at = text.find("# HELP autotuned_round_results_total", at + 1)) {
    ++helps;
  }
  CHECK(helps == 1);
}

}  // namespace
}  // namespace autotuned::metrics
