// The change stream: committed transactions of a pgoutput replication stream, in
// commit order, as per-table Arrow record batches of the row columns followed by the
// CDC metadata columns of docs/design.md §2 (cdc_op, cdc_ts, cdc_source_lsn,
// cdc_source_tx_id, cdc_commit_lsn, cdc_seq, cdc_unchanged), with the logical
// messages, the conversion issues (quarantine candidates) and the relation (schema)
// changes the consumer needs to keep its tables in step.
//
// Memory. A transaction that is not streamed is buffered as Arrow batches until its
// Commit arrives (pgoutput sends it only once it committed, and the server streams
// every transaction that outgrows `logical_decoding_work_mem` when `streaming` is on,
// so what is buffered stays within about that setting, 64MB by default). A streamed
// transaction is never held in memory: each of its pgoutput messages is appended, raw,
// with its WAL position and the xid it came with, to a per-xid spill file; Stream
// Commit replays the file through the same decode path, delivering bounded batches
// (`max_batch_rows`) as it goes, Stream Abort of the top-level xid deletes the file
// and Stream Abort of a subtransaction marks that xid, whose changes replay skips.
//
// Flow control. Nothing is acknowledged automatically: the consumer calls
// ReportDurable(commit end LSN) once it made a delivered transaction durable.
// Keepalives are answered inside the read loop, so the caller only has to keep
// calling Poll / Run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "floe/common/lsn.h"
#include "floe/source/postgres/pgoutput.h"
#include "floe/source/postgres/relation_cache.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::postgres {

class ReplicationConnection;

// ---------------------------------------------------------------------------
// Where the messages come from

/// One pgoutput message (an XLogData payload) and the WAL position it was sent at.
struct SourceMessage {
  /// The XLogData wal_start: the LSN of the change record (cdc_source_lsn).
  Lsn wal_start;
  /// Valid until the next Read.
  std::string_view payload;
};

/// The XLogData messages of a replication stream. A server connection in
/// production, a list of built messages in tests.
class MessageSource {
 public:
  virtual ~MessageSource() = default;
  /// The next pgoutput message, or nullopt when none arrived within `timeout`.
  virtual arrow::Result<std::optional<SourceMessage>> Read(
      std::chrono::milliseconds timeout) = 0;
  /// Everything up to `lsn` is durable downstream (see ReplicationConnection).
  virtual void ReportDurable(Lsn lsn) = 0;
  /// Called now and then during long work that reads nothing from the source
  /// (replaying a spilled streamed transaction), so that the server does not end
  /// the connection for want of a reply (`wal_sender_timeout`).
  virtual arrow::Status KeepAlive() { return arrow::Status::OK(); }
};

/// MessageSource over a streaming ReplicationConnection (which must outlive it).
/// Keepalives are answered by the connection and never returned.
class ReplicationMessageSource : public MessageSource {
 public:
  explicit ReplicationMessageSource(ReplicationConnection* connection)
      : connection_(connection) {}
  arrow::Result<std::optional<SourceMessage>> Read(
      std::chrono::milliseconds timeout) override;
  void ReportDurable(Lsn lsn) override;
  /// Sends a standby status update (the positions already reported).
  arrow::Status KeepAlive() override;

 private:
  ReplicationConnection* connection_;
};

// ---------------------------------------------------------------------------
// What is delivered

/// Names of the CDC metadata columns, in the order they follow the row columns.
inline constexpr const char* kCdcOp = "cdc_op";
inline constexpr const char* kCdcTs = "cdc_ts";
inline constexpr const char* kCdcSourceLsn = "cdc_source_lsn";
inline constexpr const char* kCdcSourceTxId = "cdc_source_tx_id";
inline constexpr const char* kCdcCommitLsn = "cdc_commit_lsn";
inline constexpr const char* kCdcSeq = "cdc_seq";
inline constexpr const char* kCdcUnchanged = "cdc_unchanged";
inline constexpr int kCdcColumnCount = 7;

/// The Arrow fields of the CDC metadata columns: cdc_op utf8, cdc_ts timestamp(us,
/// UTC), cdc_source_lsn / cdc_source_tx_id / cdc_commit_lsn int64, cdc_seq int32,
/// cdc_unchanged list<utf8>.
arrow::FieldVector CdcMetadataFields();

/// A committed transaction's identity; given to OnBegin and OnCommit.
struct TransactionInfo {
  TransactionId xid = 0;
  /// LSN of the commit record: the cross-transaction order (cdc_commit_lsn).
  Lsn commit_lsn;
  /// End of the commit record: what ReportDurable takes once the transaction is
  /// durable downstream.
  Lsn end_lsn;
  PgTimestamp commit_time = 0;
  /// Arrived in Stream Start/Stop blocks and was replayed from the spill file.
  bool streamed = false;
};

/// One version of a table's shape. A new version starts with every Relation message
/// that differs from the cached one.
struct TableShape {
  Oid relation_id = 0;
  /// 1 for the first shape this stream saw, +1 per change.
  uint64_t version = 0;
  RelationInfo relation;
  /// The row columns (mapped types from type_mapping) then CdcMetadataFields().
  std::shared_ptr<arrow::Schema> schema;
  /// How each row column was mapped (one per relation column, in order): the
  /// converter kind tells e.g. a uuid from a fixed[16].
  std::vector<ColumnMapping> mappings;
  /// Columns whose type is no longer in the source's catalog (dropped after these
  /// changes were written, before floe decoded them), each as "column (type name
  /// or oid)": mapped as text, since only their text form is known.
  std::vector<std::string> unresolved_types;
};

/// Delivered before the first batch of a shape the consumer has not been given yet
/// (the first batch of a table, or the first after a schema change), so it can
/// create or evolve its table first.
struct RelationChange {
  std::shared_ptr<const TableShape> shape;
  /// The shape the consumer was last given for this table; null when this is the
  /// first (then `diff` is empty).
  std::shared_ptr<const TableShape> previous;
  RelationDiff diff;
  /// The commit LSN of the transaction whose changes of this table follow (the
  /// shape is the table's as of that transaction: pgoutput describes a table with
  /// the catalog of the position it decodes, which may lie behind the live one).
  Lsn commit_lsn;
};

/// A value that could not be represented and was written as null: a quarantine
/// candidate (docs/design.md §3 "Nothing is dropped silently").
struct QuarantineCandidate {
  Oid relation_id = 0;
  std::string schema_name;
  std::string table_name;
  /// The change record's LSN and the transaction's commit LSN / xid.
  Lsn source_lsn;
  Lsn commit_lsn;
  TransactionId xid = 0;
  /// cdc_seq of the row that holds the null.
  int32_t seq = 0;
  ConversionIssue issue;
};

/// Rows of one table (one shape) from one transaction: normally one per table the
/// transaction touched; more when the table's shape changed inside the transaction
/// or it has more than `max_batch_rows` rows or `max_batch_bytes` of values. Rows are
/// in cdc_seq order.
/// A row of a change batch that lacks values (unchanged TOAST), with the text form
/// of its key as PostgreSQL sent it: what a backfill needs to select the row again
/// when Bronze holds no whole row of the key.
struct PartialRow {
  /// The row in TableChanges::batch.
  int64_t row = 0;
  /// The values of the shape's row key columns (RelationInfo::row_key()), in that
  /// order; nullopt where the value did not come as text (binary format, null, or
  /// itself unchanged TOAST).
  std::vector<std::optional<std::string>> key;
};

struct TableChanges {
  std::shared_ptr<const TableShape> shape;
  std::shared_ptr<arrow::RecordBatch> batch;
  std::vector<QuarantineCandidate> issues;
  /// The inserts and updates of the batch that lack values, in row order.
  std::vector<PartialRow> partial;
};

/// A `pg_logical_emit_message()` record.
struct CapturedMessage {
  bool transactional = false;
  /// The message record's LSN.
  Lsn lsn;
  std::string prefix;
  std::string content;
  /// The transaction's (transactional messages) or the one the message was decoded
  /// in, when the server sent it (non-transactional ones inside a stream block).
  std::optional<TransactionId> xid;
  /// Transactional messages: their transaction's commit. Unset otherwise.
  Lsn commit_lsn;
  PgTimestamp commit_time = 0;
};

/// Receives the stream. For each committed transaction, in commit order: OnBegin,
/// then its RelationChanges, TableChanges and transactional messages (a relation
/// change always before the batches of its shape, batches of one table in cdc_seq
/// order), then OnCommit. Non-transactional messages arrive through OnMessage
/// outside Begin/Commit, as soon as they are decoded (after every transaction that
/// committed before them). Everything passed is valid only during the call (the
/// batches are shared pointers and may be kept; a batch may be a slice of a larger
/// one shared with neighbouring transactions). An error
/// stops the stream and is returned by Poll / Run.
class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  virtual arrow::Status OnBegin(const TransactionInfo& transaction) = 0;
  virtual arrow::Status OnRelationChange(const RelationChange& change) = 0;
  virtual arrow::Status OnTableChanges(const TransactionInfo& transaction,
                                       const TableChanges& changes) = 0;
  virtual arrow::Status OnMessage(const CapturedMessage& message) = 0;
  virtual arrow::Status OnCommit(const TransactionInfo& transaction) = 0;
};

struct QualifiedName {
  std::string schema;
  std::string table;
  auto operator<=>(const QualifiedName&) const = default;
};

struct ChangeStreamStats {
  int64_t transactions_delivered = 0;
  int64_t transactions_skipped = 0;
  int64_t streamed_transactions = 0;
  int64_t streamed_aborts = 0;
  int64_t rows_delivered = 0;
  int64_t conversion_issues = 0;
  int64_t spilled_bytes = 0;
  /// Largest total size of the spill files at any time.
  int64_t peak_spill_bytes = 0;
  /// MessageSource::KeepAlive calls made while replaying spilled transactions.
  int64_t replay_keepalives = 0;
};

// ---------------------------------------------------------------------------
// The stream

class ChangeStream {
 public:
  struct Options {
    /// Where streamed transactions are spilled, one file per xid. Empty: a fresh
    /// directory under the system temp directory, removed with the stream. A given
    /// directory is created if missing; its files are this stream's only while it
    /// runs (a file left by a crash is truncated on its xid's first segment).
    std::filesystem::path spill_directory;
    /// Transactions whose commit LSN is at or below this are decoded but not
    /// delivered (the consumer already has them); likewise non-transactional
    /// messages at or below it.
    Lsn start_after;
    /// The same, per table: such a table's rows are left out of transactions whose
    /// commit LSN is at or below its value (the transactions are still delivered).
    std::map<QualifiedName, Lsn> table_start_after;
    /// Most rows in one TableChanges batch.
    int64_t max_batch_rows = 65'536;
    /// A batch is sealed once its values (as sent) reach this many bytes, so that
    /// no string or binary column nears Arrow's 2 GiB offset limit (a value is at
    /// most 1 GB in PostgreSQL): a transaction of large values is several batches.
    int64_t max_batch_bytes = int64_t{256} << 20;
    /// During the replay of a spilled transaction, MessageSource::KeepAlive is
    /// called when this much time passed since the last call (checked every 256
    /// messages). Well under any sensible `wal_sender_timeout`.
    std::chrono::milliseconds replay_keepalive_interval{2'000};
    /// Per table: more columns whose change makes an update a delete of the old key
    /// plus an insert of the new one (a merge key declared downstream, silver.keys).
    /// Only those the old tuple carries count (REPLICA IDENTITY FULL, or the identity
    /// index's columns).
    std::map<QualifiedName, std::vector<std::string>> extra_key_columns;
  };

  /// `source`, `attributes` (for the relation cache; may be null), `types` and
  /// `sink` must outlive the stream. `decoder_options` is what StartReplication
  /// returned.
  static arrow::Result<std::unique_ptr<ChangeStream>> Make(
      MessageSource* source, PgOutputOptions decoder_options, AttributeLookup* attributes,
      TypeResolver* types, ChangeSink* sink, Options options);
  ~ChangeStream();
  ChangeStream(const ChangeStream&) = delete;
  ChangeStream& operator=(const ChangeStream&) = delete;

  /// Waits up to `timeout` for one message and processes it (which may deliver a
  /// whole transaction to the sink). Returns whether a message was processed.
  /// Small committed transactions are held back while messages keep arriving and
  /// are delivered (in order, each on its own) by the first Poll that finds none at
  /// hand, which then returns false without waiting; see the README.
  /// After an error (protocol, I/O, type resolution, the sink's) the stream is not
  /// usable any more: drop it and the connection, and start again from the durable
  /// position (with `start_after` set to what the consumer has).
  arrow::Result<bool> Poll(std::chrono::milliseconds timeout);

  /// Polls until `deadline`, Stop(), or at least `max_transactions` more
  /// transactions were delivered (< 0: no limit; transactions held back together
  /// are delivered together). Returns after a whole message, never inside one, with
  /// every committed transaction delivered.
  arrow::Status Run(std::chrono::steady_clock::time_point deadline,
                    int64_t max_transactions = -1);

  /// Makes Run return after the message being processed. Safe from any thread
  /// (e.g. a signal handler's helper thread).
  void Stop() { stop_requested_.store(true); }
  bool stop_requested() const { return stop_requested_.load(); }

  /// The consumer made every transaction up to `end_lsn` (a TransactionInfo's
  /// end_lsn) durable: the server may now release that WAL.
  void ReportDurable(Lsn end_lsn);

  const ChangeStreamStats& stats() const { return stats_; }
  const std::filesystem::path& spill_directory() const { return spill_directory_; }
  /// Streamed transactions currently spilled (began, neither committed nor aborted).
  size_t open_streamed_transactions() const { return spills_.size(); }
  /// True when every committed transaction read so far has been delivered and none
  /// is being read: only then is the server's reported position (past whatever was
  /// read) safe to confirm (in-progress streamed transactions the server sends again).
  bool holds_nothing() const {
    return current_ == nullptr && replaying_ == nullptr && deferred_.empty();
  }
  /// The spill file of a streamed xid (whether or not it exists).
  std::filesystem::path SpillPath(TransactionId xid) const;

 private:
  struct TableState;
  struct TableBuilder;
  struct Segment;
  struct Transaction;
  struct Spill;

  ChangeStream(MessageSource* source, PgOutputDecoder decoder,
               AttributeLookup* attributes, TypeResolver* types, ChangeSink* sink,
               Options options, std::filesystem::path spill_directory,
               bool owns_spill_directory);

  arrow::Status Process(Lsn wal_start, std::string_view payload);
  arrow::Status SpillMessage(Lsn wal_start, std::string_view payload,
                             const PgOutputMessage& message);
  // Applies one data message (Relation, Type, Insert, Update, Delete, Truncate,
  // transactional Message) to `tx`.
  arrow::Status ApplyData(Transaction* tx, Lsn wal_start, const PgOutputMessage& message);
  // `tx` may be null (a Relation message outside any transaction).
  arrow::Status ApplyRelation(Transaction* tx, const RelationMessage& message);
  arrow::Status AppendRow(Transaction* tx, Oid relation_id, char op, Lsn wal_start,
                          TupleData tuple);
  // Whether two relations' latest Relation messages give them one name.
  bool SameName(Oid a, Oid b) const;
  arrow::Result<Segment*> SegmentFor(Transaction* tx, TableState* state, Oid relation_id);
  // Finishes the table's open builder into one batch and hands each transaction its
  // rows: deferred ones keep them for delivery, the open one emits them now.
  arrow::Status Seal(Oid relation_id);
  bool Deferrable(const Transaction& tx) const;
  // Seals every open builder and delivers the deferred transactions in order.
  arrow::Status FlushDeferred();
  arrow::Status Deliver(Transaction* tx);
  arrow::Status Emit(Transaction* tx, TableChanges changes);
  arrow::Status EmitMessage(Transaction* tx, CapturedMessage message);
  arrow::Status DeliverTable(const TransactionInfo& info, const TableChanges& changes);
  arrow::Status BeginDelivery(Transaction* tx);
  arrow::Status CommitTransaction(Transaction* tx);
  arrow::Status OnStreamCommit(const StreamCommitMessage& message);
  arrow::Status OnStreamAbort(const StreamAbortMessage& message);
  arrow::Status CloseSpillFile(Spill* spill);
  void RemoveSpill(TransactionId xid);
  bool SkipTable(const TableShape& shape, Lsn commit_lsn) const;

  MessageSource* source_;
  PgOutputDecoder decoder_;
  RelationCache relations_;
  TypeResolver* types_;
  /// (schema, name) pgoutput's Type messages gave user types, from the catalog as
  /// of the changes: the name of a type dropped since (a domain's is its base
  /// type's).
  std::unordered_map<Oid, std::pair<std::string, std::string>> streamed_type_names_;
  ChangeSink* sink_;
  Options options_;
  std::filesystem::path spill_directory_;
  bool owns_spill_directory_;

  std::unordered_map<Oid, std::unique_ptr<TableState>> tables_;
  /// The open non-streamed transaction (between Begin and Commit).
  std::unique_ptr<Transaction> current_;
  /// The streamed transaction being replayed at its Stream Commit, if any.
  Transaction* replaying_ = nullptr;
  /// One open builder per table, shared by consecutive transactions.
  std::unordered_map<Oid, std::unique_ptr<TableBuilder>> open_builders_;
  /// Committed small transactions not delivered yet (oldest first), and their rows.
  std::deque<std::unique_ptr<Transaction>> deferred_;
  int64_t deferred_rows_ = 0;
  std::unordered_map<TransactionId, std::unique_ptr<Spill>> spills_;
  /// The xid of the open Stream Start block, if any.
  std::optional<TransactionId> stream_xid_;
  int64_t spill_bytes_ = 0;
  std::atomic<bool> stop_requested_{false};
  ChangeStreamStats stats_;
};

}  // namespace floe::postgres
