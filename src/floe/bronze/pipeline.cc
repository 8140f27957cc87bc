#include "floe/bronze/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <arrow/array.h>

#include "floe/bronze/pipeline_internal.h"
#include "floe/bronze/system_tables.h"
#include "floe/common/failpoint.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/metrics/http_server.h"

namespace floe::bronze {

namespace {

// ---------------------------------------------------------------------------
// Errors

constexpr char kFatalTypeId[] = "floe::bronze::Fatal";

class FatalDetail : public arrow::StatusDetail {
 public:
  const char* type_id() const override { return kFatalTypeId; }
  std::string ToString() const override { return "fatal"; }
};

}  // namespace

arrow::Status Fatal(std::string message) {
  return arrow::Status(arrow::StatusCode::Invalid, std::move(message),
                       std::make_shared<FatalDetail>());
}

namespace {

// Below this many rows a change batch waits in BronzeTable::buffered; the buffer is
// written once it holds kFlushRows.
constexpr int64_t kSmallBatchRows = 4096;
constexpr int64_t kFlushRows = 8192;
// Buffered batches are written once they hold this many bytes too: concatenated, a
// few batches of large values would pass Arrow's 2 GiB offset limit.
constexpr int64_t kFlushBytes = int64_t{256} << 20;

// The cdc_op values counted by floe_events_total, in BronzeTable::events order.
constexpr char kEventOps[] = {'c', 'u', 'd', 't', 'r'};

}  // namespace

arrow::Status Pipeline::OnRelationChange(const pg::RelationChange& change) {
  const auto& rel = change.shape->relation;
  pg::QualifiedName source{rel.namespace_name, rel.relation_name};
  if (!change.shape->unresolved_types.empty()) {
    std::string columns;
    for (const std::string& c : change.shape->unresolved_types) {
      columns += (columns.empty() ? "" : ", ") + c;
    }
    spdlog::warn("{}: the type of column(s) {} is no longer in the source's catalog "
                 "(dropped after these changes were written): their values land as "
                 "the text PostgreSQL sent",
                 SourceName(source), columns);
  }
  ARROW_ASSIGN_OR_RAISE(BronzeTable * table, TableFor(source));
  if (!table->unnamed.empty()) return arrow::Status::OK();
  // The shape is bound with its first change (OnTableChanges, ConformerFor), which
  // knows the change's position: the stream may replay changes Bronze holds (after
  // a restart), or deliver changes older than a copy of the table, described as the
  // table was then, and binding such a shape again would take a column renamed
  // since for a dropped one and a new one (its values lost in Silver). A table not
  // in Bronze yet is created now.
  if (!table->appender && !Replaying(table, change.commit_lsn)) {
    ARROW_RETURN_NOT_OK(SetShape(table, SourceColumnsOf(*change.shape)));
    table->conformer_shape = change.shape.get();
  }
  if (config_.source.snapshot == config::SnapshotPolicy::kInitial) {
    ARROW_ASSIGN_OR_RAISE(bool copied, IsCopied(table));
    if (!copied && !table->awaiting_copy) {
      spdlog::info("{} appeared in the stream: copying its rows",
                   SourceName(table->source));
      ARROW_RETURN_NOT_OK(CopyLater(table));
    }
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::OnTableChanges(const pg::TransactionInfo& tx,
                                       const pg::TableChanges& changes) {
  // Once per transaction and table: keep this path free of allocations and name
  // lookups (a backlog of single-row transactions runs it for every change).
  BronzeTable* table = nullptr;
  if (auto it = table_of_shape_.find(changes.shape.get()); it != table_of_shape_.end()) {
    table = it->second.second;
  } else {
    const auto& rel = changes.shape->relation;
    ARROW_ASSIGN_OR_RAISE(table, TableFor({rel.namespace_name, rel.relation_name}));
    table_of_shape_.emplace(changes.shape.get(), std::pair{changes.shape, table});
  }
  if (!table->unnamed.empty()) return arrow::Status::OK();
  const BatchConformer* older = nullptr;
  if (table->conformer_shape != changes.shape.get() && !Replaying(table, tx.commit_lsn)) {
    ARROW_ASSIGN_OR_RAISE(older, ConformerFor(table, tx, changes));
  }
  if (table->awaiting_copy) return arrow::Status::OK();
  if (!backfills_.empty()) {
    if (auto it = backfills_.find(table->source); it != backfills_.end()) {
      ARROW_RETURN_NOT_OK(TrackBackfill(it->second.get(), tx, changes));
    }
  }
  if (tx.commit_lsn <= table->appender->committed_lsn()) return arrow::Status::OK();
  CountEvents(table, *changes.batch);
  if (const int64_t n = changes.batch->num_rows(); n > 0) {
    // cdc_seq is the sixth CDC column.
    const int column = changes.batch->num_columns() - pg::kCdcColumnCount + 5;
    const auto* seq = column >= 0 ? dynamic_cast<const arrow::Int32Array*>(
                                        changes.batch->column(column).get())
                                  : nullptr;
    if (seq != nullptr) table->last_row = {tx.commit_lsn.value(), seq->Value(n - 1)};
  }
  if (table->truncated) {
    // TRUNCATE gave the table a new relfilenode: not a rewrite that added values.
    // Recorded at once, so a restart does not take it for one. But the catalog is
    // read now, not as of the truncate: the relfilenode is the truncate's only when
    // no later transaction changed the table's pg_class row (its xmin is this one),
    // and a rewrite later in this transaction added no value the stream lacks only
    // when no row followed the truncate. Otherwise the baseline stays, and a column
    // added since counts as added by a rewrite (the table is copied again).
    table->truncated = false;
    std::string xmin;
    ARROW_ASSIGN_OR_RAISE(table->filenode_after_truncate,
                          RelFilenodeOf(table->source, &xmin));
    const auto& ops = *changes.batch->column(changes.batch->num_columns() -
                                             pg::kCdcColumnCount);
    const bool truncate_last =
        ops.type_id() == arrow::Type::STRING &&
        static_cast<const arrow::StringArray&>(ops).GetView(ops.length() - 1) == "t";
    if (xmin != std::to_string(tx.xid) || !truncate_last) {
      table->filenode_after_truncate.clear();
    }
    if (!table->filenode_after_truncate.empty()) {
      ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
          [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties(
                {{lake::kRelFilenodeProperty, table->filenode_after_truncate}});
            return arrow::Status::OK();
          }));
    }
  }
  if (older != nullptr || changes.batch->num_rows() >= kSmallBatchRows) {
    // The buffer holds the bound shape's batches: they go first.
    ARROW_RETURN_NOT_OK(FlushBuffered(table));
    const BatchConformer& conformer = older != nullptr ? *older : *table->conformer;
    ARROW_ASSIGN_OR_RAISE(auto conformed,
                          conformer.Conform(*changes.batch, NowUnixMicros()));
    ARROW_RETURN_NOT_OK(table->appender->Write(*conformed));
  } else {
    ARROW_RETURN_NOT_OK(table->buffered.Add(changes.batch));
    if (table->buffered.rows() >= kFlushRows || table->buffered.bytes() >= kFlushBytes) {
      ARROW_RETURN_NOT_OK(FlushBuffered(table));
    }
  }
  if (!changes.issues.empty()) {
    pending_quarantine_.emplace_back(changes.issues,
                                     pg::PgTimestampToUnixMicros(tx.commit_time));
  }
  return arrow::Status::OK();
}

void Pipeline::CountEvents(BronzeTable* table, const arrow::RecordBatch& batch) {
  // cdc_op is the first CDC metadata column, after the row columns.
  const int column = batch.num_columns() - pg::kCdcColumnCount;
  if (column < 0) return;
  const arrow::ArrayData& ops = *batch.column_data()[static_cast<size_t>(column)];
  if (ops.type->id() != arrow::Type::STRING) return;
  if (!table->events_bound) {
    const std::string name = SourceName(table->source);
    for (size_t k = 0; k < table->events.size(); ++k) {
      table->events[k] = metrics_->events.With({name, std::string(1, kEventOps[k])});
    }
    table->events_bound = true;
  }
  const int32_t* offsets = ops.GetValues<int32_t>(1);
  const uint8_t* chars = ops.buffers[2] ? ops.buffers[2]->data() : nullptr;
  if (offsets == nullptr || chars == nullptr) return;
  int64_t counts[5] = {0, 0, 0, 0, 0};
  for (int64_t i = 0; i < ops.length; ++i) {
    if (offsets[i + 1] - offsets[i] != 1) continue;
    const char op = static_cast<char>(chars[offsets[i]]);
    for (int k = 0; k < 5; ++k) {
      if (op == kEventOps[k]) ++counts[k];
    }
  }
  for (size_t k = 0; k < table->events.size(); ++k) {
    if (counts[k] > 0) table->events[k].Inc(static_cast<double>(counts[k]));
  }
  if (counts[3] > 0) table->truncated = true;  // kEventOps[3] == 't'
  if (counts[0] > 0 && !table->warned_insert_without_values) {
    WarnIfAnInsertLacksValues(table, batch, offsets, chars);
  }
}

// An insert always carries every value, except the new half of a key change (a `c`
// right after its `d`), and one pgoutput makes of an update that moves a row into
// the publication's row filter: that one lacks the unchanged TOAST values the old
// tuple did not carry (REPLICA IDENTITY DEFAULT), and nothing can fill them in.
// Said once per table, with the fix, so it is never a silent null.
void Pipeline::WarnIfAnInsertLacksValues(BronzeTable* table, const arrow::RecordBatch& batch,
                                         const int32_t* op_offsets,
                                         const uint8_t* op_chars) {
  const int n = batch.num_columns();
  const auto* unchanged = dynamic_cast<const arrow::ListArray*>(batch.column(n - 1).get());
  const auto* seq = dynamic_cast<const arrow::Int32Array*>(batch.column(n - 2).get());
  if (unchanged == nullptr || seq == nullptr ||
      unchanged->null_count() == unchanged->length()) {
    return;
  }
  auto op = [&](int64_t i) {
    return op_offsets[i + 1] - op_offsets[i] == 1 ? static_cast<char>(op_chars[op_offsets[i]])
                                                  : '\0';
  };
  for (int64_t i = 0; i < batch.num_rows(); ++i) {
    if (op(i) != 'c' || unchanged->IsNull(i) || unchanged->value_length(i) == 0) continue;
    if (i > 0 && op(i - 1) == 'd' && seq->Value(i - 1) + 1 == seq->Value(i)) continue;
    table->warned_insert_without_values = true;
    const auto& names = static_cast<const arrow::StringArray&>(*unchanged->values());
    std::string columns;
    for (int64_t k = unchanged->value_offset(i); k < unchanged->value_offset(i + 1); ++k) {
      columns += (columns.empty() ? "" : ", ") + std::string(names.GetView(k));
    }
    const std::string quoted =
        config::QualifiedName{table->source.schema, table->source.table}.ToString();
    spdlog::warn(
        "{}: an insert arrived without the value(s) of {} (unchanged TOAST): pgoutput "
        "turned an update that moved a row into the publication's row filter into an "
        "insert, and the old row did not carry them, so Bronze and Silver hold null "
        "there. Set ALTER TABLE {} REPLICA IDENTITY FULL (the update then carries "
        "them), and copy the table again (floe run --backfill-table {})",
        SourceName(table->source), columns, quoted, quoted);
    return;
  }
}

arrow::Status Pipeline::OnMessage(const pg::CapturedMessage& message) {
  if (message.prefix == lake::kHeartbeatPrefix) return arrow::Status::OK();
  if (message.prefix == lake::kWatermarkPrefix) {
    return message.transactional ? OnWatermark(message) : arrow::Status::OK();
  }
  metrics_->messages.Inc({});
  pending_messages_.push_back(message);
  pending_message_times_.push_back(NowUnixMicros());
  if (!message.transactional && message.lsn > position_) position_ = message.lsn;
  return arrow::Status::OK();
}

arrow::Status Pipeline::OnCommit(const pg::TransactionInfo& tx) {
  last_commit_time_us_.store(pg::PgTimestampToUnixMicros(tx.commit_time));
  last_commit_lsn_ = tx.commit_lsn;
  last_end_lsn_ = tx.end_lsn;
  if (tx.commit_lsn > position_) position_ = tx.commit_lsn;
  ++delivered_since_checkpoint_;
  return arrow::Status::OK();
}

arrow::Status Pipeline::WriteQuarantine(
    const pg::QualifiedName& source, const std::vector<pg::QuarantineCandidate>& issues,
    int64_t cdc_ts_us) {
  (void)source;
  ARROW_ASSIGN_OR_RAISE(TableAppender * q,
                        SystemTable(&quarantine_, "quarantine", QuarantineSchema(),
                                    QuarantineSpec(QuarantineSchema()).ValueOrDie()));
  std::vector<pg::QuarantineCandidate> keep;
  for (const auto& issue : issues) {
    if (issue.commit_lsn > q->committed_lsn()) keep.push_back(issue);
  }
  if (keep.empty()) return arrow::Status::OK();
  for (const auto& issue : keep) {
    metrics_->quarantined.Inc({issue.schema_name + "." + issue.table_name});
  }
  ARROW_ASSIGN_OR_RAISE(auto batch, QuarantineBatch(keep, cdc_ts_us, NowUnixMicros()));
  return q->Write(*batch);
}

// Runs `commit` (one table's commit) on its own thread, recording its duration,
// rows and bytes under `label` when it succeeds.
std::future<arrow::Status> Pipeline::CommitAsync(TableAppender* appender, std::string label,
                                                 std::function<arrow::Status()> commit) {
  return std::async(std::launch::async, [this, appender, label = std::move(label),
                                         commit = std::move(commit)] {
    const auto t0 = Clock::now();
    arrow::Status st = commit();
    if (st.ok()) {
      metrics_->commit_seconds.Observe(
          {}, std::chrono::duration<double>(Clock::now() - t0).count());
      metrics_->commits.Inc({label});
      metrics_->rows_written.Inc({label},
                                 static_cast<double>(appender->last_commit().rows));
      metrics_->bytes_written.Inc({label},
                                  static_cast<double>(appender->last_commit().bytes));
    }
    return st;
  });
}

// Commits everything delivered so far, then confirms it to the server.
arrow::Status Pipeline::Checkpoint(bool final) {
  // Writing and committing may take longer than the server's wal_sender_timeout (a
  // slow object store or catalog): the keeper answers for floe meanwhile, until the
  // position to confirm is known.
  std::optional<pg::StatusKeeper> keeper(std::in_place, streaming_);
  // The side tables first: they only ever hold rows of delivered transactions.
  if (!pending_messages_.empty()) {
    ARROW_ASSIGN_OR_RAISE(
        TableAppender * m,
        SystemTable(&messages_, "pg_logical_messages", LogicalMessagesSchema(),
                    LogicalMessagesSpec(LogicalMessagesSchema()).ValueOrDie()));
    std::vector<pg::CapturedMessage> keep;
    std::vector<int64_t> received;
    for (size_t i = 0; i < pending_messages_.size(); ++i) {
      auto& msg = pending_messages_[i];
      const Lsn at = msg.transactional ? msg.commit_lsn : msg.lsn;
      if (at > m->committed_lsn()) {
        keep.push_back(std::move(msg));
        received.push_back(pending_message_times_[i]);
      }
    }
    if (!keep.empty()) {
      ARROW_ASSIGN_OR_RAISE(auto batch,
                            LogicalMessagesBatch(keep, received, NowUnixMicros()));
      ARROW_RETURN_NOT_OK(m->Write(*batch));
    }
    pending_messages_.clear();
    pending_message_times_.clear();
  }
  for (auto& [issues, ts] : pending_quarantine_) {
    if (issues.empty()) continue;
    pg::QualifiedName source{issues.front().schema_name, issues.front().table_name};
    ARROW_RETURN_NOT_OK(WriteQuarantine(source, issues, ts));
  }
  pending_quarantine_.clear();

  for (auto& [name, table] : tables_) ARROW_RETURN_NOT_OK(FlushBuffered(table.get()));
  Failpoint("checkpoint.before-commit");  // data files written, nothing committed
  // Every touched table commits in parallel (the catalog serialises only its own
  // calls); the checkpoint holds only once all of them did. A table being
  // backfilled records its progress in the same commit as the rows it covers (and
  // commits when only the progress moved).
  std::vector<TableAppender*> dirty;
  std::map<TableAppender*, ice::SummaryProperties> progress;
  // Where the stream is (the position a checkpoint confirms).
  const Lsn passed = StreamPassed();
  // Tables whose copy again the stream has passed: committed even without rows, at
  // least at the copy's point.
  std::map<TableAppender*, Lsn> reached;
  for (auto& [name, table] : tables_) {
    if (!table->appender) continue;
    auto backfill = backfills_.find(name);
    bool moved = false;
    if (backfill != backfills_.end()) {
      Backfill& b = *backfill->second;
      std::string json = b.progress.ToJson();
      moved = json != b.committed;
      ice::SummaryProperties& summary = progress[table->appender.get()];
      summary[lake::kBackfillSummaryKey] = b.progress.SummaryJson();
      if (b.progress.has_keys()) {
        if (json != b.keys_written) {
          ice::Table& bronze = table->appender->table();
          ARROW_ASSIGN_OR_RAISE(
              b.keys_file,
              WriteBackfillKeys(bronze.io(), bronze.metadata().location, b.progress));
          b.keys_written = json;
        }
        summary[lake::kBackfillKeysSummaryKey] = b.keys_file;
      }
    }
    // A copy again whose point the stream has now passed: the table commits (even
    // without rows), so that its commit LSN reaches the point, and Silver may merge.
    const bool copy_reached =
        table->recopy_until.value() != 0 && passed >= table->recopy_until;
    if (copy_reached) reached[table->appender.get()] = table->recopy_until;
    if (moved || copy_reached || table->appender->pending_rows() > 0) {
      dirty.push_back(table->appender.get());
    }
  }
  if (messages_ && messages_->pending_rows() > 0) dirty.push_back(messages_.get());
  if (quarantine_ && quarantine_->pending_rows() > 0) dirty.push_back(quarantine_.get());
  const auto started = Clock::now();
  std::vector<std::future<arrow::Status>> commits;
  int64_t rows = 0;
  for (TableAppender* appender : dirty) {
    rows += appender->pending_rows();
    Lsn lsn = appender == messages_.get() ? position_ : last_commit_lsn_;
    const auto copy = reached.find(appender);
    if (copy != reached.end()) lsn = std::max(lsn, copy->second);
    ice::SummaryProperties summary;
    if (auto it = progress.find(appender); it != progress.end()) summary = it->second;
    const bool force = !summary.empty() || copy != reached.end();
    commits.push_back(
        CommitAsync(appender, TableLabel(appender), [appender, lsn, summary, force] {
          arrow::Status st = appender->Commit(lsn, summary, force);
          // One table committed, the others perhaps not yet.
          if (st.ok()) Failpoint("checkpoint.after-table-commit");
          return st;
        }));
  }
  // The commits' bookkeeping, once every one of them succeeded.
  auto after_commits = [&]() -> arrow::Status {
    for (auto& [name, table] : tables_) {
      if (table->recopy_until.value() == 0 || !table->appender ||
          table->appender->committed_lsn() < table->recopy_until) {
        continue;
      }
      table->recopy_until = Lsn();
      ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
          [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->RemoveProperties(
                {lake::kRecopyPendingProperty, lake::kRecopyUntilProperty});
            return arrow::Status::OK();
          }));
      spdlog::info("{}: Bronze now holds every change up to its copy again at {}",
                   SourceName(name), Lsn(table->appender->committed_lsn()).ToString());
    }
    // Requested backfills are durable once their first progress record committed.
    backfills_requested_ = true;
    for (auto it = backfills_.begin(); it != backfills_.end();) {
      Backfill& backfill = *it->second;
      backfill.committed = backfill.progress.ToJson();
      const std::string keys =
          backfill.progress.has_keys() ? backfill.keys_file : std::string();
      if (!backfill.keys_committed_file.empty() && backfill.keys_committed_file != keys) {
        // Superseded: no later run reads it (a failed delete leaves an orphan).
        const arrow::Status deleted =
            backfill.table->appender->table().io().Delete(backfill.keys_committed_file);
        if (!deleted.ok()) {
          spdlog::debug("{}: {}", backfill.keys_committed_file, deleted.ToString());
        }
      }
      backfill.keys_committed_file = keys;
      if (backfill.progress.done) {
        spdlog::info("backfilled {}: {} row(s) in {} chunk(s), {} s",
                     SourceName(it->first), backfill.progress.rows,
                     backfill.progress.chunks,
                     std::chrono::duration_cast<std::chrono::seconds>(Clock::now() -
                                                                      backfill.started)
                         .count());
        copied_.insert(it->first);
        it = backfills_.erase(it);
      } else {
        ++it;
      }
    }
    if (!dirty.empty()) {
      spdlog::info(
          "checkpoint: {} table(s), {} row(s) committed up to commit LSN {} in {} ms",
          dirty.size(), rows, last_commit_lsn_.ToString(),
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started)
              .count());
    }
    return arrow::Status::OK();
  };
  // Everything delivered is durable: confirm it (checkpointer.h). Not while the
  // initial copy runs without a stream.
  auto position = [&] { return streaming_ == nullptr ? confirmed_ : StreamPassed(); };
  PositionSink sink;
  sink.record = [&](Lsn confirm) {
    return catalog_->UpdateNamespaceProperties(
        ServiceNamespace(), {{lake::kStateConfirmed, std::to_string(confirm.value())}});
  };
  sink.confirm = [&](Lsn confirm) {
    keeper.reset();  // the connection is the pipeline's again
    streaming_->ReportDurable(confirm);
    confirmed_ = confirm;
    return final ? streaming_->SendStandbyStatus() : arrow::Status::OK();
  };
  ARROW_ASSIGN_OR_RAISE(confirmed_, FinishCheckpoint(std::move(commits), after_commits,
                                                     position, confirmed_, sink));
  // Confirmed while the stream holds a transaction it read but did not deliver: a
  // crash now must not lose it.
  if (streaming_ != nullptr && stream_ != nullptr && !stream_->holds_nothing()) {
    Failpoint("checkpoint.holding");
  }
  delivered_since_checkpoint_ = 0;
  metrics_->checkpoint_seconds.Observe(
      {}, std::chrono::duration<double>(Clock::now() - started).count());
  last_checkpoint_ms_.store(NowUnixMicros() / 1000);
  metrics_->last_checkpoint.Set({}, static_cast<double>(NowUnixMicros()) / 1e6);
  return arrow::Status::OK();
}

std::string Pipeline::TableLabel(const TableAppender* appender) const {
  if (appender == messages_.get()) return "pg_logical_messages";
  if (appender == quarantine_.get()) return "quarantine";
  for (const auto& [name, table] : tables_) {
    if (table->appender.get() == appender) return SourceName(name);
  }
  return "?";
}

arrow::Status Pipeline::RunOnce(bool* streamed) {
  *streamed = false;
  backfills_.clear();
  backfill_sql_.reset();
  table_of_shape_.clear();
  tables_.clear();
  copied_.clear();
  to_copy_.clear();
  messages_.reset();
  quarantine_.reset();
  pending_messages_.clear();
  pending_message_times_.clear();
  pending_quarantine_.clear();
  streaming_ = nullptr;
  stream_ = nullptr;
  last_commit_lsn_ = last_end_lsn_ = position_ = Lsn();

  const std::string& conninfo = config_.source.conninfo;
  ARROW_ASSIGN_OR_RAISE(sql_, pg::PgConnection::Connect(conninfo));
  ARROW_RETURN_NOT_OK(LockService(*sql_));
  types_ = std::make_unique<pg::PgTypeResolver>(sql_.get());
  pg::PgAttributeLookup attributes(sql_.get(), config_.source.publication);
  ARROW_ASSIGN_OR_RAISE(repl_, pg::ReplicationConnection::Connect(conninfo));
  ARROW_ASSIGN_OR_RAISE(pg::SystemIdentity who, repl_->IdentifySystem());

  pg::PublicationOptions pub;
  pub.name = config_.source.publication;
  pub.create_if_missing =
      config_.source.publication_mode != config::PublicationMode::kExisting;
  pub.all_tables = config_.source.publication_mode == config::PublicationMode::kAllTables;
  for (const auto& t : config_.source.publication_tables) {
    pub.tables.push_back({t.schema, t.table});
  }
  auto ensured_pub = pg::EnsurePublication(*sql_, pub);
  if (!ensured_pub.ok()) {
    return Fatal(ensured_pub.status().message());
  }
  if (ensured_pub->created) spdlog::info("created publication {}", pub.name);

  ARROW_RETURN_NOT_OK(CheckSlot(*repl_, who));
  WarnIfUnprotected(*sql_);
  // Requested backfills of tables Bronze holds (the others are copied below).
  std::set<pg::QualifiedName> held;
  if (!backfills_requested_) {
    for (const auto& t : options_.backfill_tables) {
      ARROW_ASSIGN_OR_RAISE(BronzeTable * table, TableFor({t.schema, t.table}));
      if (table->appender && table->appender->has_snapshot()) held.insert(table->source);
    }
  }
  ARROW_RETURN_NOT_OK(Discover(/*at_start=*/true));
  if (!backfills_requested_) ARROW_RETURN_NOT_OK(BackfillOnRequest(held));
  if (resnapshot_) {
    resnapshot_ = false;
    spdlog::info("every published table was copied again; --resnapshot is done");
  }

  pg::StartReplicationOptions start;
  start.publication_names = {config_.source.publication};
  ARROW_ASSIGN_OR_RAISE(pg::PgOutputOptions decoder,
                        repl_->StartReplication(config_.source.slot, Lsn(), start));
  streaming_ = repl_.get();
  pg::ReplicationMessageSource source(repl_.get());
  pg::ChangeStream::Options stream_options;
  // A long replay of a spilled transaction answers the server as often as a busy
  // checkpoint does.
  stream_options.replay_keepalive_interval =
      std::min(stream_options.replay_keepalive_interval, repl_->keepalive_interval());
  // A merge key declared for Silver: an update changing it is a key change too.
  for (const auto& [name, key] : config_.silver.keys) {
    stream_options.extra_key_columns[{name.schema, name.table}] = key;
  }
  ARROW_ASSIGN_OR_RAISE(auto stream,
                        pg::ChangeStream::Make(&source, decoder, &attributes, types_.get(),
                                               this, stream_options));
  stream_ = stream.get();
  struct ForgetStream {
    Pipeline* p;
    ~ForgetStream() { p->stream_ = nullptr; }
  } forget_stream{this};
  spdlog::info("streaming slot {} of publication {} from {}", config_.source.slot,
               config_.source.publication, confirmed_.ToString());
  *streamed = true;
  streaming_flag_.store(true);
  metrics_->streaming.Set({}, 1);
  struct NotStreaming {
    Pipeline* p;
    ~NotStreaming() {
      p->streaming_flag_.store(false);
      p->metrics_->streaming.Set({}, 0);
    }
  } not_streaming{this};
  auto last_sample = Clock::now() - std::chrono::hours(1);

  auto last_checkpoint = Clock::now();
  auto last_discovery = Clock::now();
  auto last_activity = Clock::now();
  auto last_heartbeat = Clock::now();
  while (true) {
    if (stop_requested()) {
      ARROW_RETURN_NOT_OK(Checkpoint(/*final=*/true));
      ARROW_RETURN_NOT_OK(repl_->StopReplication());
      spdlog::info("stopped; confirmed up to {}", confirmed_.ToString());
      return arrow::Status::OK();
    }
    ARROW_ASSIGN_OR_RAISE(bool got, stream->Poll(std::chrono::milliseconds(100)));
    const auto now = Clock::now();
    if (got) last_activity = now;
    // Between two Polls no transaction is half delivered: a safe point.
    int64_t pending_bytes = 0;
    for (const auto& [name, table] : tables_) {
      if (table->appender) pending_bytes += table->appender->pending_bytes();
      pending_bytes += table->buffered.bytes();
    }
    if (!to_copy_.empty() ||
        now - last_discovery >= options_.discovery_interval) {
      last_discovery = now;
      if (!to_copy_.empty()) ARROW_RETURN_NOT_OK(Checkpoint(false));
      ARROW_RETURN_NOT_OK(Discover(/*at_start=*/false));
    }
    ARROW_RETURN_NOT_OK(IssueChunks());
    if (now - last_checkpoint >= config_.checkpoint.interval ||
        pending_bytes >= config_.checkpoint.max_bytes) {
      ARROW_RETURN_NOT_OK(Checkpoint(false));
      last_checkpoint = Clock::now();
    }
    if (now - last_sample >= std::chrono::seconds(5)) {
      last_sample = now;
      SampleSource();
    }
    if (now - last_activity >= options_.heartbeat_interval &&
        now - last_heartbeat >= options_.heartbeat_interval) {
      last_heartbeat = now;
      auto st = sql_->Query("SELECT pg_logical_emit_message(true, $1, ''::text)::text",
                            {std::string(lake::kHeartbeatPrefix)});
      if (!st.ok()) return st.status();
    }
  }
}

bool IsFatal(const arrow::Status& status) {
  return status.detail() != nullptr &&
         std::string(status.detail()->type_id()) == kFatalTypeId;
}

arrow::Status RunPipeline(const config::PipelineConfig& config,
                          const RunOptions& options) {
  // A local warehouse (and a SQLite catalog in it) may not exist yet.
  std::error_code ec;
  if (config.warehouse.starts_with("file://")) {
    std::filesystem::create_directories(config.warehouse.substr(7), ec);
    if (ec) {
      return Fatal("cannot create the warehouse directory " +
                   config.warehouse.substr(7) + ": " + ec.message());
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto catalog,
                        lake::OpenPipelineCatalog(config, lake::CatalogAccess::kCreate));
  auto io = ice::MakeLocalFileIO();

  ARROW_ASSIGN_OR_RAISE(auto metrics, PipelineMetrics::Make());
  Pipeline pipeline(config, options, catalog.get(), io, metrics.get());
  ARROW_RETURN_NOT_OK(metrics->registry.AddCallbackGauge(
      "floe_source_lag_milliseconds",
      "Now minus the source commit time of the last transaction floe processed: "
      "rises while floe is stopped or behind; on an idle source it stays below the "
      "heartbeat interval (heartbeats are commits)",
      {}, [&pipeline]() {
        std::vector<std::pair<metrics::LabelValues, double>> out;
        if (auto lag = pipeline.LagMilliseconds()) out.push_back({{}, *lag});
        return out;
      }));
  std::unique_ptr<metrics::MetricsServer> server;
  if (!options.metrics_listen.empty()) {
    auto started = metrics::MetricsServer::Start(
        options.metrics_listen, metrics->registry,
        [&pipeline]() { return pipeline.NotReady(); });
    if (!started.ok()) return Fatal(started.status().message());
    server = std::move(*started);
    spdlog::info("serving /metrics, /healthz and /readyz on {}:{}", server->host(),
                 server->port());
  }
  if (options.duration) pipeline.set_deadline(Clock::now() + *options.duration);
  auto backoff = options.min_backoff;
  while (true) {
    bool streamed = false;
    const auto started = Clock::now();
    arrow::Status st = pipeline.RunOnce(&streamed);
    if (st.ok()) {
      pipeline.MarkCleanStop();
      return st;
    }
    metrics->errors.Inc({IsFatal(st) ? "fatal" : st.CodeAsString()});
    if (IsFatal(st)) return st;
    if (pipeline.stop_requested()) {
      spdlog::warn("stopping after an error: {}", st.ToString());
      return arrow::Status::OK();
    }
    // A run that streamed for a while resets the backoff.
    if (streamed && Clock::now() - started > std::chrono::minutes(1)) {
      backoff = options.min_backoff;
    }
    spdlog::warn("{}; reconnecting in {} ms (uncommitted changes are read again)",
                 st.ToString(), backoff.count());
    const auto wake = Clock::now() + backoff;
    while (Clock::now() < wake && !pipeline.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pipeline.stop_requested()) return arrow::Status::OK();
    backoff = std::min(options.max_backoff, backoff * 2);
    metrics->restarts.Inc({"reconnect"});
  }
}

}  // namespace floe::bronze
