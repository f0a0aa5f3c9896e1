// A small metrics registry: counters, gauges and histograms, rendered in the
// Prometheus text exposition format (version 0.0.4). Just enough for the
// daemon's own figures (daemon_metrics.h); no label cardinality to manage, no
// expiry, no client library.
//
// Ownership: the registry owns every metric it hands out; the pointers stay
// valid for the registry's lifetime.
//
// Thread-safety: every method of every class here may be called concurrently.
// Counter and Gauge updates are lock-free atomics; Histogram::Observe takes a
// short lock; registration and rendering share the registry's lock (never
// held while a metric is updated).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace autotuned::metrics {

// Label pairs of one series, e.g. {{"status", "tuned"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Monotonic count (Prometheus TYPE counter).
class Counter {
 public:
  void Increment(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  // Catches up with a total counted elsewhere (e.g. by the backend): the
  // value becomes max(value, total), so it never goes down.
  void RaiseTo(int64_t total) {
    int64_t v = value_.load(std::memory_order_relaxed);
    while (v < total && !value_.compare_exchange_weak(v, total, std::memory_order_relaxed)) {
    }
  }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A value that goes up and down (Prometheus TYPE gauge).
class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t d) { value_.fetch_add(d, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Observations in fixed buckets (Prometheus TYPE histogram), in seconds.
class Histogram {
 public:
  struct Snapshot {
    std::vector<double> upper_bounds;       // as constructed, increasing
    std::vector<int64_t> cumulative_counts; // one per bound: <= bound
    int64_t count = 0;                      // every observation (+Inf)
    double sum = 0;
  };

  // `upper_bounds` must be strictly increasing and finite (the +Inf bucket
  // is implicit).
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value) ABSL_LOCKS_EXCLUDED(mu_);
  Snapshot snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::vector<double> upper_bounds_;
  mutable absl::Mutex mu_;
  std::vector<int64_t> bucket_counts_ ABSL_GUARDED_BY(mu_);  // not cumulative
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers a series. `name` follows Prometheus rules
  // ([a-zA-Z_:][a-zA-Z0-9_:]*, counters ending in "_total"); series of the
  // same name form one family and must share its type and help text (the
  // first registration's help is kept). Names and labels are the caller's
  // constants; a malformed one is a programming error and aborts.
  Counter* AddCounter(const std::string& name, const std::string& help,
                      Labels labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  Gauge* AddGauge(const std::string& name, const std::string& help,
                  Labels labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Every family in registration order: "# HELP", "# TYPE", then one line
  // per series ("name{k=\"v\"} value"; histograms as _bucket{le=...},
  // _sum and _count). Help text and label values are escaped as the format
  // asks (backslash, newline, and double quote in label values).
  std::string RenderText() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<Series> series;
  };

  Series* AddSeries(const std::string& name, const std::string& help, Type type,
                    Labels labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
};

// The bounds the daemon uses for latencies: 100 us to 10 min, roughly x3
// apart (a cache hit answers in well under a millisecond; a sweep of large
// sizes can take minutes).
std::vector<double> LatencyBucketsSeconds();

}  // namespace autotuned::metrics
