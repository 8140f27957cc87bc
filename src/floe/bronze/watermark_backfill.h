// The pieces of a watermark backfill (DBLog's algorithm) that do not need a
// database: the watermark messages, the chunk window that decides which rows of a
// chunk are still current, the key of a row, the progress record kept in the Bronze
// snapshot summary, and turning chunk rows into `r` changes. `floe run`
// (pipeline_backfill.cc) drives them; docs/running.md describes the protocol.
//
// One chunk: a low watermark is committed (`pg_logical_emit_message(true,
// 'floe.watermark', ...)`), the next rows in key order are selected in a fresh
// snapshot S, a high watermark is committed. In the stream, every change to the table
// between the two watermarks, and every change of a transaction S could not see that
// arrives before the high watermark, marks its key: that key's row in the chunk may
// be stale, and the streamed change carries the newer state. At the high watermark
// the chunk's other rows are emitted as `r` changes positioned in the high
// watermark's transaction, after everything S could see and before everything it
// could not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "floe/bronze/bronze_schema.h"
#include "floe/common/lsn.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/lake/keys.h"
#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/pg_connection.h"

namespace floe::bronze {



/// One watermark message: `{"table": ..., "chunk": ..., "mark": "low" | "high"}`.
struct Watermark {
  enum class Kind { kLow, kHigh };
  std::string table;  // schema.table
  std::string chunk;  // unique per chunk issued
  Kind kind = Kind::kLow;

  std::string ToContent() const;
  /// Nullopt for a content that is not a watermark (then it is ignored).
  static std::optional<Watermark> Parse(const std::string& content);
};

/// The transaction ids a snapshot could not see (`pg_current_snapshot()`):
/// `xmin:xmax:xip,...`.
struct SnapshotXids {
  uint64_t xmin = 0;
  uint64_t xmax = 0;
  std::vector<uint64_t> xip;

  static arrow::Result<SnapshotXids> Parse(const std::string& text);
  /// Whether the changes of top-level transaction `xid` (32-bit, as pgoutput sends
  /// it) were invisible to the snapshot: in progress, or not started, when it was
  /// taken.
  bool Invisible(postgres::TransactionId xid) const;
};

/// The window of one chunk. Changes are reported in stream order.
class ChunkWindow {
 public:
  enum class Phase { kIssued, kOpen, kClosed };

  /// `row_keys`: the key (RowKeys) of each row of the chunk, in order.
  ChunkWindow(std::string table, std::string chunk, SnapshotXids snapshot,
              std::vector<std::string> row_keys);

  /// A delivered transaction `xid` changed these keys of the table. Counted while
  /// the window is open, and before it opens when the snapshot could not see `xid`.
  void OnChanges(postgres::TransactionId xid, const std::vector<std::string>& keys);
  /// A truncate of the table: every row of the chunk may be stale (same rule).
  void OnTruncate(postgres::TransactionId xid);
  /// Returns whether `mark` is this chunk's; the low one opens the window, the high
  /// one closes it. Other tables' and other chunks' watermarks change nothing.
  bool OnWatermark(const Watermark& mark);

  /// Whether a change of transaction `xid` delivered now counts.
  bool Counts(postgres::TransactionId xid) const;
  Phase phase() const { return phase_; }
  const std::string& chunk() const { return chunk_; }
  const std::vector<std::string>& row_keys() const { return row_keys_; }
  /// Indices of the chunk rows whose key no counted change touched (all of them
  /// after a counted truncate: none). REQUIRES: phase() == kClosed.
  std::vector<int64_t> RowsToEmit() const;
  int64_t changed_keys() const { return static_cast<int64_t>(changed_.size()); }

 private:
  std::string table_;
  std::string chunk_;
  SnapshotXids snapshot_;
  std::vector<std::string> row_keys_;
  Phase phase_ = Phase::kIssued;
  std::unordered_set<std::string> changed_;
  bool truncated_ = false;
};

/// A comparable key per row of `batch` from its columns `key_columns` (an Arrow
/// rendering of each value, length-prefixed): equal values of the same Arrow type
/// give equal keys, whether they came from the stream or from a chunk select.
arrow::Result<std::vector<std::string>> RowKeys(
    const arrow::RecordBatch& batch, const std::vector<std::string>& key_columns);

/// A backfill's progress. The snapshot summary (lake::kBackfillSummaryKey) holds
/// SummaryJson(): counts only. Key values are the table's data, not metadata for
/// anyone who may read the catalog: `after` and `retry` go to a file beside the
/// table's data files (WriteBackfillKeys), which the summary names
/// (lake::kBackfillKeysSummaryKey).
struct BackfillProgress {
  /// Identifies one backfill of the table (a later backfill has another).
  std::string id;
  /// The key (text form, one per key column) of the last row done; empty before the
  /// first chunk.
  std::vector<std::string> after;
  /// Keys (text forms) at or before `after` whose chunk row lost to an update
  /// inside its window that did not send every column (unchanged TOAST) while
  /// Bronze held no whole row of the key: they are selected again with a later
  /// chunk, until a window passes without such an update.
  std::vector<std::vector<std::string>> retry;
  /// The key columns `after` and `retry` are values of (empty in records written
  /// before they were kept): a resumed backfill whose table has another key now
  /// starts again from the first key.
  std::vector<std::string> key_columns;
  bool done = false;
  int64_t rows = 0;    // `r` rows emitted so far
  int64_t chunks = 0;  // chunks done so far

  /// Whether there are key values to keep (a file for them is written).
  bool has_keys() const { return !done && (!after.empty() || !retry.empty()); }

  /// Everything, keys included: the keys file, and the in-memory record of what
  /// was committed.
  std::string ToJson() const;
  /// Without `after` and `retry`: the snapshot summary's record.
  std::string SummaryJson() const;
  /// Either form (a summary written before keys moved to their own file has them).
  static arrow::Result<BackfillProgress> FromJson(const std::string& json);
  bool operator==(const BackfillProgress&) const = default;
};

/// Writes `progress`'s keys (ToJson()) to a new file under `table_location`'s data
/// directory; returns its location, for lake::kBackfillKeysSummaryKey.
arrow::Result<std::string> WriteBackfillKeys(iceberg::FileIO& io,
                                             const std::string& table_location,
                                             const BackfillProgress& progress);

/// The progress on the latest snapshot of `metadata`'s ancestry that records a
/// backfill, unless a full copy (`floe.snapshot-lsn`) came later; nullopt when none.
/// Its keys are read from the file the snapshot names. A keys file that is gone
/// (removed by hand), unreadable or of another record leaves them empty, with a
/// warning: the backfill starts again from the first key, which re-reads rows but
/// loses none.
arrow::Result<std::optional<BackfillProgress>> BackfillProgressOf(
    iceberg::FileIO& io, const iceberg::TableMetadata& metadata);

/// Where `r` rows are placed in the change order: the high watermark's transaction.
struct RowsPosition {
  Lsn commit_lsn;
  Lsn source_lsn;
  postgres::TransactionId xid = 0;
  int64_t commit_time_us = 0;
};

/// The chunk rows `selected` (indices into `rows`, whose values are the text forms
/// of `columns` in order) as a change batch of `columns` + CdcMetadataFields():
/// cdc_op 'r' at `at`, cdc_seq counting from 0. Values a type cannot hold are null
/// and reported in `issues` (their row index in the result in `issue_rows`).
arrow::Result<std::shared_ptr<arrow::RecordBatch>> ChunkRowsBatch(
    const std::vector<SourceColumn>& columns, const std::vector<postgres::PgRow>& rows,
    const std::vector<int64_t>& selected, const RowsPosition& at,
    std::vector<postgres::ConversionIssue>* issues, std::vector<int64_t>* issue_rows);

/// The key columns' values of `rows` (text forms of `columns`) converted as the
/// stream converts them, then RowKeys.
arrow::Result<std::vector<std::string>> ChunkRowKeys(
    const std::vector<SourceColumn>& columns, const std::vector<postgres::PgRow>& rows,
    const std::vector<std::string>& key_columns);

}  // namespace floe::bronze
