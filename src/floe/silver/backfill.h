// `floe silver backfill`: seeds a table's Silver replica from a Parquet export of the
// source table taken at a known LSN (e.g. a nightly job's `SELECT * FROM t` with
// pg_current_wal_lsn() in the same REPEATABLE READ transaction), instead of folding
// Bronze's whole history. The new Silver table has the layout of a normal backfill
// (merge.h, CreateSilverTable) and watermark = the export's LSN, so the next
// `floe silver` pass merges the Bronze changes committed after it (docs/silver.md,
// "Backfill from an export").
//
// The guard: Bronze must hold every change committed after the export. Bronze's
// history of a table starts at its smallest cdc_commit_lsn (the initial copy's `r`
// rows sit at the copy's consistent point, streamed changes after it); an export
// older than that would silently lose the changes between the two, so it is refused
// (BronzeStartLsn).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/table.h>

#include "floe/common/progress.h"
#include "floe/config/pipeline_config.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/sorted_runs.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/lake/keys.h"

namespace floe::silver {


/// Where Bronze's history of a table starts: the smallest cdc_commit_lsn of its
/// current snapshot's rows (from the data files' lower bounds; files without one are
/// read). A Bronze table without rows starts at its floe.commit-lsn. Error when
/// Bronze has no committed snapshot.
arrow::Result<uint64_t> BronzeStartLsn(const iceberg::TableMetadata& bronze,
                                       iceberg::FileIO& io);

/// An export read a batch at a time.
/// Rows of an export read at once, at most.
inline constexpr int64_t kExportBatchRows = 8 * 1024;

struct ExportReader {
  std::shared_ptr<arrow::Schema> schema;
  /// Rows in all (from the files' footers).
  int64_t rows = 0;
  /// The next batch; null at the end.
  std::function<arrow::Result<std::shared_ptr<arrow::RecordBatch>>()> next;
};

/// Opens a Parquet export: one file, or every `*.parquet` file of a directory (in
/// name order), which must have the same columns (a column holding only nulls, of
/// Arrow's null type, takes the other files' type); rows read are counted into `progress`
/// (may be null), whose total is the export's row count from the files' footers.
arrow::Result<ExportReader> OpenParquetExport(const std::string& path,
                                              ProgressReporter* progress = nullptr);

struct BackfillTableOptions {
  /// The merge key declared in the pipeline file (silver.keys), else Bronze's.
  std::optional<std::vector<std::string>> key;
  /// Drop an existing Silver table first (its files are left to orphan cleanup).
  bool replace = false;
  int64_t target_file_bytes = int64_t{128} << 20;
  /// The table's write mode (silver.write_mode / write_modes), for its write.*.mode
  /// properties.
  bool copy_on_write = false;
  /// Recorded in the snapshot summary (lake::kSeededFromSummaryKey).
  std::string origin;
  /// The memory the backfill aims to stay under (its MergeShare of
  /// silver.memory_limit): an export larger than fits is spilled to `spill_dir`
  /// partitioned by the first key column's hash, then checked and written a
  /// partition at a time.
  int64_t memory_limit = int64_t{512} << 20;
  std::filesystem::path spill_dir;
  /// A bucket's sorted runs (spilled partitions) merged at once, at most: more are
  /// first merged that many at a time into longer runs (iceberg::NarrowRuns).
  size_t max_fan_in = iceberg::kMaxRunFanIn;
};

struct BackfillStats {
  int64_t rows = 0;
  int32_t data_files = 0;
  int32_t buckets = 0;
  uint64_t lsn = 0;
  uint64_t bronze_start = 0;
  bool replaced = false;
};

/// Seeds Silver table `silver_id` of Bronze table `bronze_id` with `rows` (the source
/// table at `lsn`): checks the guard and the columns (matched by name to Bronze's row
/// columns; a missing or extra column is an error naming it; values are cast to
/// Bronze's types), checks the key is unique and not null, creates the table and
/// commits the rows in one append with watermark `lsn`. Nothing is created or
/// dropped (with `replace`) before every check passed.
arrow::Result<BackfillStats> BackfillTable(iceberg::Catalog* catalog,
                                           std::shared_ptr<iceberg::FileIO> io,
                                           const iceberg::TableIdentifier& bronze_id,
                                           const iceberg::TableIdentifier& silver_id,
                                           const std::string& warehouse,
                                           ExportReader& rows, uint64_t lsn,
                                           const BackfillTableOptions& options);
/// The same, from rows in memory.
arrow::Result<BackfillStats> BackfillTable(iceberg::Catalog* catalog,
                                           std::shared_ptr<iceberg::FileIO> io,
                                           const iceberg::TableIdentifier& bronze_id,
                                           const iceberg::TableIdentifier& silver_id,
                                           const std::string& warehouse,
                                           const arrow::Table& rows, uint64_t lsn,
                                           const BackfillTableOptions& options);

struct BackfillOptions {
  config::QualifiedName table;
  std::string parquet_path;
  uint64_t lsn = 0;
  bool replace = false;
  /// Progress (common/progress.h): a bar here when it is a terminal, else log lines.
  FILE* progress = stderr;
};

/// BackfillTable for source table `options.table` of the pipeline, from the Parquet
/// export at `options.parquet_path`.
arrow::Result<BackfillStats> BackfillFromExport(const config::PipelineConfig& config,
                                                const BackfillOptions& options);

}  // namespace floe::silver
