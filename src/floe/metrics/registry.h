// floe's metric registry: every metric is declared once (name, help, type, label
// names) and then updated from any thread; Render() produces the Prometheus text
// exposition format 0.0.4 that the /metrics endpoint serves.
//
// Cost model. Declaring a metric and resolving a set of label values to a series
// (`With`) take a mutex and compare strings; they are meant for start-up or for the
// first time a table is seen. The series handles `With` returns (CounterSeries,
// GaugeSeries, HistogramSeries) update one heap cell with a relaxed atomic
// operation and never lock, so the per-event paths resolve their series once and
// keep the handle.
//
// Lifetimes. A series, once created, lives as long as its Registry (metrics are
// never unregistered: a scrape must not see a counter vanish and come back at 0).
// Handles are plain pointers into the registry and must not outlive it. A
// default-constructed handle is a no-op, so code can hold metric members and run
// without a registry (tests, tools).
//
// Wrong number of label values: a programming error. Debug builds assert; release
// builds return a no-op series handle (updates through it are dropped) rather than
// crash a replication pipeline over a metric.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

namespace floe::metrics {

/// Label values of one series, in the order the label names were declared.
using LabelValues = std::vector<std::string>;

enum class MetricType { kCounter, kGauge, kHistogram };

namespace detail {

// One series' storage, on its own cache line so that hot counters of different
// tables updated by different threads do not false-share.
struct alignas(64) Cell {
  explicit Cell(size_t bucket_count) : buckets(bucket_count) {}
  std::atomic<double> value{0};  // counter / gauge value; histogram sum
  // Histogram only: per-bucket (non-cumulative) counts, one per declared upper
  // bound plus the last for the observations above every bound (+Inf). Render()
  // cumulates them and derives _count from the same numbers, so a scrape's
  // `+Inf` bucket always equals its `_count` even while Observe runs concurrently.
  std::vector<std::atomic<uint64_t>> buckets;
};

struct Family;

}  // namespace detail

/// One series of a counter. Copyable, trivially cheap; default: a no-op.
class CounterSeries {
 public:
  CounterSeries() = default;
  /// Adds `delta`. Counters only go up: a negative or NaN delta is ignored.
  void Inc(double delta = 1) const;
  double Value() const;

 private:
  friend class Counter;
  explicit CounterSeries(detail::Cell* cell) : cell_(cell) {}
  detail::Cell* cell_ = nullptr;
};

/// One series of a gauge. Copyable, trivially cheap; default: a no-op.
class GaugeSeries {
 public:
  GaugeSeries() = default;
  void Set(double value) const;
  void Add(double delta) const;
  double Value() const;

 private:
  friend class Gauge;
  explicit GaugeSeries(detail::Cell* cell) : cell_(cell) {}
  detail::Cell* cell_ = nullptr;
};

/// One series of a histogram. Copyable; default: a no-op.
class HistogramSeries {
 public:
  HistogramSeries() = default;
  /// Counts `value` in the first bucket whose upper bound is >= value (and in
  /// every later one, as the exposition is cumulative). NaN counts only in +Inf.
  void Observe(double value) const;
  uint64_t Count() const;
  double Sum() const;

 private:
  friend class Histogram;
  HistogramSeries(detail::Cell* cell, const std::vector<double>* bounds)
      : cell_(cell), bounds_(bounds) {}
  detail::Cell* cell_ = nullptr;
  const std::vector<double>* bounds_ = nullptr;
};

/// A declared counter family. Copyable handle; default-constructed: a no-op.
class Counter {
 public:
  Counter() = default;
  /// The series for `label_values` (created at 0 the first time).
  CounterSeries With(const LabelValues& label_values) const;
  /// Convenience for cold paths: With(label_values).Inc(delta).
  void Inc(const LabelValues& label_values, double delta = 1) const {
    With(label_values).Inc(delta);
  }

 private:
  friend class Registry;
  explicit Counter(detail::Family* family) : family_(family) {}
  detail::Family* family_ = nullptr;
};

/// A declared gauge family. Copyable handle; default-constructed: a no-op.
class Gauge {
 public:
  Gauge() = default;
  GaugeSeries With(const LabelValues& label_values) const;
  void Set(const LabelValues& label_values, double value) const {
    With(label_values).Set(value);
  }
  void Add(const LabelValues& label_values, double delta) const {
    With(label_values).Add(delta);
  }

 private:
  friend class Registry;
  explicit Gauge(detail::Family* family) : family_(family) {}
  detail::Family* family_ = nullptr;
};

/// A declared histogram family. Copyable handle; default-constructed: a no-op.
class Histogram {
 public:
  Histogram() = default;
  HistogramSeries With(const LabelValues& label_values) const;
  void Observe(const LabelValues& label_values, double value) const {
    With(label_values).Observe(value);
  }

 private:
  friend class Registry;
  explicit Histogram(detail::Family* family) : family_(family) {}
  detail::Family* family_ = nullptr;
};

/// Computes a gauge family's series at scrape time: (label values, value) pairs.
using GaugeCallback = std::function<std::vector<std::pair<LabelValues, double>>()>;

/// Exponentially growing bucket bounds: start, start*factor, ... (count bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Declarations. Each fails with Invalid when the metric name is not
  // `[a-zA-Z_:][a-zA-Z0-9_:]*`, a label name is not `[a-zA-Z_][a-zA-Z0-9_]*` or
  // starts with `__` or repeats, or a sample name the family would expose is
  // already exposed by an earlier family (a histogram `x` exposes `x_bucket`,
  // `x_sum` and `x_count`). A family without labels has its one series from the
  // start, so it is scraped as 0 before the first update.

  arrow::Result<Counter> AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names = {});
  arrow::Result<Gauge> AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names = {});
  /// `bucket_bounds`: the upper bounds, strictly increasing, no NaN; a trailing
  /// +Inf is implied (and accepted). `le` is reserved as a label name here.
  arrow::Result<Histogram> AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bucket_bounds);
  /// A gauge whose series come from `callback`, called on every Render() without
  /// any registry lock held (so it may itself use the registry). Returned pairs
  /// whose label value count does not match `label_names` are skipped, as are
  /// repeats of the same label values (the first wins).
  arrow::Status AddCallbackGauge(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 GaugeCallback callback);

  /// The text exposition format 0.0.4: per family, in declaration order, `# HELP`,
  /// `# TYPE` and the samples, series sorted by label values.
  std::string Render() const;

 private:
  arrow::Result<detail::Family*> Declare(std::string name, std::string help,
                                         MetricType type,
                                         std::vector<std::string> label_names,
                                         std::vector<double> bounds,
                                         GaugeCallback callback);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<detail::Family>> families_;
  std::set<std::string, std::less<>> sample_names_;
};

// Exposed for tests and for other exposition code.

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
bool IsValidMetricName(std::string_view name);
/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved by Prometheus).
bool IsValidLabelName(std::string_view name);
/// A sample value as Prometheus reads it: integers without exponent (`42`,
/// `-3`), other finite values in the shortest form that parses back to the same
/// double (`0.25`, `1e+20`), and `+Inf`, `-Inf`, `NaN`.
std::string FormatValue(double value);

}  // namespace floe::metrics
