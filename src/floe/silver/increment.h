// The Bronze increment of one merge, read once and held within a memory budget
// (docs/silver.md "Memory"): in memory when it fits, else spilled to local disk in
// partitions by the Iceberg bucket of the first key column, so that the merge can
// fold, look up and write a slice of Silver's buckets at a time.
//
// A slice must hold every change the fold of its keys reads:
//  * the changes of its keys: a key's changes share its first key column, so its
//    bucket, so its partition;
//  * every `t` (a truncate, or the start of a copy again): written to every
//    partition;
//  * the old key's changes of a key-changing update whose new row takes an unchanged
//    TOAST value from it (the `c` with a cdc_unchanged list right after the old key's
//    `d`), and so on back along a chain of such updates: read from the old key's
//    partition into the slice (Load), after the slice's own rows, so that the merge
//    folds them but writes only the slice's own keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/table.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/silver/spill.h"

namespace floe::silver {

/// The Bronze rows lower < cdc_commit_lsn <= upper (lower 0: from the start).
iceberg::ExpressionPtr CommitLsnRange(uint64_t lower, uint64_t upper);

struct IncrementOptions {
  /// The raw Arrow bytes of changes one slice may hold (the merge's working memory is
  /// a small multiple of it: MergeOptions::memory_limit / kWorkingSetFactor).
  int64_t slice_bytes = int64_t{64} << 20;
  /// Where the spill directory is made (removed when the Increment goes).
  std::filesystem::path spill_parent;
  /// Silver's bucket count when the table exists; 0 before a backfill (whose bucket
  /// count is a power of two, chosen later).
  int32_t silver_buckets = 0;
  /// The bytes of one of Silver's rows in Arrow form (0: unknown): a change weighs at
  /// least that much in a slice, since the fold may read the key's Silver row and
  /// writes a whole row back.
  int64_t row_bytes = 0;
  /// The Bronze names of every key column, the first one first (empty: the first
  /// only): a KeyMove names its keys by all of them, so that a slice imports only
  /// the old keys' rows, not every row sharing their first column.
  std::vector<std::string> key_columns;
  /// Decode Bronze's Parquet on a thread of its own while the batches decoded before
  /// are taken in (a merge with a thread to spare): at most kReadAhead batches ahead.
  bool read_ahead = false;
};

/// The decoded Bronze batches a read-ahead holds at most, waiting to be taken in.
inline constexpr size_t kReadAhead = 2;

/// A key-changing update whose new row takes an unchanged value from the old key's
/// row: each key (EncodeKey of its Bronze key columns) and its partition.
struct KeyMove {
  int32_t from_partition = 0;
  std::string from_key;
  int32_t to_partition = 0;
  std::string to_key;
};

/// The partitions of an increment that one pass of the merge folds and writes.
struct Slice {
  std::vector<int32_t> partitions;
  int64_t bytes = 0;
};

class Increment {
 public:
  ~Increment();
  Increment(const Increment&) = delete;
  Increment& operator=(const Increment&) = delete;

  /// Reads the Bronze rows lower < cdc_commit_lsn <= upper of `bronze`'s current
  /// snapshot, in `columns` (Bronze names; cdc_op, cdc_commit_lsn, cdc_seq and
  /// cdc_unchanged among them), one data file at a time; spills when they pass
  /// options.slice_bytes. `key_column` is the Bronze name of the first key column.
  static arrow::Result<std::unique_ptr<Increment>> Read(
      const iceberg::TableMetadata& bronze, iceberg::FileIO& io, uint64_t lower,
      uint64_t upper, const std::vector<std::string>& columns,
      const std::string& key_column, const IncrementOptions& options);

  /// Whether the rows went to disk; otherwise All() holds them.
  bool spilled() const { return spill_ != nullptr; }
  /// The spill's directory (empty when not spilled): other files of the merge's
  /// (UpsertRuns') go there too, removed with it.
  std::filesystem::path spill_dir() const;
  /// The whole increment (not spilled).
  const std::shared_ptr<arrow::Table>& All() const { return all_; }

  int64_t rows() const { return rows_; }
  /// Raw Arrow bytes read.
  int64_t bytes() const { return bytes_; }
  /// Keys the increment leaves alive, estimated from its operations (inserts and
  /// copied rows minus deletes), for a new table's bucket count.
  int64_t live_estimate() const { return live_estimate_; }
  int32_t partitions() const { return partitions_; }
  /// The bytes of changes a slice holds (IncrementOptions::slice_bytes).
  int64_t slice_bytes() const { return options_.slice_bytes; }

  /// The slices for a Silver table of `buckets` buckets (a power of two, or the
  /// silver_buckets the rows were spilled for): partitions of one bucket together
  /// as long as the bucket fits, each slice under options.slice_bytes unless one
  /// partition alone is not.
  std::vector<Slice> PlanSlices(int32_t buckets) const;

  /// The partitions that may hold rows of bucket `bucket` of a `buckets`-bucket
  /// table (every partition when the rows were spilled for another bucket count).
  std::vector<int32_t> PartitionsOfBucket(int32_t bucket, int32_t buckets) const;

  /// The rows of `slice`: its partitions' and every `t` row (the first `own_rows`
  /// rows), then the changes of other partitions' keys that key-changing updates of
  /// its keys carry values over from (KeyMove, followed back).
  arrow::Result<std::shared_ptr<arrow::Table>> Load(const Slice& slice,
                                                    int64_t* own_rows = nullptr) const;

 private:
  Increment() = default;

  // The keys of other partitions whose rows `slice` folds with its own: per
  // partition, the first key column values (EncodeKey).
  std::map<int32_t, std::set<std::string>> ImportsOf(const Slice& slice) const;

  std::shared_ptr<arrow::Table> all_;
  std::unique_ptr<PartitionSpill> spill_;
  /// The `t` rows (kept apart, added to every slice).
  std::vector<std::shared_ptr<arrow::RecordBatch>> truncates_;
  /// Key-changing updates carrying values over between partitions.
  std::vector<KeyMove> moves_;
  /// The Bronze names of the key columns moves name their keys by.
  std::vector<std::string> key_columns_;
  std::vector<int64_t> partition_bytes_;
  int64_t rows_ = 0;
  int64_t bytes_ = 0;
  int64_t live_estimate_ = 0;
  int32_t partitions_ = 1;
  int32_t spilled_for_buckets_ = 0;
  IncrementOptions options_;
};

}  // namespace floe::silver
