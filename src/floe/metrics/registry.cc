#include "floe/metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace floe::metrics {

namespace detail {

struct Family {
  std::string name;
  std::string help;
  MetricType type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histogram upper bounds, without the implied +Inf
  GaugeCallback callback;      // set only for callback gauges

  std::mutex mu;
  // std::map keeps the series sorted by label values, the order Render() needs.
  // Cells are heap-allocated so the handles' pointers stay valid as it grows.
  std::map<LabelValues, std::unique_ptr<Cell>> series;

  // The series of `label_values`, created on first use; null (a no-op handle)
  // when the count of values is wrong.
  Cell* Find(const LabelValues& label_values) {
    if (label_values.size() != label_names.size()) {
#ifndef NDEBUG
      std::fprintf(stderr,
                   "floe metrics: %s takes %zu label values, %zu given (a programming "
                   "error; release builds drop such updates)\n",
                   name.c_str(), label_names.size(), label_values.size());
      std::abort();
#endif
      return nullptr;
    }
    std::lock_guard lock(mu);
    auto it = series.find(label_values);
    if (it == series.end()) {
      size_t buckets = type == MetricType::kHistogram ? bounds.size() + 1 : 0;
      it = series.emplace(label_values, std::make_unique<Cell>(buckets)).first;
    }
    return it->second.get();
  }
};

}  // namespace detail

namespace {

// The updates are independent statistics with no ordering relation to other
// memory, so relaxed atomics suffice; a scrape reads whatever is current.
constexpr auto kRelaxed = std::memory_order_relaxed;

bool IsNameStart(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (allow_colon && c == ':');
}

bool IsNameChar(char c, bool allow_colon) {
  return IsNameStart(c, allow_colon) || (c >= '0' && c <= '9');
}

bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty() || !IsNameStart(name[0], allow_colon)) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return IsNameChar(c, allow_colon); });
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text: backslash and line feed are the only characters escaped there.
void AppendEscapedHelp(std::string* out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}

// Label values additionally escape the double quote that delimits them.
void AppendEscapedLabelValue(std::string* out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '"') {
      *out += "\\\"";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}

// `{a="x",b="y"}`, with an optional trailing `le` for histogram buckets; nothing
// at all when there are no labels.
void AppendLabels(std::string* out, const std::vector<std::string>& names,
                  const LabelValues& values, const std::string* le = nullptr) {
  if (names.empty() && le == nullptr) return;
  *out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) *out += ',';
    *out += names[i];
    *out += "=\"";
    AppendEscapedLabelValue(out, values[i]);
    *out += '"';
  }
  if (le != nullptr) {
    if (!names.empty()) *out += ',';
    *out += "le=\"";
    *out += *le;
    *out += '"';
  }
  *out += '}';
}

void AppendSample(std::string* out, const std::string& name, std::string_view suffix,
                  const std::vector<std::string>& label_names, const LabelValues& values,
                  const std::string* le, std::string_view value) {
  *out += name;
  *out += suffix;
  AppendLabels(out, label_names, values, le);
  *out += ' ';
  *out += value;
  *out += '\n';
}

void RenderHistogramSeries(std::string* out, const detail::Family& f,
                           const LabelValues& values, const detail::Cell& cell,
                           const std::vector<std::string>& le_texts) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < cell.buckets.size(); ++i) {
    cumulative += cell.buckets[i].load(kRelaxed);
    AppendSample(out, f.name, "_bucket", f.label_names, values, &le_texts[i],
                 FormatValue(static_cast<double>(cumulative)));
  }
  AppendSample(out, f.name, "_sum", f.label_names, values, nullptr,
               FormatValue(cell.value.load(kRelaxed)));
  AppendSample(out, f.name, "_count", f.label_names, values, nullptr,
               FormatValue(static_cast<double>(cumulative)));
}

void RenderFamily(std::string* out, detail::Family& f) {
  *out += "# HELP ";
  *out += f.name;
  *out += ' ';
  AppendEscapedHelp(out, f.help);
  *out += "\n# TYPE ";
  *out += f.name;
  *out += ' ';
  *out += TypeName(f.type);
  *out += '\n';

  if (f.callback) {
    std::vector<std::pair<LabelValues, double>> samples = f.callback();
    std::erase_if(samples,
                  [&](const auto& s) { return s.first.size() != f.label_names.size(); });
    // Stable, so that of repeated label values the first returned is kept.
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const LabelValues* previous = nullptr;
    for (const auto& [values, value] : samples) {
      if (previous != nullptr && *previous == values) continue;
      AppendSample(out, f.name, "", f.label_names, values, nullptr, FormatValue(value));
      previous = &values;
    }
    return;
  }

  std::vector<std::string> le_texts;
  if (f.type == MetricType::kHistogram) {
    for (double bound : f.bounds) le_texts.push_back(FormatValue(bound));
    le_texts.push_back("+Inf");
  }
  std::lock_guard lock(f.mu);
  for (const auto& [values, cell] : f.series) {
    if (f.type == MetricType::kHistogram) {
      RenderHistogramSeries(out, f, values, *cell, le_texts);
    } else {
      AppendSample(out, f.name, "", f.label_names, values, nullptr,
                   FormatValue(cell->value.load(kRelaxed)));
    }
  }
}

}  // namespace

bool IsValidMetricName(std::string_view name) { return IsValidName(name, true); }

bool IsValidLabelName(std::string_view name) {
  return IsValidName(name, false) && !name.starts_with("__");
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::to_chars_result r;
  // Below 2^53 every integer is exact and fixed notation is what people expect to
  // read (`1000000`, not the shorter `1e+06`); beyond, the shortest round-trip form.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    if (value == 0) return "0";  // also -0
    r = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), value);
  }
  return std::string(buf, r.ptr);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

// --- series handles ---------------------------------------------------------------

void CounterSeries::Inc(double delta) const {
  // `!(delta >= 0)` also catches NaN, which would poison the counter for good.
  if (cell_ == nullptr || !(delta >= 0)) return;
  cell_->value.fetch_add(delta, kRelaxed);
}

double CounterSeries::Value() const {
  return cell_ == nullptr ? 0 : cell_->value.load(kRelaxed);
}

void GaugeSeries::Set(double value) const {
  if (cell_ != nullptr) cell_->value.store(value, kRelaxed);
}

void GaugeSeries::Add(double delta) const {
  if (cell_ != nullptr) cell_->value.fetch_add(delta, kRelaxed);
}

double GaugeSeries::Value() const {
  return cell_ == nullptr ? 0 : cell_->value.load(kRelaxed);
}

void HistogramSeries::Observe(double value) const {
  if (cell_ == nullptr) return;
  // The bucket is the first bound >= value (`le` is inclusive); NaN compares false
  // with every bound, so it is sent to the +Inf bucket explicitly.
  size_t index = std::isnan(value)
                     ? bounds_->size()
                     : static_cast<size_t>(
                           std::lower_bound(bounds_->begin(), bounds_->end(), value) -
                           bounds_->begin());
  cell_->buckets[index].fetch_add(1, kRelaxed);
  cell_->value.fetch_add(value, kRelaxed);
}

uint64_t HistogramSeries::Count() const {
  if (cell_ == nullptr) return 0;
  uint64_t total = 0;
  for (const auto& b : cell_->buckets) total += b.load(kRelaxed);
  return total;
}

double HistogramSeries::Sum() const {
  return cell_ == nullptr ? 0 : cell_->value.load(kRelaxed);
}

CounterSeries Counter::With(const LabelValues& label_values) const {
  if (family_ == nullptr) return {};
  return CounterSeries(family_->Find(label_values));
}

GaugeSeries Gauge::With(const LabelValues& label_values) const {
  if (family_ == nullptr) return {};
  return GaugeSeries(family_->Find(label_values));
}

HistogramSeries Histogram::With(const LabelValues& label_values) const {
  if (family_ == nullptr) return {};
  detail::Cell* cell = family_->Find(label_values);
  if (cell == nullptr) return {};
  return HistogramSeries(cell, &family_->bounds);
}

// --- registry ---------------------------------------------------------------------

Registry::Registry() = default;
Registry::~Registry() = default;

arrow::Result<detail::Family*> Registry::Declare(std::string name, std::string help,
                                                 MetricType type,
                                                 std::vector<std::string> label_names,
                                                 std::vector<double> bounds,
                                                 GaugeCallback callback) {
  if (!IsValidMetricName(name)) {
    return arrow::Status::Invalid(
        "metric name '", name, "' is not valid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      return arrow::Status::Invalid(
          "metric ", name, ": label name '", label,
          "' is not valid: it must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __");
    }
    if (std::find(label_names.begin(), label_names.begin() + i, label) !=
        label_names.begin() + i) {
      return arrow::Status::Invalid("metric ", name, ": label name '", label,
                                    "' is declared twice");
    }
    if (type == MetricType::kHistogram && label == "le") {
      return arrow::Status::Invalid("histogram ", name,
                                    ": 'le' is reserved for the bucket bounds");
    }
  }
  if (type == MetricType::kHistogram) {
    if (!bounds.empty() && bounds.back() == INFINITY) bounds.pop_back();
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (std::isnan(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
        return arrow::Status::Invalid(
            "histogram ", name, ": bucket bounds must be strictly increasing numbers");
      }
    }
  }

  std::vector<std::string> exposed = {name};
  if (type == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      exposed.push_back(name + suffix);
  }

  auto family = std::make_unique<detail::Family>();
  family->name = std::move(name);
  family->help = std::move(help);
  family->type = type;
  family->label_names = std::move(label_names);
  family->bounds = std::move(bounds);
  family->callback = std::move(callback);
  if (family->label_names.empty() && !family->callback) {
    family->Find({});  // a label-less metric is scraped as 0 from the start
  }

  std::lock_guard lock(mu_);
  for (const std::string& n : exposed) {
    if (sample_names_.contains(n)) {
      return arrow::Status::Invalid("metric ", family->name, ": the name ", n,
                                    " is already used by another metric");
    }
  }
  sample_names_.insert(exposed.begin(), exposed.end());
  families_.push_back(std::move(family));
  return families_.back().get();
}

arrow::Result<Counter> Registry::AddCounter(std::string name, std::string help,
                                            std::vector<std::string> label_names) {
  ARROW_ASSIGN_OR_RAISE(detail::Family * f,
                        Declare(std::move(name), std::move(help), MetricType::kCounter,
                                std::move(label_names), {}, nullptr));
  return Counter(f);
}

arrow::Result<Gauge> Registry::AddGauge(std::string name, std::string help,
                                        std::vector<std::string> label_names) {
  ARROW_ASSIGN_OR_RAISE(detail::Family * f,
                        Declare(std::move(name), std::move(help), MetricType::kGauge,
                                std::move(label_names), {}, nullptr));
  return Gauge(f);
}

arrow::Result<Histogram> Registry::AddHistogram(std::string name, std::string help,
                                                std::vector<std::string> label_names,
                                                std::vector<double> bucket_bounds) {
  ARROW_ASSIGN_OR_RAISE(
      detail::Family * f,
      Declare(std::move(name), std::move(help), MetricType::kHistogram,
              std::move(label_names), std::move(bucket_bounds), nullptr));
  return Histogram(f);
}

arrow::Status Registry::AddCallbackGauge(std::string name, std::string help,
                                         std::vector<std::string> label_names,
                                         GaugeCallback callback) {
  if (!callback) {
    return arrow::Status::Invalid("callback gauge ", name, " has no callback");
  }
  return Declare(std::move(name), std::move(help), MetricType::kGauge,
                 std::move(label_names), {}, std::move(callback))
      .status();
}

std::string Registry::Render() const {
  // Families are never removed and never move (unique_ptr), so their pointers can
  // be used after the lock is released; callbacks then run without it.
  std::vector<detail::Family*> families;
  {
    std::lock_guard lock(mu_);
    families.reserve(families_.size());
    for (const auto& f : families_) families.push_back(f.get());
  }
  std::string out;
  for (detail::Family* f : families) RenderFamily(&out, *f);
  return out;
}

}  // namespace floe::metrics
