// The pipeline as the change stream's sink (pg::ChangeSink): relation changes,
// a transaction's changes of a table written through its conformer (buffered
// when small), events counted, logical messages and commits.

#include "floe/bronze/pipeline_internal.h"

#include <arrow/array.h>

#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"

namespace floe::bronze {

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
    ARROW_RETURN_NOT_OK(SetShape(table, SourceColumnsOf(*change.shape), {0, -1},
                                 change.shape->relation_id));
    table->conformer_shape = change.shape.get();
  }
  if (config_.source.snapshot == config::SnapshotPolicy::kInitial) {
    ARROW_ASSIGN_OR_RAISE(bool copied, IsCopied(table));
    if (!copied && !table->awaiting_copy && !table->stream_relation_gone) {
      ARROW_RETURN_NOT_OK(CopyFirstSeen(table, change.shape->relation_id));
    }
    ARROW_RETURN_NOT_OK(
        CopyIfRenamedBack(table, change.shape->relation_id, change.commit_lsn));
  }
  return MarkRenamedAway(table, change.shape->relation_id, change.commit_lsn);
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
  if (table->relations.empty() ||
      table->relations.back().relation != changes.shape->relation_id ||
      table->relations.back().from.first >= static_cast<int64_t>(tx.commit_lsn.value())) {
    ARROW_RETURN_NOT_OK(MarkRelationChange(
        table, tx, changes, older != nullptr ? *older : *table->conformer));
  }
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
    // added since counts as added by a rewrite (the table is copied again). Read
    // before the truncate is visible, the row is the one before it: so first wait
    // for that (the stream can deliver a commit before other sessions see it).
    table->truncated = false;
    ARROW_ASSIGN_OR_RAISE(const bool visible, source_->AwaitVisible(tx.xid));
    if (!visible) {
      spdlog::warn(
          "{}: the TRUNCATE of transaction {} was still not visible after 10 s (a "
          "synchronous standby not answering?): floe cannot tell its relfilenode, so a "
          "column added to the table before the next TRUNCATE makes floe copy it again",
          SourceName(table->source), tx.xid);
    }
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

}  // namespace floe::bronze
