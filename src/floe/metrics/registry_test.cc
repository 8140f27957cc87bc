#include "floe/metrics/registry.h"

#include <cmath>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

namespace floe::metrics {
namespace {

TEST(FormatValueTest, IntegersWithoutExponentAndSpecials) {
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(1000000), "1000000");
  EXPECT_EQ(FormatValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  // Whatever the form, it parses back to the same double.
  for (double v : {1e-7, 123.456, 9007199254740993.0, 1.7976931348623157e308}) {
    EXPECT_EQ(std::stod(FormatValue(v)), v) << FormatValue(v);
  }
}

TEST(RegistryTest, NameValidation) {
  EXPECT_TRUE(IsValidMetricName("floe_rows_total"));
  EXPECT_TRUE(IsValidMetricName("job:rate:5m"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9lives"));
  EXPECT_FALSE(IsValidMetricName("rows-total"));
  EXPECT_FALSE(IsValidMetricName("rows total"));
  EXPECT_FALSE(IsValidMetricName("réseau"));
  EXPECT_TRUE(IsValidLabelName("table"));
  EXPECT_TRUE(IsValidLabelName("_op"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName(""));

  Registry r;
  EXPECT_TRUE(r.AddCounter("bad-name", "h").status().IsInvalid());
  EXPECT_TRUE(r.AddGauge("g", "h", {"ok", "bad:label"}).status().IsInvalid());
  EXPECT_TRUE(r.AddGauge("g", "h", {"__reserved"}).status().IsInvalid());
  EXPECT_TRUE(r.AddGauge("g", "h", {"a", "a"}).status().IsInvalid());
  EXPECT_TRUE(r.AddHistogram("h", "h", {"le"}, {1}).status().IsInvalid());
  EXPECT_TRUE(r.AddHistogram("h", "h", {}, {2, 1}).status().IsInvalid());
  EXPECT_TRUE(r.AddHistogram("h", "h", {}, {1, 1}).status().IsInvalid());
  EXPECT_TRUE(r.AddHistogram("h", "h", {}, {std::nan("")}).status().IsInvalid());
  EXPECT_TRUE(r.AddCallbackGauge("cb", "h", {}, nullptr).IsInvalid());
  // None of the failures registered anything.
  EXPECT_EQ(r.Render(), "");
}

TEST(RegistryTest, DuplicateAndCollidingNamesRejected) {
  Registry r;
  ASSERT_TRUE(r.AddCounter("a_total", "h").ok());
  EXPECT_TRUE(r.AddGauge("a_total", "h").status().IsInvalid());
  ASSERT_TRUE(r.AddHistogram("lat", "h", {}, {1}).ok());
  EXPECT_TRUE(r.AddGauge("lat_count", "h").status().IsInvalid());
  EXPECT_TRUE(r.AddCounter("lat", "h").status().IsInvalid());
  ASSERT_TRUE(r.AddGauge("x_sum", "h").ok());
  EXPECT_TRUE(r.AddHistogram("x", "h", {}, {1}).status().IsInvalid());
}

TEST(RegistryTest, RendersCounterAndGaugeWithLabels) {
  Registry r;
  auto counter = r.AddCounter("floe_rows_total", "Rows written.", {"table", "op"});
  ASSERT_TRUE(counter.ok());
  auto gauge = r.AddGauge("floe_queue_depth", "Queued changes.");
  ASSERT_TRUE(gauge.ok());
  counter->Inc({"public.orders", "u"});
  counter->With({"public.orders", "c"}).Inc(41);
  counter->Inc({"public.orders", "c"});
  counter->Inc({"public.accounts", "d"}, 0.5);
  gauge->With({}).Set(7);
  gauge->With({}).Add(-2.5);

  EXPECT_EQ(r.Render(),
            "# HELP floe_rows_total Rows written.\n"
            "# TYPE floe_rows_total counter\n"
            "floe_rows_total{table=\"public.accounts\",op=\"d\"} 0.5\n"
            "floe_rows_total{table=\"public.orders\",op=\"c\"} 42\n"
            "floe_rows_total{table=\"public.orders\",op=\"u\"} 1\n"
            "# HELP floe_queue_depth Queued changes.\n"
            "# TYPE floe_queue_depth gauge\n"
            "floe_queue_depth 4.5\n");
}

TEST(RegistryTest, LabelLessMetricsStartAtZeroLabelledOnesEmpty) {
  Registry r;
  ASSERT_TRUE(r.AddCounter("c_total", "c").ok());
  ASSERT_TRUE(r.AddGauge("g", "g", {"t"}).ok());
  EXPECT_EQ(r.Render(),
            "# HELP c_total c\n# TYPE c_total counter\nc_total 0\n"
            "# HELP g g\n# TYPE g gauge\n");
}

TEST(RegistryTest, CounterNeverDecreases) {
  Registry r;
  auto c = r.AddCounter("c_total", "c");
  ASSERT_TRUE(c.ok());
  CounterSeries s = c->With({});
  s.Inc(3);
  s.Inc(-1);
  s.Inc(std::nan(""));
  EXPECT_EQ(s.Value(), 3);
}

TEST(RegistryTest, EscapesHelpAndLabelValues) {
  Registry r;
  auto c = r.AddCounter("odd_total", "Back\\slash, \"quotes\" and\nnewline.", {"v"});
  ASSERT_TRUE(c.ok());
  c->Inc({"a\\b \"q\"\nline"});
  EXPECT_EQ(r.Render(),
            "# HELP odd_total Back\\\\slash, \"quotes\" and\\nnewline.\n"
            "# TYPE odd_total counter\n"
            "odd_total{v=\"a\\\\b \\\"q\\\"\\nline\"} 1\n");
}

TEST(RegistryTest, HistogramBucketsAreCumulative) {
  Registry r;
  auto h = r.AddHistogram("lat_seconds", "Latency.", {"stage"}, {0.1, 0.5, 1});
  ASSERT_TRUE(h.ok());
  HistogramSeries s = h->With({"commit"});
  for (double v : {0.05, 0.1, 0.3, 0.7, 0.9, 5.0}) s.Observe(v);
  h->Observe({"b\"x"}, 2);
  EXPECT_EQ(s.Count(), 6u);
  EXPECT_DOUBLE_EQ(s.Sum(), 7.05);
  EXPECT_EQ(r.Render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{stage=\"b\\\"x\",le=\"0.1\"} 0\n"
            "lat_seconds_bucket{stage=\"b\\\"x\",le=\"0.5\"} 0\n"
            "lat_seconds_bucket{stage=\"b\\\"x\",le=\"1\"} 0\n"
            "lat_seconds_bucket{stage=\"b\\\"x\",le=\"+Inf\"} 1\n"
            "lat_seconds_sum{stage=\"b\\\"x\"} 2\n"
            "lat_seconds_count{stage=\"b\\\"x\"} 1\n"
            "lat_seconds_bucket{stage=\"commit\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{stage=\"commit\",le=\"0.5\"} 3\n"
            "lat_seconds_bucket{stage=\"commit\",le=\"1\"} 5\n"
            "lat_seconds_bucket{stage=\"commit\",le=\"+Inf\"} 6\n"
            "lat_seconds_sum{stage=\"commit\"} " +
                FormatValue(s.Sum()) +
                "\n"
                "lat_seconds_count{stage=\"commit\"} 6\n");
}

TEST(RegistryTest, HistogramWithoutLabelsAndExplicitInf) {
  Registry r;
  auto h = r.AddHistogram("size_bytes", "Sizes.", {},
                          {1024, std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(h.ok());
  h->With({}).Observe(std::nan(""));  // counts in +Inf only
  h->With({}).Observe(1024);          // le is inclusive
  std::string text = r.Render();
  EXPECT_NE(text.find("size_bytes_bucket{le=\"1024\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("size_bytes_bucket{le=\"+Inf\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("size_bytes_sum NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("size_bytes_count 2\n"), std::string::npos) << text;
}

TEST(RegistryTest, ExponentialBuckets) {
  EXPECT_EQ(ExponentialBuckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
}

TEST(RegistryTest, ConcurrentIncrementsSumExactly) {
  Registry r;
  auto c = r.AddCounter("events_total", "Events.", {"table"});
  auto g = r.AddGauge("level", "Level.");
  auto h = r.AddHistogram("obs", "Obs.", {}, {0.5});
  ASSERT_TRUE(c.ok() && g.ok() && h.ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads resolve their series once, half per update, so both the
      // handle path and the lookup path race with each other and with Render().
      CounterSeries shared = c->With({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        if (t % 2 == 0) {
          shared.Inc();
        } else {
          c->Inc({"shared"});
        }
        g->With({}).Add(1);
        h->With({}).Observe(i % 2 == 0 ? 0.25 : 1.0);
        if (i % 20000 == 0) (void)r.Render();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->With({"shared"}).Value(), kThreads * kPerThread);
  EXPECT_EQ(g->With({}).Value(), kThreads * kPerThread);
  EXPECT_EQ(h->With({}).Count(), static_cast<uint64_t>(kThreads * kPerThread));
  std::string text = r.Render();
  EXPECT_NE(text.find("events_total{table=\"shared\"} 400000\n"), std::string::npos);
  EXPECT_NE(text.find("obs_bucket{le=\"0.5\"} 200000\n"), std::string::npos);
  EXPECT_NE(text.find("obs_sum 250000\n"), std::string::npos);
}

TEST(RegistryTest, CallbackGauge) {
  Registry r;
  int calls = 0;
  ASSERT_TRUE(r.AddCallbackGauge("lag_seconds", "Lag.", {"table"}, [&] {
                 ++calls;
                 return std::vector<std::pair<LabelValues, double>>{
                     {{"z"}, 3},
                     {{"a"}, 1.5},
                     {{"a"}, 99},      // repeat: dropped
                     {{"x", "y"}, 7},  // wrong arity: dropped
                 };
               }).ok());
  // A callback may use the registry itself (it runs without the registry lock):
  // here it reads a counter's series, which resolves it through the family.
  auto copies = r.AddCounter("copies_total", "Copies.");
  ASSERT_TRUE(copies.ok());
  copies->Inc({}, 5);
  ASSERT_TRUE(r.AddCallbackGauge("copies_seen", "Derived.", {}, [&] {
                 return std::vector<std::pair<LabelValues, double>>{
                     {{}, copies->With({}).Value()}};
               }).ok());
  EXPECT_EQ(r.Render(),
            "# HELP lag_seconds Lag.\n"
            "# TYPE lag_seconds gauge\n"
            "lag_seconds{table=\"a\"} 1.5\n"
            "lag_seconds{table=\"z\"} 3\n"
            "# HELP copies_total Copies.\n"
            "# TYPE copies_total counter\n"
            "copies_total 5\n"
            "# HELP copies_seen Derived.\n"
            "# TYPE copies_seen gauge\n"
            "copies_seen 5\n");
  EXPECT_EQ(calls, 1);
}

TEST(RegistryTest, DefaultHandlesAreNoOps) {
  Counter c;
  Gauge g;
  Histogram h;
  c.Inc({"anything"});
  g.Set({}, 1);
  h.Observe({}, 1);
  EXPECT_EQ(c.With({}).Value(), 0);
  EXPECT_EQ(h.With({}).Count(), 0u);
}

TEST(RegistryDeathTest, WrongLabelCount) {
  Registry r;
  auto c = r.AddCounter("c_total", "c", {"table", "op"});
  ASSERT_TRUE(c.ok());
  // Debug builds abort; release builds hand out a no-op series.
  EXPECT_DEBUG_DEATH(c->Inc({"only-one"}), "takes 2 label values, 1 given");
#ifdef NDEBUG
  EXPECT_EQ(c->With({"only-one"}).Value(), 0);
  EXPECT_EQ(r.Render(), "# HELP c_total c\n# TYPE c_total counter\n");
#endif
}

}  // namespace
}  // namespace floe::metrics
