// The pieces of one merge (merge.cc) that live in files of their own: Silver's schema
// evolution (merge_schema.cc), finding the Silver rows a merge deletes
// (merge_deletes.cc) and the copy-on-write rewrite (merge_cow.cc). Not part of the
// module's interface.

#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/table.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/position_delete.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/sorted_runs.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/silver/fold.h"
#include "floe/silver/increment.h"
#include "floe/silver/merge.h"

namespace floe::silver::merge_internal {

/// Deletes `files` (written by a merge that does not commit them), errors ignored.
void DeleteFiles(iceberg::FileIO& io, const std::vector<iceberg::DataFile>& files);

// --- merge_schema.cc

/// The names of Silver's merge key as its table property records them.
std::vector<std::string> SilverKeyNames(const iceberg::TableMetadata& silver);

/// The Bronze -> Silver field map as its table property records it (JSON object).
std::string FieldMapJson(const std::map<int32_t, int32_t>& map);

/// The bucket count of a Silver table of `rows` rows of `bronze` (its bytes per row,
/// from its current snapshot's summary, set in *bytes_per_row; 0 when unknown).
int32_t SilverBucketsFor(const iceberg::TableMetadata& bronze, int64_t rows,
                         int64_t target_file_bytes, int64_t* bytes_per_row);

/// Silver's sort order: `key` ascending, nulls first (order id 1).
iceberg::SortOrder SilverSortOrder(const iceberg::Schema& schema,
                                   const std::vector<std::string>& key);

/// The layout's table properties: the key, the target file size, write.*.mode and
/// the key columns' bloom filters.
std::map<std::string, std::string> SilverLayoutProperties(
    const iceberg::Schema& schema, const std::vector<std::string>& key,
    int64_t target_file_bytes, bool copy_on_write);

/// Evolves Silver's schema to what changed in Bronze's row columns (new columns
/// added, renames followed by field id, allowed promotions) and records the field
/// map; `changes` describes each step (empty when nothing changed).
arrow::Status EvolveSilver(iceberg::Table* silver, const iceberg::TableMetadata& bronze,
                           std::vector<std::string>* changes);

// --- merge_deletes.cc

/// The Silver rows a merge deletes, by partition ("<spec id>/<partition path>"):
/// positions by data file.
using RowsByPartition =
    std::map<std::string, std::pair<iceberg::PartitionTuple, iceberg::PositionsByFile>>;

struct SilverDeletes {
  RowsByPartition by_partition;
  /// The data files holding them.
  std::set<std::string> referenced;
  /// The Silver rows of the folded keys when the fold needs them
  /// (FoldResult::needs_existing).
  ExistingRows existing;
};

/// Finds the live rows of snapshot `planned` of `silver` whose key is one of the
/// fold's (bucket and min/max pruning, then row groups by statistics and bloom
/// filters); counts what it read in `stats`. The rows Silver holds for values the
/// fold keeps are read for the keys of `existing_of` (default: `fold`), which may
/// hold more keys than `fold`'s (a slice's imported ones). With `replaced`
/// (merge-on-read), the positions of the live delete files of each partition it finds
/// rows in, not in `replaced` yet, are added to that partition's, and the files to
/// `replaced` (under `replaced_mu` when set: slices merged at once share it).
arrow::Result<SilverDeletes> FindSilverDeletes(
    const iceberg::Table& silver, const iceberg::TableMetadata& planned,
    iceberg::FileIO& io, const Changes& changes, const FoldResult& fold,
    const std::vector<int>& key_columns, const std::vector<std::string>& key,
    MergeStats* stats, std::map<std::string, iceberg::DataFile>* replaced = nullptr,
    bool declared_key = false, const FoldResult* existing_of = nullptr,
    std::mutex* replaced_mu = nullptr);

/// Which of the keys at `rows` of `changes` `silver` holds (encoded as EncodeKey does).
arrow::Result<std::unordered_set<std::string>> HeldKeys(
    const iceberg::TableMetadata& silver, iceberg::FileIO& io,
    const iceberg::Schema& schema, const Changes& changes,
    const std::vector<int>& key_columns, const std::vector<std::string>& key,
    const std::vector<int64_t>& rows);

// --- merge_cow.cc

/// What a copy-on-write merge commits besides its new rows.
struct CowRewrite {
  /// Data files rewritten and position delete files made obsolete by the rewrite.
  std::vector<iceberg::DataFile> remove;
  /// The rewritten data files.
  std::vector<iceberg::DataFile> add;
};

/// Plans and writes the rewrite of a copy-on-write merge from `deletes` on snapshot
/// `snapshot_id` (see merge_cow.cc).
arrow::Result<CowRewrite> RewriteForCopyOnWrite(iceberg::Table& silver,
                                                std::optional<int64_t> snapshot_id,
                                                const RowsByPartition& deletes,
                                                MergeStats* stats);

// --- merge_commit.cc

/// The files one merge plan writes.
struct MergeFiles {
  /// The new rows.
  std::vector<iceberg::DataFile> data;
  /// Position delete files (merge-on-read).
  std::vector<iceberg::DataFile> deletes;
  /// The spec of each of `deletes` (by path) that is not of the default spec: the
  /// deletes of an older spec's data files (RowDeltaRequest::delete_file_specs).
  std::map<std::string, int32_t> delete_specs;
  /// The rewrite (copy-on-write).
  CowRewrite cow;
  /// Every file written, to delete when the plan does not commit.
  std::vector<iceberg::DataFile> written;
  /// Merge-on-read: the live position delete files of the partitions the plan writes
  /// deletes in, by path; their positions are in the plan's delete files, and the
  /// commit removes them, so a bucket keeps one delete file however many merges ran
  /// since it was last compacted.
  std::map<std::string, iceberg::DataFile> replaced_deletes;
  /// Merge-on-read: live data files whose rows the plan folded into new ones
  /// (TierSmallFiles); the commit removes them. Copy-on-write's are in `cow.remove`.
  std::vector<iceberg::DataFile> tiered;
  /// Merge-on-read: deletes held in memory, not written yet: TierSmallFiles writes a
  /// partition's once its folds are done, leaving out the positions in files they
  /// removed (a delete file is then written once, not written and rewritten).
  RowsByPartition held_deletes;
  /// The plan's upserts held in memory, sorted by the key, a batch per partition (a
  /// merge whose increment fits in memory): TierSmallFiles folds those of a bucket
  /// that folds with its small files, and writes the others.
  std::vector<iceberg::PartitionedBatch> held_upserts;
};

/// Writes the plan's deletes: the rewrite of the data files holding them
/// (copy-on-write) or a position delete file per partition (merge-on-read; with
/// `hold`, they go to files->held_deletes, for TierSmallFiles to write).
arrow::Status WriteMergeDeletes(iceberg::Table& silver,
                                std::optional<int64_t> planned_snapshot,
                                const RowsByPartition& deletes, bool copy_on_write,
                                MergeFiles* files, MergeStats* stats, bool hold);

/// Writes a position delete file per partition of `deletes` into `files` (deletes
/// and written), each of its partition's spec (delete_specs when not the default).
arrow::Status WriteDeleteFiles(iceberg::Table& silver, RowsByPartition deletes,
                               MergeFiles* files);

/// Adds the positions of `from` to `into`'s, partition by partition; returns how many.
int64_t AddDeletes(RowsByPartition from, RowsByPartition* into);

/// Writes the plan made on snapshot `planned` of `silver`: finds the Silver rows the
/// fold deletes or builds on (not after a truncate), holds the upserts (sorted, by
/// partition) and merge-on-read's deletes in `files` for TierSmallFiles to fold and
/// write, and writes copy-on-write's rewrite (deleted again when it fails), its
/// work counted in `stats` (the files: TierSmallFiles); returns the Silver rows found.
struct MergeColumns;
arrow::Result<SilverDeletes> WritePlan(
    iceberg::Table& silver, const iceberg::TableMetadata& planned, iceberg::FileIO& io,
    const Changes& changes, const FoldResult& fold, const MergeColumns& columns,
    const std::vector<std::string>& key, bool silver_has_rows, bool copy_on_write,
    MergeFiles* files, MergeStats* stats);

// --- merge_tier.cc

/// The small data files (under 3/4 of the target size) a partition may gather before
/// a merge writing in it folds them into one, on the partition's turn (every
/// kTierFiles - 1 merges); off its turn, once it has kTierFiles + 2.
inline constexpr int kTierFiles = 4;
/// The folds of one bucket in one merge, at most (each of as many files as the
/// merge's memory share holds open at once).
inline constexpr int kTierPasses = 8;

/// Folds the small data files of each partition the plan writes in, when there are
/// kTierFiles or more on its turn (the turns spread over the merges by the table's
/// sequence number and a hash of the partition), kTierFiles + 2 off it (its own new ones,
/// its upserts held in memory, and the live ones of snapshot `planned_snapshot` with
/// their deletes and the plan's applied), into one file sorted by `key`: the longest run
/// of them by size in which each next is at most twice those before it together (so a row
/// is rewritten a logarithmic number of times; files under 1/64 of the target count as
/// that), pass after pass while the bucket still holds that many (off its turn
/// kTierFiles; kTierPasses at most). Within `memory` (the merge's share), `workers`
/// partitions at once, each within its part of it. The files folded leave `files` (the
/// plan's own are deleted); merge-on-read: the live ones go to `files->tiered` and the
/// partition's deletes are written without positions in them (its held deletes written
/// once, here; files written before rewritten); copy-on-write: to `files->cow.remove`.
/// Nothing folded after a truncate (the commit replaces every file). A folded partition's
/// held deletes are written once its folds are done (on its thread); then the upserts
/// still held, and the other held deletes (dropped after a truncate, which no delete file
/// survives). Counts the plan's files in `stats` (the one place they are counted: every
/// plan passes here); on an error every file the plan wrote is deleted.
arrow::Status TierSmallFiles(iceberg::Table& silver,
                             std::optional<int64_t> planned_snapshot, bool truncated,
                             const std::vector<std::string>& key, int64_t memory,
                             int workers, bool copy_on_write, MergeFiles* files,
                             MergeStats* stats);

/// The merge's work counters as snapshot-summary properties.
void AddMergeCounters(const MergeStats& stats, iceberg::SummaryProperties* summary);

/// Commits a plan in one attempt that lands only on `planned_snapshot`: after a
/// truncate an overwrite of every live file, a copy-on-write overwrite, an append,
/// or a row delta of the new rows and position deletes; an empty append when
/// nothing changed still moves the watermark.
arrow::Status CommitMerge(iceberg::Table& silver, std::optional<int64_t> planned_snapshot,
                          bool truncated, bool silver_has_rows, const MergeFiles& files,
                          const std::set<std::string>& referenced,
                          const iceberg::SummaryProperties& summary);

/// Commits the plan (CommitMerge, its summary carrying the watermark `bronze_lsn` and
/// the merge's counters; options.before_commit called first). When it does not land,
/// the plan's files are deleted unless the commit may have landed; a retryable
/// failure is logged, waited out (unless a lost race) and the plan's counters in
/// `stats` reset, for the caller to plan again.
arrow::Status CommitPlan(iceberg::Table& silver, iceberg::FileIO& io,
                         std::optional<int64_t> planned_snapshot, bool truncated,
                         bool silver_has_rows, const MergeFiles& files,
                         const std::set<std::string>& referenced, uint64_t bronze_lsn,
                         int attempt, const MergeOptions& options, MergeStats* stats);

// --- merge_runs.cc

/// Runs `each(i)` for every i in [0, n) on up to `workers` threads (the caller's one
/// of them), each i once; returns when all are done.
void OnThreads(size_t n, int workers, const std::function<void(size_t)>& each);

/// `rows` (Silver's Arrow form) sorted by `key_names`, split by Silver's partitions
/// (those of `spec` when set: a spec the table does not have yet).
arrow::Result<std::vector<iceberg::PartitionedBatch>> SortedPartitions(
    const iceberg::Table& silver, const std::shared_ptr<arrow::RecordBatch>& rows,
    const std::vector<std::string>& key_names,
    const std::optional<iceberg::PartitionSpec>& spec = std::nullopt);

/// Writes `parts` (SortedPartitions) as Silver's data files of their partitions (of
/// `spec` when set), each part released once written.
arrow::Result<std::vector<iceberg::DataFile>> WriteSortedPartitions(
    const iceberg::Table& silver, std::vector<iceberg::PartitionedBatch> parts,
    const std::optional<iceberg::PartitionSpec>& spec = std::nullopt);

/// The upserts of a merge cut into slices. A partition whose rows several slices
/// hold (`shared`) gets a sorted run, a local file in `dir`, from each slice that
/// upserts in it; Write merges each such partition's runs into one sorted sequence
/// of data files, so a bucket gains the files of one write per merge, not a small
/// file per slice. Other partitions' upserts (and every one when the key cannot be
/// ordered: no `order`) are written as data files at once. Add may be called from
/// several threads; memory: about a quarter of `memory` for one batch of each of at
/// most `most_runs` runs in `workers` partitions merged at once. A partition with
/// more than `max_fan_in` runs has them merged that many at a time into longer runs
/// first, so no more files are open at once.
class UpsertRuns {
 public:
  UpsertRuns(const iceberg::Table& silver, std::vector<std::string> key,
             std::optional<iceberg::RowOrder> order, std::filesystem::path dir,
             std::function<bool(const iceberg::PartitionTuple&)> shared,
             int64_t most_runs, int64_t memory, int workers,
             size_t max_fan_in = iceberg::kMaxRunFanIn);
  ~UpsertRuns();
  UpsertRuns(const UpsertRuns&) = delete;
  UpsertRuns& operator=(const UpsertRuns&) = delete;

  /// Adds a slice's upserts (Silver's Arrow form); the data files written at once
  /// are appended to `written`, also on an error.
  arrow::Status Add(const std::shared_ptr<arrow::RecordBatch>& upserts,
                    std::vector<iceberg::DataFile>* written);
  /// Merges every partition's runs into data files (appended to `written`, also on an
  /// error), `workers` partitions at once; the runs are removed.
  arrow::Status Write(std::vector<iceberg::DataFile>* written);

 private:
  struct Partition;
  const iceberg::Table& silver_;
  std::vector<std::string> key_;
  std::optional<iceberg::RowOrder> order_;
  std::filesystem::path dir_;
  std::function<bool(const iceberg::PartitionTuple&)> shared_;
  int64_t most_runs_;
  int64_t memory_;
  int workers_;
  /// The widest upserted rows' in-memory bytes.
  std::atomic<int64_t> row_bytes_{0};
  std::mutex mu_;
  std::map<std::string, Partition> partitions_;
  size_t max_fan_in_;

  // Merges the partition's runs max_fan_in_ at a time until no more are left.
  arrow::Status Narrow(Partition& partition,
                       const std::shared_ptr<arrow::Schema>& schema);
};

// --- merge_slices.cc

/// Silver's row columns by their source names, and the Bronze fields they are read
/// from (a retyped column's new field is `code__int`, its Silver column `code`); the
/// key columns' indexes among them.
struct MergeColumns {
  std::vector<RowColumn> row_columns;
  std::vector<std::string> row_names;
  std::vector<std::string> bronze_names;
  std::vector<int> key_columns;
  /// The key is declared in silver.keys (not the source's primary key): the merge
  /// refuses changes that show it is not unique (NotUniqueKey).
  bool declared_key = false;
};

/// The refusal of a merge whose declared key `key` is not unique in the source: the
/// change at `row` of `changes` gave its key a second row, as `how` says.
arrow::Status NotUniqueKey(const Changes& changes, int64_t row,
                           const std::vector<std::string>& key, std::string_view how);

/// The Bronze columns a merge reads: the row columns, then cdc_op, cdc_commit_lsn,
/// cdc_seq and cdc_unchanged.
arrow::Result<std::vector<std::string>> BronzeColumnsOf(
    const iceberg::TableMetadata& bronze);

/// Folds the changes `rows` (Bronze's columns) into `changes` and the result, asking
/// `silver` about the keys the changes leave open; adds what it folded to `stats`
/// (changes, upserted, deleted keys, truncated): of the first `own_rows` rows and
/// their keys only, when set (a slice's own, without the rows it imported).
arrow::Result<FoldResult> FoldChanges(
    const arrow::Table& rows, const MergeColumns& columns, const iceberg::Table* silver,
    bool silver_has_rows, iceberg::FileIO& io, const std::vector<std::string>& key,
    Changes* changes, MergeStats* stats, int64_t own_rows = -1);

/// The keys of `fold` whose changes are among the first `own_rows` rows: a slice's
/// own, without those it imported (Increment::Load; a key's changes are all of one
/// partition, so all own or all imported).
FoldResult OwnKeys(const FoldResult& fold, int64_t own_rows);

/// Silver's bucket count: the bucket transform's of its spec (1 when it has none).
int32_t SilverBuckets(const iceberg::Table& silver);

/// The bytes of one of Silver's rows, uncompressed (about its Arrow size): from the
/// row groups of its largest live data files' footers; 0 for a table without rows.
arrow::Result<int64_t> SilverRowBytes(const iceberg::Table& silver);

/// The increment a merge's plans share: the Bronze changes above a watermark, in
/// memory when they fit the merge's share, else spilled by the bucket of the first
/// key column in slices `workers` of which fit the share together.
struct HeldIncrement {
  std::unique_ptr<Increment> increment;  // the changes above `from`
  uint64_t from = 0;
  int64_t bronze_bytes = 0;  // the Bronze bytes reading it took
  int workers = 1;           // the slices of it merged at once

  /// Reads the changes watermark < cdc_commit_lsn <= upper unless it holds them;
  /// `bronze_read`: the Bronze bytes read so far (kept as bronze_bytes).
  arrow::Status Read(const iceberg::TableMetadata& bronze, iceberg::FileIO& bronze_io,
                     uint64_t watermark, uint64_t upper, const MergeColumns& columns,
                     const iceberg::Table* silver, const MergeOptions& options,
                     int64_t bronze_read);
};

/// On an object store, makes `silver` read through a read cache (iceberg/read_cache.h)
/// in the spill directory of the spilled `increment`, for the rest of its plan: its
/// slices, the small-file fold and a copy-on-write rewrite read the same files again
/// and again. Leaves the increment's size + 64 MiB free for the spill's runs; logs
/// once when it stops keeping what it reads. Nothing to do for an increment in memory
/// or a local warehouse.
arrow::Status CacheSilverReads(iceberg::Table& silver, const Increment& increment,
                               const iceberg::TableIdentifier& silver_id);

/// Writes the plan made on snapshot `planned` of `silver` a slice of the spilled
/// `increment` at a time: each slice folded, its Silver rows found, its upserts
/// written (a bucket several slices write in gets one sorted write of them all at the
/// end, UpsertRuns, within `memory`); the deletes of a Silver partition written (a delete
/// file, or the rewrite of its files) once no later slice can add to them. Up to
/// `workers` slices are merged at once, on threads of their own, each within the slice
/// size the increment was read with; what they found is taken in slice order. Fills
/// `files` (every written file deleted again on an error), `referenced` and `stats`;
/// `truncated` tells whether the increment holds a `t`; `on_slices` (when set) is
/// told of each slice taken.
arrow::Status WriteSlices(iceberg::Table& silver, const iceberg::TableMetadata& planned,
                          iceberg::FileIO& io, const Increment& increment,
                          const MergeColumns& columns,
                          const std::vector<std::string>& key, bool silver_has_rows,
                          bool copy_on_write, int64_t memory, int workers,
                          MergeFiles* files, std::set<std::string>* referenced,
                          bool* truncated, MergeStats* stats,
                          const std::function<void(int64_t, int64_t)>& on_slices = {});

}  // namespace floe::silver::merge_internal
