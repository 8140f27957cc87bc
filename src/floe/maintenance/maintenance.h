// Table maintenance for a running service (docs/maintenance.md): compaction of the
// Silver replicas (position deletes applied, rows re-sorted by key, files of the
// target size, per bucket) and of the recent days of the Bronze changelogs (small
// files merged, sorted by cdc_ts descending), snapshot expiry and orphan-file
// removal. Everything commits optimistically and is safe while `floe run` and
// `floe silver` write the same tables: a compaction is planned on one snapshot,
// validated against every commit after it, and planned again when a concurrent
// commit added deletes to (or removed) a file it rewrites.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/config/pipeline_config.h"
#include "floe/iceberg/table.h"

namespace floe::maintenance {

/// Compaction's target file size when the table sets no
/// `write.target-file-size-bytes`.
inline constexpr int64_t kDefaultCompactTargetBytes = int64_t{128} << 20;
/// Bronze compaction looks at the partitions of this many most recent days.
inline constexpr int kDefaultBronzeDays = 7;
/// The memory a Silver compaction aims to stay under when none is given (floe
/// compact passes silver.memory_limit).
inline constexpr int64_t kDefaultCompactMemoryBytes = int64_t{512} << 20;
/// Snapshots younger than this are never expired.
inline constexpr int64_t kDefaultSnapshotRetentionMs = int64_t{30} * 24 * 3600 * 1000;
/// Of every table's history at least this many newest snapshots are kept.
inline constexpr int32_t kDefaultRetainLast = 10;
/// A compaction replace snapshot's summary carries this key (value "compact").
inline constexpr char kMaintenanceSummaryKey[] = "floe.maintenance";

struct CompactTableOptions {
  /// Overrides the table's `write.target-file-size-bytes` (default 128 MiB when the
  /// table sets none).
  std::optional<int64_t> target_file_bytes;
  /// Plans in all when concurrent commits invalidate a plan.
  int max_attempts = 10;
  /// Bronze: only partitions of `day(cdc_ts)` at or after now - `bronze_days` days.
  int bronze_days = kDefaultBronzeDays;
  /// Bronze: "now" for `bronze_days`, ms since the epoch (default: the clock).
  std::optional<int64_t> now_ms;
  /// Called with the attempt number after a plan's files are written and before
  /// they are committed (tests race a concurrent commit here).
  std::function<void(int attempt)> before_commit;
  /// Silver: re-bucket to this many buckets (1 to lake::kMaxBuckets) instead of
  /// the count the live size calls for (RebucketTarget).
  std::optional<int32_t> buckets;
  /// Silver: the memory the rewrite of a bucket aims to stay under. Silver's files
  /// are each sorted by the key, so a bucket is merged from them a batch at a time
  /// (when more files than fit are open at once, groups of them are merged to
  /// `spill_dir` first) instead of read whole and sorted.
  int64_t memory_limit = kDefaultCompactMemoryBytes;
  /// Where merges of many files spill (empty: the system's temporary directory).
  std::string spill_dir;
};

struct CompactResult {
  std::string table;
  bool silver = false;
  /// Partitions rewritten (0: nothing to do).
  int32_t partitions = 0;
  int64_t data_files_removed = 0;
  int64_t delete_files_removed = 0;
  int64_t data_files_added = 0;
  /// Rows written (the live rows of the rewritten files).
  int64_t rows = 0;
  /// Plans made (a plan invalidated by a concurrent commit is made again).
  int attempts = 0;
  /// The replace snapshot committed, if any.
  std::optional<int64_t> snapshot_id;
  /// A rewrite of the whole table (Silver): the bucket counts of the default spec
  /// before and after (different when it was re-bucketed); 0 otherwise.
  int32_t buckets_from = 0;
  int32_t buckets_to = 0;
};

/// A table's live size estimated from its manifests: the data files' record counts
/// minus the position deletes' record counts, times the data files' bytes per row.
struct LiveSize {
  int64_t rows = 0;
  int64_t bytes = 0;
};
LiveSize EstimateLiveSize(const std::vector<iceberg::LiveFile>& live);

/// The bucket count a Silver table of `current` buckets holding `live_bytes` is
/// compacted into. The ideal count is lake::BucketCount(live_bytes, target) (the
/// smallest power of two with live_bytes / N <= target); the table moves to it only
/// when it is at least twice the current count (the files outgrew the target) or at
/// most a quarter of it (they shrank below a quarter of the target); otherwise it
/// stays at `current`. Right after a move the ideal count equals the new one, and
/// going back takes the live size halving (after growing) or more than doubling
/// (after shrinking), so compactions cannot flap between two counts.
int32_t RebucketTarget(int32_t current, int64_t live_bytes, int64_t target_file_bytes);

/// The Silver merge key recorded in the table (`floe.silver.key`).
arrow::Result<std::vector<std::string>> SilverKeyOf(const iceberg::TableMetadata& silver);

/// Compacts a Silver table. When its live size calls for another bucket count
/// (RebucketTarget) or `options.buckets` asks for one, the whole table is rewritten
/// into a new default spec bucket(N', key[0]) in one commit that adds the spec, makes
/// it the default and replaces every data and delete file (rows with their deletes
/// applied, sorted by the key per bucket); when live files of an older spec remain,
/// the whole table is rewritten into the default spec the same way. Otherwise every
/// partition (bucket) of the default spec that holds
/// delete files, or more than one data file of which at least two are smaller than
/// three quarters of the target, is rewritten whole: its rows read with their
/// position deletes applied, sorted by `key`, written as files of about the target
/// size; its data and delete files are replaced in one `replace` snapshot that
/// carries Silver's watermark (`floe.bronze-commit-lsn`) forward. The snapshot is
/// validated against every commit since the one the rewrite was read from: a
/// concurrent `floe silver` merge that added deletes against a rewritten file (or
/// removed one) makes it plan again from the new snapshot.
arrow::Result<CompactResult> CompactSilverTable(iceberg::Table& silver,
                                                const std::vector<std::string>& key,
                                                const CompactTableOptions& options = {});

/// Compacts a Bronze changelog (or the audit or quarantine table): in each partition
/// of the spec's day field (`day(cdc_ts)`; the quarantine table's
/// `day(cdc_processed_at)`) of the last `bronze_days` days with at least two data
/// files smaller than three quarters of the target, those small files are merged
/// into files of about the target size, rows sorted by that day field's column
/// descending, as one `replace` snapshot that carries `floe.commit-lsn` forward.
/// Races only with appends, which never invalidate it.
arrow::Result<CompactResult> CompactBronzeTable(iceberg::Table& bronze,
                                                const CompactTableOptions& options = {});

/// One Bronze changelog and its Silver replica, as the pipeline file names them.
struct ServiceTable {
  std::string source;  // schema.table
  iceberg::TableIdentifier bronze;
  /// Set when the Silver table exists.
  std::optional<iceberg::TableIdentifier> silver;
};

/// Every Bronze changelog of the service (silver::ListBronzeTables) with its Silver
/// replica; only `only` when set (an error if it has no Bronze table).
arrow::Result<std::vector<ServiceTable>> ListServiceTables(
    iceberg::Catalog* catalog, const config::PipelineConfig& config,
    const std::optional<config::QualifiedName>& only);

struct CompactOptions {
  std::optional<config::QualifiedName> table;
  bool bronze = true;
  bool silver = true;
  CompactTableOptions table_options;
};

/// One line of a maintenance command's report: a table and what happened to it.
struct TableReport {
  std::string table;
  /// Empty when it succeeded.
  std::string error;
  std::string text;
};

/// `floe compact`: every Bronze changelog and Silver replica of the service (or of
/// one source table), and, without `table` and unless Silver only, the service's
/// audit (`pg_logical_messages`) and quarantine tables. A table that fails is
/// reported and the others carry on.
arrow::Result<std::vector<TableReport>> CompactService(const config::PipelineConfig& config,
                                                       const CompactOptions& options);

struct ExpireOptions {
  std::optional<config::QualifiedName> table;
  /// Snapshots at least this old may be expired.
  int64_t retention_ms = kDefaultSnapshotRetentionMs;
  int32_t retain_last = kDefaultRetainLast;
  /// "Now" for the retention (default: the clock).
  std::optional<int64_t> now_ms;
};

/// `floe expire`: expires the snapshots of every Bronze and Silver table older than
/// the retention, keeping the newest `retain_last` and the newest snapshot carrying
/// `floe.commit-lsn` (Bronze) / `floe.bronze-commit-lsn` (Silver), and deletes the
/// files only the expired snapshots reached.
arrow::Result<std::vector<TableReport>> ExpireService(const config::PipelineConfig& config,
                                                      const ExpireOptions& options);

struct RemoveOrphansOptions {
  std::optional<config::QualifiedName> table;
  /// Only files last modified at least this long ago are removed.
  int64_t older_than_ms = int64_t{3} * 24 * 3600 * 1000;
  bool dry_run = false;
  std::optional<int64_t> now_ms;
};

/// `floe remove-orphans`: deletes the files under each Bronze and Silver table's
/// location that no metadata references and that are older than `older_than_ms`
/// (files of another table nested under the location are left alone).
arrow::Result<std::vector<TableReport>> RemoveOrphansService(
    const config::PipelineConfig& config, const RemoveOrphansOptions& options);

}  // namespace floe::maintenance
