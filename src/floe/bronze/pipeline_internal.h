// The `floe run` pipeline's internals, shared by its files in this folder (not
// installed, included only by src/floe/bronze/pipeline*.cc): the Pipeline class,
// its per-table state (BronzeTable, Backfill), its metrics and the helpers more
// than one of its files use. pipeline.h is the public API; the Pipeline's member
// functions are defined by seam:
//
//   pipeline.cc             the run loop (RunOnce), RunPipeline, IsFatal, Fatal
//   pipeline_startup.cc     start-up checks: the service lock, the slot, settings
//   pipeline_tables.cc      Bronze tables: finding, creating, binding columns
//   pipeline_copy.cc        copies through an exported snapshot, discovery
//   pipeline_backfill.cc    the watermark-backfill driver
//   pipeline_changes.cc     the change stream's sink: writing changes
//   pipeline_checkpoint.cc  checkpoints: commits and their bookkeeping
//   pipeline_metrics.cc     PipelineMetrics, the source sampled for it
//   pipeline_shared.cc      helpers several of them use
#pragma once

#include <unistd.h>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <spdlog/spdlog.h>

#include "floe/bronze/bronze_schema.h"
#include "floe/bronze/checkpointer.h"
#include "floe/bronze/pipeline.h"
#include "floe/bronze/table_appender.h"
#include "floe/bronze/watermark_backfill.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/metrics/registry.h"
#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/relation_cache.h"
#include "floe/source/postgres/replication_connection.h"
#include "floe/source/postgres/snapshot.h"
#include "floe/source/postgres/source_session.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::bronze {

namespace pg = floe::postgres;
namespace ice = floe::iceberg;
using Clock = std::chrono::steady_clock;

struct BronzeTable;

/// From `from` on, a Bronze table's rows are of source relation `relation` (a
/// pg_class oid): one entry per relation that held the table's name
/// (lake::kSourceRelationsProperty). `marked`: a `t` row at `from` (written by
/// Pipeline::MarkRelationChange) ends the previous relation's rows in the latest
/// state; a copy's entry and the first one are not marked.
struct RelationSpan {
  pg::Oid relation = 0;
  ChangePosition from{0, -1};
  bool marked = false;
  bool operator==(const RelationSpan&) const = default;
};
/// lake::kSourceRelationsProperty's value in `metadata` (empty: none, or unreadable),
/// and the value of `spans`.
std::vector<RelationSpan> RelationsOf(const ice::TableMetadata& metadata);
std::string RelationsJson(const std::vector<RelationSpan>& spans);

// pipeline.cc: an error retrying cannot fix (IsFatal).
arrow::Status Fatal(std::string message);

// pipeline_shared.cc
std::string PositionJson(ChangePosition at);
int64_t NowUnixMicros();
std::string SourceName(const pg::QualifiedName& name);
std::vector<SourceColumn> SourceColumnsOf(const pg::TableShape& shape);
/// `relation_id`, when given: set to the table's pg_class oid.
arrow::Result<std::vector<SourceColumn>> SourceColumnsFromCatalog(
    pg::SourceSession& source, pg::TypeResolver& types, const pg::QualifiedName& table,
    const std::string& publication, pg::Oid* relation_id = nullptr);
arrow::Status FlushBuffered(BronzeTable* table);
/// The cdc_seq of a change batch's first row (the sixth CDC column); 0 when empty.
int32_t FirstSeqOf(const arrow::RecordBatch& batch);

// pipeline_startup.cc
void WarnIfUnprotected(pg::SourceSession& source);

/// While a slot is created on a standby, PostgreSQL waits for the primary to log
/// its running transactions (its background writer does every 15 s, and only while
/// the primary writes): this asks the primary for one every second, on a thread of
/// its own, for as long as it lives (nothing with a null primary).
class StandbySnapshotRequests {
 public:
  explicit StandbySnapshotRequests(pg::PgConnection* primary);
  ~StandbySnapshotRequests();
  StandbySnapshotRequests(const StandbySnapshotRequests&) = delete;
  StandbySnapshotRequests& operator=(const StandbySnapshotRequests&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable done_;
  bool stop_ = false;
  std::thread thread_;
};

// A published table's identity (lake::kSourceIdentityProperty's value) is
// pg::SourceSession::PublishedIdentities'; a change of it means a copy again.
using pg::IdentityIsOf;
using pg::IdentityOfGone;

// ---------------------------------------------------------------------------
// Metrics (docs/operations.md lists them)

struct PipelineMetrics {
  metrics::Registry registry;
  metrics::Gauge lag_bytes, retained_wal, wal_status, streaming, last_checkpoint,
      unnamed_tables;
  metrics::Counter events, rows_written, bytes_written, commits, errors, restarts,
      quarantined, snapshot_rows, messages;
  metrics::Histogram commit_seconds, checkpoint_seconds;

  static arrow::Result<std::unique_ptr<PipelineMetrics>> Make();
};

// ---------------------------------------------------------------------------
// One Bronze table

struct BronzeTable {
  pg::QualifiedName source;
  ice::TableIdentifier id;
  std::unique_ptr<TableAppender> appender;  // null until the table exists
  /// The position of the last streamed row handed to the appender in this run
  /// ({0, -1}: none yet): the rows through it were written with the bound names.
  ChangePosition last_row{0, -1};
  std::vector<SourceColumn> columns;
  ColumnMap bindings;
  /// The pg_class oid of the relation whose attnums `bindings` hold (0: unknown;
  /// lake::kColumnsRelationProperty). A shape of another relation (the table dropped
  /// and created again) is bound by name.
  pg::Oid bound_relation = 0;
  /// Which relation the table's rows are of, from which position on, sorted by
  /// position (lake::kSourceRelationsProperty; entries wholly below the commit LSN
  /// dropped but the last). `relations_changed`: not recorded yet.
  std::vector<RelationSpan> relations;
  bool relations_changed = false;
  std::optional<BatchConformer> conformer;
  /// The change stream's shape `conformer` was made for (null: made from the
  /// catalog's columns, for a copy or a backfill).
  const pg::TableShape* conformer_shape = nullptr;
  /// From this change position on, the stream's shapes are bound (SetShape); a
  /// change before it in another shape is older than the bindings (the stream behind
  /// a copy of the table, or replaying after a restart) and is written through an
  /// `older` conformer instead (lake::kColumnsPositionProperty).
  ChangePosition bound_at{0, -1};
  std::unordered_map<const pg::TableShape*, BatchConformer> older;
  /// Small change batches (one per transaction) waiting to be conformed and written
  /// together: per-batch costs (casts, partition split, a Parquet write call) paid
  /// once per few thousand rows instead of once per transaction. Same shape (the
  /// buffer is flushed before a shape change).
  BatchBuffer buffered;
  /// floe_events_total{table, op} of each cdc_op (kEventOps), bound on first use.
  std::array<metrics::CounterSeries, 5> events;
  bool events_bound = false;
  /// WarnIfAnInsertLacksValues said so once.
  bool warned_insert_without_values = false;
  /// Queued to be copied again after a column change the stream cannot carry
  /// (RecopyIfMoved): its changes keep reaching Bronze meanwhile.
  bool recopy_queued = false;
  /// Such a copy committed at this point (its `t` and `r` rows' cdc_commit_lsn)
  /// while Bronze's commit LSN stayed behind it, so that the stream's changes up
  /// to it still land; floe.source.recopy-pending is removed (Silver merges again)
  /// once the table's commit LSN reaches it. Zero: none.
  Lsn recopy_until;
  /// Rows are being skipped until a copy of the table commits.
  bool awaiting_copy = false;
  /// SourceIdentities' value when the copy awaited was scheduled: recorded in
  /// lake::kSourceIdentityProperty once it commits.
  std::string identity_at_copy;
  /// The stream delivered changes of a relation that was no longer the source's
  /// table of this name when floe read them (CopyFirstSeen): a table published
  /// under the name later is copied after a `t` row. Cleared by that copy.
  bool stream_relation_gone = false;
  /// Columns SetShape moved to another field (MovedColumns): the table must be
  /// copied again (lake::kRecopyPendingProperty); cleared when that copy commits.
  std::string recopy_reason;
  /// The stream delivered a TRUNCATE of it (CountEvents), and the relfilenode read
  /// right after: SetShape's baseline instead of floe.source.relfilenode.
  bool truncated = false;
  std::string filenode_after_truncate;
  /// Why the catalog cannot hold this table's Bronze identifier (e.g. a schema
  /// named "a.b" in the SQL catalog); empty when it can. Such a table is skipped,
  /// never holding back the others or the slot, until naming.tables names it.
  std::string unnamed;
  std::mutex mutex;  // snapshot workers write concurrently
  int64_t snapshot_seq = 0;
};

// A watermark backfill of one table (watermark_backfill.h): at most one chunk in
// flight. `progress` is what the table's appender holds (rows written, maybe not
// committed); `committed` is what its last commit recorded.
struct Backfill {
  BronzeTable* table = nullptr;
  /// The replica identity key (primary key, or the REPLICA IDENTITY USING INDEX
  /// columns), in index order: the chunk order.
  std::vector<std::string> key_columns;
  /// The publication's row filter on the table (read at the first chunk): the chunks
  /// select only the rows it publishes.
  std::optional<std::string> row_filter;
  BackfillProgress progress;
  std::string committed;
  /// The file holding the keys of `keys_written` (a progress's ToJson()), which
  /// the table's commits name while the keys stay the same (WriteBackfillKeys).
  std::string keys_file;
  std::string keys_written;
  /// The keys file the table's last commit named: deleted once a later commit
  /// names another (or the backfill is done), as only the latest record is read.
  std::string keys_committed_file;
  /// The chunk in flight: its window, rows (text forms of `chunk_columns`) and
  /// whether it is the last one (fewer rows than asked for).
  std::optional<ChunkWindow> window;
  std::vector<pg::PgRow> chunk_rows;
  std::vector<SourceColumn> chunk_columns;
  bool chunk_last = false;
  /// The first `chunk_range_rows` of `chunk_rows` continue the key order; the rest
  /// are the first `chunk_retried` keys of progress.retry, selected again.
  size_t chunk_range_rows = 0;
  size_t chunk_retried = 0;
  /// Transactions of the table delivered since the last chunk was issued: if the
  /// next chunk's snapshot could not see one of them, the chunk is retried (its
  /// changes are already in Bronze but its rows would be older).
  std::unordered_set<pg::TransactionId> recent_xids;
  /// Keys whose whole row Bronze holds from a change streamed during the backfill
  /// (an insert, an update that sent every column, a delete: the key's history
  /// from then on is complete), and whether a truncate was streamed: such rows need
  /// no `r` row. Forgotten on restart (then they get a redundant `r` row).
  std::unordered_set<std::string> complete_keys;
  /// The keys the transaction `made_xid` inserted (its `c` changes): a delete of
  /// one of them in that transaction does not complete the key's history.
  pg::TransactionId made_xid = 0;
  std::unordered_set<std::string> made_keys;
  bool truncated = false;
  /// Said once: a partial row's key could not be selected again.
  bool warned_partial = false;
  /// The table is gone from the source under its name (BackfilledTableGone): no
  /// chunk is issued any more.
  bool gone = false;
  Clock::time_point started = Clock::now();
};

// ---------------------------------------------------------------------------
// The pipeline

class Pipeline;

/// The catalog's columns of a streamed relation; for one the catalog no longer has
/// (dropped before floe read its changes), the columns and primary key Bronze
/// recorded for it. Under REPLICA IDENTITY FULL the Relation
/// message flags every column, so without these its changes would carry no key, and
/// a key-changing update would land as an update of the new key.
class RecordedAttributeLookup : public pg::PgAttributeLookup {
 public:
  RecordedAttributeLookup(pg::PgConnection* conn, std::string publication,
                          Pipeline* pipeline)
      : PgAttributeLookup(conn, std::move(publication)), pipeline_(pipeline) {}
  /// Loads the Bronze table of `schema`.`name` if this run has not yet (floe started
  /// after the table was dropped), and takes what it recorded when it is bound to
  /// `relation_id`.
  arrow::Result<std::vector<pg::AttributeInfo>> LookupGone(
      pg::Oid relation_id, const std::string& schema, const std::string& name) override;

 private:
  Pipeline* pipeline_;
};

class Pipeline : public pg::ChangeSink {
 public:
  friend class RecordedAttributeLookup;
  Pipeline(const config::PipelineConfig& config, const RunOptions& options,
           ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
           PipelineMetrics* metrics)
      : config_(config),
        options_(options),
        catalog_(catalog),
        io_(std::move(io)),
        metrics_(metrics),
        resnapshot_(options.resnapshot) {}

  /// Why floe is not ready (nullopt: ready): streaming, and a checkpoint within
  /// three intervals (at least a minute).
  std::optional<std::string> NotReady() const {
    if (!streaming_flag_.load())
      return "not streaming (starting, copying or reconnecting)";
    const int64_t last = last_checkpoint_ms_.load();
    const int64_t bound =
        std::max<int64_t>(60'000, 3 * config_.checkpoint.interval.count());
    const int64_t now = NowUnixMicros() / 1000;
    if (last > 0 && now - last > bound) {
      return "no checkpoint for " + std::to_string((now - last) / 1000) + " s";
    }
    return std::nullopt;
  }
  /// Milliseconds since the commit time of the last source transaction floe
  /// processed (nullopt before the first). Grows while floe is stopped or stuck;
  /// on an idle source, up to the heartbeat interval (each heartbeat is a commit).
  std::optional<double> LagMilliseconds() const {
    const int64_t last = last_commit_time_us_.load();
    if (last == 0) return std::nullopt;
    return static_cast<double>(std::max<int64_t>(0, NowUnixMicros() - last) / 1000);
  }
  /// Records a clean stop (the next start is not a crash restart).
  /// Records a stop asked for (SIGTERM, --duration), once this process recorded
  /// that it runs (StartUp); then the next start does not report a crash.
  void MarkCleanStop() {
    if (!running_recorded_) return;
    auto st = catalog_->UpdateNamespaceProperties(ServiceNamespace(),
                                                  {{lake::kStateCleanStop, "true"}});
    if (!st.ok()) spdlog::warn("could not record the clean stop: {}", st.message());
  }

  arrow::Status RunOnce(bool* streamed);

  // ChangeSink
  arrow::Status OnBegin(const pg::TransactionInfo&) override {
    return arrow::Status::OK();
  }
  arrow::Status OnRelationChange(const pg::RelationChange& change) override;
  arrow::Status OnTableChanges(const pg::TransactionInfo& tx,
                               const pg::TableChanges& changes) override;
  arrow::Status OnMessage(const pg::CapturedMessage& message) override;
  arrow::Status OnCommit(const pg::TransactionInfo& tx) override;
  void CountEvents(BronzeTable* table, const arrow::RecordBatch& batch);
  void SampleSource();
  std::string TableLabel(const TableAppender* appender) const;
  std::future<arrow::Status> CommitAsync(TableAppender* appender, std::string label,
                                         std::function<arrow::Status()> commit);

  bool stop_requested() const {
    if (options_.stop != nullptr && options_.stop->load()) return true;
    return deadline_ && Clock::now() >= *deadline_;
  }
  void set_deadline(std::optional<Clock::time_point> deadline) { deadline_ = deadline; }

 private:
  /// RunOnce's steps (pipeline.cc).
  void ResetRun();
  arrow::Status StartUp();
  pg::ChangeStream::Options StreamOptions() const;
  /// When each of AtSafePoint's periodic steps last ran.
  struct SafePointClock {
    Clock::time_point last_checkpoint = Clock::now();
    Clock::time_point last_discovery = Clock::now();
    Clock::time_point last_activity = Clock::now();
    Clock::time_point last_heartbeat = Clock::now();
    Clock::time_point last_sample = Clock::now() - std::chrono::hours(1);
  };
  arrow::Status AtSafePoint(bool got, SafePointClock* clock);
  ice::Namespace ServiceNamespace() const {
    return {config_.naming.bronze_namespace, config_.service};
  }
  arrow::Status LockService(pg::SourceSession& source);
  /// A standby as the source (pipeline_standby.cc): checks it may be decoded from
  /// and connects to its primary (nothing on a primary).
  arrow::Status ConnectPrimary();
  /// The primary's session for floe's writes (connected again when it was lost).
  arrow::Result<pg::SourceSession*> PrimarySession();
  /// Waits until `standby` replayed what the primary wrote so far (nothing when
  /// the source is a primary): a publication floe created there.
  arrow::Status AwaitStandby(pg::PgConnection& standby);
  /// An error (reconnect) once the standby the source is was promoted: it is read as
  /// a primary from then on, and floe's writes go to it.
  arrow::Status NoticePromotion();
  /// Refuses a primary of another cluster than the standby (`who`), and retries
  /// while it is on another timeline than the standby replays: not the standby's
  /// primary (a promoted sibling).
  arrow::Status CheckPrimaryOf(const pg::SystemIdentity& who);
  /// A heartbeat message into the WAL: the source's own, or its primary's.
  arrow::Status Heartbeat();
  /// Where floe's writes go: the primary's session on a standby, else `source_`.
  arrow::Result<pg::SourceSession*> Writer() {
    if (standby_) return PrimarySession();
    return source_.get();
  }
  void WarnIfAnInsertLacksValues(BronzeTable* table, const arrow::RecordBatch& batch,
                                 const int32_t* op_offsets, const uint8_t* op_chars);
  arrow::Status CheckSlot(pg::ReplicationConnection& repl, const pg::SystemIdentity& who);
  arrow::Result<uint64_t> HighestBronzeCommit();
  arrow::Result<BronzeTable*> TableFor(const pg::QualifiedName& source);
  /// The silver.keys entry of `source` as JSON names (`[]`: none).
  std::string DeclaredKeyJson(const pg::QualifiedName& source) const;
  /// Records the declared key in Bronze (lake::kDeclaredKeyProperty); a different
  /// one than the table's changes were written with copies it again.
  arrow::Status RecordDeclaredKey(BronzeTable* table);
  /// The columns and primary key Bronze recorded for relation `relation_id` (the
  /// bindings and lake::kPrimaryKeyProperty of a table bound to it); when no held
  /// table is, those of the table `named` with attnums unknown (the key by name);
  /// empty when that has no key either. RecordedAttributeLookup's fallback.
  std::vector<pg::AttributeInfo> RecordedAttributes(pg::Oid relation_id,
                                                    const pg::QualifiedName& named) const;
  /// Binds the catalog's columns of the table (SetShape) unless a shape is bound.
  arrow::Status BindFromCatalogIfUnbound(BronzeTable* table);
  /// Binds `columns` (evolving the Bronze table to them) for changes from `at` on.
  /// `relation_id`: the pg_class oid the columns' attnums are of (0: unknown).
  arrow::Status SetShape(BronzeTable* table, std::vector<SourceColumn> columns,
                         ChangePosition at = {0, -1}, pg::Oid relation_id = 0);
  /// SetShape's steps. Creates the Bronze table of `columns` (or loads it, when
  /// another run created it meanwhile) and its appender.
  arrow::Status CreateBronzeTable(BronzeTable* table,
                                  const std::vector<SourceColumn>& columns,
                                  pg::Oid relation_id);
  /// Records the relfilenode, the key every change carries and the columns a delete
  /// carries; a change of either that Bronze's rows cannot carry schedules a copy
  /// again, marked pending in the same commit.
  arrow::Status RecordKeyColumns(BronzeTable* table,
                                 const std::vector<SourceColumn>& columns,
                                 const std::string& filenode);
  /// Evolves the schema and bindings to `columns`; a column moved to another field
  /// (or a table rewritten: `filenode` differs from the recorded one) schedules a
  /// copy again.
  arrow::Status EvolveBindings(BronzeTable* table,
                               const std::vector<SourceColumn>& columns,
                               ChangePosition at, pg::Oid relation_id,
                               const std::string& filenode);
  /// The conformer for `changes`, whose shape is not the one bound: its shape bound
  /// now (null returned: use table->conformer), or, when the changes are older than
  /// the bindings, an `older` conformer for that shape.
  arrow::Result<const BatchConformer*> ConformerFor(BronzeTable* table,
                                                    const pg::TransactionInfo& tx,
                                                    const pg::TableChanges& changes);
  /// The table's current relfilenode as text; empty when it has none (partitioned)
  /// or no longer exists.
  /// pg_relation_filenode of `table` (empty when none), and the xmin of its
  /// pg_class row (the last transaction that changed it) when `xmin` is given.
  arrow::Result<std::string> RelFilenodeOf(const pg::QualifiedName& table,
                                           std::string* xmin = nullptr);
  /// True when Bronze already holds `table`'s changes of the transaction committed
  /// at `commit_lsn`: the stream replays them after a restart.
  static bool Replaying(const BronzeTable* table, Lsn commit_lsn) {
    return table->appender && commit_lsn.value() != 0 &&
           commit_lsn <= table->appender->committed_lsn();
  }
  arrow::Result<bool> IsCopied(BronzeTable* table);
  // Whether the source table Bronze copied is not the one published now (re-created,
  // or removed from the publication and added back): compares `identity` with the
  // recorded one, recording it when none is.
  arrow::Result<bool> Rejoined(BronzeTable* table, const std::string& identity);
  /// Records `identity` (when not empty) and the table's relations when changed;
  /// after a copy again (none pending any more), drops lake::kRecopyPendingProperty.
  arrow::Status RecordIdentity(BronzeTable* table, const std::string& identity);
  /// Records the table's relations when changed (nothing else).
  arrow::Status RecordRelations(BronzeTable* table);
  arrow::Status UpdateIdentity(BronzeTable* table, const std::string& identity,
                               bool copied_again);
  /// The stream names relation `relation_id` as `table` at `commit_lsn` again after
  /// MarkRenamedAway marked it renamed away: its changes under the other name are
  /// not in this table. Copied again at once, and Silver waits for that copy
  /// (lake::kRecopyPendingProperty, which a restart before the copy finds).
  arrow::Status CopyIfRenamedBack(BronzeTable* table, pg::Oid relation_id,
                                  Lsn commit_lsn);
  /// Queues a copy again of `table` (the source's table under its name is not the one
  /// Bronze copied); `identity` is recorded once it commits.
  void CopyAgain(BronzeTable* table, const std::string& identity);
  /// Before `changes` (which Bronze does not hold yet) are written: when the
  /// relation they are of is not the one the table's rows at their position are of
  /// (the table was dropped, or renamed away, and created again under its name), a
  /// `t` row right before them (cdc_seq one less; the change stream leaves that
  /// position free) ends the old relation's rows in the latest state. Written again
  /// when the stream replays the transaction after a crash before its commit.
  arrow::Status MarkRelationChange(BronzeTable* table, const pg::TransactionInfo& tx,
                                   const pg::TableChanges& changes,
                                   const BatchConformer& conformer);
  /// A copy of the table at `point` committed: from there on its rows are of the
  /// relation it copied (table->bound_relation).
  void NoteCopiedRelation(BronzeTable* table, Lsn point);
  /// `table` is no longer in the source under its name (`why` is recorded as its
  /// identity): nothing more is copied or backfilled of it, and a table published
  /// under the name later is copied after a `t` row (Discover).
  arrow::Status MarkGone(BronzeTable* table, const std::string& why);
  /// A table first seen in the stream, as relation `relation_id`: copied (CopyLater)
  /// when that relation is the one published under its name now; skipped when no
  /// table is (dropped, renamed or unpublished since: its streamed changes are all
  /// floe can have); copied through an exported snapshot after a `t` row when
  /// another relation is (the stream's one was dropped and the name re-created).
  arrow::Status CopyFirstSeen(BronzeTable* table, pg::Oid relation_id);
  /// A chunk found the backfilled table gone (dropped or renamed): the backfill
  /// stops, and a table published under the name later is copied after a `t` row.
  arrow::Status BackfilledTableGone(Backfill* backfill);
  /// The stream names relation `relation_id` as `table` at `commit_lsn`: a held table
  /// whose recorded identity is of that relation under another name, and which
  /// Bronze holds only up to an earlier point, was renamed, and its changes under
  /// this name are not in its Bronze table. Its identity is replaced by a mark, so
  /// Discover copies it again once it is published under its name again.
  arrow::Status MarkRenamedAway(const BronzeTable* table, pg::Oid relation_id,
                                Lsn commit_lsn);
  // Schedules a copy of `table` when SetShape moved a column to another field.
  /// `columns_moved`: the reason is a column change (logged as such); else the
  /// caller said why.
  void RecopyIfMoved(BronzeTable* table, bool columns_moved = true);
  /// Records where the table's changes go (lake::kStatePlacementPrefix) when routes
  /// are used; a table routed back to a catalog holding its Bronze table from before
  /// is copied again there.
  arrow::Status RecordPlacement(BronzeTable* table);
  /// Warns of route patterns that match no published table.
  arrow::Status WarnUnusedRoutes();
  arrow::Status Discover(bool at_start);
  arrow::Status CopyTables(const std::vector<BronzeTable*>& tables);
  /// CopyTables' steps. Binds each table's catalog columns for the copy at `point`
  /// and drops what its appender held; a table gone from the source by now is left
  /// out (MarkGone). Returns the tables to copy.
  arrow::Result<std::vector<BronzeTable*>> PrepareCopies(
      const std::vector<BronzeTable*>& requested, Lsn point);
  /// The copy's temporary slot on `temp`, exporting its snapshot (the stream kept
  /// alive meanwhile, and a long wait said, with how to find what it waits for).
  arrow::Result<pg::CreatedSlot> CreateCopySlot(pg::ReplicationConnection* temp,
                                                size_t tables);
  /// The snapshot reader's options for a copy (workers, publication, progress).
  pg::SnapshotOptions CopySnapshotOptions() const;
  /// Writes `arrays` (the table's columns, n rows) with the copy's CDC columns: op,
  /// the copy's time, the copy's point as both LSNs, seq from first_seq; into the
  /// appender's `lane` (TableAppender::Write).
  arrow::Status WriteCopyRows(BronzeTable* table, arrow::ArrayVector arrays, size_t n,
                              const char* op_code, int64_t first_seq, Lsn point,
                              int64_t copy_ts, int lane = 0);
  /// The `t` row that starts the copy of each table Bronze already holds rows of
  /// (a copy again); returns those tables.
  arrow::Result<std::set<BronzeTable*>> StartCopiesAgain(
      const std::vector<BronzeTable*>& tables, Lsn point, int64_t copy_ts);
  /// Commits the copies' rows at `point` (a copy again while streaming on, below it:
  /// floe.source.recopy-until keeps the point), then records each table's identity.
  /// `recopied`: the tables whose copy starts with a `t` row.
  arrow::Status CommitCopies(const std::vector<BronzeTable*>& tables, Lsn point,
                             const std::set<BronzeTable*>& recopied);
  /// Copies `table` later: a watermark backfill when it has a key, else through an
  /// exported snapshot (CopyTables, at the next safe point).
  arrow::Status CopyLater(BronzeTable* table);
  /// --backfill-table: a new watermark backfill of each requested table that Bronze
  /// held at start-up (`held`).
  arrow::Status BackfillOnRequest(const std::set<pg::QualifiedName>& held);
  arrow::Result<std::vector<std::string>> KeyColumnsOf(const pg::QualifiedName& table);
  arrow::Status StartBackfill(BronzeTable* table, std::vector<std::string> key_columns,
                              BackfillProgress progress, std::string committed);
  arrow::Status IssueChunks();
  arrow::Status IssueChunk(Backfill* backfill);
  /// IssueChunk's steps: the next chunk's query of `columns`, and what a chunk that
  /// could not be read means (`moved`: the catalog's columns differ; else `status`).
  arrow::Result<pg::KeyChunkQuery> ChunkQuery(Backfill* backfill,
                                              const std::vector<SourceColumn>& columns);
  arrow::Status ChunkNotRead(Backfill* backfill, const arrow::Status& status,
                             const std::string& moved);
  void RetryPartialRows(Backfill* backfill, const pg::TableChanges& changes,
                        const std::vector<std::string>& keys);
  arrow::Status TrackBackfill(Backfill* backfill, const pg::TransactionInfo& tx,
                              const pg::TableChanges& changes);
  arrow::Status OnWatermark(const pg::CapturedMessage& message);
  arrow::Status FinishChunk(Backfill* backfill, const pg::CapturedMessage& high);
  arrow::Status Checkpoint(bool final);
  /// Checkpoint's steps (pipeline_checkpoint.cc). What it commits: the tables with
  /// something to commit (`dirty`, with `rows` rows), each backfilled table's
  /// progress record, and each copy again's point the stream has passed.
  struct CheckpointPlan {
    std::vector<TableAppender*> dirty;
    int64_t rows = 0;
    std::map<TableAppender*, ice::SummaryProperties> summaries;
    std::map<TableAppender*, Lsn> reached;
  };
  arrow::Status WriteSideTables();
  arrow::Result<CheckpointPlan> PlanCheckpoint(Lsn passed);
  std::vector<std::future<arrow::Status>> StartCommits(const CheckpointPlan& plan);
  arrow::Status AfterCommits(const CheckpointPlan& plan, Clock::time_point started);
  arrow::Status WriteQuarantine(const pg::QualifiedName& source,
                                const std::vector<pg::QuarantineCandidate>& issues,
                                int64_t cdc_ts_us);
  arrow::Result<TableAppender*> SystemTable(std::unique_ptr<TableAppender>* slot,
                                            const std::string& name,
                                            const ice::Schema& schema,
                                            const ice::PartitionSpec& spec);

  const config::PipelineConfig& config_;
  const RunOptions& options_;
  ice::Catalog* catalog_;
  std::shared_ptr<ice::FileIO> io_;
  PipelineMetrics* metrics_;
  std::optional<Clock::time_point> deadline_;
  std::atomic<bool> streaming_flag_{false};
  std::atomic<int64_t> last_checkpoint_ms_{0};
  std::atomic<int64_t> last_commit_time_us_{0};
  bool crash_checked_ = false;
  /// StartUp recorded floe.clean-stop false: MarkCleanStop sets it true.
  bool running_recorded_ = false;
  /// Whether WarnUnusedRoutes ran (once per process).
  bool routes_checked_ = false;
  // The source's version and identity are logged once per server, not at every
  // reconnect: what was said last (version, system, timeline, host and port).
  std::string version_said_;

  // Per connection (reset by RunOnce). `source_` asks `sql_` every question.
  std::unique_ptr<pg::PgConnection> sql_;
  std::unique_ptr<pg::SourceSession> source_;
  std::unique_ptr<pg::PgTypeResolver> types_;
  std::unique_ptr<pg::ReplicationConnection> repl_;
  /// The source is a hot standby; its primary's session takes floe's writes.
  bool standby_ = false;
  std::unique_ptr<pg::PgConnection> primary_sql_;
  std::unique_ptr<pg::SourceSession> primary_source_;
  bool primary_unused_said_ = false;
  bool no_primary_slot_said_ = false;
  bool standby_said_ = false;
  pg::ReplicationConnection* streaming_ = nullptr;
  /// The change stream reading streaming_ (null while not streaming).
  pg::ChangeStream* stream_ = nullptr;
  /// Where the stream is: every transaction committed before it was delivered
  /// (ConfirmablePosition; what was delivered alone while not streaming).
  Lsn StreamPassed() const {
    if (streaming_ == nullptr) return last_end_lsn_;
    return ConfirmablePosition(
        {.delivered_end = last_end_lsn_,
         .server_sent = streaming_->server_wal_end(),
         .holds_transaction = stream_ != nullptr && !stream_->holds_nothing()});
  }
  std::map<pg::QualifiedName, std::unique_ptr<BronzeTable>> tables_;
  /// The table of each shape the stream delivered batches of (the shape is kept
  /// alive here, so its address is not reused): a pointer lookup per transaction
  /// instead of building and comparing names.
  std::unordered_map<const pg::TableShape*,
                     std::pair<std::shared_ptr<const pg::TableShape>, BronzeTable*>>
      table_of_shape_;
  std::set<pg::QualifiedName> copied_;
  std::vector<BronzeTable*> to_copy_;
  std::unique_ptr<TableAppender> messages_;
  std::unique_ptr<TableAppender> quarantine_;
  std::vector<pg::CapturedMessage> pending_messages_;
  std::vector<int64_t> pending_message_times_;
  std::vector<std::pair<std::vector<pg::QuarantineCandidate>, int64_t>>
      pending_quarantine_;
  std::map<std::string, std::string> state_;
  /// The last delivered transaction, and the furthest stream position seen.
  Lsn last_commit_lsn_, last_end_lsn_, position_;
  int64_t delivered_since_checkpoint_ = 0;
  Lsn confirmed_;
  /// --resnapshot, until the copies it asked for committed.
  bool resnapshot_;
  /// Watermark backfills in progress, and their own SQL session.
  std::map<pg::QualifiedName, std::unique_ptr<Backfill>> backfills_;
  std::unique_ptr<pg::PgConnection> backfill_sql_;
  std::unique_ptr<pg::SourceSession> backfill_source_;
  /// Makes chunk ids unique across runs and reconnects.
  const std::string chunk_nonce_ =
      std::to_string(::getpid()) + "." + std::to_string(NowUnixMicros());
  int64_t chunk_counter_ = 0;
  /// RunOptions::backfill_tables were started and their progress committed (once
  /// per process; a reconnect before that starts them again).
  bool backfills_requested_ = false;
};

}  // namespace floe::bronze
