// Copies of published tables through a temporary slot's exported snapshot
// (CopyTables; at start-up, after --resnapshot, for keyless tables and copies
// again), and the discovery of published tables Bronze does not hold yet.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include <arrow/array.h>

#include "floe/bronze/copy_writer.h"
#include "floe/bronze/system_tables.h"
#include "floe/common/failpoint.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/source/postgres/snapshot.h"

namespace floe::bronze {

namespace {

// Says `what`, with the seconds waited so far, once `first` has passed and then every
// minute, until destroyed: for a call that may block on the source for long.
class WaitNotice {
 public:
  WaitNotice(std::string what, std::chrono::seconds first)
      : thread_([this, what = std::move(what), first] { Run(what, first); }) {}
  ~WaitNotice() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  WaitNotice(const WaitNotice&) = delete;
  WaitNotice& operator=(const WaitNotice&) = delete;

 private:
  void Run(const std::string& what, std::chrono::seconds first) {
    const auto started = std::chrono::steady_clock::now();
    auto next = started + first;
    std::unique_lock lock(mu_);
    while (!wake_.wait_until(lock, next, [&] { return stop_; })) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - started);
      spdlog::warn("{} (waiting {} s so far)", what, waited.count());
      next += std::chrono::minutes(1);
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

// The columns of a copy's batch in the table's shape: by name, null for a column the
// copy did not read. Invalid when a column was read as another type than the table's
// columns say (the table changed under the copy, which is redone).
arrow::Result<arrow::ArrayVector> CopiedArrays(const BronzeTable& table,
                                               const pg::SnapshotBatch& batch) {
  const auto& columns = table.columns;
  std::vector<int> from(columns.size(), -1);
  for (size_t c = 0; c < columns.size(); ++c) {
    for (size_t k = 0; k < batch.num_columns(); ++k) {
      if ((*batch.column_names)[k] == columns[c].name) from[c] = static_cast<int>(k);
    }
  }
  // The reader decoded the rows into type_mapping's types already (binary COPY).
  const auto n = static_cast<int64_t>(batch.num_rows());
  const std::shared_ptr<arrow::RecordBatch>& read = batch.arrow_batch();
  arrow::ArrayVector arrays;
  for (size_t c = 0; c < columns.size(); ++c) {
    std::shared_ptr<arrow::Array> array;
    if (from[c] < 0) {
      ARROW_ASSIGN_OR_RAISE(array, arrow::MakeArrayOfNull(columns[c].mapping.type, n));
    } else {
      array = read->column(from[c]);
      if (!array->type()->Equals(*columns[c].mapping.type)) {
        return arrow::Status::Invalid(
            "copying ", SourceName(table.source), ": column ", columns[c].name,
            " was read as ", array->type()->ToString(), " but the table's columns say ",
            columns[c].mapping.type->ToString());
      }
    }
    arrays.push_back(std::move(array));
  }
  return arrays;
}

}  // namespace

// Batches (snapshot batch_rows each) read ahead of a copy's writer.
constexpr size_t kCopyWriterDepth = 4;
// Writer threads a table's batches take turns among (and of a copy with one reader
// worker).
constexpr int kCopyWritersPerTable = 2;

std::string CopySlotName(const std::string& slot, int64_t pid) {
  // PostgreSQL truncates names to 63 bytes (NAMEDATALEN - 1) and a slot name that
  // long is refused: a long configured slot keeps a prefix and a hash of itself.
  const std::string suffix = "_copy_" + std::to_string(pid);
  constexpr size_t kMaxName = 63;
  if (slot.size() + suffix.size() <= kMaxName) return slot + suffix;
  const uint64_t h = ice::Fnv1a64(slot);
  char hash[9];
  std::snprintf(hash, sizeof hash, "%08x", static_cast<unsigned>(h ^ (h >> 32)));
  return slot.substr(0, kMaxName - suffix.size() - 9) + "_" + hash + suffix;
}

// Copies `tables` through a temporary slot's exported snapshot: their rows become
// `r` changes just below the slot's consistent point C (at C - 1), committed with
// floe.commit-lsn = C - 1, so the stream's changes below C (already in the copy)
// are skipped for them and those at C or later land after the copy.
arrow::Result<std::vector<BronzeTable*>> Pipeline::PrepareCopies(
    const std::vector<BronzeTable*>& requested, Lsn point) {
  std::vector<BronzeTable*> tables;
  for (BronzeTable* table : requested) {
    pg::Oid relation_id = 0;
    auto read = SourceColumnsFromCatalog(*source_, *types_, table->source,
                                         config_.source.publication, &relation_id);
    if (read.status().IsKeyError()) {
      // Renamed or dropped since it was listed (or first seen in the stream): there
      // is nothing to copy under its name, and a table published under it later is
      // copied after a `t` row (CopyFirstSeen, Discover).
      spdlog::warn(
          "{}: not copied, it is no longer in the source under this name or "
          "not in publication {} (dropped, renamed or removed meanwhile)",
          SourceName(table->source), config_.source.publication);
      table->awaiting_copy = false;
      table->recopy_queued = false;
      table->identity_at_copy.clear();
      ARROW_RETURN_NOT_OK(MarkGone(table, "gone before its copy"));
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(auto columns, std::move(read));
    tables.push_back(table);
    // The stream may still be behind the copy: its changes before the copy's point
    // are older than these columns (ConformerFor).
    ARROW_RETURN_NOT_OK(
        SetShape(table, std::move(columns), {point.value(), INT32_MAX}, relation_id));
    table->appender->Abandon();
    table->buffered.Clear();
    table->snapshot_seq = 0;
  }
  return tables;
}

arrow::Result<pg::CreatedSlot> Pipeline::CreateCopySlot(pg::ReplicationConnection* temp,
                                                        size_t tables) {
  pg::CreateSlotOptions slot_options;
  slot_options.snapshot = pg::SnapshotAction::kExport;
  slot_options.temporary = true;
  const std::string temp_name = CopySlotName(config_.source.slot, ::getpid());
  // The copy's slot waits until every transaction running in the cluster when it
  // started has ended (prepared ones too, in any database): the stream pauses
  // meanwhile, its connection kept alive, and a long wait is said, with how to find
  // what it waits for.
  arrow::Result<pg::CreatedSlot> creating;
  {
    pg::StatusKeeper keeper(streaming_);
    // On a standby StandbySnapshotRequests says what the wait is instead.
    std::optional<WaitNotice> notice;
    if (!standby_) {
      notice.emplace(
          "copying " + std::to_string(tables) +
              " table(s): the copy's snapshot waits until every transaction that was "
              "running in the cluster has ended (the stream is paused meanwhile); find "
              "them with SELECT pid, datname, state, xact_start FROM pg_stat_activity "
              "WHERE backend_xid IS NOT NULL ORDER BY xact_start, and SELECT * FROM "
              "pg_prepared_xacts",
          std::chrono::seconds(5));
    }
    // On a standby it waits for the primary's running transactions too.
    StandbySnapshotRequests requests(standby_ ? primary_sql_.get() : nullptr);
    pg::CancelWhen cancel(temp->raw(), [this] { return stop_requested(); });
    creating = temp->CreateSlot(temp_name, slot_options);
    if (!creating.ok() && cancel.cancelled()) {
      return arrow::Status::Cancelled("while the copy of ", tables,
                                      " table(s) waited for its snapshot (they are "
                                      "copied at the next start)");
    }
  }
  return creating;
}

pg::SnapshotOptions Pipeline::CopySnapshotOptions() const {
  pg::SnapshotOptions snap_options;
  snap_options.workers = options_.snapshot_workers;
  snap_options.publication = config_.source.publication;
  snap_options.output = pg::SnapshotOutput::kArrow;
  // A bar redrawn on a terminal; otherwise log lines (JSON with --json-logs), not
  // bare lines in between the log's.
  if (options_.progress != nullptr && isatty(fileno(options_.progress))) {
    snap_options.progress_stream = options_.progress;
  } else if (options_.progress != nullptr) {
    snap_options.on_progress = [](const pg::SnapshotProgressSample& sample) {
      spdlog::info("{}", pg::FormatProgressLine(sample));
    };
  }
  return snap_options;
}

arrow::Status Pipeline::WriteCopyRows(BronzeTable* table, arrow::ArrayVector arrays,
                                      size_t n, const char* op_code, int64_t first_seq,
                                      Lsn point, int64_t copy_ts, int lane) {
  SyntheticPosition at;
  at.op = op_code;
  at.ts_us = copy_ts;
  at.source_lsn = at.commit_lsn = point;
  at.first_seq = first_seq;
  ARROW_ASSIGN_OR_RAISE(
      auto stream_batch,
      WithCdcColumns(table->columns, std::move(arrays), static_cast<int64_t>(n), at));
  ARROW_ASSIGN_OR_RAISE(auto conformed,
                        table->conformer->Conform(*stream_batch, NowUnixMicros()));
  return table->appender->Write(*conformed, lane);
}

arrow::Result<std::set<BronzeTable*>> Pipeline::StartCopiesAgain(
    const std::vector<BronzeTable*>& tables, Lsn point, int64_t copy_ts) {
  // A table Bronze already holds rows of is copied again (--resnapshot, or published
  // again after a gap): the copy starts with a `t` row, so that whatever the gap
  // deleted does not outlive it in the latest state (docs/running.md, Recovery).
  std::set<BronzeTable*> recopied;
  for (BronzeTable* table : tables) {
    if (table->appender->committed_lsn().value() == 0 && !table->stream_relation_gone) {
      continue;
    }
    recopied.insert(table);
    arrow::ArrayVector nulls;
    for (const auto& c : table->columns) {
      ARROW_ASSIGN_OR_RAISE(auto a, arrow::MakeArrayOfNull(c.mapping.type, 1));
      nulls.push_back(std::move(a));
    }
    ARROW_RETURN_NOT_OK(
        WriteCopyRows(table, std::move(nulls), 1, "t", 0, point, copy_ts));
    table->snapshot_seq = 1;
    metrics_->events.Inc({SourceName(table->source), "t"});
  }
  return recopied;
}

arrow::Status Pipeline::CopyTables(const std::vector<BronzeTable*>& requested) {
  if (requested.empty()) return arrow::Status::OK();
  Failpoint("copy.before-snapshot");  // the copy decided, its point not yet taken
  const std::string& conninfo = config_.source.conninfo;
  ARROW_ASSIGN_OR_RAISE(auto temp, pg::ReplicationConnection::Connect(conninfo));
  ARROW_ASSIGN_OR_RAISE(pg::CreatedSlot created,
                        CreateCopySlot(temp.get(), requested.size()));
  // The exported snapshot holds the transactions whose commit record lies before C;
  // one whose commit record starts at C is decoded (a slot skips only commits below
  // its start) and is not in the snapshot. No record starts at C - 1 (the one
  // ending at C covers it): the copy's position sorts after everything it holds and
  // before everything it does not.
  const Lsn point(created.consistent_point.value() - 1);
  Failpoint("copy.after-snapshot");  // the snapshot exported, no table read yet

  ARROW_ASSIGN_OR_RAISE(std::vector<BronzeTable*> tables,
                        PrepareCopies(requested, point));
  std::vector<pg::QualifiedTable> names;
  std::map<std::pair<std::string, std::string>, BronzeTable*> by_name;
  for (BronzeTable* table : tables) {
    names.push_back({table->source.schema, table->source.table});
    by_name[{table->source.schema, table->source.table}] = table;
  }
  if (tables.empty()) return arrow::Status::OK();
  spdlog::info("copying {} table(s) at LSN {}", tables.size(),
               created.consistent_point.ToString());

  const pg::SnapshotOptions snap_options = CopySnapshotOptions();
  ARROW_ASSIGN_OR_RAISE(
      auto reader, pg::SnapshotReader::Open(
                       conninfo, pg::SnapshotSource::Exported(created), snap_options));
  const int64_t copy_ts = NowUnixMicros();
  ARROW_ASSIGN_OR_RAISE(const std::set<BronzeTable*> recopied,
                        StartCopiesAgain(tables, point, copy_ts));
  std::mutex quarantine_mutex;
  std::vector<pg::QuarantineCandidate> quarantined;
  // Writer threads, at least two even for one reader worker: encoding Parquet costs
  // more than reading. A table's batches take turns between two of them (each open
  // file buffers a row group: more would multiply a wide table's memory); writer i
  // writes lane i of the table's appender (files of its own), so that none waits
  // for another.
  std::vector<std::unique_ptr<CopyWriter>> writers;
  for (int w = 0; w < std::max(kCopyWritersPerTable, options_.snapshot_workers); ++w) {
    writers.push_back(std::make_unique<CopyWriter>(kCopyWriterDepth));
  }
  // Per table: its first writer and the batches it sent so far; every entry made
  // before the reader starts (the workers change a table's under its mutex, never
  // the map).
  std::map<BronzeTable*, std::pair<size_t, size_t>> turns;
  for (size_t t = 0; t < tables.size(); ++t)
    turns[tables[t]] = {t * kCopyWritersPerTable, 0};
  auto sink = [&](const pg::SnapshotBatch& batch) -> arrow::Status {
    BronzeTable* table = by_name.at({batch.table->schema, batch.table->name});
    ARROW_ASSIGN_OR_RAISE(arrow::ArrayVector arrays, CopiedArrays(*table, batch));
    const size_t n = batch.num_rows();
    int64_t first_seq = 0;
    size_t lane = 0;
    {
      std::lock_guard lock(table->mutex);
      first_seq = table->snapshot_seq;
      table->snapshot_seq += static_cast<int64_t>(n);
      auto& [first, sent] = turns.at(table);
      lane = (first + sent++ % kCopyWritersPerTable) % writers.size();
    }
    ARROW_RETURN_NOT_OK(writers[lane]->Submit([this, table, arrays = std::move(arrays), n,
                                               first_seq, point, copy_ts,
                                               lane]() mutable -> arrow::Status {
      ARROW_RETURN_NOT_OK(WriteCopyRows(table, std::move(arrays), n, "r", first_seq,
                                        point, copy_ts, static_cast<int>(lane)));
      metrics_->snapshot_rows.Inc({SourceName(table->source)}, static_cast<double>(n));
      metrics_->events.Inc({SourceName(table->source), "r"}, static_cast<double>(n));
      return arrow::Status::OK();
    }));
    if (!batch.issues().empty()) {
      std::lock_guard qlock(quarantine_mutex);
      for (const pg::SnapshotIssue& issue : batch.issues()) {
        pg::QuarantineCandidate q;
        q.schema_name = table->source.schema;
        q.table_name = table->source.table;
        q.source_lsn = point;
        q.commit_lsn = point;
        q.seq = static_cast<int32_t>(first_seq + static_cast<int64_t>(issue.row));
        q.issue = issue.issue;
        quarantined.push_back(std::move(q));
      }
    }
    return arrow::Status::OK();
  };

  // The main replication connection must keep answering while the copy runs.
  arrow::Status copied;
  {
    pg::StatusKeeper keeper(streaming_);
    copied = reader->Run(names, sink).status();
  }
  for (auto& writer : writers) {
    arrow::Status written = writer->Finish(/*discard=*/!copied.ok());
    if (copied.ok()) copied = std::move(written);
  }
  if (!copied.ok()) {
    for (BronzeTable* table : tables) table->appender->Abandon();
    return copied;
  }
  if (!quarantined.empty()) {
    ARROW_RETURN_NOT_OK(WriteQuarantine({}, quarantined, copy_ts));
    ARROW_ASSIGN_OR_RAISE(TableAppender * q,
                          SystemTable(&quarantine_, "quarantine", QuarantineSchema(),
                                      QuarantineSpec(QuarantineSchema()).ValueOrDie()));
    // At the quarantine table's own position, not the copy's: the copy's point may
    // lie ahead of what the stream delivered, and a quarantine table marked as
    // holding everything up to it would skip, after a restart, the records of
    // other tables' streamed transactions before it (floe.commit-lsn is per table).
    ARROW_RETURN_NOT_OK(q->Commit(q->committed_lsn()));
  }
  return CommitCopies(tables, point, recopied);
}

arrow::Status Pipeline::CommitCopies(const std::vector<BronzeTable*>& tables, Lsn point,
                                     const std::set<BronzeTable*>& recopied) {
  Failpoint("copy.before-commit");  // the copy's files written, nothing committed
  std::vector<std::future<arrow::Status>> commits;
  for (BronzeTable* table : tables) {
    TableAppender* appender = table->appender.get();
    // A copy again while streaming on (recopy_queued): Bronze's commit LSN stays
    // at what the stream delivered, below the copy's point, so that the stream's
    // changes up to the point still land (as changes; the `t` row at the point
    // ends them in the latest state). floe.source.recopy-until keeps the point
    // across a restart.
    Lsn at = point;
    ice::SummaryProperties summary{
        {lake::kSnapshotLsnSummaryKey, std::to_string(point.value())}};
    if (table->recopy_queued) {
      at = std::min(point, std::max(appender->committed_lsn(), last_commit_lsn_));
      table->recopy_until = point;
    }
    commits.push_back(CommitAsync(
        appender, SourceName(table->source),
        [appender, at, summary] { return appender->CommitResettingLsn(at, summary); }));
  }
  ARROW_RETURN_NOT_OK(WaitForCommits(&commits));
  for (BronzeTable* table : tables) {
    if (table->recopy_queued) {
      table->recopy_queued = false;
      ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
          [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties({{lake::kRecopyUntilProperty,
                               std::to_string(table->recopy_until.value())}});
            // The stream's changes up to the point are older than the bindings the
            // copy used, after a restart too.
            b->SetProperties(
                {{lake::kColumnsPositionProperty, PositionJson(table->bound_at)}});
            return arrow::Status::OK();
          }));
    }
    Failpoint("copy.after-commit");  // committed, the stream perhaps still behind it
    table->awaiting_copy = false;
    copied_.insert(table->source);
    // A watermark backfill of the table still under way has nothing left to do: the
    // copy holds every row (and after a restart BackfillProgressOf stops at the
    // copy's snapshot). Its chunk in flight, if any, is dropped with it; a later
    // chunk would select columns by names the copy may have seen renamed.
    if (auto it = backfills_.find(table->source); it != backfills_.end()) {
      spdlog::info("{}: its backfill ends with the copy, which holds every row",
                   SourceName(table->source));
      backfills_.erase(it);
    }
    // After the commit: a crash before this line copies the table once more on the
    // next start (redundant, never wrong).
    NoteCopiedRelation(table, point);
    ARROW_RETURN_NOT_OK(RecordIdentity(table, table->identity_at_copy));
    table->identity_at_copy.clear();
    table->recopy_reason.clear();
    table->stream_relation_gone = false;
    spdlog::info("copied {}: {} row(s) into {}{}", SourceName(table->source),
                 table->snapshot_seq - (recopied.contains(table) ? 1 : 0),
                 table->id.ToString(),
                 recopied.contains(table) ? " (after a t row: a copy again)" : "");
  }
  return arrow::Status::OK();
}

void Pipeline::CopyAgain(BronzeTable* table, const std::string& identity) {
  copied_.erase(table->source);
  table->identity_at_copy = identity;
  if (table->appender && table->appender->committed_lsn().value() > 0) {
    // As RecopyIfMoved: the stream's changes up to the copy's point still land,
    // the last ones of a table dropped since among them (floe may have been stopped,
    // or behind), and the copy's `t` row at its point ends them in the latest state.
    table->recopy_until = Lsn();
    table->recopy_queued = true;
  } else {
    table->awaiting_copy = true;
  }
  to_copy_.push_back(table);
}

// Finds published tables Bronze has not copied yet and copies them (together with
// the ones first seen in the stream).
arrow::Status Pipeline::Discover(bool at_start) {
  // --resnapshot copies every published table, whatever source.snapshot says.
  if (config_.source.snapshot == config::SnapshotPolicy::kInitial || resnapshot_) {
    ARROW_ASSIGN_OR_RAISE(auto identities,
                          source_->PublishedIdentities(config_.source.publication));
    for (const auto& [name, identity] : identities) {
      ARROW_ASSIGN_OR_RAISE(BronzeTable * table, TableFor(name));
      if (!table->unnamed.empty() || table->awaiting_copy || table->recopy_queued)
        continue;
      if (!copied_.contains(name) && !table->stream_relation_gone) {
        ARROW_ASSIGN_OR_RAISE(bool copied, IsCopied(table));
        // A backfill under way (started or resumed) is a copy of the table as
        // published now.
        if (copied && !copied_.contains(name) && !table->stream_relation_gone) continue;
      }
      if (table->stream_relation_gone) {
        // Bronze holds changes or rows of a relation that is not this one (gone
        // since, or read by a backfill before the table left its name): this one is
        // copied after a `t` row, whether those rows committed yet or not.
        spdlog::warn(
            "{} is published under its name again, as another table than the "
            "one Bronze last read: copying it again (a `t` row in {} marks "
            "the gap)",
            SourceName(name), table->id.ToString());
        CopyAgain(table, identity);
        continue;
      }
      if (copied_.contains(name)) {
        ARROW_ASSIGN_OR_RAISE(bool again, Rejoined(table, identity));
        if (!again) continue;
        // Through the exported-snapshot copy, whose `t` row ends what the gap may
        // have left behind in the latest state (a watermark backfill has none).
        CopyAgain(table, identity);
        continue;
      }
      table->identity_at_copy = identity;
      if (at_start) {
        table->awaiting_copy = true;
        to_copy_.push_back(table);
      } else {
        spdlog::info("{} joined publication {}: copying its rows", SourceName(name),
                     config_.source.publication);
        ARROW_RETURN_NOT_OK(CopyLater(table));
      }
    }
  }
  std::vector<BronzeTable*> batch;
  batch.swap(to_copy_);
  return CopyTables(batch);
}

}  // namespace floe::bronze
