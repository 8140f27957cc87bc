// ChangeStream (change_stream.h): building rows. Each data message of a transaction
// becomes a row of its table's open builder (converted as it arrives, with its CDC
// columns); full builders are sealed into batches, each transaction's rows a slice.

#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/change_stream_internal.h"

#include <cstring>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

namespace floe::postgres {

using internal::Capture;

namespace {

// A no-null array of `type` whose one buffer holds exactly `values` (which is
// emptied).
template <typename T>
arrow::Result<std::shared_ptr<arrow::Array>> ExactArray(
    const std::shared_ptr<arrow::DataType>& type, std::vector<T>* values) {
  const int64_t n = static_cast<int64_t>(values->size());
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buffer,
                        arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(T))));
  if (n > 0)
    std::memcpy(buffer->mutable_data(), values->data(), values->size() * sizeof(T));
  values->clear();
  return arrow::MakeArray(
      arrow::ArrayData::Make(type, n, {nullptr, std::move(buffer)}, 0));
}

}  // namespace

arrow::Status ChangeStream::ApplyData(Transaction* tx, Lsn wal_start,
                                      const PgOutputMessage& message) {
  if (const auto* m = std::get_if<RelationMessage>(&message)) {
    return ApplyRelation(tx, *m);
  }
  if (const auto* m = std::get_if<TypeMessage>(&message)) {
    streamed_type_names_[m->type_oid] = {std::string(m->namespace_name),
                                         std::string(m->type_name)};
    return arrow::Status::OK();
  }
  if (const auto* m = std::get_if<InsertMessage>(&message)) {
    return AppendRow(tx, m->relation_id, 'c', wal_start, m->new_tuple);
  }
  if (const auto* m = std::get_if<UpdateMessage>(&message)) {
    if (m->old_kind != OldTupleKind::kNone) {
      auto state = tables_.find(m->relation_id);
      if (state == tables_.end()) {
        return arrow::Status::Invalid("pgoutput UPDATE of unknown relation ",
                                      m->relation_id);
      }
      // Whether a key column changed: the update is then a delete of the old key
      // and an insert of the new one. A key column stored out of line and left
      // unchanged arrives as unchanged TOAST: without its value the change names no
      // row (Silver would fold it onto a null key). The old image carries it
      // (PostgreSQL logs a replica identity key with external values even when it
      // did not change; REPLICA IDENTITY FULL logs every value): the new row, or
      // the insert of the new key, takes it from there.
      bool key_changed = false;
      std::vector<TupleValue> filled;
      for (int i : state->second->key_columns) {
        const auto at = static_cast<size_t>(i);
        if (at >= m->old_tuple.size() || at >= m->new_tuple.size()) {
          break;  // AppendRow reports the malformed tuple
        }
        const TupleValue& before = m->old_tuple[at];
        const TupleValue& after = m->new_tuple[at];
        if (after.is_unchanged_toast()) {
          if (before.is_unchanged_toast() || before.is_null()) continue;
          if (filled.empty()) filled.assign(m->new_tuple.begin(), m->new_tuple.end());
          filled[at] = before;
        } else if (!before.is_unchanged_toast() &&
                   (before.kind != after.kind || before.bytes != after.bytes)) {
          key_changed = true;
        }
      }
      if (key_changed) {
        ARROW_RETURN_NOT_OK(AppendRow(tx, m->relation_id, 'd', wal_start, m->old_tuple));
        return AppendRow(tx, m->relation_id, 'c', wal_start,
                         filled.empty() ? m->new_tuple : TupleData(filled));
      }
      if (!filled.empty()) {
        return AppendRow(tx, m->relation_id, 'u', wal_start, filled);
      }
    }
    return AppendRow(tx, m->relation_id, 'u', wal_start, m->new_tuple);
  }
  if (const auto* m = std::get_if<DeleteMessage>(&message)) {
    return AppendRow(tx, m->relation_id, 'd', wal_start, m->old_tuple);
  }
  if (const auto* m = std::get_if<TruncateMessage>(&message)) {
    for (Oid relation_id : m->relation_ids) {
      ARROW_RETURN_NOT_OK(AppendRow(tx, relation_id, 't', wal_start, TupleData{}));
    }
    return arrow::Status::OK();
  }
  if (const auto* m = std::get_if<LogicalMessage>(&message)) {
    CapturedMessage captured = Capture(*m);
    if (!m->transactional) return EmitMessage(nullptr, std::move(captured));
    if (!captured.xid) captured.xid = tx->info.xid;
    return EmitMessage(tx, std::move(captured));
  }
  return arrow::Status::Invalid("pgoutput ", MessageTypeName(TypeOf(message)),
                                " inside a transaction");
}

arrow::Status ChangeStream::ApplyRelation(Transaction* tx,
                                          const RelationMessage& message) {
  ARROW_ASSIGN_OR_RAISE(RelationUpdate update,
                        relations_.Apply(message, tx != nullptr ? tx->info.xid : 0));
  auto& state = tables_[message.relation_id];
  if (update.kind == RelationUpdate::Kind::kUnchanged && state) {
    return arrow::Status::OK();
  }
  // Rows of the old shape are finished before the new shape's first row.
  ARROW_RETURN_NOT_OK(Seal(message.relation_id));
  auto next = std::make_unique<TableState>();
  auto shape = std::make_shared<TableShape>();
  shape->relation_id = message.relation_id;
  shape->version = state && state->shape ? state->shape->version + 1 : 1;
  shape->relation = *update.relation;
  arrow::FieldVector fields;
  for (const RelationColumnInfo& column : shape->relation.columns) {
    arrow::Result<PgTypeInfo> resolved =
        types_->Resolve(column.type_oid, column.type_modifier);
    PgTypeInfo type;
    if (resolved.ok()) {
      type = std::move(resolved).ValueUnsafe();
    } else if (resolved.status().IsKeyError()) {
      // The type (or one it is built on) was dropped after these changes were
      // written: the catalog no longer describes it, but every value arrives as
      // text (floe asks for the text format). pgoutput's Type message named it as
      // of the changes, a domain by its base type: a domain over a built-in type
      // keeps that type's mapping; anything else is kept as its text.
      auto named = streamed_type_names_.find(column.type_oid);
      std::string what = "oid " + std::to_string(column.type_oid);
      if (named != streamed_type_names_.end() && named->second.first == "pg_catalog" &&
          !named->second.second.starts_with("_")) {
        type = PgTypeInfo::Builtin(named->second.second, column.type_oid,
                                   column.type_modifier);
        what = "a domain over pg_catalog." + named->second.second + ", " + what;
      } else {
        type.oid = column.type_oid;
        type.typmod = column.type_modifier;
        type.kind = PgTypeKind::kOther;
        if (named != streamed_type_names_.end()) {
          type.namespace_name = named->second.first;
          type.name = named->second.second;
          what = named->second.first + "." + named->second.second + ", " + what;
        } else {
          type.name = what;
        }
      }
      shape->unresolved_types.push_back(column.name + " (" + what + ")");
    } else {
      return resolved.status();
    }
    ColumnMapping mapping = MapType(type);
    fields.push_back(arrow::field(column.name, mapping.type));
    shape->mappings.push_back(mapping);
    next->binary_formats.push_back(BinaryFormatFor(type, mapping));
    next->type_names.push_back(type.name);
    next->converters.emplace_back(column.name, std::move(mapping));
  }
  for (auto& f : CdcMetadataFields()) fields.push_back(std::move(f));
  shape->schema = arrow::schema(std::move(fields));

  // The key that identifies a row downstream (never all columns of REPLICA
  // IDENTITY FULL: then an update would look like a key change whenever any value
  // changed).
  next->key_columns = shape->relation.row_key();
  if (auto extra = options_.extra_key_columns.find(
          {shape->relation.namespace_name, shape->relation.relation_name});
      extra != options_.extra_key_columns.end()) {
    for (const std::string& name : extra->second) {
      const int i = shape->relation.FindColumn(name);
      if (i < 0 || !shape->relation.columns[static_cast<size_t>(i)].is_replica_identity) {
        continue;  // the old tuple lacks it: a change of it cannot be seen
      }
      if (std::find(next->key_columns.begin(), next->key_columns.end(), i) ==
          next->key_columns.end()) {
        next->key_columns.push_back(i);
      }
    }
  }
  next->shape = std::move(shape);
  if (state) next->delivered = std::move(state->delivered);
  state = std::move(next);
  return arrow::Status::OK();
}

bool ChangeStream::SkipTable(const TableShape& shape, Lsn commit_lsn) const {
  if (options_.table_start_after.empty()) return false;
  auto it = options_.table_start_after.find(
      QualifiedName{shape.relation.namespace_name, shape.relation.relation_name});
  return it != options_.table_start_after.end() && commit_lsn <= it->second;
}

arrow::Result<ChangeStream::Segment*> ChangeStream::SegmentFor(Transaction* tx,
                                                               TableState* state,
                                                               Oid relation_id) {
  for (Segment& seg : tx->segments) {
    if (seg.relation_id == relation_id) return &seg;
  }
  auto& slot = open_builders_[relation_id];
  if (slot == nullptr) {
    slot = std::move(state->spare);
    if (slot == nullptr) {
      slot = std::make_unique<TableBuilder>();
      slot->shape = state->shape;
      for (const ColumnConverter& converter : state->converters) {
        ARROW_ASSIGN_OR_RAISE(auto column, converter.MakeBuilder());
        slot->columns.push_back(std::move(column));
      }
    }
  }
  Segment seg;
  seg.relation_id = relation_id;
  seg.builder = slot.get();
  seg.start = slot->rows;
  tx->segments.push_back(std::move(seg));
  return &tx->segments.back();
}

bool ChangeStream::SameName(Oid a, Oid b) const {
  auto x = tables_.find(a);
  auto y = tables_.find(b);
  if (x == tables_.end() || y == tables_.end() || !x->second || !y->second) return false;
  const RelationInfo& p = x->second->shape->relation;
  const RelationInfo& q = y->second->shape->relation;
  return p.relation_name == q.relation_name && p.namespace_name == q.namespace_name;
}

arrow::Status ChangeStream::AppendRow(Transaction* tx, Oid relation_id, char op,
                                      Lsn wal_start, TupleData tuple) {
  if (relation_id != tx->last_relation) {
    // A table dropped (or renamed away) and created again under its name in this
    // transaction, its next row right after the old relation's: one cdc_seq is left
    // out between them, the position of the `t` row the sink writes where the
    // name's relation changes (so that it sorts after the old rows and before the
    // new ones, and no two rows of the table share a position).
    if (tx->last_relation != 0 && SameName(tx->last_relation, relation_id)) {
      ++tx->next_seq;
    }
    tx->last_relation = relation_id;
  }
  const int32_t seq = tx->next_seq++;
  if (tx->skip) {
    // Still checked, so that a replayed stream fails the same way it did first.
    if (!tables_.contains(relation_id)) {
      return arrow::Status::Invalid("pgoutput change of relation ", relation_id,
                                    " before its Relation message");
    }
    return arrow::Status::OK();
  }
  auto state = tables_.find(relation_id);
  if (state == tables_.end() || !state->second) {
    return arrow::Status::Invalid("pgoutput change of relation ", relation_id,
                                  " before its Relation message");
  }
  const TableShape& shape = *state->second->shape;
  if (SkipTable(shape, tx->info.commit_lsn)) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(Segment * segment,
                        SegmentFor(tx, state->second.get(), relation_id));
  TableBuilder* b = segment->builder;
  const auto& converters = state->second->converters;
  if (op != 't' && tuple.size() != converters.size()) {
    return arrow::Status::Invalid("pgoutput tuple of ", shape.relation.namespace_name,
                                  ".", shape.relation.relation_name, " has ",
                                  tuple.size(), " columns, its relation ",
                                  converters.size());
  }
  bool any_unchanged = false;
  for (size_t i = 0; i < converters.size(); ++i) {
    arrow::ArrayBuilder* column = b->columns[i].get();
    if (op == 't') {
      ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
      continue;
    }
    const TupleValue& v = tuple[i];
    switch (v.kind) {
      case TupleValueKind::kNull:
        ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
        break;
      case TupleValueKind::kUnchangedToast:
        ARROW_RETURN_NOT_OK(converters[i].AppendNull(column));
        if (!any_unchanged) ARROW_RETURN_NOT_OK(b->unchanged.Append());
        any_unchanged = true;
        ARROW_RETURN_NOT_OK(b->unchanged_names->Append(converters[i].column_name()));
        break;
      case TupleValueKind::kText:
      case TupleValueKind::kBinary: {
        b->value_bytes += static_cast<int64_t>(v.bytes.size());
        b->found.clear();
        if (v.kind == TupleValueKind::kText) {
          ARROW_RETURN_NOT_OK(converters[i].Append(v.bytes, column, &b->found));
        } else {
          const BinaryFormat format = state->second->binary_formats[i];
          if (format == BinaryFormat::kNone) {
            return arrow::Status::NotImplemented(
                "column ", converters[i].column_name(), " of ",
                shape.relation.namespace_name, ".", shape.relation.relation_name,
                ": floe has no decoder for the binary form of type ",
                state->second->type_names[i],
                "; stream without the pgoutput option binary");
          }
          ARROW_RETURN_NOT_OK(
              AppendBinaryValue(converters[i], format, v.bytes, column, &b->found));
        }
        for (ConversionIssue& issue : b->found) {
          QuarantineCandidate q;
          q.relation_id = relation_id;
          q.schema_name = shape.relation.namespace_name;
          q.table_name = shape.relation.relation_name;
          q.source_lsn = wal_start;
          q.commit_lsn = tx->info.commit_lsn;
          q.xid = tx->info.xid;
          q.seq = seq;
          q.issue = std::move(issue);
          b->issues.push_back(std::move(q));
          b->issue_rows.push_back(b->rows);
          ++stats_.conversion_issues;
        }
        break;
      }
    }
  }
  if (!any_unchanged) {
    ARROW_RETURN_NOT_OK(b->unchanged.AppendNull());
  } else if (op == 'c' || op == 'u') {
    PartialRow partial;
    partial.row = b->rows;
    for (int column : shape.relation.row_key()) {
      const TupleValue& v = tuple[static_cast<size_t>(column)];
      partial.key.push_back(v.kind == TupleValueKind::kText
                                ? std::optional<std::string>(std::string(v.bytes))
                                : std::nullopt);
    }
    b->partial.push_back(std::move(partial));
  }
  b->op.push_back(op);
  b->ts.push_back(PgTimestampToUnixMicros(tx->info.commit_time));
  b->source_lsn.push_back(static_cast<int64_t>(wal_start.value()));
  b->xid.push_back(static_cast<int64_t>(tx->info.xid));
  b->commit_lsn.push_back(static_cast<int64_t>(tx->info.commit_lsn.value()));
  b->seq.push_back(seq);
  ++b->rows;
  ++segment->rows;
  if (b->rows >= options_.max_batch_rows || b->value_bytes >= options_.max_batch_bytes) {
    return Seal(relation_id);
  }
  return arrow::Status::OK();
}

arrow::Status ChangeStream::Seal(Oid relation_id) {
  auto it = open_builders_.find(relation_id);
  if (it == open_builders_.end()) return arrow::Status::OK();
  std::unique_ptr<TableBuilder> b = std::move(it->second);
  open_builders_.erase(it);
  // Hands the emptied builder back to its table for the next batch, unless the
  // table changed shape meanwhile.
  auto recycle = [&] {
    b->rows = 0;
    b->value_bytes = 0;
    b->issues.clear();
    b->issue_rows.clear();
    b->partial.clear();
    auto state = tables_.find(relation_id);
    if (state != tables_.end() && state->second && state->second->shape == b->shape &&
        state->second->spare == nullptr) {
      state->second->spare = std::move(b);
    }
  };
  if (b->rows == 0) {
    for (auto& tx : deferred_) {
      for (Segment& seg : tx->segments) {
        if (seg.builder == b.get()) seg.builder = nullptr;
      }
    }
    for (Transaction* tx : {current_.get(), replaying_}) {
      if (tx != nullptr) {
        std::erase_if(tx->segments,
                      [&](const Segment& seg) { return seg.builder == b.get(); });
      }
    }
    recycle();
    return arrow::Status::OK();
  }
  const arrow::Schema& schema = *b->shape->schema;
  const int first_meta = schema.num_fields() - kCdcColumnCount;
  arrow::ArrayVector arrays;
  arrays.reserve(static_cast<size_t>(schema.num_fields()));
  for (auto& column : b->columns) {
    ARROW_ASSIGN_OR_RAISE(auto array, column->Finish());
    arrays.push_back(std::move(array));
  }
  {
    // cdc_op: utf8 of one character per row.
    const int64_t n = b->rows;
    ARROW_ASSIGN_OR_RAISE(
        std::shared_ptr<arrow::Buffer> offsets,
        arrow::AllocateBuffer(static_cast<int64_t>(sizeof(int32_t)) * (n + 1)));
    auto* o = reinterpret_cast<int32_t*>(offsets->mutable_data());
    for (int64_t i = 0; i <= n; ++i) o[i] = static_cast<int32_t>(i);
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> chars, arrow::AllocateBuffer(n));
    std::memcpy(chars->mutable_data(), b->op.data(), static_cast<size_t>(n));
    arrays.push_back(arrow::MakeArray(arrow::ArrayData::Make(
        schema.field(first_meta)->type(), n, {nullptr, offsets, chars}, 0)));
    b->op.clear();
  }
  ARROW_ASSIGN_OR_RAISE(auto ts,
                        ExactArray(schema.field(first_meta + 1)->type(), &b->ts));
  arrays.push_back(std::move(ts));
  for (auto [column, values] : {std::pair{2, &b->source_lsn}, std::pair{3, &b->xid},
                                std::pair{4, &b->commit_lsn}}) {
    ARROW_ASSIGN_OR_RAISE(auto a,
                          ExactArray(schema.field(first_meta + column)->type(), values));
    arrays.push_back(std::move(a));
  }
  ARROW_ASSIGN_OR_RAISE(auto seq,
                        ExactArray(schema.field(first_meta + 5)->type(), &b->seq));
  arrays.push_back(std::move(seq));
  ARROW_ASSIGN_OR_RAISE(auto unchanged, b->unchanged.Finish());
  arrays.push_back(std::move(unchanged));
  std::shared_ptr<arrow::RecordBatch> batch =
      arrow::RecordBatch::Make(b->shape->schema, b->rows, std::move(arrays));
  // Each transaction's rows: the whole batch, or a zero-copy slice of it.
  auto cut = [&](const Segment& seg) {
    TableChanges changes;
    changes.shape = b->shape;
    changes.batch =
        seg.start == 0 && seg.rows == b->rows ? batch : batch->Slice(seg.start, seg.rows);
    for (size_t i = 0; i < b->issues.size(); ++i) {
      if (b->issue_rows[i] >= seg.start && b->issue_rows[i] < seg.start + seg.rows) {
        changes.issues.push_back(std::move(b->issues[i]));
      }
    }
    for (PartialRow& partial : b->partial) {
      if (partial.row >= seg.start && partial.row < seg.start + seg.rows) {
        changes.partial.push_back(std::move(partial));
        changes.partial.back().row -= seg.start;
      }
    }
    return changes;
  };
  for (auto& tx : deferred_) {
    for (Segment& seg : tx->segments) {
      if (seg.builder != b.get()) continue;
      seg.builder = nullptr;
      if (seg.rows > 0) seg.done = cut(seg);
    }
  }
  // The open transaction (or the streamed one being replayed) gets its rows now, as
  // when it outgrows max_batch_rows or its table changes shape.
  for (Transaction* tx : {current_.get(), replaying_}) {
    if (tx == nullptr) continue;
    for (size_t i = 0; i < tx->segments.size(); ++i) {
      if (tx->segments[i].builder != b.get()) continue;
      const Segment seg = std::move(tx->segments[i]);
      tx->segments.erase(tx->segments.begin() + static_cast<std::ptrdiff_t>(i));
      if (seg.rows > 0) ARROW_RETURN_NOT_OK(Emit(tx, cut(seg)));
      break;
    }
  }
  recycle();
  return arrow::Status::OK();
}

}  // namespace floe::postgres
