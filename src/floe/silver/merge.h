// One MERGE of a Bronze changelog into its Silver replica (docs/silver.md): read the
// Bronze rows above Silver's watermark from one Bronze snapshot, fold them to the
// latest state per key (fold.h), delete the rows Silver holds for those keys with
// position deletes (merge-on-read) or by rewriting the data files holding them
// (copy-on-write), write the new rows, and commit both with the new watermark in
// one snapshot that lands only on the Silver snapshot it was planned from. A table
// without a Silver replica yet is backfilled from its whole Bronze history.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/table.h>

#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/lake/silver_layout.h"

namespace floe::silver {


/// One of Silver's row columns: the source table's live column as it is named now
/// (Silver's column name) and the Bronze field it is read from.
struct RowColumn {
  std::string name;
  const iceberg::NestedField* bronze = nullptr;
  /// The column's names before renames (ColumnBinding::former_names), and per name
  /// the (cdc_commit_lsn, cdc_seq) of the last row written under it
  /// (ColumnBinding::former_through).
  std::vector<std::string> former_names;
  std::vector<std::pair<int64_t, int32_t>> former_through;
};

/// Silver's row columns, from Bronze's column bindings (`floe.source.columns`): the
/// source's live columns in order, so a column dropped in the source is not one,
/// and a column a type change Iceberg cannot promote moved to a new Bronze field
/// (`code` -> `code__int`) is the Silver column `code` of the new type. A Bronze
/// table without bindings: every row field under its own name. The fields point
/// into `bronze`'s current schema.
arrow::Result<std::vector<RowColumn>> RowColumnsOf(const iceberg::TableMetadata& bronze);

/// Bronze field id -> Silver field id: the table property lake::kSilverFieldMapProperty,
/// or (a table created by a merge that crashed before recording it) by name.
/// Whether the merge key `key` (names of `row_columns`) is the key Silver was built
/// with (lake::kSilverKeyProperty), under other names: the same Silver fields by id.
bool SameKeyColumns(const iceberg::TableMetadata& silver,
                    const iceberg::Schema& bronze_schema,
                    const std::vector<RowColumn>& row_columns,
                    const std::vector<std::string>& key);
std::map<int32_t, int32_t> FieldMapOf(const iceberg::TableMetadata& silver,
                                      const iceberg::Schema& bronze);

/// The Iceberg properties that tell engines how to write a table's deletes, updates
/// and merges; Silver sets all three to the mode its merges use.
inline constexpr const char* kWriteModeProperties[] = {
    "write.delete.mode", "write.update.mode", "write.merge.mode"};
inline constexpr char kMergeOnRead[] = "merge-on-read";
inline constexpr char kCopyOnWrite[] = "copy-on-write";

// Silver's layout (lake/silver_layout.h).
using lake::BucketCount;
using lake::kDefaultSilverTargetFileBytes;
using lake::kMaxBuckets;

/// The default of silver.memory_limit.
inline constexpr int64_t kDefaultMemoryLimit = int64_t{512} << 20;
/// The memory of the floe silver process before any merge (its code and libraries,
/// the catalog, the pipeline), taken once from silver.memory_limit; the rest is
/// shared by the merges running at once (MergeShare).
inline constexpr int64_t kProgramMemory = int64_t{40} << 20;
/// The working memory of a merge per byte of changes it holds in Arrow form (the
/// changes, their fold, the Silver rows they find, the sorted upserts, Parquet
/// buffers): a slice holds at most (its share - kFixedWorkingSet) / kWorkingSetFactor
/// bytes of changes.
inline constexpr int64_t kWorkingSetFactor = 10;
/// The memory a merge needs beside its slice whatever the slice's size (manifests,
/// Parquet writers, the slices' plan).
inline constexpr int64_t kFixedWorkingSet = int64_t{8} << 20;

/// A merge's share of silver.memory_limit `limit` when `merges` run at once.
inline int64_t MergeShare(int64_t limit, int merges) {
  return (limit - kProgramMemory) / (merges < 1 ? 1 : merges);
}

/// The slices each of `merges` merges running at once merges at once, with
/// `concurrency` threads in all (silver.concurrency): the threads the other merges
/// leave, at most the machine's cores.
int SliceWorkers(int concurrency, int merges);

/// The bytes of changes one slice of a merge with `share` of memory holds.
inline int64_t SliceBytes(int64_t share) {
  return std::max<int64_t>(int64_t{1} << 20,
                           (share - kFixedWorkingSet) / kWorkingSetFactor);
}

/// The in-memory bytes of a row group a merge with `share` of memory writes (held
/// until flushed): an eighth of the share, at least 1 MiB (the writer's default, a
/// quarter of the target file size, when that is less).
inline int64_t RowGroupBytes(int64_t share) {
  return std::max<int64_t>(int64_t{1} << 20, share / 8);
}

struct MergeOptions {
  /// The merge key declared in the pipeline file (silver.keys); unset uses Bronze's
  /// `floe.source.primary-key`.
  std::optional<std::vector<std::string>> key;
  /// Silver's `write.target-file-size-bytes` (set at create, updated when it
  /// changes) and the size a new table's bucket count aims at (silver.target_file_size).
  int64_t target_file_bytes = kDefaultSilverTargetFileBytes;
  /// Copy-on-write (silver.write_mode / write_modes): data files holding replaced rows
  /// are rewritten without them instead of getting position deletes.
  bool copy_on_write = false;
  /// The memory this merge may use (its MergeShare of silver.memory_limit): an
  /// increment larger than fits is spilled to `spill_dir` and merged a slice of
  /// Silver's buckets at a time (increment.h).
  int64_t memory_limit = MergeShare(kDefaultMemoryLimit, 1);
  /// The bytes of changes a slice holds; 0: from memory_limit and slice_workers
  /// (tests set it to slice small increments).
  int64_t slice_bytes = 0;
  /// The slices of a spilled increment merged at once, on threads of their own; each
  /// holds a slice_workers-th of what one slice alone could (memory_limit is the
  /// merge's whole budget). floe silver gives a table the threads of
  /// silver.concurrency that other tables do not use, up to the machine's cores.
  int slice_workers = 1;
  /// Where the spill goes (empty: the system's temporary directory).
  std::filesystem::path spill_dir;
  /// Called, when set, as the slices of a spilled increment are merged: `done` of
  /// `slices` (for a progress line; a plan made again starts again from 0).
  std::function<void(int64_t done, int64_t slices)> on_slices;
  /// Plans in all when the Silver table changes under a merge (another merge won).
  int max_attempts = 5;
  /// Called with the attempt number just before each commit (tests use it to race
  /// another commit against the merge).
  std::function<void(int attempt)> before_commit;
};

enum class MergeOutcome {
  /// A new Silver table, built from the whole Bronze history.
  kBackfilled,
  /// An existing Silver table moved to a newer watermark.
  kMerged,
  /// The watermark already covers Bronze's commit LSN; nothing committed.
  kUpToDate,
  /// No merge key: no Silver table (see `message`).
  kNoKey,
  /// Bronze awaits floe run's copy of the table after a type change Iceberg cannot
  /// promote (lake::kRecopyPendingProperty); nothing merged (see `message`).
  kWaiting,
};

struct MergeStats {
  MergeOutcome outcome = MergeOutcome::kUpToDate;
  /// Why there is no Silver table (kNoKey), with the fix.
  std::string message;
  uint64_t from_lsn = 0;
  uint64_t to_lsn = 0;
  int64_t changes = 0;
  int64_t upserted = 0;
  int64_t deleted_keys = 0;
  int64_t position_deletes = 0;
  int32_t data_files = 0;
  int32_t delete_files = 0;
  /// Silver data files opened to find rows to delete (their row groups checked
  /// against the keys; the key column(s) read of those that may hold one).
  int32_t files_scanned = 0;
  /// Copy-on-write: Silver data files replaced by copies without the deleted rows,
  /// the files those copies make up, the rows dropped from them (replaced now, or
  /// deleted earlier by position deletes of merge-on-read) and the rows copied.
  int32_t rewritten_data_files = 0;
  int32_t rewrite_files_added = 0;
  int64_t rewrite_rows_dropped = 0;
  int64_t rewrite_rows_copied = 0;
  /// Copy-on-write: position delete files removed (every row they deleted is gone
  /// from the rewritten files).
  int32_t delete_files_removed = 0;
  /// Small data files folded into new ones before the commit (the merge's own and
  /// live ones), and the files they made (merge_tier.cc).
  int32_t tiered_files = 0;
  int32_t tier_files_added = 0;
  /// Row groups of those files whose key column(s) were read, and the row groups
  /// skipped without reading them: by their min/max statistics of the key, or by
  /// their bloom filters of the key.
  int32_t row_groups_read = 0;
  int32_t row_groups_skipped_stats = 0;
  int32_t row_groups_skipped_bloom = 0;
  /// Bytes read from Silver's Parquet files (data and delete files), from Bronze's,
  /// and written to new Silver data and delete files, by the committed attempt.
  int64_t silver_bytes_read = 0;
  int64_t bronze_bytes_read = 0;
  int64_t bytes_written = 0;
  bool truncated = false;
  int32_t buckets = 0;
  /// Slices the increment was merged in (1: it fit in memory; more: it was spilled
  /// to local disk, MergeOptions::memory_limit), and its size in Arrow form.
  int32_t slices = 1;
  int64_t increment_bytes = 0;
  int attempts = 0;
  std::vector<std::string> schema_changes;
};

// Silver's watermark and its last merge (lake/metadata.h).
using lake::LastMergeSnapshot;
using lake::SilverWatermark;

/// The merge key of a Bronze table: `override_key` when set, else its
/// `floe.source.primary-key`; empty when it has none.
arrow::Result<std::vector<std::string>> MergeKeyOf(
    const iceberg::TableMetadata& bronze,
    const std::optional<std::vector<std::string>>& override_key);

/// Error, saying why and what to declare instead, unless `key` can be the merge key
/// of the Bronze table `bronze` (named `id`): primitive columns of it, the first
/// one of a type Iceberg's bucket transform takes.
arrow::Status CheckMergeKey(const iceberg::TableMetadata& bronze,
                            const std::vector<std::string>& key,
                            const iceberg::TableIdentifier& id);

/// Merges Bronze table `bronze_id` into Silver table `silver_id` (created under
/// `warehouse` when absent). One pass; see the file comment.
arrow::Result<MergeStats> MergeTable(iceberg::Catalog* catalog,
                                     std::shared_ptr<iceberg::FileIO> io,
                                     const iceberg::TableIdentifier& bronze_id,
                                     const iceberg::TableIdentifier& silver_id,
                                     const std::string& warehouse,
                                     const MergeOptions& options = {});

// Pieces of a merge shared with `floe silver verify` and `floe silver backfill`
// (verify.h, backfill.h).

/// The Bronze rows with lower < cdc_commit_lsn <= upper of `bronze`'s current
/// snapshot: its row columns (current schema, CDC columns left out) then cdc_op,
/// cdc_commit_lsn, cdc_seq and cdc_unchanged. Files are pruned by their cdc_commit_lsn
/// bounds. lower = 0 reads the whole history up to `upper`.
arrow::Result<std::shared_ptr<arrow::Table>> ReadBronze(
    const iceberg::TableMetadata& bronze, iceberg::FileIO& io, uint64_t lower,
    uint64_t upper);

/// Creates the (empty) Silver table `silver_id` of Bronze table `bronze` with the
/// layout of docs/silver.md: Bronze's row columns then cdc_commit_lsn, bucket(N,
/// key[0]) with N = BucketCount(Bronze's bytes per row x `rows`), sorted by `key`,
/// bloom filters on the key, the floe.silver.* properties, write.*.mode naming the
/// merge mode (copy-on-write or merge-on-read); with a `seeding` origin (a backfill
/// from an export), lake::kSilverSeedingProperty naming it. Sets *buckets to N.
/// Fails with the catalog's kAlreadyExists when the table exists.
arrow::Result<std::unique_ptr<iceberg::Table>> CreateSilverTable(
    iceberg::Catalog* catalog, std::shared_ptr<iceberg::FileIO> io,
    const iceberg::TableMetadata& bronze, const iceberg::TableIdentifier& bronze_id,
    const iceberg::TableIdentifier& silver_id, const std::string& warehouse,
    const std::vector<std::string>& key, int64_t rows, int64_t target_file_bytes,
    int32_t* buckets, bool copy_on_write, const std::string& seeding);

/// Gives the existing Silver table `silver` the layout CreateSilverTable would give a
/// new one of `rows` rows, for `floe silver backfill --replace`, in metadata commits
/// that change no rows: the schema evolved to Bronze's as a merge does, sorted by
/// `key`, the layout's properties. Refused when the table was built with another
/// key. Sets *buckets to N of bucket(N, key[0]) and, when the table's spec is not
/// that, *new_spec to it: the spec the replacing rows are written in and that their
/// commit makes the default (OverwriteRequest::new_spec).
arrow::Status ReplaceSilverLayout(iceberg::Table* silver,
                                  const iceberg::TableMetadata& bronze,
                                  const std::vector<std::string>& key, int64_t rows,
                                  int64_t target_file_bytes, bool copy_on_write,
                                  int32_t* buckets,
                                  std::optional<iceberg::PartitionSpec>* new_spec);

/// `rows` (Silver's Arrow schema) sorted by the key columns `key_names` and written as
/// data files of their buckets (of `spec` when set: a spec the table does not have
/// yet, which the files' commit adds). Nothing is committed.
arrow::Result<std::vector<iceberg::DataFile>> WriteUpserts(
    const iceberg::Table& silver, const std::shared_ptr<arrow::RecordBatch>& rows,
    const std::vector<std::string>& key_names,
    const std::optional<iceberg::PartitionSpec>& spec = std::nullopt);

}  // namespace floe::silver
