// Silver's schema follows Bronze's row columns: the row columns (RowColumnsOf),
// the field map from Bronze's field ids to Silver's, and the schema evolution a merge
// applies before it writes.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/table.h"
#include "floe/lake/column_map.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/lake/silver_layout.h"
#include "floe/silver/fold.h"
#include "floe/silver/merge.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver {

namespace ice = floe::iceberg;
using json = nlohmann::json;

namespace merge_internal {

std::string FieldMapJson(const std::map<int32_t, int32_t>& map) {
  json object = json::object();
  for (const auto& [b, s] : map) object[std::to_string(b)] = s;
  return object.dump();
}

// The names of Silver's merge key as its table property records them (a JSON array).
std::vector<std::string> SilverKeyNames(const ice::TableMetadata& silver) {
  return lake::NamesProperty(silver, lake::kSilverKeyProperty);
}

}  // namespace merge_internal

namespace {

using merge_internal::SilverKeyNames;

// The Silver schema and field map after applying what changed in Bronze's row
// columns: new columns added, renames followed by field id, allowed promotions.
// `changes` describes each step (empty when nothing changed).
struct Evolution {
  ice::Schema schema;
  int32_t last_column_id = 0;
  std::map<int32_t, int32_t> field_map;
  std::vector<std::string> changes;
};

// Whether two types are the same apart from the ids of nested fields (Silver's
// nested ids are its own, assigned when it was created).
bool SameTypeIgnoringIds(const ice::Type& a, const ice::Type& b) {
  if (a.is_primitive() || b.is_primitive()) return a.Equals(b);
  if (a.id() != b.id() || a.fields().size() != b.fields().size()) return false;
  for (size_t i = 0; i < a.fields().size(); ++i) {
    const ice::NestedField& x = a.fields()[i];
    const ice::NestedField& y = b.fields()[i];
    if (x.name != y.name || x.required != y.required ||
        !SameTypeIgnoringIds(*x.type, *y.type)) {
      return false;
    }
  }
  return true;
}

bool IsSilverKeyColumn(const ice::TableMetadata& silver, const std::string& name) {
  const auto names = SilverKeyNames(silver);
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The column of `schema` with field id `id` at its top level; null when it has none.
const ice::NestedField* TopLevelField(const ice::Schema& schema, int32_t id) {
  for (const auto& f : schema.fields()) {
    if (f.id == id) return &f;
  }
  return nullptr;  // absent, or nested (the map holds nested ids too)
}

// Removes from `e` the Silver columns no source column is bound to any more (a Silver
// key column among them is an error).
arrow::Status RemoveUnboundColumns(const ice::TableMetadata& silver,
                                   const std::vector<RowColumn>& columns,
                                   const ice::NestedField* cdc_lsn, Evolution* e) {
  // Silver columns whose Bronze field no source column is bound to any more: the
  // column was dropped, or a type change Iceberg cannot promote moved it to a new
  // field (then a new Silver column of the new type takes its name below). They
  // leave Silver's current schema; old snapshots keep them.
  std::set<int32_t> bound;
  for (const RowColumn& c : columns) bound.insert(c.bronze->id);
  for (auto it = e->field_map.begin(); it != e->field_map.end();) {
    const ice::NestedField* s = TopLevelField(e->schema, it->second);
    if (bound.contains(it->first) || s == nullptr ||
        (cdc_lsn != nullptr && it->first == cdc_lsn->id)) {
      ++it;
      continue;
    }
    const std::string name = s->name;
    if (IsSilverKeyColumn(silver, name)) {
      // The partition spec and sort order are built on it.
      return arrow::Status::Invalid(
          "key column `", name,
          "` of the Silver table was dropped or changed type in a way Iceberg cannot "
          "promote, and a Silver table cannot change its key in place: drop the "
          "Silver table (the next floe silver pass rebuilds it from Bronze)");
    }
    // By field id: DeleteColumn takes a dotted path, and a source column may be
    // named `a.b`.
    std::vector<ice::NestedField> kept;
    for (const auto& f : e->schema.fields()) {
      if (f.id != it->second) kept.push_back(f);
    }
    ARROW_ASSIGN_OR_RAISE(e->schema,
                          ice::Schema::Make(e->schema.schema_id(), std::move(kept),
                                            e->schema.identifier_field_ids()));
    e->changes.push_back("removed column " + name +
                         " (dropped in the source, or retyped to a new column)");
    it = e->field_map.erase(it);
  }
  return arrow::Status::OK();
}

// A source column that takes the debugging column's name replaces it.
arrow::Status FreeDebugName(const ice::NestedField* cdc_lsn, const std::string& name,
                            Evolution* e) {
  const ice::NestedField* clash = e->schema.as_struct()->FindChild(name);
  if (clash == nullptr || cdc_lsn == nullptr || !e->field_map.contains(cdc_lsn->id) ||
      e->field_map.at(cdc_lsn->id) != clash->id) {
    return arrow::Status::OK();
  }
  const int32_t debug_id = clash->id;
  std::vector<ice::NestedField> kept;
  for (const auto& field : e->schema.fields()) {
    if (field.id != debug_id) kept.push_back(field);
  }
  ARROW_ASSIGN_OR_RAISE(e->schema,
                        ice::Schema::Make(e->schema.schema_id(), std::move(kept),
                                          e->schema.identifier_field_ids()));
  e->field_map.erase(cdc_lsn->id);
  e->changes.push_back("removed the debugging column " + name +
                       " (the source now has a column of that name)");
  return arrow::Status::OK();
}

// Follows the source's renames in `e`.
arrow::Status RenameColumns(const std::vector<RowColumn>& columns,
                            const ice::NestedField* cdc_lsn, Evolution* e) {
  // Renames first, through temporary names, so that names can move between columns
  // (a <-> b) in one schema change; by field id, as a dotted path cannot name a
  // column called `a.b`.
  std::vector<std::pair<int32_t, std::string>> renames;  // Silver id, new name
  for (const RowColumn& c : columns) {
    auto mapped = e->field_map.find(c.bronze->id);
    if (mapped == e->field_map.end()) continue;
    const ice::NestedField* s = TopLevelField(e->schema, mapped->second);
    if (s != nullptr && s->name != c.name) renames.emplace_back(s->id, c.name);
  }
  for (const auto& [id, name] : renames) {
    std::string temp = "__floe_renaming_" + std::to_string(id);
    while (e->schema.as_struct()->FindChild(temp) != nullptr) temp += "_";
    e->changes.push_back("renamed column " + TopLevelField(e->schema, id)->name + " to " +
                         name);
    ARROW_ASSIGN_OR_RAISE(auto renamed,
                          ice::RenameColumn(e->schema, e->last_column_id, id, temp));
    e->schema = std::move(renamed.schema);
  }
  for (const auto& [id, name] : renames) {
    ARROW_RETURN_NOT_OK(FreeDebugName(cdc_lsn, name, e));
    auto renamed = ice::RenameColumn(e->schema, e->last_column_id, id, name);
    if (!renamed.ok()) {
      return renamed.status().WithMessage(
          "Silver cannot rename a column to `", name, "`: ", renamed.status().message(),
          "; drop the Silver table to rebuild it");
    }
    e->schema = std::move(renamed->schema);
  }
  return arrow::Status::OK();
}

// Adds the source columns new to Silver to `e`, and promotes the columns whose type
// changed (an error when Iceberg cannot promote it).
arrow::Status AddOrPromoteColumns(const std::vector<RowColumn>& columns,
                                  const ice::NestedField* cdc_lsn, Evolution* e) {
  for (const RowColumn& c : columns) {
    const ice::NestedField* f = c.bronze;
    auto mapped = e->field_map.find(f->id);
    const ice::NestedField* s =
        mapped == e->field_map.end() ? nullptr : e->schema.FindField(mapped->second);
    if (s == nullptr) {
      ARROW_RETURN_NOT_OK(FreeDebugName(cdc_lsn, c.name, e));
      if (const ice::NestedField* clash = e->schema.as_struct()->FindChild(c.name)) {
        return arrow::Status::Invalid(
            "Bronze column `", f->name, "` (field id ", f->id, ") is new to Silver as `",
            c.name, "`, but Silver already has a column of that name (field id ",
            clash->id,
            ") copied from another Bronze column; rename one of them in the "
            "source, or drop the Silver table to rebuild it");
      }
      // AddColumn gives the column the next id.
      const int32_t id = e->last_column_id + 1;
      ARROW_ASSIGN_OR_RAISE(
          auto added, ice::AddColumn(e->schema, e->last_column_id, "", c.name, f->type));
      e->schema = std::move(added.schema);
      e->last_column_id = added.last_column_id;
      e->field_map[f->id] = id;
      e->changes.push_back("added column " + c.name + " " + f->type->ToString());
      continue;
    }
    const int32_t id = s->id;
    const std::string name = s->name;
    if (!SameTypeIgnoringIds(*s->type, *f->type)) {
      if (s->type->is_primitive() && f->type->is_primitive() &&
          ice::IsAllowedPromotion(*s->type, *f->type)) {
        // `s` points into e->schema: done with it before e->schema is replaced.
        const std::string from = s->type->ToString();
        ARROW_ASSIGN_OR_RAISE(
            auto promoted,
            ice::UpdateColumnType(e->schema, e->last_column_id, id, f->type));
        e->schema = std::move(promoted.schema);
        e->changes.push_back("promoted column " + name + " from " + from + " to " +
                             f->type->ToString());
      } else {
        return arrow::Status::NotImplemented("Bronze column `", f->name,
                                             "` changed type from ", s->type->ToString(),
                                             " to ", f->type->ToString(),
                                             ", which Iceberg cannot promote in place; "
                                             "drop the Silver table to rebuild it");
      }
    }
  }
  return arrow::Status::OK();
}

arrow::Result<Evolution> PlanSilverEvolution(const ice::TableMetadata& silver,
                                             const ice::TableMetadata& bronze) {
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> columns, RowColumnsOf(bronze));
  Evolution e{*silver.CurrentSchema(),
              silver.last_column_id,
              FieldMapOf(silver, bronze_schema),
              {}};
  // Silver's debugging column comes from Bronze's own cdc_commit_lsn field (a
  // source column of that name is bound like any other).
  const ice::NestedField* cdc_lsn = bronze_schema.FindField(kCdcCommitLsn);
  ARROW_RETURN_NOT_OK(RemoveUnboundColumns(silver, columns, cdc_lsn, &e));
  ARROW_RETURN_NOT_OK(RenameColumns(columns, cdc_lsn, &e));
  ARROW_RETURN_NOT_OK(AddOrPromoteColumns(columns, cdc_lsn, &e));
  return e;
}

}  // namespace

namespace merge_internal {

int32_t SilverBucketsFor(const ice::TableMetadata& bronze, int64_t rows,
                         int64_t target_file_bytes, int64_t* bytes_per_row) {
  *bytes_per_row = 0;
  if (const ice::Snapshot* s = bronze.CurrentSnapshot()) {
    auto size = s->summary.find("total-files-size");
    auto records = s->summary.find("total-records");
    if (size != s->summary.end() && records != s->summary.end()) {
      auto b = ParseUint64(size->second);
      auto r = ParseUint64(records->second);
      if (b && r && *r > 0) *bytes_per_row = static_cast<int64_t>(*b / *r);
    }
  }
  return lake::BucketCount(*bytes_per_row * rows, target_file_bytes);
}

ice::SortOrder SilverSortOrder(const ice::Schema& schema,
                               const std::vector<std::string>& key) {
  ice::SortOrder order;
  order.order_id = 1;
  for (const auto& k : key) {
    order.fields.push_back({ice::Transform::Identity(), schema.FindField(k)->id,
                            ice::SortDirection::kAscending, ice::NullOrder::kNullsFirst});
  }
  return order;
}

arrow::Status EvolveSilver(ice::Table* silver, const ice::TableMetadata& bronze,
                           std::vector<std::string>* changes) {
  ARROW_ASSIGN_OR_RAISE(Evolution planned,
                        PlanSilverEvolution(silver->metadata(), bronze));
  const bool map_recorded =
      silver->metadata().properties.count(lake::kSilverFieldMapProperty) > 0 &&
      FieldMapJson(planned.field_map) ==
          silver->metadata().properties.at(lake::kSilverFieldMapProperty);
  if (planned.changes.empty() && map_recorded) return arrow::Status::OK();
  ARROW_RETURN_NOT_OK(silver->UpdateMetadata(
      [&](const ice::TableMetadata& base, ice::TableMetadataBuilder* b) -> arrow::Status {
        ARROW_ASSIGN_OR_RAISE(Evolution e, PlanSilverEvolution(base, bronze));
        if (!e.changes.empty()) {
          b->AddSchema(e.schema).SetCurrentSchema(ice::kLastAdded);
        }
        b->SetProperties({{lake::kSilverFieldMapProperty, FieldMapJson(e.field_map)}});
        return arrow::Status::OK();
      }));
  *changes = std::move(planned.changes);
  return arrow::Status::OK();
}

}  // namespace merge_internal

arrow::Status ReplaceSilverLayout(ice::Table* silver, const ice::TableMetadata& bronze,
                                  const std::vector<std::string>& key, int64_t rows,
                                  int64_t target_file_bytes, bool copy_on_write,
                                  int32_t* buckets,
                                  std::optional<ice::PartitionSpec>* new_spec) {
  const std::string name = silver->identifier().ToString();
  // The key stays: a layout of another key committed before the rows would leave the
  // old rows under it if the backfill then failed.
  if (SilverKeyNames(silver->metadata()) != key) {
    return arrow::Status::Invalid(
        name, " was built with merge key ",
        silver->metadata().properties.count(lake::kSilverKeyProperty) > 0
            ? silver->metadata().properties.at(lake::kSilverKeyProperty)
            : std::string("(none recorded)"),
        ", not the key of the export's table; --replace keeps a table's key: drop the "
        "table, then run the backfill without --replace");
  }
  std::vector<std::string> changes;
  if (arrow::Status evolved = merge_internal::EvolveSilver(silver, bronze, &changes);
      !evolved.ok()) {
    return evolved.WithMessage(
        evolved.message(),
        " (--replace keeps the table and its schema's history: drop the table, then run "
        "the backfill without --replace)");
  }
  const ice::Schema& schema = silver->schema();
  for (const auto& k : key) {
    if (schema.FindField(k) == nullptr) {
      return arrow::Status::Invalid("merge key column `", k, "` is not a column of ",
                                    name);
    }
  }
  int64_t bytes_per_row = 0;
  *buckets =
      merge_internal::SilverBucketsFor(bronze, rows, target_file_bytes, &bytes_per_row);
  // Another bucket count (or key column) is the replacing commit's: a spec changed
  // now would leave the old rows in another spec's files until then.
  const ice::PartitionSpec& spec = silver->spec();
  new_spec->reset();
  if (spec.fields.size() != 1 ||
      spec.fields[0].source_id != schema.FindField(key[0])->id ||
      spec.fields[0].transform != ice::Transform::Bucket(*buckets)) {
    ARROW_ASSIGN_OR_RAISE(*new_spec,
                          lake::RebucketSpec(silver->metadata(), key[0], *buckets));
  }
  return silver->UpdateMetadata(
      [&](const ice::TableMetadata& base, ice::TableMetadataBuilder* b) -> arrow::Status {
        const ice::Schema& current = *base.CurrentSchema();
        b->AddSortOrder(merge_internal::SilverSortOrder(current, key))
            .SetDefaultSortOrder(ice::kLastAdded);
        b->SetProperties(merge_internal::SilverLayoutProperties(
            current, key, target_file_bytes, copy_on_write));
        return arrow::Status::OK();
      });
}

arrow::Result<std::vector<RowColumn>> RowColumnsOf(const ice::TableMetadata& bronze) {
  const ice::Schema& schema = *bronze.CurrentSchema();
  std::vector<RowColumn> out;
  auto it = bronze.properties.find(lake::kSourceColumnsProperty);
  if (it == bronze.properties.end()) {
    for (const auto& f : schema.fields()) {
      if (!IsCdcColumn(f.name)) out.push_back({f.name, &f});
    }
    return out;
  }
  ARROW_ASSIGN_OR_RAISE(lake::ColumnMap map, lake::ColumnMap::FromJson(it->second));
  for (const lake::ColumnBinding& b : map.columns) {
    const ice::NestedField* f = schema.FindField(b.field_id);
    if (f == nullptr) {
      return arrow::Status::Invalid("Bronze binds source column `", b.name,
                                    "` to field id ", b.field_id,
                                    ", which its current schema lacks");
    }
    out.push_back({b.name, f, b.former_names, b.former_through});
  }
  return out;
}

// Bronze field id -> Silver field id: the table property, or (a table created by a
// merge that crashed before recording it) by name.
bool SameKeyColumns(const ice::TableMetadata& silver, const ice::Schema& bronze_schema,
                    const std::vector<RowColumn>& row_columns,
                    const std::vector<std::string>& key) {
  const std::vector<std::string> old_names = SilverKeyNames(silver);
  if (old_names.empty() || old_names.size() != key.size()) return false;
  const std::map<int32_t, int32_t> field_map = FieldMapOf(silver, bronze_schema);
  const ice::Schema& schema = *silver.CurrentSchema();
  for (size_t i = 0; i < key.size(); ++i) {
    const ice::NestedField* old_field = schema.as_struct()->FindChild(old_names[i]);
    auto column = std::find_if(row_columns.begin(), row_columns.end(),
                               [&](const RowColumn& c) { return c.name == key[i]; });
    if (old_field == nullptr || column == row_columns.end()) return false;
    auto mapped = field_map.find(column->bronze->id);
    if (mapped == field_map.end() || mapped->second != old_field->id) return false;
  }
  return true;
}

std::map<int32_t, int32_t> FieldMapOf(const ice::TableMetadata& silver,
                                      const ice::Schema& bronze) {
  std::map<int32_t, int32_t> out;
  auto it = silver.properties.find(lake::kSilverFieldMapProperty);
  if (it != silver.properties.end()) {
    json parsed = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      for (const auto& [k, v] : parsed.items()) {
        if (!v.is_number_integer()) continue;
        if (std::optional<int32_t> id = ParseInt32(k)) out[*id] = v.get<int32_t>();
      }
      return out;
    }
  }
  const ice::Schema& schema = *silver.CurrentSchema();
  for (const auto& f : bronze.fields()) {
    if (const ice::NestedField* s = schema.FindField(f.name)) out[f.id] = s->id;
  }
  return out;
}

}  // namespace floe::silver
