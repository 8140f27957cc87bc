// Appends rows to one Iceberg table between checkpoints: batches are split by the
// table's partition spec and streamed to disk through one DataFileWriter per
// partition as they arrive (so a huge transaction never sits in memory), and a
// checkpoint commits every file written since the last one as one `append` snapshot
// whose summary carries `floe.commit-lsn` (docs/design.md §3).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/lsn.h"
#include "floe/iceberg/table.h"

namespace floe::bronze {


class TableAppender {
 public:
  explicit TableAppender(std::unique_ptr<iceberg::Table> table);
  ~TableAppender();

  iceberg::Table& table() { return *table_; }
  const iceberg::Table& table() const { return *table_; }

  /// What the table holds: `floe.commit-lsn` of its last commit by floe.
  Lsn committed_lsn() const { return committed_lsn_; }
  /// Whether the table has any snapshot at all.
  bool has_snapshot() const { return table_->metadata().current_snapshot_id.has_value(); }

  /// Writes `batch` (the table's Arrow schema, iceberg::ToArrowSchema) to the data
  /// files of its partitions. Nothing is committed. Each `lane` has data files of
  /// its own: calls with different lanes may run at once on different threads (a
  /// copy's writers), never two with the same lane, nor with any other method.
  arrow::Status Write(const arrow::RecordBatch& batch, int lane = 0);

  /// Rows written since the last commit.
  int64_t pending_rows() const { return pending_rows_; }
  /// In-memory bytes of the batches written since the last commit (a bound on what
  /// the open writers buffer).
  int64_t pending_bytes() const { return pending_bytes_; }

  /// Closes the open data files (before a schema change, which the files must not
  /// straddle). They are committed with the next Commit.
  arrow::Status CloseFiles();

  /// Commits the files written since the last commit, with `floe.commit-lsn` =
  /// `commit_lsn` (never lowered: the larger of it and the committed value) plus
  /// `summary`. With no rows written, commits nothing unless `force` (e.g. an
  /// empty snapshot copy must still mark the table as copied).
  arrow::Status Commit(Lsn commit_lsn, const iceberg::SummaryProperties& summary = {},
                       bool force = false);
  /// Commit with `floe.commit-lsn` set to exactly `commit_lsn`, even when lower: a
  /// fresh copy of the table (which may come from another cluster after
  /// --resnapshot) restarts its position. Always commits.
  arrow::Status CommitResettingLsn(Lsn commit_lsn,
                                   const iceberg::SummaryProperties& summary = {});

  /// Drops what was written since the last commit (its files become orphans).
  void Abandon();

  /// What the last successful commit added.
  struct CommitStats {
    int64_t rows = 0;
    int64_t bytes = 0;
    int64_t files = 0;
  };
  const CommitStats& last_commit() const { return last_commit_; }

 private:
  arrow::Status CommitAt(Lsn lsn, const iceberg::SummaryProperties& summary);

  std::unique_ptr<iceberg::Table> table_;
  Lsn committed_lsn_;
  /// By lane and partition path. writers_mu_ guards the map and the pending counts
  /// while lanes write at once; a writer itself is used by its lane alone.
  std::map<std::pair<int, std::string>, std::unique_ptr<iceberg::DataFileWriter>>
      writers_;
  std::mutex writers_mu_;
  std::vector<iceberg::DataFile> closed_files_;
  int64_t pending_rows_ = 0;
  int64_t pending_bytes_ = 0;
  CommitStats last_commit_;
};

/// Small change batches of one table waiting to be written together (one per
/// transaction when transactions are small), so that per-batch costs (conform,
/// partition split, a Parquet write call) are paid once per few thousand rows.
/// ChangeStream delivers each transaction's rows as a zero-copy slice of a batch
/// shared with its neighbours: a slice that continues the last one (same buffers,
/// starting where it ended) extends that run instead of being kept on its own, so a
/// single-row transaction costs a few pointer comparisons here, and Take
/// concatenates runs (one per shared batch), not transactions.
class BatchBuffer {
 public:
  /// Adds `batch`. Every batch added until the next Take or Clear must have the
  /// same schema.
  arrow::Status Add(std::shared_ptr<arrow::RecordBatch> batch);
  /// The buffered rows, in the order they were added, as one batch (null when
  /// empty); the buffer is empty afterwards.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Take();
  void Clear();

  bool empty() const { return runs_.empty(); }
  int64_t rows() const { return rows_; }
  /// Bytes of the buffer ranges the added batches reference (what arrow::util::
  /// ReferencedBufferSize counts, summed over them, computed without its
  /// allocations): what the buffered rows hold in memory.
  int64_t bytes() const { return bytes_; }
  /// Runs of contiguous rows held (what Take concatenates).
  size_t runs() const { return runs_.size(); }

 private:
  struct Run {
    std::shared_ptr<arrow::RecordBatch> first;  // the run's first slice
    int64_t rows = 0;                           // rows from its first one on
  };
  std::vector<Run> runs_;
  int64_t rows_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace floe::bronze
