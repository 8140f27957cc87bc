// Serves a fixed set of metrics of every type, with awkward label values and help
// texts, so tests can check floe's /metrics with an independent parser
// (prometheus_client). Prints the bound port on the first stdout line, then reads
// commands from stdin until it closes:
//   ready               /readyz answers 200
//   not-ready REASON    /readyz answers 503 with REASON
// and answers each with a line `done`.
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "floe/metrics/http_server.h"
#include "floe/metrics/registry.h"

namespace {

using floe::metrics::LabelValues;

arrow::Status Declare(floe::metrics::Registry& r) {
  const double inf = std::numeric_limits<double>::infinity();

  ARROW_ASSIGN_OR_RAISE(
      auto rows, r.AddCounter("floe_tool_rows_total", "Rows written, per table and op.",
                              {"table", "op"}));
  rows.Inc({"public.orders", "c"}, 42);
  rows.With({"public.orders", "u"}).Inc();
  rows.Inc({"back\\slash", "d"}, 2);
  rows.Inc({"say \"hi\"", "c"}, 3);
  rows.Inc({"two\nlines", "c"}, 4);
  rows.Inc({"ünïcødé 表", "c"}, 5);
  rows.Inc({"", "t"}, 0.5);

  ARROW_ASSIGN_OR_RAISE(auto restarts, r.AddCounter("floe_tool_restarts_total",
                                                    "Help with a \\ backslash\nand a "
                                                    "second line."));
  (void)restarts;  // label-less: exposed as 0 with no update

  ARROW_ASSIGN_OR_RAISE(
      auto level, r.AddGauge("floe_tool_level", "Gauge values of every kind.", {"kind"}));
  level.Set({"negative"}, -7);
  level.Set({"fraction"}, 0.25);
  level.Set({"huge"}, 1e20);
  level.Set({"million"}, 1000000);
  level.Set({"pos_inf"}, inf);
  level.Set({"neg_inf"}, -inf);
  level.With({"added"}).Set(1.5);
  level.With({"added"}).Add(2);

  ARROW_ASSIGN_OR_RAISE(auto latency,
                        r.AddHistogram("floe_tool_commit_seconds", "Commit latency.",
                                       {"table"}, {0.005, 0.1, 1, 10}));
  for (double v : {0.001, 0.05, 0.05, 0.5, 2.0, 100.0}) {
    latency.Observe({"public.orders"}, v);
  }
  latency.Observe({"q\"uote"}, 1);

  ARROW_ASSIGN_OR_RAISE(auto sizes,
                        r.AddHistogram("floe_tool_file_bytes", "File sizes.", {},
                                       floe::metrics::ExponentialBuckets(1024, 4, 3)));
  (void)sizes;  // no observations: all buckets 0

  return r.AddCallbackGauge("floe_tool_lag_seconds", "Lag computed at scrape time.",
                            {"table"}, [] {
                              return std::vector<std::pair<LabelValues, double>>{
                                  {{"public.orders"}, 1.5}, {{"public.accounts"}, 0}};
                            });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Serves sample metrics on /metrics for the format tests"};
  std::string listen = "127.0.0.1:0";
  app.add_option("--listen", listen, "host:port to serve on");
  CLI11_PARSE(app, argc, argv);

  floe::metrics::Registry registry;
  if (arrow::Status st = Declare(registry); !st.ok()) {
    std::cerr << "metrics_tool: " << st.ToString() << "\n";
    return 1;
  }
  std::mutex mu;
  std::optional<std::string> not_ready;
  auto server = floe::metrics::MetricsServer::Start(listen, registry, [&] {
    std::lock_guard lock(mu);
    return not_ready;
  });
  if (!server.ok()) {
    std::cerr << "metrics_tool: " << server.status().ToString() << "\n";
    return 1;
  }
  std::cout << (*server)->port() << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    {
      std::lock_guard lock(mu);
      if (line == "ready") {
        not_ready.reset();
      } else if (line.starts_with("not-ready ")) {
        not_ready = line.substr(10);
      } else {
        std::cerr << "metrics_tool: unknown command '" << line << "'\n";
        return 2;
      }
    }
    std::cout << "done" << std::endl;
  }
  (*server)->Stop();
  return 0;
}
