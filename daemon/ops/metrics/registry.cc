#include "daemon/ops/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autotuned::metrics {
namespace {

bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

void Require(bool ok, const std::string& what) {
  if (ok) return;
  fprintf(stderr, "metrics registry: %s\n", what.c_str());
  abort();
}

// Help text: backslash and newline escaped. Label values: also '"'.
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatLabels(const Labels& labels, const std::string& extra_key = "",
                         const std::string& extra_value = "") {
  std::string out;
  auto add = [&](const std::string& k, const std::string& v) {
    absl::StrAppend(&out, out.empty() ? "{" : ",", k, "=\"", Escape(v, true), "\"");
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_key.empty()) add(extra_key, extra_value);
  if (!out.empty()) out += "}";
  return out;
}

std::string FormatDouble(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return absl::StrFormat("%.9g", v);
}

const char* TypeName(int type) {
  switch (type) {
    case 0: return "counter";
    case 1: return "gauge";
    default: return "histogram";
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(upper_bounds_.size(), 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    Require(std::isfinite(upper_bounds_[i]), "histogram bounds must be finite");
    Require(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i],
            "histogram bounds must increase");
  }
}

void Histogram::Observe(double value) {
  absl::MutexLock lock(&mu_);
  ++count_;
  sum_ += value;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (value <= upper_bounds_[i]) {
      ++bucket_counts_[i];
      break;
    }
  }
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  absl::MutexLock lock(&mu_);
  int64_t running = 0;
  for (int64_t n : bucket_counts_) {
    running += n;
    s.cumulative_counts.push_back(running);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

Registry::Series* Registry::AddSeries(const std::string& name,
                                      const std::string& help, Type type,
                                      Labels labels) {
  Require(ValidName(name), "bad metric name \"" + name + "\"");
  for (const auto& [k, v] : labels) {
    Require(ValidName(k) && k != "le", "bad label name \"" + k + "\"");
  }
  Family* family = nullptr;
  for (const auto& f : families_) {
    if (f->name == name) family = f.get();
  }
  if (family == nullptr) {
    families_.push_back(std::make_unique<Family>(Family{name, help, type, {}}));
    family = families_.back().get();
  }
  Require(family->type == type, "metric \"" + name + "\" registered twice with two types");
  for (const Series& s : family->series) {
    Require(s.labels != labels, "series of \"" + name + "\" registered twice");
  }
  family->series.push_back(Series{std::move(labels), nullptr, nullptr, nullptr});
  return &family->series.back();
}

Counter* Registry::AddCounter(const std::string& name, const std::string& help,
                              Labels labels) {
  absl::MutexLock lock(&mu_);
  Series* s = AddSeries(name, help, Type::kCounter, std::move(labels));
  s->counter = std::make_unique<Counter>();
  return s->counter.get();
}

Gauge* Registry::AddGauge(const std::string& name, const std::string& help,
                          Labels labels) {
  absl::MutexLock lock(&mu_);
  Series* s = AddSeries(name, help, Type::kGauge, std::move(labels));
  s->gauge = std::make_unique<Gauge>();
  return s->gauge.get();
}

Histogram* Registry::AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> upper_bounds) {
  absl::MutexLock lock(&mu_);
  Series* s = AddSeries(name, help, Type::kHistogram, {});
  s->histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  return s->histogram.get();
}

std::string Registry::RenderText() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& f : families_) {
    absl::StrAppend(&out, "# HELP ", f->name, " ", Escape(f->help, false), "\n",
                    "# TYPE ", f->name, " ", TypeName(static_cast<int>(f->type)),
                    "\n");
    for (const Series& s : f->series) {
      if (s.counter) {
        absl::StrAppend(&out, f->name, FormatLabels(s.labels), " ",
                        s.counter->value(), "\n");
      } else if (s.gauge) {
        absl::StrAppend(&out, f->name, FormatLabels(s.labels), " ",
                        s.gauge->value(), "\n");
      } else {
        const Histogram::Snapshot h = s.histogram->snapshot();
        for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
          absl::StrAppend(&out, f->name, "_bucket",
                          FormatLabels(s.labels, "le", FormatDouble(h.upper_bounds[i])),
                          " ", h.cumulative_counts[i], "\n");
        }
        absl::StrAppend(&out, f->name, "_bucket", FormatLabels(s.labels, "le", "+Inf"),
                        " ", h.count, "\n", f->name, "_sum", FormatLabels(s.labels),
                        " ", FormatDouble(h.sum), "\n", f->name, "_count",
                        FormatLabels(s.labels), " ", h.count, "\n");
      }
    }
  }
  return out;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3,
          1,      3,      10,    30,    60,   120,  300,  600};
}

}  // namespace autotuned::metrics
