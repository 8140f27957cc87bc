// Reading Iceberg tables: scan planning (manifest list -> manifests pruned by their
// partition summaries -> data files pruned by partition tuple and column metrics,
// each paired with the delete files that apply to it by the spec's sequence-number
// rules) and reading the planned files into Arrow record batches in the requested
// projection of the snapshot's schema (columns matched by Parquet field id, added
// columns as nulls, promotions applied), with position and equality deletes and the
// row filter applied. Free functions over TableMetadata + FileIO, or a Table.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/table.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/position_delete.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::iceberg {

struct ScanOptions {
  /// The snapshot to read; the table's current snapshot when unset. A time-travel
  /// scan reads in the schema the snapshot was written with.
  std::optional<int64_t> snapshot_id;
  /// Row filter (unbound, columns by name); null reads every row. Rows are kept
  /// where the filter is true: a comparison with null is not (SQL semantics).
  ExpressionPtr filter;
  /// Top-level columns to return, by name, in this order; unset returns all.
  std::optional<std::vector<std::string>> columns;
  /// Manifests read at once while planning, and data files while reading
  /// (ScanToArrow).
  int parallelism = 8;
};

/// Every (data file path, position) a position delete file holds, positions by
/// path in the file's order (columns matched by field id, else by name).
arrow::Result<std::map<std::string, std::vector<int64_t>>> ReadPositionDeletes(
    FileIO& io, const DataFile& deletes);

/// The Iceberg field id a Parquet column carries (`PARQUET:field_id` metadata, as
/// Arrow reads it), or nullopt when it has none or it is not an int32.
std::optional<int32_t> FieldIdOf(const arrow::Field& field);

/// One data file to read and the delete files that apply to it.
struct FileScanTask {
  DataFile data_file;
  int32_t spec_id = 0;
  /// The data file's data sequence number.
  int64_t data_sequence_number = 0;
  /// Position and equality delete files that apply (see AssignDeleteFiles).
  std::vector<DataFile> delete_files;
  /// Positions of the data file deleted besides those of `delete_files`: deletes not
  /// written to a file yet (a merge's own, in memory).
  std::vector<int64_t> deleted_positions;
};

/// A live delete file of the snapshot, as AssignDeleteFiles needs it.
struct DeleteFileEntry {
  DataFile file;
  int32_t spec_id = 0;
  int64_t data_sequence_number = 0;
};

struct ScanPlanStats {
  int32_t manifests = 0;
  int32_t manifests_skipped = 0;
  int64_t data_files = 0;
  int64_t files_skipped_by_partition = 0;
  int64_t files_skipped_by_metrics = 0;
  int64_t delete_files = 0;
};

struct ScanPlan {
  /// None for a table without snapshots (no tasks).
  std::optional<int64_t> snapshot_id;
  /// The schema rows are read in (the snapshot's for time travel, else current).
  std::shared_ptr<const Schema> schema;
  /// The requested columns of `schema`.
  std::shared_ptr<const Schema> projection;
  /// The filter bound to `schema` (AlwaysTrue when none).
  ExpressionPtr filter;
  std::vector<FileScanTask> tasks;
  /// Every live delete file of the partitions the filter keeps (the tasks' ones
  /// among them).
  std::vector<DeleteFileEntry> delete_files;
  ScanPlanStats stats;
};

/// Plans a scan of `metadata` (files read through `io`).
arrow::Result<ScanPlan> PlanScan(const TableMetadata& metadata, FileIO& io,
                                 const ScanOptions& options = {});
arrow::Result<ScanPlan> PlanScan(const Table& table, const ScanOptions& options = {});

/// Adds to each task the delete files that apply to its data file (spec "Scan
/// Planning"): a position delete file applies when it is in the same partition of
/// the same spec and its data sequence number is >= the data file's (and, when it
/// names a referenced data file, that is this one); an equality delete file applies
/// when its data sequence number is > the data file's and it is either in the same
/// partition of the same spec or unpartitioned (an empty partition tuple).
void AssignDeleteFiles(const std::vector<DeleteFileEntry>& deletes,
                       std::vector<FileScanTask>* tasks);

/// Reads one planned file: its columns matched by field id to `projection` (plus
/// those `filter` and the task's equality deletes need, read in `schema`'s types),
/// deletes applied, then `filter` (bound to `schema`) applied to the rows. Batches
/// have ToArrowSchema(projection) as their schema, one per row group with rows left
/// (the file is read a row group at a time).
arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadFileScanTask(
    FileIO& io, const FileScanTask& task, const Schema& schema, const Schema& projection,
    const ExpressionPtr& filter);

/// Position delete files read whole, the last few kept: the tasks of one partition,
/// read one after the other, share its delete files (merge-on-read writes one per
/// bucket, a few until the next merge after a sliced one), which are then read once
/// instead of once per data file. Holds at most kKept files' positions.
class LastPositionDeletes {
 public:
  static constexpr size_t kKept = 4;

  /// Appends the positions of `data_path` that `deletes` deletes to `out`.
  arrow::Status Append(FileIO& io, const DataFile& deletes, const std::string& data_path,
                       std::vector<int64_t>* out);

 private:
  /// The files kept, the last used first: path, then positions by data file.
  std::deque<std::pair<std::string, std::map<std::string, std::vector<int64_t>>>> files_;
};

/// Reads one planned file like ReadFileScanTask, handing `each` batches of at most
/// `batch_rows` rows as they are decoded (column chunks streamed through a bounded
/// buffer), so the memory it takes does not grow with the file's row groups. With
/// `batch_bytes`, a row group of wide rows (its uncompressed bytes per row) is read in
/// batches of about that many bytes instead (at least 64 rows). With `last_deletes`,
/// position delete files are read through it (else only this file's positions of
/// them are kept, the delete file read again for every data file).
arrow::Status ReadFileScanTaskInBatches(
    FileIO& io, const FileScanTask& task, const Schema& schema, const Schema& projection,
    const ExpressionPtr& filter, int64_t batch_rows,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each,
    int64_t batch_bytes = 0, LastPositionDeletes* last_deletes = nullptr);

/// A planned file read in `schema` like ReadFileScanTaskInBatches (no filter), its
/// batches pulled one at a time, so several files can be read in step (a merge of
/// sorted files). Each column chunk streams through `stream_buffer_bytes`: with many
/// files open at once, a smaller buffer. REQUIRES: `io` (and `last_deletes`) outlive it.
class FileScanBatches {
 public:
  ~FileScanBatches();
  static arrow::Result<std::unique_ptr<FileScanBatches>> Open(
      FileIO& io, const FileScanTask& task, const Schema& schema, int64_t batch_rows,
      int64_t batch_bytes, int64_t stream_buffer_bytes,
      LastPositionDeletes* last_deletes = nullptr);
  /// The next batch with rows left, or null at the end.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Next();

 private:
  FileScanBatches();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reads a planned scan lazily, one data file at a time.
/// REQUIRES: `io` outlives the reader.
arrow::Result<std::shared_ptr<arrow::RecordBatchReader>> ScanPlanBatches(FileIO& io,
                                                                         ScanPlan plan);

/// Plans and reads a scan of `table`. REQUIRES: `table` outlives the reader.
arrow::Result<std::shared_ptr<arrow::RecordBatchReader>> ScanBatches(
    const Table& table, const ScanOptions& options = {});
/// Plans and reads a scan of `table` into one Arrow table (ToArrowSchema of the
/// projection).
arrow::Result<std::shared_ptr<arrow::Table>> ScanToArrow(const Table& table,
                                                         const ScanOptions& options = {});
arrow::Result<std::shared_ptr<arrow::Table>> ScanToArrow(const TableMetadata& metadata,
                                                         FileIO& io,
                                                         const ScanOptions& options = {});

}  // namespace floe::iceberg
