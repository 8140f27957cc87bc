// The initial snapshot of a source database: every row of a set of tables, read in
// parallel by N worker connections that all see exactly the database state at the
// replication slot's consistent point, so the snapshot plus the slot's changes from
// that point is the full history with no gap and no duplicate.
//
// How: the slot is created with an exported snapshot (CreateSlot with kExport); its
// replication connection stays open and idle while SnapshotReader::Open imports that
// snapshot into every worker (`BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SET
// TRANSACTION SNAPSHOT '<name>'`). Tables are split into chunks (primary-key ranges
// for a single-column integer key, else `ctid` page ranges), all chunks go into one
// queue, and each worker reads its chunks with `COPY (SELECT ...) TO STDOUT` and hands
// the rows to the caller's sink in batches: as text values (SnapshotOutput::kText,
// text COPY, unescaped), or as Arrow arrays of the type mapping
// (SnapshotOutput::kArrow, by default from `COPY ... (FORMAT binary)`: the types
// with a BinaryFormat decoded from their send format, every other column selected
// through its output function and converted from that text).
//
// Interruption rule: a snapshot either finishes completely or is thrown away. The
// exported snapshot dies with the connections that hold it, so a snapshot cannot be
// resumed consistently; any failure (a worker connection lost, a query error, the
// sink refusing a batch, Cancel) stops every worker and Run returns an error carrying
// SnapshotIncompleteDetail. Batches delivered before the failure belong to no
// snapshot and must be discarded; the caller restarts from scratch with a new slot.
// Only an OK result from Run says "complete" — nothing is reported complete per table.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "floe/common/lsn.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/replication_connection.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::postgres {

// ---------------------------------------------------------------------------
// COPY text format (pure, unit-tested)

/// Appends the value of one COPY text field (its escapes undone) to `out`: `\b`, `\f`,
/// `\n`, `\r`, `\t`, `\v`, `\\`, `\` + 1-3 octal digits, `\x` + 1-2 hex digits, and `\`
/// + any other character standing for that character (COPY's own rules). A trailing
/// lone backslash is an error. The null marker `\N` is not a value: check
/// IsCopyNull first.
arrow::Status UnescapeCopyText(std::string_view field, std::string* out);

/// Whether a COPY text field is the null marker `\N`.
inline bool IsCopyNull(std::string_view field) { return field == "\\N"; }

// ---------------------------------------------------------------------------
// COPY binary format (pure, unit-tested)

/// The 11 bytes a binary COPY starts with.
inline constexpr std::string_view kCopyBinarySignature{"PGCOPY\n\377\r\n\0", 11};

/// Reads the CopyData messages of `COPY ... TO STDOUT (FORMAT binary)`, strictly:
/// the header (signature, Int32 flags, Int32 extension length + extension) in front
/// of the first tuple, then tuples (Int16 field count, per field Int32 length, -1 for
/// NULL, and that many bytes), then the trailer (Int16 -1). The server sends whole
/// tuples per message; a tuple split across messages, a field count other than the
/// table's, a length below -1, a critical flag bit (0-15, or 16: OIDs) and anything
/// after the trailer are errors naming the byte offset in the message.
class CopyBinaryReader {
 public:
  /// One field of a tuple; valid until the message it points into goes.
  struct Field {
    const char* data = nullptr;
    /// -1: NULL.
    int32_t length = -1;
    bool is_null() const { return length < 0; }
    std::string_view bytes() const {
      return std::string_view(data, static_cast<size_t>(length));
    }
  };
  using RowCallback = std::function<arrow::Status(const std::vector<Field>&)>;

  explicit CopyBinaryReader(size_t num_columns) : num_columns_(num_columns) {}

  /// Reads one message, calling `on_row` for each tuple in it (a non-OK status from
  /// it stops the read and is returned).
  arrow::Status Read(std::string_view message, const RowCallback& on_row);
  /// Whether the trailer arrived (the COPY is complete).
  bool finished() const { return finished_; }

 private:
  size_t num_columns_;
  bool header_done_ = false;
  bool finished_ = false;
  std::vector<Field> fields_;
};

// ---------------------------------------------------------------------------
// Batches handed to the sink

/// How the reader hands rows over.
enum class SnapshotOutput {
  /// SnapshotBatch::value(): each value's text as Postgres' output function renders
  /// it (text COPY).
  kText,
  /// SnapshotBatch::arrow_batch(): the row columns as Arrow arrays of
  /// type_mapping's types, with the ConversionIssues of values they cannot hold.
  kArrow,
};

/// The COPY format behind SnapshotOutput::kArrow.
enum class SnapshotCopyFormat {
  /// `(FORMAT binary)`: BinaryFormat types decoded from their send format, the
  /// others selected through their output function (`textin(typoutput(c))`) and
  /// converted from that text.
  kBinary,
  /// Text COPY, every value through ColumnConverter::Append.
  kText,
};

/// A value of a kArrow batch that its type cannot hold (appended as null).
struct SnapshotIssue {
  /// Row inside the batch.
  size_t row = 0;
  ConversionIssue issue;
};

/// Rows of one table: the values of all rows in one buffer with offsets, so a batch
/// costs a few allocations however many rows it holds (and none once a worker's batch
/// has grown to its working size: it is cleared and reused).
class SnapshotBatch {
 public:
  /// Index of the table in the list given to Run.
  size_t table_index = 0;
  const QualifiedTable* table = nullptr;
  const std::vector<std::string>* column_names = nullptr;

  size_t num_columns() const { return column_names ? column_names->size() : 0; }
  size_t num_rows() const { return num_rows_; }
  /// SnapshotOutput::kArrow only: the rows, one array per column (in column_names
  /// order) of the type type_mapping maps it to. Shared: may be kept.
  const std::shared_ptr<arrow::RecordBatch>& arrow_batch() const { return arrow_; }
  /// SnapshotOutput::kArrow only: values appended as null because their type cannot
  /// hold them (quarantine candidates), in row order.
  const std::vector<SnapshotIssue>& issues() const { return issues_; }
  /// SnapshotOutput::kArrow only: how each column was mapped.
  const std::vector<ColumnMapping>* mappings = nullptr;
  /// SnapshotOutput::kText only: the text value of `column` in `row` (as Postgres'
  /// output function renders it in floe's pinned session), nullopt for SQL NULL.
  /// Valid while the batch is.
  std::optional<std::string_view> value(size_t row, size_t column) const {
    const size_t i = row * num_columns() + column;
    if (nulls_[i]) return std::nullopt;
    return std::string_view(data_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  /// Bytes of value text held.
  size_t data_size() const { return data_.size(); }

  void Clear();
  /// Parses one COPY text row (trailing newline optional) and appends it. The row
  /// must have exactly num_columns() fields.
  arrow::Status AppendCopyRow(std::string_view line);

 private:
  friend class SnapshotReader;
  std::shared_ptr<arrow::RecordBatch> arrow_;
  std::vector<SnapshotIssue> issues_;
  std::string data_;
  /// Value i spans data_[offsets_[i], offsets_[i + 1]); offsets_ starts with 0.
  std::vector<size_t> offsets_{0};
  std::vector<uint8_t> nulls_;
  size_t num_rows_ = 0;
};

/// Receives batches, concurrently from the worker threads; the batch is only valid
/// during the call. A non-OK status stops the snapshot (it is then incomplete).
using SnapshotSink = std::function<arrow::Status(const SnapshotBatch&)>;

// ---------------------------------------------------------------------------
// Chunk planning (pure, unit-tested)

/// What the planner needs to know about a table (read from the catalog inside the
/// snapshot by SnapshotReader).
struct TableLayout {
  QualifiedTable name;
  std::vector<std::string> columns;
  /// The primary key column, when the key is a single int2/int4/int8 column.
  std::optional<std::string> integer_key;
  /// min and max of integer_key in the snapshot (nullopt: the table is empty).
  std::optional<int64_t> key_min, key_max;
  /// Heap pages (pg_relation_size / block_size); 0 for an empty or partitioned table.
  int64_t pages = 0;
  /// reltuples, or -1 when the server has no estimate.
  int64_t estimated_rows = -1;
  /// A partitioned parent: no heap of its own, so no ctid ranges.
  bool partitioned = false;
  /// Per column: pg_attribute.atttypid and atttypmod.
  std::vector<Oid> type_oids;
  std::vector<int32_t> typmods;
  /// Per column: its type's output function, quoted and schema-qualified.
  std::vector<std::string> output_functions;
  /// The publication's row filter on the table (TableDescription::row_filter):
  /// ANDed into every chunk's predicate. Empty: none.
  std::string row_filter;
};

enum class ChunkKind {
  /// The whole table, no predicate.
  kWhole,
  /// `key >= lo AND key < hi` (an absent bound is open).
  kKeyRange,
  /// `ctid >= '(lo,0)' AND ctid < '(hi,0)'` (an absent bound is open).
  kPageRange,
};

struct SnapshotChunk {
  size_t table_index = 0;
  ChunkKind kind = ChunkKind::kWhole;
  std::optional<int64_t> lo, hi;
  /// Share of the table's estimated rows, for progress.
  int64_t estimated_rows = 0;
};

struct ChunkingOptions {
  /// Aim for chunks of about this many rows.
  int64_t target_rows = 100'000;
  /// Page-range chunks span about this many heap pages.
  int64_t target_pages = 2'000;
  /// Never more chunks than this per table.
  int64_t max_chunks_per_table = 1024;
};

/// Splits one table into chunks that together cover every row exactly once: the
/// first chunk has no lower bound and the last no upper bound, so rows outside the
/// sampled min/max or beyond the measured pages are still read. Key ranges are even
/// slices of [key_min, key_max] (enough of them for target_rows each at the estimated
/// row count); page ranges are target_pages wide. An empty table is one kWhole chunk.
std::vector<SnapshotChunk> PlanChunks(const TableLayout& table, size_t table_index,
                                      const ChunkingOptions& options);

/// The WHERE clause of a chunk ("" for kWhole), with `quoted_key` the quoted key column.
std::string ChunkPredicate(const SnapshotChunk& chunk, std::string_view quoted_key);

// ---------------------------------------------------------------------------
// Progress

/// A consistent-enough reading of the counters (each counter is exact; they are not
/// read atomically together).
struct SnapshotProgressSample {
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t chunks_done = 0;
  int64_t chunks_total = 0;
  /// Sum of the tables' estimates; <= 0 when unknown.
  int64_t estimated_rows = 0;
  std::chrono::steady_clock::duration elapsed{};
};

/// `snapshot: 120000/1000000 rows (12%), 3/10 chunks, 45000 rows/s, ETA 19s`. The
/// percentage follows the row estimate (capped at 99% until every chunk is done),
/// or the chunks when there is no estimate; rate and ETA are omitted until known.
/// With `bar` (on a terminal) a bar follows `snapshot: ` (common/progress.h).
std::string FormatProgressLine(const SnapshotProgressSample& sample, bool bar = false);

/// Counters updated by the workers and readable from any thread.
class SnapshotProgress {
 public:
  struct Table {
    QualifiedTable name;
    std::atomic<int64_t> rows{0};
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> chunks_done{0};
    int64_t chunks_total = 0;
    int64_t estimated_rows = -1;
  };

  SnapshotProgressSample Sample() const;
  /// Whether Run has planned: tables() is filled and no longer changes.
  bool planned() const { return planned_.load(std::memory_order_acquire); }
  /// One entry per table; read only once planned() is true.
  const std::vector<std::unique_ptr<Table>>& tables() const { return tables_; }

 private:
  friend class SnapshotReader;
  std::vector<std::unique_ptr<Table>> tables_;
  std::atomic<bool> planned_{false};
  std::atomic<int64_t> rows_{0}, bytes_{0}, chunks_done_{0}, chunks_total_{0};
  std::atomic<int64_t> estimated_rows_{0};
  /// steady_clock nanoseconds at the start of Run; 0 before.
  std::atomic<int64_t> start_ns_{0};
};

// ---------------------------------------------------------------------------
// The reader

/// Where the snapshot's rows come from and which LSN they stand for.
struct SnapshotSource {
  /// The exported snapshot every worker imports; nullopt: each worker takes its own
  /// REPEATABLE READ snapshot (not consistent across workers; see Unsynchronized).
  std::optional<std::string> snapshot_name;
  /// The LSN the snapshot stands for: changes committed after it come from the slot.
  Lsn consistent_point;
  /// Unsynchronized only: the caller's LSN bounds around the read (for an
  /// incremental, watermark-based snapshot; deduplication against the stream between
  /// the bounds is the caller's job and not implemented yet).
  Lsn low_watermark, high_watermark;

  /// The slot's exported snapshot and consistent point.
  static SnapshotSource Exported(const CreatedSlot& slot);
  static SnapshotSource Unsynchronized(Lsn low, Lsn high);
};

struct SnapshotOptions {
  int workers = 4;
  /// The publication whose column list and row filter the copy follows (a copy
  /// reads what the stream would send: the listed columns, the rows the filter
  /// publishes). Empty: every column and row.
  std::string publication;
  /// Text values (what floe run consumes today) or Arrow arrays.
  SnapshotOutput output = SnapshotOutput::kText;
  /// kArrow only: which COPY format to read (binary unless measured otherwise; see
  /// the README).
  SnapshotCopyFormat copy_format = SnapshotCopyFormat::kBinary;
  ChunkingOptions chunking;
  /// A batch is handed to the sink at this many rows or value bytes.
  size_t batch_rows = 8192;
  size_t batch_bytes = 4 << 20;
  /// Progress lines to this stream (nullptr: none). On a terminal one line is
  /// redrawn every progress_tty_interval; otherwise a line every progress_interval.
  FILE* progress_stream = nullptr;
  std::chrono::milliseconds progress_interval{10'000};
  std::chrono::milliseconds progress_tty_interval{500};
  /// Called with each progress sample, from the progress thread (may be empty).
  std::function<void(const SnapshotProgressSample&)> on_progress;
};

struct TableSnapshotStats {
  QualifiedTable table;
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t chunks = 0;
};

/// The outcome of a complete snapshot.
struct SnapshotResult {
  Lsn consistent_point;
  std::vector<TableSnapshotStats> tables;
  int64_t rows = 0;
  int64_t bytes = 0;
  std::chrono::steady_clock::duration elapsed{};
};

/// Attached to every error of Run: the snapshot is incomplete and what it delivered
/// must be discarded.
class SnapshotIncompleteDetail : public arrow::StatusDetail {
 public:
  static constexpr const char* kTypeId = "floe::postgres::SnapshotIncomplete";
  SnapshotIncompleteDetail(int64_t chunks_done, int64_t chunks_total)
      : chunks_done_(chunks_done), chunks_total_(chunks_total) {}
  const char* type_id() const override { return kTypeId; }
  std::string ToString() const override;
  int64_t chunks_done() const { return chunks_done_; }
  int64_t chunks_total() const { return chunks_total_; }

 private:
  int64_t chunks_done_, chunks_total_;
};

/// Whether `status` says a snapshot did not complete.
bool IsSnapshotIncomplete(const arrow::Status& status);

class SnapshotReader {
 public:
  /// Opens options.workers SQL connections and, for an exported snapshot, imports it
  /// into each. The replication connection that exported it must stay open and idle
  /// until Open returns; afterwards it may stream or close.
  static arrow::Result<std::unique_ptr<SnapshotReader>> Open(const std::string& conninfo,
                                                             SnapshotSource source,
                                                             SnapshotOptions options);
  ~SnapshotReader();
  SnapshotReader(const SnapshotReader&) = delete;
  SnapshotReader& operator=(const SnapshotReader&) = delete;

  /// Reads every row of `tables` into `sink`. Runs once: the snapshot's transactions
  /// end with it. Errors carry SnapshotIncompleteDetail.
  arrow::Result<SnapshotResult> Run(const std::vector<QualifiedTable>& tables,
                                    const SnapshotSink& sink);

  /// Asks Run to stop (from any thread); Run then returns Cancelled, incomplete.
  void Cancel() { cancelled_.store(true); }

  const SnapshotProgress& progress() const { return progress_; }
  const SnapshotSource& source() const { return source_; }

 private:
  struct Worker;
  struct TablePlan;
  SnapshotReader(SnapshotSource source, SnapshotOptions options);
  arrow::Result<TableLayout> DescribeTable(PgConnection& conn, const QualifiedTable& t);
  arrow::Status PlanTable(PgConnection& conn, TypeResolver& types,
                          const TableLayout& layout);
  arrow::Status RunWorker(Worker& worker, const std::vector<TableLayout>& layouts,
                          const std::vector<SnapshotChunk>& chunks,
                          std::atomic<size_t>& next, const SnapshotSink& sink);
  arrow::Status ReadChunk(Worker& worker, const TableLayout& layout,
                          const SnapshotChunk& chunk, const SnapshotSink& sink);
  // The COPY statement of a chunk; `qualified` gets the table's quoted name.
  static arrow::Result<std::string> CopyStatement(PgConnection& conn,
                                                  const TableLayout& layout,
                                                  const SnapshotChunk& chunk,
                                                  const TablePlan* plan, bool binary,
                                                  std::string* qualified);
  // Converts one text value of batch row `row` into its column's builder.
  static arrow::Status AppendText(Worker& worker, const TablePlan& plan, size_t column,
                                  std::string_view text, size_t row);
  // Converts the rows a text COPY left in the worker's batch into its builders.
  static arrow::Status ConvertTextRows(Worker& worker, const TablePlan& plan);
  // Finishes the builders into the batch's record batch of `arrow_rows` rows.
  static arrow::Status FinishArrowBatch(Worker& worker, const TablePlan& plan,
                                        size_t arrow_rows);
  // Appends one binary COPY row (batch row `row`) to the worker's builders.
  static arrow::Status AppendBinaryRow(Worker& worker, const TablePlan& plan,
                                       const std::vector<CopyBinaryReader::Field>& fields,
                                       size_t row);
  // Describes and plans `tables` into layouts and chunks, counted in progress_.
  arrow::Status PlanTables(const std::vector<QualifiedTable>& tables,
                           std::vector<TableLayout>* layouts,
                           std::vector<SnapshotChunk>* chunks);
  // The reporter thread: reports progress every interval until `done`, then once more.
  void ReportProgress(std::mutex& mu, std::condition_variable& cv, const bool& done);
  // The status Run fails with: the root cause among the workers' (OK if none failed).
  arrow::Status FirstFailure() const;

  SnapshotSource source_;
  SnapshotOptions options_;
  std::vector<std::unique_ptr<Worker>> workers_;
  /// kArrow: per table, its converters and select list (filled before the workers
  /// start, read-only afterwards).
  std::vector<std::unique_ptr<TablePlan>> plans_;
  SnapshotProgress progress_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  bool ran_ = false;
};

}  // namespace floe::postgres
