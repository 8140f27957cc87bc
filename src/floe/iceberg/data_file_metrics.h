// Turns what ParquetFileWriter measured about a data file into the manifest's
// DataFile: column sizes, value and null counts by field id, and lower / upper bounds
// in Iceberg's single-value form, truncated the way Iceberg's default metrics mode
// `truncate(16)` does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/parquet_writer.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

struct MetricsOptions {
  /// Bounds of string columns keep this many Unicode code points, binary bounds this
  /// many bytes (`write.metadata.metrics.default=truncate(16)`).
  int32_t truncate_length = 16;
};

/// The manifest DataFile of a closed Parquet data file at `file_path`, written with
/// `schema` (the Iceberg schema whose field ids the file carries).
///
/// Counts and sizes cover every leaf column. Bounds are kept for primitive columns at
/// the top level or inside structs, not inside lists or maps (where Parquet's
/// statistics mix the values of many rows' collections). Float / double bounds are
/// dropped when either is NaN, and nan_value_counts is left empty: Parquet statistics
/// do not count NaNs (readers treat a missing NaN count as unknown).
arrow::Result<DataFile> DataFileFromMetrics(
    const Schema& schema, const DataFileMetrics& metrics, std::string file_path,
    std::vector<std::optional<Literal>> partition = {},
    const MetricsOptions& options = {});

/// The first `length` code points of UTF-8 `value` (all of it when shorter): a valid
/// lower bound for every string that starts with `value`.
std::string TruncateStringLowerBound(std::string_view value, int32_t length);
/// The first `length` code points of `value` with the last one that can be
/// incremented, incremented (dropping what follows it), so that it is greater than
/// every string starting with the truncated prefix; `value` itself when not longer
/// than `length`; nullopt when no code point can be incremented.
std::optional<std::string> TruncateStringUpperBound(std::string_view value,
                                                    int32_t length);
/// The same by bytes for binary values.
std::string TruncateBinaryLowerBound(std::string_view value, int32_t length);
std::optional<std::string> TruncateBinaryUpperBound(std::string_view value,
                                                    int32_t length);

}  // namespace floe::iceberg
