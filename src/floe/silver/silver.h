// `floe silver`: merges every Bronze changelog of a service into its Silver replica
// (merge.h), a few tables at a time, once or on a schedule (docs/silver.md).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

#include <arrow/status.h>

#include "floe/config/pipeline_config.h"

namespace floe::silver {

struct SilverOptions {
  /// Merge again this long after each pass started, until `stop`; unset: one pass.
  std::optional<std::chrono::milliseconds> every;
  /// Set by a signal handler: finish the tables being merged, then return.
  const std::atomic<bool>* stop = nullptr;
};

/// One pass (or, with `every`, passes until stopped) over every Bronze table of the
/// service: `<bronze_namespace>.<service>.<schema>.<table>` (the audit and quarantine
/// tables are skipped) and those named in naming.tables, merged
/// `config.silver.concurrency` at a time. A table that fails is logged and the others
/// carry on; the status is an error naming the failed tables when any failed in the
/// last pass. Tables without a key are skipped with a warning saying how to declare
/// one.
arrow::Status RunSilver(const config::PipelineConfig& config,
                        const SilverOptions& options);

}  // namespace floe::silver
