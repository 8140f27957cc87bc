// `floe silver`: merges every Bronze changelog of a service into its Silver replica
// (merge.h), a few tables at a time, once or on a schedule (docs/silver.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/config/pipeline_config.h"
#include "floe/iceberg/catalog.h"

namespace floe::silver {

struct SilverOptions {
  /// Merge again this long after each pass started, until `stop`; unset: one pass.
  std::optional<std::chrono::milliseconds> every;
  /// Set by a signal handler: finish the tables being merged, then return.
  const std::atomic<bool>* stop = nullptr;
  /// With `every`: serve /metrics, /healthz and /readyz on this `host:port` (port 0:
  /// any free port, logged); empty: do not serve. A one-shot pass never serves.
  std::string metrics_listen;
  /// Whether `metrics_listen` was asked for explicitly (--metrics-listen): then a
  /// bind failure is an error; from the file's `metrics.listen` it is logged and the
  /// scheduler merges without serving (floe run on the same host may hold it).
  bool metrics_listen_explicit = false;
  /// Each pass's progress (common/progress.h): a bar redrawn here when it is a
  /// terminal, else a log line every 10 s and one at the end of the pass.
  FILE* progress = stderr;
};

/// One pass (or, with `every`, passes until stopped) over every Bronze table of the
/// service: `<bronze_namespace>.<service>.<schema>.<table>` (the audit and quarantine
/// tables are skipped) and those named in naming.tables, merged
/// `config.silver.concurrency` at a time. A table that fails is logged and the others
/// carry on; the status is an error naming the failed tables when any failed in the
/// last pass. Tables without a key are skipped with a warning saying how to declare
/// one. With `every` and `metrics_listen`, the merges are also exported as the
/// floe_silver_* metrics (docs/operations.md).
arrow::Status RunSilver(const config::PipelineConfig& config,
                        const SilverOptions& options);

}  // namespace floe::silver
