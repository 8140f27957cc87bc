// The pipeline's Bronze tables (pipeline_internal.h): finding or creating a
// source table's Bronze table and the system tables, binding its columns
// (SetShape, schema evolution, copies again a change needs) and the declared key
// recorded in it. Its source identity is pipeline_identity.cc's.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>

#include <arrow/array.h>
#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/sort_order.h"
#include "floe/iceberg/table.h"
#include "floe/lake/cdc_columns.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/source/postgres/table_description.h"

namespace floe::bronze {

namespace {

// The table's lake::kColumnsPositionProperty ({0, -1}: none, or unreadable).
ChangePosition ColumnsPositionOf(const ice::TableMetadata& metadata) {
  auto it = metadata.properties.find(lake::kColumnsPositionProperty);
  if (it == metadata.properties.end()) return {0, -1};
  const auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() ||
      !j[1].is_number_integer()) {
    return {0, -1};
  }
  return {j[0].get<int64_t>(), j[1].get<int32_t>()};
}

// The relation whose attnums the table's bindings hold (lake::kColumnsRelationProperty),
// or, for a table bound before floe recorded it, the relation its last copy was of
// (lake::kSourceIdentityProperty, "relation <oid>, ..."); 0 when unknown.
pg::Oid ColumnsRelationOf(const ice::TableMetadata& metadata) {
  if (auto it = metadata.properties.find(lake::kColumnsRelationProperty);
      it != metadata.properties.end()) {
    return ParseInteger<uint32_t>(it->second).value_or(0);
  }
  auto it = metadata.properties.find(lake::kSourceIdentityProperty);
  if (it == metadata.properties.end()) return 0;
  std::string_view identity = it->second;
  constexpr std::string_view kPrefix = "relation ";
  if (!identity.starts_with(kPrefix)) return 0;
  identity.remove_prefix(kPrefix.size());
  return ParseInteger<uint32_t>(identity.substr(0, identity.find(','))).value_or(0);
}

// The source columns `after` binds to another field than `before` did ("code (field
// 2 -> 5)"), joined; empty when none moved.
std::string MovedColumns(const ColumnMap& before, const ColumnMap& after) {
  std::string out;
  for (const ColumnBinding& a : after.columns) {
    for (const ColumnBinding& b : before.columns) {
      const bool same =
          a.attnum != 0 && b.attnum != 0 ? a.attnum == b.attnum : a.name == b.name;
      if (!same || a.field_id == b.field_id) continue;
      if (!out.empty()) out += ", ";
      out += a.name + " (field " + std::to_string(b.field_id) + " -> " +
             std::to_string(a.field_id) + ")";
    }
  }
  return out;
}

// Why a table whose bindings go from `before` to `after` (for the source `columns`)
// must be copied again, or empty: a column moved to another field (MovedColumns); a
// column added with a default or an identity (PostgreSQL filled the existing rows
// without a change in the WAL); or a column dropped and another added while the
// catalog no longer agreed with the stream's description (attnum unknown), which may
// have been a rename. `had_rows`: Bronze holds rows of the table; `rewritten`: the
// table's relfilenode is not the one Bronze last recorded (floe.source.relfilenode).
std::string RecopyReason(const ColumnMap& before, const ColumnMap& after,
                         const std::vector<SourceColumn>& columns, bool had_rows,
                         bool rewritten) {
  std::string out = MovedColumns(before, after);
  if (!had_rows || before.columns.empty()) return out;
  auto same = [](int16_t attnum, const std::string& name, const ColumnBinding& b) {
    if (attnum != 0 && b.attnum != 0) return attnum == b.attnum;
    return name == b.name || std::find(b.former_names.begin(), b.former_names.end(),
                                       name) != b.former_names.end();
  };
  std::vector<std::string> defaulted;
  std::vector<std::string> added_names;
  bool added = false;
  bool unknown_attnum = false;
  for (const SourceColumn& c : columns) {
    unknown_attnum |= c.attnum == 0;
    const bool known =
        std::any_of(before.columns.begin(), before.columns.end(),
                    [&](const ColumnBinding& b) { return same(c.attnum, c.name, b); });
    if (known) continue;
    added = true;
    added_names.push_back(c.name);
    if (c.defaulted) defaulted.push_back(c.name);
  }
  std::vector<std::string> readded;
  bool dropped = false;
  for (const ColumnBinding& b : before.columns) {
    if (std::none_of(columns.begin(), columns.end(),
                     [&](const SourceColumn& c) { return same(c.attnum, c.name, b); })) {
      dropped = true;
      // Bound by name only (the catalog had moved on when it was bound).
      unknown_attnum |= b.attnum == 0;
      if (std::find(added_names.begin(), added_names.end(), b.name) !=
          added_names.end()) {
        readded.push_back(b.name);
      }
    }
  }
  auto add = [&out](const std::string& why) {
    if (!out.empty()) out += "; ";
    out += why;
  };
  // A volatile default or an identity rewrites the table; dropped right after,
  // nothing in the catalog says so but the table's new relfilenode.
  if (defaulted.empty() && rewritten && !added_names.empty()) {
    std::string names;
    for (const auto& n : added_names) names += (names.empty() ? "" : ", ") + n;
    add("added while the table got a new relfilenode (a rewrite by a volatile default "
        "or an identity; or a VACUUM FULL, CLUSTER or TRUNCATE floe did not see): " +
        names);
  }
  if (!defaulted.empty()) {
    std::string names;
    for (const auto& n : defaulted) names += (names.empty() ? "" : ", ") + n;
    add("added with a default, which PostgreSQL gave the existing rows without a change "
        "in the WAL: " +
        names);
  }
  if (!readded.empty()) {
    std::string names;
    for (const auto& n : readded) names += (names.empty() ? "" : ", ") + n;
    // Seen at once, the stream cannot tell which changes came before the drop.
    add("dropped and added again under the same name: " + names);
  } else if (added && dropped && unknown_attnum) {
    add("a column dropped and one added while the catalog had moved on from the "
        "stream (it may have been a rename)");
  }
  // PostgreSQL never reorders a table's columns: matched by name (attnums unknown)
  // in another order than they were bound in, names moved between columns (a swap
  // in a transaction the catalog has moved on from), which names cannot undo.
  if (unknown_attnum) {
    int last = -1;
    bool reordered = false;
    for (const SourceColumn& c : columns) {
      for (size_t j = 0; j < before.columns.size(); ++j) {
        if (!same(c.attnum, c.name, before.columns[j])) continue;
        reordered |= static_cast<int>(j) < last;
        last = static_cast<int>(j);
        break;
      }
    }
    if (reordered) {
      add("columns found in another order than they were bound in, while the catalog "
          "had moved on from the stream (names swapped between columns)");
    }
  }
  return out;
}

}  // namespace

arrow::Result<TableAppender*> Pipeline::SystemTable(std::unique_ptr<TableAppender>* slot,
                                                    const std::string& name,
                                                    const ice::Schema& schema,
                                                    const ice::PartitionSpec& spec) {
  if (*slot) return slot->get();
  ice::TableIdentifier id{ServiceNamespace(), name};
  auto loaded = ice::Table::Load(catalog_, io_, id);
  std::unique_ptr<ice::Table> table;
  if (loaded.ok()) {
    table = std::move(*loaded);
  } else if (ice::GetCatalogErrorKind(loaded.status()) ==
             ice::CatalogErrorKind::kNoSuchTable) {
    ARROW_RETURN_NOT_OK(catalog_->CatalogOf(id)->EnsureNamespace(id.ns));
    auto created =
        ice::Table::Create(catalog_, io_, id, schema, spec, ice::SortOrder::Unsorted(),
                           ice::Table::DefaultLocation(config_.warehouse, id));
    if (!created.ok() && ice::GetCatalogErrorKind(created.status()) ==
                             ice::CatalogErrorKind::kAlreadyExists) {
      ARROW_ASSIGN_OR_RAISE(table, ice::Table::Load(catalog_, io_, id));
    } else {
      ARROW_ASSIGN_OR_RAISE(table, std::move(created));
      spdlog::info("created {}", id.ToString());
    }
  } else {
    return loaded.status();
  }
  *slot = std::make_unique<TableAppender>(std::move(table));
  return slot->get();
}

arrow::Result<BronzeTable*> Pipeline::TableFor(const pg::QualifiedName& source) {
  auto& entry = tables_[source];
  if (entry) return entry.get();
  entry = std::make_unique<BronzeTable>();
  entry->source = source;
  entry->id =
      ice::IdentifierFromLevels(config_.BronzeIdentifier({source.schema, source.table}));
  for (const auto& id : {entry->id, ice::IdentifierFromLevels(config_.SilverIdentifier(
                                        {source.schema, source.table}))}) {
    if (arrow::Status named = catalog_->CheckIdentifier(id); !named.ok()) {
      entry->unnamed = id.ToString() + ": " + named.message();
      break;
    }
  }
  // Two source tables never share a Bronze table (naming.tables may map one onto
  // another's name): their changes would interleave under one set of bindings.
  for (const auto& [other, t] : tables_) {
    if (entry->unnamed.empty() && t && t.get() != entry.get() && t->id == entry->id) {
      entry->unnamed = entry->id.ToString() + " is the Bronze table of " +
                       SourceName(other) + " already";
    }
  }
  std::unique_ptr<ice::Table> existing;
  if (entry->unnamed.empty()) {
    auto loaded = ice::Table::Load(catalog_, io_, entry->id);
    if (loaded.ok()) {
      existing = std::move(*loaded);
      auto owner = existing->metadata().properties.find(lake::kSourceTableProperty);
      if (owner != existing->metadata().properties.end() &&
          owner->second != SourceName(source)) {
        entry->unnamed =
            entry->id.ToString() + " is the Bronze table of " + owner->second;
        existing.reset();
      }
    } else if (ice::GetCatalogErrorKind(loaded.status()) !=
               ice::CatalogErrorKind::kNoSuchTable) {
      return loaded.status();
    }
  }
  if (!entry->unnamed.empty()) {
    spdlog::error(
        "{} cannot be replicated under its name ({}); its changes are skipped "
        "and the other tables go on. Name it in the pipeline file, then restart floe "
        "run, which copies it:\n  naming:\n    tables:\n      {}: {{bronze: "
        "bronze.{}.<schema>.<table>, silver: silver.{}.<schema>.<table>}}",
        config::QualifiedName{source.schema, source.table}.ToString(), entry->unnamed,
        config::QualifiedName{source.schema, source.table}.ToString(), config_.service,
        config_.service);
    metrics_->unnamed_tables.Set({SourceName(source)}, 1);
    return entry.get();
  }
  // Never a silent null: say once why a generated column is not replicated.
  if (auto described = source_->Describe(source, config_.source.publication);
      described.ok() && *described && !(*described)->GeneratedColumns().empty()) {
    const std::string why =
        repl_ != nullptr && repl_->server_version() >= 180000
            ? fmt::format(
                  "publication {} does not publish them (PostgreSQL 18 sends a "
                  "stored generated column when the publication has "
                  "publish_generated_columns = stored or names it in its "
                  "column list; a virtual one never)",
                  config_.source.publication)
            : "pgoutput does not send generated columns before PostgreSQL 18";
    spdlog::warn(
        "{}: generated column(s) {} are not replicated: {}, so Bronze and Silver leave "
        "them out (compute them in the reader; docs/schema-evolution.md, \"Generated "
        "columns\")",
        SourceName(source), nlohmann::json((*described)->GeneratedColumns()).dump(), why);
  }
  if (existing) {
    auto it = existing->metadata().properties.find(lake::kSourceColumnsProperty);
    if (it != existing->metadata().properties.end()) {
      ARROW_ASSIGN_OR_RAISE(entry->bindings, ColumnMap::FromJson(it->second));
    }
    entry->bound_relation = ColumnsRelationOf(existing->metadata());
    entry->bound_at = ColumnsPositionOf(existing->metadata());
    entry->relations = RelationsOf(existing->metadata());
    entry->appender = std::make_unique<TableAppender>(std::move(existing));
    ARROW_RETURN_NOT_OK(RecordDeclaredKey(entry.get()));
  }
  ARROW_RETURN_NOT_OK(RecordPlacement(entry.get()));
  return entry.get();
}

arrow::Status Pipeline::RecordPlacement(BronzeTable* table) {
  const std::string key = lake::kStatePlacementPrefix + SourceName(table->source);
  std::vector<std::string> levels = table->id.ns;
  levels.push_back(table->id.name);
  const std::string here = config_.CatalogKeyOf(levels) + " " + table->id.ToString();
  auto recorded = state_.find(key);
  // A pipeline that never routed keeps no record.
  if (recorded == state_.end() && config_.routes.empty()) return arrow::Status::OK();
  if (recorded != state_.end() && recorded->second == here) return arrow::Status::OK();
  if (recorded != state_.end() && table->appender && table->appender->has_snapshot()) {
    // The table's changes went elsewhere for a while: this Bronze table missed them.
    const std::string reason = "its route moved its changes to " + recorded->second +
                               " for a while, and this Bronze table missed them";
    spdlog::warn(
        "{}: routed back to {}, which holds its Bronze table from before; {}: "
        "it is copied again there (Silver waits for that copy)",
        SourceName(table->source), here, reason);
    table->recopy_reason += (table->recopy_reason.empty() ? "" : "; ") + reason;
    ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
        [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
          b->SetProperties({{lake::kRecopyPendingProperty, table->recopy_reason}});
          b->RemoveProperties({lake::kRecopyUntilProperty});
          return arrow::Status::OK();
        }));
    RecopyIfMoved(table, /*columns_moved=*/false);
  }
  // Recorded once the copy again is pending in the table itself: a crash in between
  // finds the pending copy there.
  ARROW_RETURN_NOT_OK(
      catalog_->UpdateNamespaceProperties(ServiceNamespace(), {{key, here}}, {}));
  state_[key] = here;
  return arrow::Status::OK();
}

std::string Pipeline::DeclaredKeyJson(const pg::QualifiedName& source) const {
  auto it = config_.silver.keys.find({source.schema, source.table});
  return nlohmann::json(it == config_.silver.keys.end() ? std::vector<std::string>{}
                                                        : it->second)
      .dump();
}

arrow::Status Pipeline::RecordDeclaredKey(BronzeTable* table) {
  const std::string declared = DeclaredKeyJson(table->source);
  ice::Table& t = table->appender->table();
  auto it = t.metadata().properties.find(lake::kDeclaredKeyProperty);
  const std::string recorded =
      it == t.metadata().properties.end() ? std::string("[]") : it->second;
  if (it != t.metadata().properties.end() && recorded == declared) {
    return arrow::Status::OK();
  }
  // The changes Bronze holds split an update into a delete and an insert only when
  // it changed the key declared then: under a newly declared key, an update that
  // changed it reads as an update of the new value, and the old value's row would
  // stay in Silver. A copy again starts the latest state afresh.
  // Without a replica identity the source has no updates to split (PostgreSQL
  // refuses them on a published table): nothing to copy again.
  auto identity = t.metadata().properties.find(lake::kIdentityColumnsProperty);
  const bool updates =
      identity == t.metadata().properties.end() || identity->second != "[]";
  std::string reason;
  if (recorded != declared && declared != "[]" && updates &&
      table->appender->has_snapshot()) {
    reason = "silver.keys now declares " + declared + " as the merge key (it declared " +
             recorded + " when Bronze's changes were written)";
    table->recopy_reason += (table->recopy_reason.empty() ? "" : "; ") + reason;
  }
  ARROW_RETURN_NOT_OK(
      t.UpdateMetadata([&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
        b->SetProperties({{lake::kDeclaredKeyProperty, declared}});
        if (!reason.empty()) {
          b->SetProperties({{lake::kRecopyPendingProperty, table->recopy_reason}});
          b->RemoveProperties({lake::kRecopyUntilProperty});
        }
        return arrow::Status::OK();
      }));
  if (!reason.empty()) RecopyIfMoved(table);
  return arrow::Status::OK();
}

arrow::Status Pipeline::BindFromCatalogIfUnbound(BronzeTable* table) {
  if (table->conformer) return arrow::Status::OK();
  pg::Oid relation_id = 0;
  ARROW_ASSIGN_OR_RAISE(
      auto columns, SourceColumnsFromCatalog(*source_, *types_, table->source,
                                             config_.source.publication, &relation_id));
  return SetShape(table, std::move(columns), {0, -1}, relation_id);
}

arrow::Status Pipeline::CreateBronzeTable(BronzeTable* table,
                                          const std::vector<SourceColumn>& columns,
                                          pg::Oid relation_id) {
  ARROW_ASSIGN_OR_RAISE(BronzeLayout layout, NewBronzeLayout(columns));
  ARROW_ASSIGN_OR_RAISE(ice::PartitionSpec spec,
                        ice::PartitionSpecBuilder(layout.schema, 0).Day(kCdcTs).Build());
  ARROW_RETURN_NOT_OK(catalog_->CatalogOf(table->id)->EnsureNamespace(table->id.ns));
  std::map<std::string, std::string> props{
      {lake::kSourceTableProperty, SourceName(table->source)},
      {lake::kSourceColumnsProperty, layout.columns.ToJson()},
      {lake::kDeclaredKeyProperty, DeclaredKeyJson(table->source)}};
  if (relation_id != 0) {
    props[lake::kColumnsRelationProperty] = std::to_string(relation_id);
    props[lake::kSourceRelationsProperty] =
        RelationsJson({{relation_id, {0, -1}, false}});
  }
  auto created = ice::Table::Create(
      catalog_, io_, table->id, layout.schema, spec, ice::SortOrder::Unsorted(),
      ice::Table::DefaultLocation(
          config_.WarehouseOf({table->source.schema, table->source.table}), table->id),
      props);
  std::unique_ptr<ice::Table> t;
  if (!created.ok() && ice::GetCatalogErrorKind(created.status()) ==
                           ice::CatalogErrorKind::kAlreadyExists) {
    ARROW_ASSIGN_OR_RAISE(t, ice::Table::Load(catalog_, io_, table->id));
    auto it = t->metadata().properties.find(lake::kSourceColumnsProperty);
    if (it != t->metadata().properties.end()) {
      ARROW_ASSIGN_OR_RAISE(table->bindings, ColumnMap::FromJson(it->second));
    }
    table->bound_relation = ColumnsRelationOf(t->metadata());
    table->bound_at = ColumnsPositionOf(t->metadata());
    table->relations = RelationsOf(t->metadata());
  } else {
    ARROW_ASSIGN_OR_RAISE(t, std::move(created));
    table->relations = RelationsOf(t->metadata());
    // Create assigns fresh field ids; bind to the ids it chose.
    ARROW_ASSIGN_OR_RAISE(table->bindings, BindByName(t->schema(), layout.columns));
    if (!(table->bindings == layout.columns)) {
      const std::string json = table->bindings.ToJson();
      ARROW_RETURN_NOT_OK(
          t->UpdateMetadata([&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
            b->SetProperties({{lake::kSourceColumnsProperty, json}});
            return arrow::Status::OK();
          }));
    }
    spdlog::info("created {} for {}", table->id.ToString(), SourceName(table->source));
  }
  table->appender = std::make_unique<TableAppender>(std::move(t));
  return arrow::Status::OK();
}

arrow::Status Pipeline::RecordKeyColumns(BronzeTable* table,
                                         const std::vector<SourceColumn>& columns,
                                         const std::string& filenode) {
  ice::Table& t = table->appender->table();
  // The key every change carries, for Silver's merge key (by current column names,
  // in column order).
  nlohmann::json key = nlohmann::json::array();
  for (const auto& c : columns) {
    if (c.is_row_key) key.push_back(c.name);
  }
  const std::string key_json = key.dump();
  nlohmann::json identity = nlohmann::json::array();
  for (const auto& c : columns) {
    if (c.in_identity) identity.push_back(c.name);
  }
  const std::string identity_json = identity.dump();
  // Sets a table property; a non-empty `reason` also schedules a copy again, marked
  // pending in the same commit (no reader sees one without the other).
  auto record = [&](const char* property, const std::string& value,
                    const std::string& reason) -> arrow::Status {
    if (!reason.empty()) {
      table->recopy_reason += (table->recopy_reason.empty() ? "" : "; ") + reason;
    }
    return t.UpdateMetadata([&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
      b->SetProperties({{property, value}});
      if (!reason.empty()) {
        b->SetProperties({{lake::kRecopyPendingProperty, table->recopy_reason}});
        // An earlier copy again no longer suffices.
        b->RemoveProperties({lake::kRecopyUntilProperty});
      }
      return arrow::Status::OK();
    });
  };
  if (!filenode.empty() &&
      !t.metadata().properties.contains(lake::kRelFilenodeProperty)) {
    ARROW_RETURN_NOT_OK(record(lake::kRelFilenodeProperty, filenode, ""));
  }
  // The same columns under the names Bronze's bindings still have: a column renamed
  // since is the same column (a renamed key is no new key).
  auto by_bound_names = [&](auto pick) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : columns) {
      if (!pick(c)) continue;
      std::string name = c.name;
      for (const ColumnBinding& b : table->bindings.columns) {
        if (c.attnum != 0 && b.attnum != 0 ? c.attnum == b.attnum : c.name == b.name) {
          name = b.name;
          break;
        }
      }
      out.push_back(name);
    }
    return out.dump();
  };
  const std::string key_as_bound =
      by_bound_names([](const SourceColumn& c) { return c.is_row_key; });
  const std::string identity_as_bound =
      by_bound_names([](const SourceColumn& c) { return c.in_identity; });
  if (auto it = t.metadata().properties.find(lake::kIdentityColumnsProperty);
      it == t.metadata().properties.end() || it->second != identity_json) {
    // A delete now carries a column it did not (REPLICA IDENTITY FULL, say): the
    // deletes Bronze holds lack it, and a Silver merge key declared on it could not
    // match them. A copy again starts Bronze's latest state afresh.
    std::string reason;
    if (it != t.metadata().properties.end() && table->appender->has_snapshot()) {
      const auto before = nlohmann::json::parse(it->second, nullptr, false);
      for (const auto& name : nlohmann::json::parse(identity_as_bound)) {
        if (!before.is_array() ||
            std::find(before.begin(), before.end(), name) == before.end()) {
          reason = "a delete now carries " + identity_json + " (it carried " +
                   it->second + ")";
          break;
        }
      }
    }
    ARROW_RETURN_NOT_OK(record(lake::kIdentityColumnsProperty, identity_json, reason));
  }
  {
    auto it = t.metadata().properties.find(lake::kPrimaryKeyProperty);
    if (it == t.metadata().properties.end() || it->second != key_json) {
      // The key changed (a new primary key, or a replica identity index): the
      // changes Bronze holds carry the old one (a delete only that), which a Silver
      // table rebuilt with the new key could not match. A copy again starts Bronze's
      // latest state afresh (its `t` row), and Silver waits for it.
      std::string reason;
      if (it != t.metadata().properties.end() && table->appender->has_snapshot() &&
          it->second != key_as_bound) {
        reason =
            "the key every change carries changed from " + it->second + " to " + key_json;
      }
      ARROW_RETURN_NOT_OK(record(lake::kPrimaryKeyProperty, key_json, reason));
    }
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::EvolveBindings(BronzeTable* table,
                                       const std::vector<SourceColumn>& columns,
                                       ChangePosition at, pg::Oid relation_id,
                                       const std::string& filenode) {
  ice::Table& t = table->appender->table();
  // Every row Bronze holds or was handed so far carries the bound names.
  ChangePosition written_through = table->last_row;
  if (written_through.second < 0) {
    const int64_t committed = table->appender->committed_lsn().value();
    written_through =
        committed > 0 ? ChangePosition{committed, INT32_MAX} : ChangePosition{0, 0};
  }
  ARROW_ASSIGN_OR_RAISE(EvolutionPlan plan,
                        PlanEvolution(t.schema(), t.metadata().last_column_id,
                                      table->bindings, columns, written_through));
  if (plan.schema_changed || !(plan.columns == table->bindings)) {
    ARROW_RETURN_NOT_OK(table->appender->CloseFiles());
    const std::string json = plan.columns.ToJson();
    // A column moved to another field (a type change Iceberg cannot promote): the
    // source rewrote every row, but logical decoding sends none of it, so the new
    // field lacks the values of every row not changed since. The table is copied
    // again; until that copy commits, Silver waits (lake::kRecopyPendingProperty, set in
    // the same commit as the new bindings, so no reader sees one without the other).
    const auto recorded = t.metadata().properties.find(lake::kRelFilenodeProperty);
    const std::string baseline =
        !table->filenode_after_truncate.empty()     ? table->filenode_after_truncate
        : recorded != t.metadata().properties.end() ? recorded->second
                                                    : std::string();
    const bool rewritten = !baseline.empty() && !filenode.empty() && baseline != filenode;
    table->filenode_after_truncate.clear();
    const std::string moved = RecopyReason(
        table->bindings, plan.columns, columns,
        table->appender->has_snapshot() || table->appender->pending_rows() > 0,
        rewritten);
    if (!moved.empty()) {
      table->recopy_reason += (table->recopy_reason.empty() ? "" : "; ") + moved;
    }
    ARROW_RETURN_NOT_OK(t.UpdateMetadata([&](const ice::TableMetadata& base,
                                             ice::TableMetadataBuilder* b) {
      if (plan.schema_changed && !base.CurrentSchema()->SameSchema(plan.schema)) {
        b->AddSchema(plan.schema);
        b->SetCurrentSchema(*b->last_added_schema_id());
      }
      b->SetProperties({{lake::kSourceColumnsProperty, json}});
      if (relation_id != 0) {
        b->SetProperties({{lake::kColumnsRelationProperty, std::to_string(relation_id)}});
      }
      if (at > table->bound_at) {
        b->SetProperties({{lake::kColumnsPositionProperty, PositionJson(at)}});
      }
      if (!filenode.empty()) b->SetProperties({{lake::kRelFilenodeProperty, filenode}});
      if (!moved.empty()) {
        b->SetProperties({{lake::kRecopyPendingProperty, table->recopy_reason}});
        b->RemoveProperties({lake::kRecopyUntilProperty});
      }
      return arrow::Status::OK();
    }));
    for (const auto& line : plan.changes) {
      spdlog::info("{}: {}", table->id.ToString(), line);
    }
    table->bindings = plan.columns;
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::SetShape(BronzeTable* table, std::vector<SourceColumn> columns,
                                 ChangePosition at, pg::Oid relation_id) {
  if (!table->appender) {
    ARROW_RETURN_NOT_OK(CreateBronzeTable(table, columns, relation_id));
  }
  // Buffered rows belong to the previous shape.
  if (table->conformer) ARROW_RETURN_NOT_OK(FlushBuffered(table));
  ice::Table& t = table->appender->table();
  if (relation_id != 0 && table->bound_relation != 0 &&
      relation_id != table->bound_relation) {
    // The table was dropped and created again under its name: its attnums say nothing
    // of the old relation's columns (a column at the place of one dropped before is
    // not that column). Bound by name, as a new table's columns are; the copy again
    // that a new relation makes (Rejoined) brings the rows.
    spdlog::info(
        "{}: relation {} is not the one Bronze's columns were bound to ({}): "
        "the table was created again; its columns are bound by name",
        SourceName(table->source), relation_id, table->bound_relation);
    for (ColumnBinding& b : table->bindings.columns) b.attnum = 0;
  }
  ARROW_ASSIGN_OR_RAISE(const std::string filenode, RelFilenodeOf(table->source));
  ARROW_RETURN_NOT_OK(RecordKeyColumns(table, columns, filenode));
  ARROW_RETURN_NOT_OK(EvolveBindings(table, columns, at, relation_id, filenode));
  ARROW_ASSIGN_OR_RAISE(auto conformer,
                        BatchConformer::Make(t.schema(), table->bindings, columns));
  table->conformer.emplace(std::move(conformer));
  table->conformer_shape = nullptr;  // the callers binding a stream shape say which
  // cdc_seq and the row key are mostly unique in a file (all unique in a copy): no
  // dictionary for them.
  std::vector<int32_t> plain;
  if (const ice::NestedField* seq = t.schema().FindField(lake::kCdcSeq)) {
    plain.push_back(seq->id);
  }
  for (const lake::ColumnBinding& b : table->bindings.columns) {
    for (const SourceColumn& c : columns) {
      if (c.is_row_key && c.name == b.name) plain.push_back(b.field_id);
    }
  }
  t.set_plain_fields(std::move(plain));
  table->older.clear();
  table->bound_at = std::max(table->bound_at, at);
  if (relation_id != 0) table->bound_relation = relation_id;
  table->columns = std::move(columns);
  return arrow::Status::OK();
}

arrow::Result<const BatchConformer*> Pipeline::ConformerFor(
    BronzeTable* table, const pg::TransactionInfo& tx, const pg::TableChanges& changes) {
  const ChangePosition at{static_cast<int64_t>(tx.commit_lsn.value()),
                          FirstSeqOf(*changes.batch)};
  if (table->appender && at <= table->bound_at) {
    // Described as the table was before what Bronze's bindings describe: binding it
    // again would take a column added since for a dropped one (its values, copied
    // since, lost to Silver), a renamed one for a new one.
    auto it = table->older.find(changes.shape.get());
    if (it == table->older.end()) {
      std::vector<std::string> unplaced;
      std::vector<SourceColumn> older_columns = SourceColumnsOf(*changes.shape);
      if (table->bound_relation != 0 &&
          changes.shape->relation_id != table->bound_relation) {
        // Of the relation before the table was created again: by name.
        for (SourceColumn& c : older_columns) c.attnum = 0;
      }
      ARROW_ASSIGN_OR_RAISE(
          auto conformer,
          BatchConformer::MakeForOlderShape(table->appender->table().schema(),
                                            table->bindings, older_columns, &unplaced));
      if (!unplaced.empty()) {
        spdlog::warn(
            "{}: changes made before its columns changed again (at {}) name "
            "column(s) {} that no Bronze field of theirs holds any more: those "
            "values are left out of these changes (a later copy holds the rows "
            "as they are now)",
            SourceName(table->source), Lsn(static_cast<uint64_t>(at.first)).ToString(),
            nlohmann::json(unplaced).dump());
      }
      it = table->older.emplace(changes.shape.get(), std::move(conformer)).first;
    }
    return &it->second;
  }
  ARROW_RETURN_NOT_OK(
      SetShape(table, SourceColumnsOf(*changes.shape), at, changes.shape->relation_id));
  RecopyIfMoved(table);
  table->conformer_shape = changes.shape.get();
  return nullptr;
}

arrow::Result<std::vector<std::string>> Pipeline::KeyColumnsOf(
    const pg::QualifiedName& table) {
  // The columns every change (deletes included) carries, in index order (the
  // backfill chunks by them); none for a partitioned parent or under REPLICA
  // IDENTITY NOTHING, which are copied through an exported snapshot.
  ARROW_ASSIGN_OR_RAISE(auto described,
                        source_->Describe(table, config_.source.publication));
  if (!described || described->relkind != 'r' || described->replica_identity == 'n') {
    return std::vector<std::string>{};
  }
  return described->RowKey();
}

}  // namespace floe::bronze
