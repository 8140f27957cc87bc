// The source identity of each Bronze table (lake::kSourceIdentityProperty): what
// identifies the relation published under a name and its membership in the
// publication, recorded at each copy; the identity changing (a table dropped and
// re-created, renamed away and back, out of the publication and back, a partition
// attached or detached) means Bronze may miss changes, and the table is copied
// again. Also: a table the stream names that is gone, and whether a table is copied.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>
#include <string>

#include <arrow/array.h>
#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/source/postgres/table_description.h"

namespace floe::bronze {

arrow::Status Pipeline::MarkGone(BronzeTable* table, const std::string& why) {
  table->stream_relation_gone = true;
  return RecordIdentity(table, why);
}

arrow::Result<std::string> Pipeline::RelFilenodeOf(const pg::QualifiedName& table,
                                                   std::string* xmin) {
  ARROW_ASSIGN_OR_RAISE(pg::TableFile file, source_->FileOf(table));
  if (file.filenode.empty()) return std::string();
  if (xmin != nullptr) *xmin = file.xmin;
  return file.filenode;
}

arrow::Result<bool> Pipeline::Rejoined(BronzeTable* table, const std::string& identity) {
  if (!table->appender || !table->appender->has_snapshot()) return false;
  const auto& properties = table->appender->table().metadata().properties;
  if (auto until = properties.find(lake::kRecopyUntilProperty);
      until != properties.end()) {
    // The copy again committed; the stream had not reached its point yet.
    if (auto lsn = ParseUint64(until->second)) table->recopy_until = Lsn(*lsn);
  }
  if (auto pending = properties.find(lake::kRecopyPendingProperty);
      pending != properties.end() && table->recopy_until.value() == 0) {
    spdlog::warn("{}: its copy again ({}) did not commit yet: copying it",
                 SourceName(table->source), pending->second);
    // As RecopyIfMoved: the table's changes keep reaching Bronze until the copy,
    // which records the identity it read.
    table->identity_at_copy = identity;
    if (!table->recopy_queued) {
      table->recopy_queued = true;
      to_copy_.push_back(table);
    }
    return false;
  }
  if (identity.empty()) return false;
  auto it = properties.find(lake::kSourceIdentityProperty);
  if (it == properties.end()) {
    ARROW_RETURN_NOT_OK(RecordIdentity(table, identity));
    return false;
  }
  if (it->second == identity) return false;
  spdlog::warn(
      "{} is not the table Bronze copied ({}; now {}): it was re-created, removed "
      "from publication {} and added back, renamed and renamed back, or had "
      "partitions attached, detached or truncated on their own, "
      "and those changes never reached the stream. Copying it again: a `t` row in {} "
      "marks the gap",
      SourceName(table->source), it->second, identity, config_.source.publication,
      table->id.ToString());
  return true;
}

arrow::Status Pipeline::CopyFirstSeen(BronzeTable* table, pg::Oid relation_id) {
  ARROW_ASSIGN_OR_RAISE(auto identities,
                        source_->PublishedIdentities(config_.source.publication));
  auto now = identities.find(table->source);
  if (relation_id == 0 ||
      (now != identities.end() && IdentityIsOf(now->second, relation_id))) {
    spdlog::info("{} appeared in the stream: copying its rows",
                 SourceName(table->source));
    return CopyLater(table);
  }
  table->stream_relation_gone = true;
  if (now == identities.end()) {
    spdlog::warn(
        "{} appeared in the stream but is no longer in the source under this "
        "name, or not in publication {} (dropped, renamed or removed since): "
        "there is nothing to copy, and its streamed changes are kept in {}. A "
        "table published under this name later is copied then",
        SourceName(table->source), config_.source.publication, table->id.ToString());
    // Any table published under the name later is not the relation streamed now.
    return RecordIdentity(table, IdentityOfGone(relation_id, "gone"));
  }
  spdlog::warn(
      "{}: the stream's changes are of a relation dropped since (the table of "
      "this name now is another): copying the table it is now, after a `t` "
      "row in {}",
      SourceName(table->source), table->id.ToString());
  table->awaiting_copy = true;
  table->identity_at_copy = now->second;
  to_copy_.push_back(table);
  return arrow::Status::OK();
}

arrow::Status Pipeline::MarkRenamedAway(const BronzeTable* table, pg::Oid relation_id,
                                        Lsn commit_lsn) {
  if (relation_id == 0) return arrow::Status::OK();
  for (auto& [name, held] : tables_) {
    if (held.get() == table || !held->appender) continue;
    // A copy (or changes) of the held table committed after this point already
    // hold what the relation did under this name: the stream replays older
    // changes, from before the table took its name.
    if (commit_lsn.value() == 0 || commit_lsn <= held->appender->committed_lsn()) {
      continue;
    }
    const auto& properties = held->appender->table().metadata().properties;
    auto it = properties.find(lake::kSourceIdentityProperty);
    if (it == properties.end() || !IdentityIsOf(it->second, relation_id)) continue;
    spdlog::warn(
        "{} was renamed {}: its changes under that name reach {} only, so it "
        "is copied again once it is published under its name again",
        SourceName(held->source), SourceName(table->source), table->id.ToString());
    const std::string mark =
        IdentityOfGone(relation_id, "renamed " + SourceName(table->source));
    ARROW_RETURN_NOT_OK(held->appender->table().UpdateMetadata(
        [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
          b->SetProperties({{lake::kSourceIdentityProperty, mark}});
          return arrow::Status::OK();
        }));
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::CopyIfRenamedBack(BronzeTable* table, pg::Oid relation_id,
                                          Lsn commit_lsn) {
  if (relation_id == 0 || !table->appender || table->awaiting_copy ||
      table->recopy_queued || Replaying(table, commit_lsn)) {
    return arrow::Status::OK();
  }
  const auto& properties = table->appender->table().metadata().properties;
  // MarkRenamedAway's mark: IdentityOfGone(relation_id, "renamed <other name>").
  const std::string renamed = "relation " + std::to_string(relation_id) + " (renamed ";
  auto recorded = properties.find(lake::kSourceIdentityProperty);
  if (recorded == properties.end() || !recorded->second.starts_with(renamed)) {
    return arrow::Status::OK();
  }
  ARROW_ASSIGN_OR_RAISE(auto identities,
                        source_->PublishedIdentities(config_.source.publication));
  auto now = identities.find(table->source);
  // Renamed away again since, or dropped: Discover sees to it.
  if (now == identities.end() || !IdentityIsOf(now->second, relation_id)) {
    return arrow::Status::OK();
  }
  spdlog::warn(
      "{} is back under its name: copying it again (its changes under the other name "
      "are not in {}); floe silver waits for that copy",
      SourceName(table->source), table->id.ToString());
  const std::string reason = "renamed away and back";
  ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
      [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
        b->SetProperties({{lake::kRecopyPendingProperty, reason}});
        b->RemoveProperties({lake::kRecopyUntilProperty});
        return arrow::Status::OK();
      }));
  CopyAgain(table, now->second);
  return arrow::Status::OK();
}

arrow::Status Pipeline::RecordIdentity(BronzeTable* table, const std::string& identity) {
  if (!table->appender) return arrow::Status::OK();
  const auto& properties = table->appender->table().metadata().properties;
  const bool pending = properties.contains(lake::kRecopyPendingProperty) &&
                       table->recopy_until.value() == 0;
  if (identity.empty() && !pending && !table->relations_changed) {
    return arrow::Status::OK();
  }
  return UpdateIdentity(table, identity, pending);
}

arrow::Status Pipeline::RecordRelations(BronzeTable* table) {
  if (!table->appender || !table->relations_changed) return arrow::Status::OK();
  return UpdateIdentity(table, "", false);
}

arrow::Status Pipeline::UpdateIdentity(BronzeTable* table, const std::string& identity,
                                       bool copied_again) {
  // Entries wholly below what the table holds say nothing of a change still to come.
  auto& spans = table->relations;
  const auto held = static_cast<int64_t>(table->appender->committed_lsn().value());
  size_t keep = 0;
  while (keep + 1 < spans.size() && spans[keep + 1].from.first <= held) ++keep;
  spans.erase(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(keep));
  const std::string relations = RelationsJson(spans);
  ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
      [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
        if (!identity.empty())
          b->SetProperties({{lake::kSourceIdentityProperty, identity}});
        if (copied_again) b->RemoveProperties({lake::kRecopyPendingProperty});
        if (!spans.empty()) {
          b->SetProperties({{lake::kSourceRelationsProperty, relations}});
        }
        return arrow::Status::OK();
      }));
  table->relations_changed = false;
  return arrow::Status::OK();
}

std::vector<RelationSpan> RelationsOf(const ice::TableMetadata& metadata) {
  auto it = metadata.properties.find(lake::kSourceRelationsProperty);
  if (it == metadata.properties.end()) return {};
  const auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return {};
  std::vector<RelationSpan> out;
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 4 || !e[0].is_number_unsigned() ||
        !e[1].is_number_integer() || !e[2].is_number_integer() ||
        !e[3].is_number_integer()) {
      return {};
    }
    out.push_back(RelationSpan{e[0].get<pg::Oid>(),
                               {e[1].get<int64_t>(), e[2].get<int32_t>()},
                               e[3].get<int>() != 0});
  }
  if (!std::is_sorted(out.begin(), out.end(),
                      [](const auto& a, const auto& b) { return a.from < b.from; })) {
    return {};
  }
  return out;
}

std::string RelationsJson(const std::vector<RelationSpan>& spans) {
  nlohmann::json j = nlohmann::json::array();
  for (const RelationSpan& s : spans) {
    j.push_back({s.relation, s.from.first, s.from.second, s.marked ? 1 : 0});
  }
  return j.dump();
}

arrow::Status Pipeline::MarkRelationChange(BronzeTable* table,
                                           const pg::TransactionInfo& tx,
                                           const pg::TableChanges& changes,
                                           const BatchConformer& conformer) {
  const pg::Oid relation = changes.shape->relation_id;
  const arrow::RecordBatch& batch = *changes.batch;
  if (relation == 0 || batch.num_rows() == 0) return arrow::Status::OK();
  auto& spans = table->relations;
  if (spans.empty()) {
    // A table written before floe recorded relations: from here on, this one's.
    spans.push_back(RelationSpan{relation, {0, -1}, false});
    table->relations_changed = true;
    return RecordRelations(table);
  }
  const ChangePosition first{static_cast<int64_t>(tx.commit_lsn.value()),
                             FirstSeqOf(batch)};
  const ChangePosition mark{first.first, first.second - 1};
  auto next = std::partition_point(spans.begin(), spans.end(),
                                   [&](const RelationSpan& s) { return s.from < first; });
  if (next == spans.begin()) return arrow::Status::OK();  // before anything recorded
  const RelationSpan& in = *std::prev(next);
  if (in.relation == relation) {
    // The `t` row of a transaction the stream replays (floe stopped before its
    // commit) is written again with it; otherwise nothing changed.
    if (!in.marked || in.from != mark) return arrow::Status::OK();
  } else {
    spdlog::warn(
        "{}: the stream's changes at {} are of relation {}, not of relation {} whose "
        "changes {} holds before them: the table was dropped (or renamed away) and "
        "created again under its name. A `t` row before them ends the old table's "
        "rows in the latest state",
        SourceName(table->source), tx.commit_lsn.ToString(), relation, in.relation,
        table->id.ToString());
    spans.insert(next, RelationSpan{relation, mark, true});
    table->relations_changed = true;
    ARROW_RETURN_NOT_OK(RecordRelations(table));
  }
  ARROW_RETURN_NOT_OK(FlushBuffered(table));
  std::vector<SourceColumn> columns = SourceColumnsOf(*changes.shape);
  arrow::ArrayVector nulls;
  for (const auto& c : columns) {
    ARROW_ASSIGN_OR_RAISE(auto a, arrow::MakeArrayOfNull(c.mapping.type, 1));
    nulls.push_back(std::move(a));
  }
  // Of no transaction (floe's mark, as a copy's `t` row is), at the first change's
  // cdc_source_lsn (a copy's `t` row has its cdc_commit_lsn there).
  const int source_lsn_column = batch.num_columns() - pg::kCdcColumnCount + 2;
  const auto* source_lsn =
      dynamic_cast<const arrow::Int64Array*>(batch.column(source_lsn_column).get());
  SyntheticPosition at;
  at.op = "t";
  at.ts_us = pg::PgTimestampToUnixMicros(tx.commit_time);
  at.source_lsn = source_lsn != nullptr && !source_lsn->IsNull(0)
                      ? Lsn(static_cast<uint64_t>(source_lsn->Value(0)))
                      : tx.commit_lsn;
  at.commit_lsn = tx.commit_lsn;
  at.first_seq = mark.second;
  ARROW_ASSIGN_OR_RAISE(auto marker, WithCdcColumns(columns, std::move(nulls), 1, at));
  ARROW_ASSIGN_OR_RAISE(auto conformed, conformer.Conform(*marker, NowUnixMicros()));
  ARROW_RETURN_NOT_OK(table->appender->Write(*conformed));
  metrics_->events.Inc({SourceName(table->source), "t"});
  return arrow::Status::OK();
}

void Pipeline::NoteCopiedRelation(BronzeTable* table, Lsn point) {
  if (table->bound_relation == 0) return;
  const RelationSpan span{
      table->bound_relation, {static_cast<int64_t>(point.value()), 0}, false};
  auto& spans = table->relations;
  auto next =
      std::partition_point(spans.begin(), spans.end(),
                           [&](const RelationSpan& s) { return s.from < span.from; });
  if (next != spans.begin() && std::prev(next)->relation == span.relation) return;
  spans.insert(next, span);
  table->relations_changed = true;
}

void Pipeline::RecopyIfMoved(BronzeTable* table, bool columns_moved) {
  if (table->recopy_reason.empty() || table->awaiting_copy || table->recopy_queued) {
    return;
  }
  if (columns_moved)
    spdlog::warn(
        "{}: column(s) changed in a way logical decoding does not send ({}): "
        "PostgreSQL changed the existing rows without a change in the WAL, so the "
        "table is copied again (Silver waits for that copy)",
        SourceName(table->source), table->recopy_reason);
  // The table's changes keep reaching Bronze: every one of them is in the
  // changelog, and the copy's `t` row (at its later point) ends them in the
  // latest state. A table Bronze holds nothing of yet is copied the usual way.
  table->recopy_until = Lsn();  // an earlier copy again no longer suffices
  if (table->appender && table->appender->committed_lsn().value() > 0) {
    table->recopy_queued = true;
  } else {
    copied_.erase(table->source);
    table->awaiting_copy = true;
  }
  to_copy_.push_back(table);
}

arrow::Result<bool> Pipeline::IsCopied(BronzeTable* table) {
  if (copied_.contains(table->source) || backfills_.contains(table->source) ||
      table->stream_relation_gone) {
    return true;
  }
  if (!table->appender || !table->appender->has_snapshot()) return false;
  if (resnapshot_) return false;
  ARROW_ASSIGN_OR_RAISE(auto progress,
                        BackfillProgressOf(table->appender->table().io(),
                                           table->appender->table().metadata()));
  if (progress && !progress->done) {
    // A backfill the last run did not finish: carry on after its last chunk.
    ARROW_ASSIGN_OR_RAISE(auto described,
                          source_->Describe(table->source, config_.source.publication));
    if (!described) {
      spdlog::warn(
          "{}: its unfinished backfill cannot go on: the table is no longer in "
          "the source under this name (dropped or renamed). A table published "
          "under this name later is copied then",
          SourceName(table->source));
      ARROW_RETURN_NOT_OK(MarkGone(table, "gone during its backfill"));
      return true;
    }
    // The table it read is not the one published under the name now (re-created,
    // renamed away and back, out of the publication and back): the rows it copied
    // and the changes since may hold what the source no longer has, so the table is
    // copied again after a `t` row instead (Discover).
    ARROW_ASSIGN_OR_RAISE(auto identities,
                          source_->PublishedIdentities(config_.source.publication));
    const auto& properties = table->appender->table().metadata().properties;
    auto recorded = properties.find(lake::kSourceIdentityProperty);
    auto now = identities.find(table->source);
    if (recorded != properties.end() && now != identities.end() &&
        recorded->second != now->second) {
      spdlog::warn(
          "{}: its unfinished backfill read another table than the one "
          "published under its name now ({}; now {}): copying it again instead",
          SourceName(table->source), recorded->second, now->second);
      table->stream_relation_gone = true;
      return true;
    }
    ARROW_ASSIGN_OR_RAISE(auto key, KeyColumnsOf(table->source));
    if (key.empty()) {
      return Fatal(SourceName(table->source) +
                   " was being backfilled but has no primary key or replica identity "
                   "index any more, so the backfill cannot resume. Give it one, or "
                   "run floe run --resnapshot <config> to copy every table again");
    }
    bool same_key = progress->key_columns.empty() || progress->key_columns == key;
    same_key =
        same_key && (progress->after.empty() || progress->after.size() == key.size());
    for (const auto& k : progress->retry) same_key = same_key && k.size() == key.size();
    if (!same_key) {
      // The last key done is a value of other columns: going on after it skipped
      // rows. The table is copied again instead (which Silver, whose key changed
      // too, waits for).
      spdlog::warn(
          "{}: its key columns are not the ones its unfinished backfill went "
          "by; the table is copied again instead",
          SourceName(table->source));
      return false;
    }
    spdlog::info("{}: resuming its backfill after {} chunk(s), {} row(s)",
                 SourceName(table->source), progress->chunks, progress->rows);
    const std::string committed = progress->ToJson();
    ARROW_RETURN_NOT_OK(
        StartBackfill(table, std::move(key), std::move(*progress), committed));
    if (const ice::Snapshot* record =
            lake::LatestBackfillRecord(table->appender->table().metadata())) {
      auto keys = record->summary.find(lake::kBackfillKeysSummaryKey);
      if (keys != record->summary.end()) {
        backfills_[table->source]->keys_committed_file = keys->second;
      }
    }
    return true;
  }
  copied_.insert(table->source);
  return true;
}

arrow::Result<std::vector<pg::AttributeInfo>> RecordedAttributeLookup::LookupGone(
    pg::Oid relation_id, const std::string& schema, const std::string& name) {
  ARROW_RETURN_NOT_OK(pipeline_->TableFor({schema, name}).status());
  return pipeline_->RecordedAttributes(relation_id, {schema, name});
}

std::vector<pg::AttributeInfo> Pipeline::RecordedAttributes(
    pg::Oid relation_id, const pg::QualifiedName& named) const {
  std::vector<pg::AttributeInfo> out;
  if (relation_id == 0) return out;
  auto attributes = [&](const BronzeTable& table, bool by_name) {
    const std::vector<std::string> key = lake::NamesProperty(
        table.appender->table().metadata(), lake::kPrimaryKeyProperty);
    for (const ColumnBinding& b : table.bindings.columns) {
      pg::AttributeInfo a;
      a.attnum = by_name ? 0 : b.attnum;  // 0: unknown, the columns go by name
      a.name = b.name;
      a.type_oid = b.type_oid;
      a.type_modifier = b.type_modifier;
      a.is_primary_key = std::find(key.begin(), key.end(), b.name) != key.end();
      out.push_back(std::move(a));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& x, const auto& y) { return x.attnum < y.attnum; });
    return key;
  };
  for (const auto& [name, table] : tables_) {
    if (!table->appender || table->bound_relation != relation_id) continue;
    const std::vector<std::string> key = attributes(*table, false);
    spdlog::info(
        "{}: relation {} is no longer in the source's catalog: its changes "
        "are read with the columns and key Bronze recorded for it ({})",
        SourceName(table->source), relation_id, nlohmann::json(key).dump());
    return out;
  }
  // A relation Bronze never bound (a table created again under the name, written
  // and dropped while floe was stopped or behind): nothing says which of its columns
  // were its key but the name's. Under REPLICA IDENTITY FULL the stream flags every
  // column, and without a key a key-changing update would land as a lone `u` and the
  // table lose its Silver key: the key Bronze recorded for the name is taken, by name.
  auto it = tables_.find(named);
  if (it == tables_.end() || !it->second->appender) return out;
  const std::vector<std::string> key = attributes(*it->second, true);
  if (key.empty()) {
    out.clear();
    return out;
  }
  spdlog::warn(
      "{}: relation {} is no longer in the source's catalog, and Bronze never read "
      "it: its changes are read with the key Bronze recorded for the table of its "
      "name ({}), by column name",
      SourceName(named), relation_id, nlohmann::json(key).dump());
  return out;
}

}  // namespace floe::bronze
