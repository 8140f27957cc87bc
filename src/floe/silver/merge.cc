#include "floe/silver/merge.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_set>
#include <utility>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/iceberg/expression.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/table.h"
#include "floe/lake/column_map.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/counting_file_io.h"
#include "floe/silver/fold.h"
#include "floe/silver/position_deletes.h"
#include "floe/silver/row_group_pruning.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;
using json = nlohmann::json;

// Up to this many distinct values per key column, the Silver scan is planned with an
// IN filter (bucket and min/max pruning by Iceberg's evaluators); above it, with the
// range of the values plus our own bucket pruning, so planning stays linear.
constexpr size_t kMaxInValues = 1000;

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = cp::Initialize(); });
  return status;
}

// Whether a delete carries some column (lake::kIdentityColumnsProperty non-empty):
// without a replica identity, PostgreSQL refuses a published table's updates and
// deletes.
bool HasReplicaIdentity(const ice::TableMetadata& bronze) {
  auto it = bronze.properties.find(lake::kIdentityColumnsProperty);
  if (it == bronze.properties.end()) return true;  // not recorded: assume it has
  const json carried = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  return !carried.is_array() || !carried.empty();
}

std::string JsonArray(const std::vector<std::string>& items) {
  json array = json::array();
  for (const auto& item : items) array.push_back(item);
  return array.dump();
}


std::string FieldMapJson(const std::map<int32_t, int32_t>& map) {
  json object = json::object();
  for (const auto& [b, s] : map) object[std::to_string(b)] = s;
  return object.dump();
}

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

// The names of Silver's merge key as its table property records them (a JSON array).
std::vector<std::string> SilverKeyNames(const ice::TableMetadata& silver) {
  return lake::NamesProperty(silver, lake::kSilverKeyProperty);
}

bool IsSilverKeyColumn(const ice::TableMetadata& silver, const std::string& name) {
  const auto names = SilverKeyNames(silver);
  return std::find(names.begin(), names.end(), name) != names.end();
}

arrow::Result<Evolution> PlanSilverEvolution(const ice::TableMetadata& silver,
                                             const ice::TableMetadata& bronze) {
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> columns, RowColumnsOf(bronze));
  Evolution e{*silver.CurrentSchema(), silver.last_column_id,
              FieldMapOf(silver, bronze_schema), {}};
  // Silver columns whose Bronze field no source column is bound to any more: the
  // column was dropped, or a type change Iceberg cannot promote moved it to a new
  // field (then a new Silver column of the new type takes its name below). They
  // leave Silver's current schema; old snapshots keep them.
  std::set<int32_t> bound;
  for (const RowColumn& c : columns) bound.insert(c.bronze->id);
  auto top_level = [&](int32_t id) -> const ice::NestedField* {
    for (const auto& f : e.schema.fields()) {
      if (f.id == id) return &f;
    }
    return nullptr;  // absent, or nested (the map holds nested ids too)
  };
  // Silver's debugging column comes from Bronze's own cdc_commit_lsn field (a
  // source column of that name is bound like any other).
  const ice::NestedField* cdc_lsn = bronze_schema.FindField(kCdcCommitLsn);
  for (auto it = e.field_map.begin(); it != e.field_map.end();) {
    const ice::NestedField* s = top_level(it->second);
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
    for (const auto& f : e.schema.fields()) {
      if (f.id != it->second) kept.push_back(f);
    }
    ARROW_ASSIGN_OR_RAISE(e.schema,
                          ice::Schema::Make(e.schema.schema_id(), std::move(kept),
                                            e.schema.identifier_field_ids()));
    e.changes.push_back("removed column " + name +
                        " (dropped in the source, or retyped to a new column)");
    it = e.field_map.erase(it);
  }
  // A source column that takes the debugging column's name replaces it.
  auto free_debug_name = [&](const std::string& name) -> arrow::Status {
    const ice::NestedField* clash = e.schema.as_struct()->FindChild(name);
    if (clash == nullptr || cdc_lsn == nullptr || !e.field_map.contains(cdc_lsn->id) ||
        e.field_map.at(cdc_lsn->id) != clash->id) {
      return arrow::Status::OK();
    }
    const int32_t debug_id = clash->id;
    std::vector<ice::NestedField> kept;
    for (const auto& field : e.schema.fields()) {
      if (field.id != debug_id) kept.push_back(field);
    }
    ARROW_ASSIGN_OR_RAISE(e.schema, ice::Schema::Make(e.schema.schema_id(), std::move(kept),
                                                      e.schema.identifier_field_ids()));
    e.field_map.erase(cdc_lsn->id);
    e.changes.push_back("removed the debugging column " + name +
                        " (the source now has a column of that name)");
    return arrow::Status::OK();
  };
  // Renames first, through temporary names, so that names can move between columns
  // (a <-> b) in one schema change; by field id, as a dotted path cannot name a
  // column called `a.b`.
  std::vector<std::pair<int32_t, std::string>> renames;  // Silver id, new name
  for (const RowColumn& c : columns) {
    auto mapped = e.field_map.find(c.bronze->id);
    if (mapped == e.field_map.end()) continue;
    const ice::NestedField* s = top_level(mapped->second);
    if (s != nullptr && s->name != c.name) renames.emplace_back(s->id, c.name);
  }
  for (const auto& [id, name] : renames) {
    std::string temp = "__floe_renaming_" + std::to_string(id);
    while (e.schema.as_struct()->FindChild(temp) != nullptr) temp += "_";
    e.changes.push_back("renamed column " + top_level(id)->name + " to " + name);
    ARROW_ASSIGN_OR_RAISE(auto renamed,
                          ice::RenameColumn(e.schema, e.last_column_id, id, temp));
    e.schema = std::move(renamed.schema);
  }
  for (const auto& [id, name] : renames) {
    ARROW_RETURN_NOT_OK(free_debug_name(name));
    auto renamed = ice::RenameColumn(e.schema, e.last_column_id, id, name);
    if (!renamed.ok()) {
      return renamed.status().WithMessage(
          "Silver cannot rename a column to `", name, "`: ", renamed.status().message(),
          "; drop the Silver table to rebuild it");
    }
    e.schema = std::move(renamed->schema);
  }
  for (const RowColumn& c : columns) {
    const ice::NestedField* f = c.bronze;
    auto mapped = e.field_map.find(f->id);
    const ice::NestedField* s =
        mapped == e.field_map.end() ? nullptr : e.schema.FindField(mapped->second);
    if (s == nullptr) {
      ARROW_RETURN_NOT_OK(free_debug_name(c.name));
      if (const ice::NestedField* clash = e.schema.as_struct()->FindChild(c.name)) {
        return arrow::Status::Invalid(
            "Bronze column `", f->name, "` (field id ", f->id, ") is new to Silver as `",
            c.name, "`, but Silver already has a column of that name (field id ",
            clash->id,
            ") copied from another Bronze column; rename one of them in the "
            "source, or drop the Silver table to rebuild it");
      }
      // AddColumn gives the column the next id.
      const int32_t id = e.last_column_id + 1;
      ARROW_ASSIGN_OR_RAISE(
          auto added, ice::AddColumn(e.schema, e.last_column_id, "", c.name, f->type));
      e.schema = std::move(added.schema);
      e.last_column_id = added.last_column_id;
      e.field_map[f->id] = id;
      e.changes.push_back("added column " + c.name + " " + f->type->ToString());
      continue;
    }
    const int32_t id = s->id;
    const std::string name = s->name;
    if (!SameTypeIgnoringIds(*s->type, *f->type)) {
      if (s->type->is_primitive() && f->type->is_primitive() &&
          ice::IsAllowedPromotion(*s->type, *f->type)) {
        // `s` points into e.schema: done with it before e.schema is replaced.
        const std::string from = s->type->ToString();
        ARROW_ASSIGN_OR_RAISE(
            auto promoted,
            ice::UpdateColumnType(e.schema, e.last_column_id, id, f->type));
        e.schema = std::move(promoted.schema);
        e.changes.push_back("promoted column " + name + " from " + from + " to " +
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
  return e;
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

// Position delete files, each read once per merge plan: a delete file of ours covers
// a bucket, so it applies to every data file of that bucket, and reading it for each
// of them would read a bucket's deletes once per data file (quadratic in the merges
// since the last compaction).
class PositionDeleteCache {
 public:
  arrow::Result<const std::map<std::string, std::vector<int64_t>>*> Get(
      ice::FileIO& io, const ice::DataFile& d) {
    auto it = files_.find(d.file_path);
    if (it == files_.end()) {
      ARROW_ASSIGN_OR_RAISE(auto refs, ice::ReadPositionDeletes(io, d));
      it = files_.emplace(d.file_path, std::move(refs)).first;
    }
    return &it->second;
  }

 private:
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> files_;
};

// Positions deleted from `data_path` by the position delete files of `task`.
arrow::Result<std::vector<int64_t>> DeletedPositions(ice::FileIO& io,
                                                     const ice::FileScanTask& task,
                                                     PositionDeleteCache& cache) {
  std::vector<int64_t> out;
  const std::string& data_path = task.data_file.file_path;
  for (const ice::DataFile& d : task.delete_files) {
    if (d.content != ice::DataFileContent::kPositionDeletes) continue;
    if (d.referenced_data_file && *d.referenced_data_file != data_path) continue;
    ARROW_ASSIGN_OR_RAISE(const auto* refs, cache.Get(io, d));
    if (auto it = refs->find(data_path); it != refs->end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The increment's keys, to match the key column(s) of Silver rows against. A single
// key column stored as 32- or 64-bit integers (int, long, date, time, timestamps) is
// matched by value: a bitmap over the keys' range when that is at most 64 bits per key,
// else a sorted vector. Any other key is matched by its EncodeKey bytes.
class KeySet {
 public:
  static arrow::Result<KeySet> Make(const Changes& changes, const FoldResult& fold,
                                    const std::vector<int>& key_columns) {
    KeySet set;
    set.fold_ = &fold;
    if (key_columns.size() == 1) {
      const arrow::Array& array = *changes.columns[key_columns[0]];
      const int width = IntWidth(*array.type());
      if (width != 0) {
        set.type_ = array.type();
        set.values_.reserve(fold.keys.size());
        for (const FoldedKey& k : fold.keys) {
          if (array.IsNull(k.key_row)) {
            set.has_null_ = true;
          } else {
            set.values_.push_back(ValueAt(array, width, k.key_row));
          }
        }
        std::sort(set.values_.begin(), set.values_.end());
        set.values_.erase(std::unique(set.values_.begin(), set.values_.end()),
                          set.values_.end());
        if (!set.values_.empty()) {
          const uint64_t span = static_cast<uint64_t>(set.values_.back()) -
                                static_cast<uint64_t>(set.values_.front());
          if (span / 64 <= set.values_.size()) {
            set.bitmap_.assign(span / 64 + 1, 0);
            for (int64_t v : set.values_) {
              const uint64_t bit =
                  static_cast<uint64_t>(v) - static_cast<uint64_t>(set.values_.front());
              set.bitmap_[bit / 64] |= uint64_t{1} << (bit % 64);
            }
          }
        }
        return set;
      }
    }
    set.EnsureEncoded();
    return set;
  }

  // Appends to *out the positions first_row + i of the rows i of `columns` (one row
  // group's key columns, in Silver's types) whose key is in the set; positions in
  // `deleted` (ascending; `next` is where the last call stopped) are skipped.
  arrow::Status Match(const std::vector<const arrow::Array*>& columns, int64_t rows,
                      int64_t first_row, const std::string& path,
                      const std::vector<int64_t>& deleted,
                      std::vector<int64_t>::const_iterator* next,
                      std::vector<RowPosition>* out) {
    auto is_deleted = [&](int64_t pos) {
      while (*next != deleted.end() && **next < pos) ++*next;
      return *next != deleted.end() && **next == pos;
    };
    if (type_ != nullptr && columns.size() == 1 && columns[0]->type()->Equals(*type_)) {
      const arrow::Array& array = *columns[0];
      const int width = IntWidth(*type_);
      for (int64_t i = 0; i < rows; ++i) {
        const bool hit = array.IsNull(i) ? has_null_
                                         : Contains(ValueAt(array, width, i));
        if (hit && !is_deleted(first_row + i)) out->push_back({path, first_row + i});
      }
      return arrow::Status::OK();
    }
    EnsureEncoded();
    for (int64_t i = 0; i < rows; ++i) {
      ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(columns, i));
      if (encoded_.contains(key) && !is_deleted(first_row + i)) {
        out->push_back({path, first_row + i});
      }
    }
    return arrow::Status::OK();
  }

 private:
  // 32 or 64 for a type stored as int32 / int64 values, else 0.
  static int IntWidth(const arrow::DataType& type) {
    switch (type.id()) {
      case arrow::Type::INT32:
      case arrow::Type::DATE32:
        return 32;
      case arrow::Type::INT64:
      case arrow::Type::TIME64:
      case arrow::Type::TIMESTAMP:
        return 64;
      default:
        return 0;
    }
  }
  static int64_t ValueAt(const arrow::Array& array, int width, int64_t row) {
    return width == 32 ? array.data()->GetValues<int32_t>(1)[row]
                       : array.data()->GetValues<int64_t>(1)[row];
  }
  bool Contains(int64_t v) const {
    if (values_.empty() || v < values_.front() || v > values_.back()) return false;
    if (!bitmap_.empty()) {
      const uint64_t bit = static_cast<uint64_t>(v) - static_cast<uint64_t>(values_.front());
      return (bitmap_[bit / 64] >> (bit % 64)) & 1;
    }
    return std::binary_search(values_.begin(), values_.end(), v);
  }
  void EnsureEncoded() {
    if (encoded_built_) return;
    encoded_.reserve(fold_->keys.size());
    for (const FoldedKey& k : fold_->keys) encoded_.insert(k.key);
    encoded_built_ = true;
  }

  const FoldResult* fold_ = nullptr;
  std::shared_ptr<arrow::DataType> type_;  // set: matched by value
  std::vector<int64_t> values_;            // sorted, distinct
  std::vector<uint64_t> bitmap_;           // bit v - values_.front(), when dense
  bool has_null_ = false;
  bool encoded_built_ = false;
  std::unordered_set<std::string> encoded_;
};

// The live rows of one Silver data file whose key is in `keys`, as position deletes.
// Row groups are chosen first by `probe` (the keys' min/max statistics, then bloom
// filters; row_group_pruning.h), and only the key columns of the chosen ones are read
// (by field id, cast to Silver's current types); the positions are the rows' ordinals
// in the file, skipping rows already deleted.
arrow::Status FindRowsToDelete(ice::FileIO& io, const ice::FileScanTask& task,
                               const std::vector<const ice::NestedField*>& key_fields,
                               KeySet& keys, const KeyProbe& probe,
                               PositionDeleteCache& deletes,
                               std::vector<RowPosition>* out, MergeStats* stats) {
  const std::string& path = task.data_file.file_path;
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(path));
  try {
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
    const std::shared_ptr<parquet::FileMetaData> md = reader->parquet_reader()->metadata();
    const auto& fields = reader->manifest().schema_fields;
    // Key column k's leaf index, and the leaves in file order with their key column.
    std::vector<int> leaf_of(key_fields.size(), -1);
    std::vector<int> leaves;
    std::vector<size_t> order;
    for (const auto& f : fields) {
      std::optional<int32_t> id = ice::FieldIdOf(*f.field);
      if (!id) continue;
      for (size_t k = 0; k < key_fields.size(); ++k) {
        if (key_fields[k]->id != *id) continue;
        if (f.column_index < 0) {
          return arrow::Status::Invalid("key column ", key_fields[k]->name, " of ", path,
                                        " is not a primitive column");
        }
        leaves.push_back(f.column_index);
        order.push_back(k);
        leaf_of[k] = f.column_index;
      }
    }
    if (order.size() != key_fields.size()) {
      return arrow::Status::Invalid("Silver data file ", path,
                                    " lacks a key column; was the key changed?");
    }
    const RowGroupChoice choice = probe.Choose(*reader->parquet_reader(), leaf_of);
    stats->row_groups_read += static_cast<int32_t>(choice.read.size());
    stats->row_groups_skipped_stats += choice.skipped_by_stats;
    stats->row_groups_skipped_bloom += choice.skipped_by_bloom;
    if (choice.read.empty()) return arrow::Status::OK();
    ARROW_ASSIGN_OR_RAISE(std::vector<int64_t> deleted, DeletedPositions(io, task, deletes));
    std::vector<int64_t> first_row(md->num_row_groups(), 0);
    for (int rg = 1; rg < md->num_row_groups(); ++rg) {
      first_row[rg] = first_row[rg - 1] + md->RowGroup(rg - 1)->num_rows();
    }
    std::vector<std::shared_ptr<arrow::DataType>> arrow_types(key_fields.size());
    for (size_t k = 0; k < key_fields.size(); ++k) {
      ARROW_ASSIGN_OR_RAISE(arrow_types[k], ice::ToArrowType(*key_fields[k]->type));
    }
    std::vector<int64_t>::const_iterator next_deleted = deleted.cbegin();
    for (int rg : choice.read) {
      ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> table,
                            reader->ReadRowGroup(rg, leaves));
      std::vector<std::shared_ptr<arrow::Array>> columns(key_fields.size());
      for (size_t i = 0; i < order.size(); ++i) {
        const size_t k = order[i];
        auto chunked = table->column(static_cast<int>(i));
        std::shared_ptr<arrow::Array> array;
        if (chunked->num_chunks() == 1) {
          array = chunked->chunk(0);
        } else {
          ARROW_ASSIGN_OR_RAISE(array, arrow::Concatenate(chunked->chunks()));
        }
        if (!array->type()->Equals(*arrow_types[k])) {
          ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, arrow_types[k]));
          array = cast.make_array();
        }
        columns[k] = array;
      }
      std::vector<const arrow::Array*> key_arrays;
      for (const auto& c : columns) key_arrays.push_back(c.get());
      ARROW_RETURN_NOT_OK(keys.Match(key_arrays, table->num_rows(), first_row[rg], path,
                                     deleted, &next_deleted, out));
    }
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", path, ": ", e.what());
  }
  return arrow::Status::OK();
}

// A filter that every Silver row of the folded keys satisfies: per key column, IN of
// its values (or their range when there are many).
arrow::Result<ice::ExpressionPtr> KeyFilter(
    const Changes& changes, const FoldResult& fold, const std::vector<int>& key_columns,
    const std::vector<const ice::NestedField*>& fields,
    std::vector<std::vector<ice::Literal>>* values) {
  ice::ExpressionPtr filter = ice::AlwaysTrue();
  values->assign(key_columns.size(), {});
  for (size_t k = 0; k < key_columns.size(); ++k) {
    const arrow::Array& array = *changes.columns[key_columns[k]];
    const ice::Type& type = *fields[k]->type;
    std::vector<ice::Literal>& lits = (*values)[k];
    // The folded keys are distinct: so are the values of a single key column.
    const bool distinct = key_columns.size() == 1;
    std::unordered_set<std::string> seen;
    if (!distinct) seen.reserve(fold.keys.size());
    lits.reserve(fold.keys.size());
    for (const FoldedKey& f : fold.keys) {
      ARROW_ASSIGN_OR_RAISE(auto lit, ice::ArrowValueToLiteral(array, f.key_row, type));
      if (!lit) continue;  // a null key value matches no Silver row by equality
      if (!distinct) {
        ARROW_ASSIGN_OR_RAISE(std::string encoded, EncodeKey({&array}, f.key_row));
        if (!seen.insert(encoded).second) continue;
      }
      lits.push_back(std::move(*lit));
    }
    if (lits.empty()) return ice::AlwaysFalse();
    if (lits.size() <= kMaxInValues) {
      filter = ice::And(filter, ice::In(fields[k]->name, lits));
    } else {
      auto [lo, hi] = std::minmax_element(
          lits.begin(), lits.end(), [&](const ice::Literal& a, const ice::Literal& b) {
            return ice::CompareLiterals(type, a, b) < 0;
          });
      filter = ice::And(filter, ice::And(ice::GreaterThanOrEqual(fields[k]->name, *lo),
                                         ice::LessThanOrEqual(fields[k]->name, *hi)));
    }
  }
  return filter;
}

// The Silver rows of the folded keys (all row columns), for values that
// cdc_unchanged keeps.
arrow::Result<ExistingRows> ReadExistingRows(const ice::TableMetadata& silver,
                                             ice::FileIO& io, const Changes& changes,
                                             const std::vector<int>& key_columns,
                                             const ice::ExpressionPtr& filter) {
  ice::ScanOptions scan;
  scan.filter = filter;
  scan.columns = changes.names;
  ARROW_ASSIGN_OR_RAISE(auto table, ice::ScanToArrow(silver, io, scan));
  ARROW_ASSIGN_OR_RAISE(table, table->CombineChunks());
  ExistingRows out;
  for (int c = 0; c < table->num_columns(); ++c) {
    auto chunked = table->column(c);
    std::shared_ptr<arrow::Array> array;
    if (chunked->num_chunks() == 0) {
      ARROW_ASSIGN_OR_RAISE(array, arrow::MakeEmptyArray(chunked->type()));
    } else {
      array = chunked->chunk(0);
    }
    const auto& want = changes.columns[c]->type();
    if (!array->type()->Equals(*want)) {
      ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, want));
      array = cast.make_array();
    }
    out.columns.push_back(array);
  }
  std::vector<const arrow::Array*> keys;
  for (int k : key_columns) keys.push_back(out.columns[k].get());
  for (int64_t i = 0; i < table->num_rows(); ++i) {
    ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, i));
    out.row_of_key.emplace(std::move(key), i);
  }
  return out;
}

// Which of the keys at `rows` of `changes` `silver` holds (encoded as EncodeKey does).
arrow::Result<std::unordered_set<std::string>> HeldKeys(
    const ice::TableMetadata& silver, ice::FileIO& io, const ice::Schema& schema,
    const Changes& changes, const std::vector<int>& key_columns,
    const std::vector<std::string>& key, const std::vector<int64_t>& rows) {
  FoldResult asked;
  for (int64_t row : rows) {
    FoldedKey k;
    k.key_row = row;
    asked.keys.push_back(std::move(k));
  }
  std::vector<const ice::NestedField*> key_fields;
  for (const auto& name : key) key_fields.push_back(schema.FindField(name));
  std::vector<std::vector<ice::Literal>> values;
  ARROW_ASSIGN_OR_RAISE(auto filter,
                        KeyFilter(changes, asked, key_columns, key_fields, &values));
  ARROW_ASSIGN_OR_RAISE(ExistingRows found,
                        ReadExistingRows(silver, io, changes, key_columns, filter));
  std::unordered_set<std::string> out;
  for (auto& [encoded, row] : found.row_of_key) out.insert(encoded);
  return out;
}

void DeleteFiles(ice::FileIO& io, const std::vector<ice::DataFile>& files) {
  for (const auto& f : files) ARROW_UNUSED(io.Delete(f.file_path));
}

std::string SourceNameOf(const ice::TableMetadata& bronze,
                         const ice::TableIdentifier& id) {
  auto it = bronze.properties.find(lake::kSourceTableProperty);
  if (it != bronze.properties.end() && !it->second.empty()) return it->second;
  return id.name;
}

// The key columns' Bronze fields and their indexes among the row columns.
arrow::Status ResolveKey(const std::vector<RowColumn>& row_columns,
                         const std::vector<std::string>& key,
                         const ice::TableIdentifier& id, std::vector<int>* indexes,
                         std::vector<const ice::NestedField*>* fields) {
  for (const auto& name : key) {
    auto at = std::find_if(row_columns.begin(), row_columns.end(),
                           [&](const RowColumn& c) { return c.name == name; });
    const ice::NestedField* f = at == row_columns.end() ? nullptr : at->bronze;
    if (at == row_columns.end() || f == nullptr) {
      return arrow::Status::Invalid("merge key column `", name, "` is not a column of ",
                                    id.ToString(),
                                    "; fix silver.keys in the pipeline file");
    }
    if (!f->type->is_primitive()) {
      return arrow::Status::Invalid("merge key column `", name, "` of ", id.ToString(),
                                    " is a ", f->type->ToString(),
                                    "; a key must be a primitive column");
    }
    // Silver is bucket(N, first key column): Iceberg's bucket transform takes
    // integers, decimals, dates and times, strings, uuids and binaries.
    const ice::TypeId type = f->type->id();
    if (name == key.front() &&
        (type == ice::TypeId::kBoolean || type == ice::TypeId::kFloat ||
         type == ice::TypeId::kDouble)) {
      return arrow::Status::Invalid(
          "merge key column `", name, "` of ", id.ToString(), " is a ",
          f->type->ToString(),
          ": Silver buckets its rows by the first key column, and "
          "Iceberg's bucket transform does not take float, double or boolean; no Silver "
          "table is built. Declare a key whose first column is an integer, decimal, "
          "string, uuid, date, time or binary column in the pipeline file (silver: "
          "keys: <schema.table>: [column, ...]), e.g. another unique column, or this "
          "one after such a column");
    }
    indexes->push_back(static_cast<int>(at - row_columns.begin()));
    fields->push_back(f);
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Status CheckMergeKey(const ice::TableMetadata& bronze,
                            const std::vector<std::string>& key,
                            const ice::TableIdentifier& id) {
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  std::vector<int> indexes;
  std::vector<const ice::NestedField*> fields;
  return ResolveKey(row_columns, key, id, &indexes, &fields);
}

namespace {

struct Plan {
  Changes changes;
  FoldResult fold;
};

// Silver's table properties that follow the pipeline file: the data file target
// size (silver.target_file_size) and the write mode in Iceberg's write.*.mode, so
// other engines (Spark) write the table the way floe does. Set at create; updated
// here when the file changed.
std::map<std::string, std::string> ConfiguredProperties(const MergeOptions& options) {
  std::map<std::string, std::string> out = {
      {ice::kTargetFileSizeProperty, std::to_string(options.target_file_bytes)}};
  for (const char* key : kWriteModeProperties) {
    out[key] = options.copy_on_write ? kCopyOnWrite : kMergeOnRead;
  }
  return out;
}

arrow::Status SyncConfiguredProperties(ice::Table* silver, const MergeOptions& options) {
  const std::map<std::string, std::string> want = ConfiguredProperties(options);
  const auto& have = silver->metadata().properties;
  const bool same = std::all_of(want.begin(), want.end(), [&](const auto& kv) {
    auto it = have.find(kv.first);
    return it != have.end() && it->second == kv.second;
  });
  if (same) return arrow::Status::OK();
  spdlog::info("{}: table properties updated to the pipeline file's silver settings",
               silver->identifier().ToString());
  return silver->UpdateMetadata(
      [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) -> arrow::Status {
        b->SetProperties(want);
        return arrow::Status::OK();
      });
}


// ---------------------------------------------------------------------------
// Copy-on-write: the commit replaces each Silver data file holding a row to delete
// with a copy without it (and without the rows earlier position deletes removed).

// What a copy-on-write merge commits besides its new rows.
struct CowRewrite {
  /// Data files rewritten and position delete files made obsolete by the rewrite.
  std::vector<ice::DataFile> remove;
  /// The rewritten data files.
  std::vector<ice::DataFile> add;
};


// The rows of `file` in Silver's current schema and file order, without the rows at
// the positions `drop` (sorted).
arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadWithout(
    ice::Table& silver, const ice::LiveFile& file, const std::vector<int64_t>& drop) {
  ice::FileScanTask task;
  task.data_file = file.entry.data_file;
  task.spec_id = file.spec_id;
  task.data_sequence_number = file.entry.sequence_number.value_or(0);
  const ice::Schema& schema = silver.schema();
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  // No deletes and no filter: every row comes back, one batch per row group, so a
  // row's ordinal among them is its position in the file.
  ARROW_ASSIGN_OR_RAISE(
      auto batches,
      ice::ReadFileScanTask(silver.io(), task, schema, schema, ice::AlwaysTrue()));
  ARROW_ASSIGN_OR_RAISE(auto rows, arrow::Table::FromRecordBatches(arrow_schema, batches));
  ARROW_ASSIGN_OR_RAISE(auto batch, rows->CombineChunksToBatch());
  arrow::BooleanBuilder keep;
  ARROW_RETURN_NOT_OK(keep.Reserve(batch->num_rows()));
  auto next = drop.begin();
  for (int64_t pos = 0; pos < batch->num_rows(); ++pos) {
    while (next != drop.end() && *next < pos) ++next;
    keep.UnsafeAppend(next == drop.end() || *next != pos);
  }
  ARROW_ASSIGN_OR_RAISE(auto mask, keep.Finish());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum kept, cp::Filter(arrow::Datum(batch), mask));
  return kept.record_batch();
}

// Plans and writes the rewrite of a copy-on-write merge from `deletes` (the rows to
// delete that FindRowsToDelete found, grouped by partition) on snapshot
// `snapshot_id`. The files rewritten are those holding a row to delete, plus every
// data file a position delete file applying to one of them points into (a file left
// from when the table was merge-on-read may cover several data files of a bucket),
// so that every such delete file can be removed: after a copy-on-write merge no
// delete file refers to a live row the merge did not rewrite.
arrow::Result<CowRewrite> RewriteForCopyOnWrite(
    ice::Table& silver, std::optional<int64_t> snapshot_id,
    const std::map<std::string, std::pair<ice::PartitionTuple,
                                          std::vector<RowPosition>>>& deletes,
    MergeStats* stats) {
  CowRewrite out;
  std::map<std::string, std::vector<int64_t>> drop;
  for (const auto& [where, entry] : deletes) {
    for (const RowPosition& r : entry.second) drop[r.file_path].push_back(r.pos);
  }
  if (drop.empty()) return out;
  ARROW_ASSIGN_OR_RAISE(auto live, silver.LiveFiles(snapshot_id));
  std::map<std::string, const ice::LiveFile*> data_files;
  std::vector<ice::FileScanTask> tasks;
  std::vector<ice::DeleteFileEntry> delete_entries;
  for (const auto& f : live) {
    if (f.entry.data_file.content == ice::DataFileContent::kData) {
      data_files[f.entry.data_file.file_path] = &f;
      ice::FileScanTask task;
      task.data_file = f.entry.data_file;
      task.spec_id = f.spec_id;
      task.data_sequence_number = f.entry.sequence_number.value_or(0);
      tasks.push_back(std::move(task));
    } else {
      delete_entries.push_back(ice::DeleteFileEntry{
          f.entry.data_file, f.spec_id, f.entry.sequence_number.value_or(0)});
    }
  }
  // The delete files that may apply to each data file (partition and sequence
  // number); which rows they delete is read from them below.
  ice::AssignDeleteFiles(delete_entries, &tasks);
  std::map<std::string, const std::vector<ice::DataFile>*> may_apply;
  for (const auto& t : tasks) may_apply[t.data_file.file_path] = &t.delete_files;

  std::map<std::string, std::map<std::string, std::vector<int64_t>>> delete_refs;
  std::map<std::string, ice::DataFile> obsolete_deletes;
  std::set<std::string> rewrite;
  std::vector<std::string> queue;
  for (const auto& [path, positions] : drop) {
    if (!data_files.contains(path)) {
      return arrow::Status::Invalid("Silver data file ", path, " is not live in snapshot ",
                                    snapshot_id.value_or(-1));
    }
    if (rewrite.insert(path).second) queue.push_back(path);
  }
  while (!queue.empty()) {
    const std::string path = queue.back();
    queue.pop_back();
    for (const ice::DataFile& d : *may_apply.at(path)) {
      if (d.content != ice::DataFileContent::kPositionDeletes) {
        return arrow::Status::NotImplemented(
            "Silver data file ", path, " has equality delete file ", d.file_path,
            " (written by another engine); a copy-on-write merge cannot rewrite around "
            "it: run `floe compact` on the table first, or set its silver.write_modes "
            "entry to merge-on-read");
      }
      if (delete_refs.contains(d.file_path)) continue;
      ARROW_ASSIGN_OR_RAISE(auto refs, ice::ReadPositionDeletes(silver.io(), d));
      for (const auto& [ref, positions] : refs) {
        // Paths of data files no longer live are left to go with the delete file.
        if (data_files.contains(ref) && rewrite.insert(ref).second) queue.push_back(ref);
      }
      delete_refs[d.file_path] = std::move(refs);
      obsolete_deletes[d.file_path] = d;
    }
  }

  const ice::PartitionSpec& spec = silver.spec();
  for (const std::string& path : rewrite) {
    const ice::LiveFile& file = *data_files.at(path);
    std::vector<int64_t> positions = drop[path];
    for (const ice::DataFile& d : *may_apply.at(path)) {
      const auto& refs = delete_refs.at(d.file_path);
      if (auto it = refs.find(path); it != refs.end()) {
        positions.insert(positions.end(), it->second.begin(), it->second.end());
      }
    }
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
    auto written = [&]() -> arrow::Result<std::vector<ice::DataFile>> {
      ARROW_ASSIGN_OR_RAISE(auto kept, ReadWithout(silver, file, positions));
      stats->rewrite_rows_dropped += file.entry.data_file.record_count - kept->num_rows();
      stats->rewrite_rows_copied += kept->num_rows();
      std::vector<ice::DataFile> files;
      if (kept->num_rows() == 0) return files;
      if (file.spec_id == spec.spec_id) {
        return silver.WriteDataFiles({kept}, file.entry.data_file.partition);
      }
      // A file of an older spec: its rows go to the partitions of the current one.
      ARROW_ASSIGN_OR_RAISE(auto parts,
                            ice::SplitByPartition(spec, silver.schema(), *kept));
      for (const auto& part : parts) {
        ARROW_ASSIGN_OR_RAISE(auto part_files,
                              silver.WriteDataFiles({part.batch}, part.partition));
        for (auto& f : part_files) files.push_back(std::move(f));
      }
      return files;
    }();
    if (!written.ok()) {
      DeleteFiles(silver.io(), out.add);
      return written.status();
    }
    for (auto& f : *written) out.add.push_back(std::move(f));
    out.remove.push_back(file.entry.data_file);
  }
  stats->rewritten_data_files = static_cast<int32_t>(out.remove.size());
  stats->rewrite_files_added = static_cast<int32_t>(out.add.size());
  stats->delete_files_removed = static_cast<int32_t>(obsolete_deletes.size());
  for (auto& [path, d] : obsolete_deletes) out.remove.push_back(std::move(d));
  return out;
}
// The merge's work counters as snapshot-summary properties.
void AddMergeCounters(const MergeStats& stats, ice::SummaryProperties* summary) {
  (*summary)[lake::kFilesReadSummaryKey] = std::to_string(stats.files_scanned);
  (*summary)[lake::kRowGroupsReadSummaryKey] = std::to_string(stats.row_groups_read);
  (*summary)[lake::kRowGroupsSkippedStatsSummaryKey] =
      std::to_string(stats.row_groups_skipped_stats);
  (*summary)[lake::kRowGroupsSkippedBloomSummaryKey] =
      std::to_string(stats.row_groups_skipped_bloom);
  (*summary)[lake::kSilverBytesReadSummaryKey] = std::to_string(stats.silver_bytes_read);
  (*summary)[lake::kBronzeBytesReadSummaryKey] = std::to_string(stats.bronze_bytes_read);
  (*summary)[lake::kBytesWrittenSummaryKey] = std::to_string(stats.bytes_written);
}

}  // namespace

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

// The Bronze rows with lower < cdc_commit_lsn <= upper of `bronze`'s current snapshot,
// files pruned by their cdc_commit_lsn bounds.
arrow::Result<std::shared_ptr<arrow::Table>> ReadBronze(const ice::TableMetadata& bronze,
                                                        ice::FileIO& io, uint64_t lower,
                                                        uint64_t upper) {
  ice::ScanOptions scan;
  ice::ExpressionPtr filter =
      ice::LessThanOrEqual(kCdcCommitLsn, static_cast<int64_t>(upper));
  if (lower > 0) {
    filter =
        ice::And(ice::GreaterThan(kCdcCommitLsn, static_cast<int64_t>(lower)), filter);
  }
  scan.filter = filter;
  std::vector<std::string> columns;
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  for (const RowColumn& c : row_columns) columns.push_back(c.bronze->name);
  for (const char* c : {kCdcOp, kCdcCommitLsn, kCdcSeq, kCdcUnchanged}) {
    if (bronze.CurrentSchema()->FindField(c) == nullptr) {
      return arrow::Status::Invalid("Bronze table has no `", c,
                                    "` column; is it a floe Bronze changelog?");
    }
    columns.push_back(c);
  }
  scan.columns = columns;
  return ice::ScanToArrow(bronze, io, scan);
}

// Whether `bronze` holds a `t` row (a truncate, or the start of a copy again) with
// lower < cdc_commit_lsn <= upper.
arrow::Result<bool> TruncatedSince(const ice::TableMetadata& bronze, ice::FileIO& io,
                                   uint64_t lower, uint64_t upper) {
  ice::ScanOptions scan;
  scan.filter = ice::And(
      ice::And(ice::GreaterThan(kCdcCommitLsn, static_cast<int64_t>(lower)),
               ice::LessThanOrEqual(kCdcCommitLsn, static_cast<int64_t>(upper))),
      ice::Equal(kCdcOp, ice::Literal(std::string("t"))));
  scan.columns = {kCdcOp};
  ARROW_ASSIGN_OR_RAISE(auto rows, ice::ScanToArrow(bronze, io, scan));
  for (const auto& chunk : rows->column(0)->chunks()) {
    const auto& ops = static_cast<const arrow::StringArray&>(*chunk);
    for (int64_t i = 0; i < ops.length(); ++i) {
      if (!ops.IsNull(i) && ops.GetView(i) == "t") return true;
    }
  }
  return false;
}

// The upserted rows sorted by key, written as data files of their buckets.
arrow::Result<std::vector<ice::DataFile>> WriteUpserts(
    ice::Table& silver, const std::shared_ptr<arrow::RecordBatch>& rows,
    const std::vector<std::string>& key_names) {
  std::vector<ice::DataFile> out;
  if (rows->num_rows() == 0) return out;
  std::vector<cp::SortKey> sort_keys;
  for (const auto& k : key_names) sort_keys.emplace_back(k);
  ARROW_ASSIGN_OR_RAISE(auto indices,
                        cp::SortIndices(arrow::Datum(rows), cp::SortOptions(sort_keys)));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted, cp::Take(arrow::Datum(rows), indices));
  ARROW_ASSIGN_OR_RAISE(auto parts, ice::SplitByPartition(silver.spec(), silver.schema(),
                                                          *sorted.record_batch()));
  for (const auto& part : parts) {
    ARROW_ASSIGN_OR_RAISE(auto files,
                          silver.WriteDataFiles({part.batch}, part.partition));
    for (auto& f : files) out.push_back(std::move(f));
  }
  return out;
}

arrow::Result<std::unique_ptr<ice::Table>> CreateSilverTable(
    ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
    const ice::TableMetadata& bronze, const ice::TableIdentifier& bronze_id,
    const ice::TableIdentifier& silver_id, const std::string& warehouse,
    const std::vector<std::string>& key, int64_t rows, int64_t target_file_bytes,
    int32_t* buckets_out, bool copy_on_write) {
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  const std::string source = SourceNameOf(bronze, bronze_id);
  const std::string key_json = JsonArray(key);
  // Layout: bucket(N, first key column) with N from Bronze's bytes per row times
  // the rows Silver will hold; sorted by the key; bloom filters on the key.
  int64_t bytes_per_row = 0;
  if (const ice::Snapshot* s = bronze.CurrentSnapshot()) {
    auto size = s->summary.find("total-files-size");
    auto records = s->summary.find("total-records");
    if (size != s->summary.end() && records != s->summary.end()) {
      auto b = ParseUint64(size->second);
      auto r = ParseUint64(records->second);
      if (b && r && *r > 0) bytes_per_row = static_cast<int64_t>(*b / *r);
    }
  }
  const int32_t buckets = BucketCount(bytes_per_row * rows, target_file_bytes);
  std::vector<ice::NestedField> fields;
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  std::map<int32_t, std::string> silver_name;
  for (const RowColumn& c : row_columns) {
    fields.push_back(*c.bronze);
    fields.back().name = c.name;
    silver_name[c.bronze->id] = c.name;
  }
  // The debugging column, unless the source has a column of that name (then that
  // column is the one Silver holds).
  if (std::none_of(row_columns.begin(), row_columns.end(),
                   [](const RowColumn& c) { return c.name == kCdcCommitLsn; })) {
    const ice::NestedField* lsn_field = bronze_schema.FindField(kCdcCommitLsn);
    fields.push_back(ice::NestedField::Optional(
        lsn_field->id, kCdcCommitLsn, ice::Type::Long(),
        "Bronze cdc_commit_lsn of the last change applied to this row"));
  }
  ARROW_ASSIGN_OR_RAISE(ice::Schema pre, ice::Schema::Make(0, std::move(fields)));
  std::map<int32_t, int32_t> field_map;
  ARROW_ASSIGN_OR_RAISE(ice::Schema schema, ice::AssignFreshFieldIds(pre, &field_map));
  ARROW_ASSIGN_OR_RAISE(
      ice::PartitionSpec spec,
      ice::PartitionSpecBuilder(schema).Bucket(key[0], buckets).Build());
  ice::SortOrder order;
  order.order_id = 1;
  for (const auto& k : key) {
    order.fields.push_back({ice::Transform::Identity(), schema.FindField(k)->id,
                            ice::SortDirection::kAscending, ice::NullOrder::kNullsFirst});
  }
  std::map<std::string, std::string> props = {
      {lake::kSilverKeyProperty, key_json},
      {lake::kSilverFieldMapProperty, FieldMapJson(field_map)},
      {lake::kSourceTableProperty, source},
      {ice::kTargetFileSizeProperty, std::to_string(target_file_bytes)},
  };
  for (const char* mode_key : kWriteModeProperties) {
    props[mode_key] = copy_on_write ? kCopyOnWrite : kMergeOnRead;
  }
  for (const auto& k : key) {
    props[std::string(ice::kBloomFilterEnabledPrefix) + k] = "true";
  }
  ARROW_RETURN_NOT_OK(catalog->EnsureNamespace(silver_id.ns));
  auto created =
      ice::Table::Create(catalog, io, silver_id, schema, spec, order,
                         ice::Table::DefaultLocation(warehouse, silver_id), props);
  if (!created.ok()) return created.status();
  std::unique_ptr<ice::Table> silver = std::move(*created);
  // Fresh ids of an already-fresh schema are the same; make sure of it, since the
  // field map relies on it.
  for (const auto& [b, s] : field_map) {
    const ice::NestedField* sf = silver->schema().FindField(s);
    const ice::NestedField* bf = bronze_schema.FindField(b);
    if (sf == nullptr || bf == nullptr ||
        sf->name != (silver_name.contains(b) ? silver_name.at(b) : bf->name)) {
      return arrow::Status::Invalid("Silver field ids of ", silver_id.ToString(),
                                    " do not follow Bronze's; drop it and retry");
    }
  }
  *buckets_out = buckets;
  spdlog::info("{}: created, bucket({}, {}) for about {} bytes in {} rows",
               silver_id.ToString(), buckets, key[0], bytes_per_row * rows, rows);
  return silver;
}

uint64_t SilverWatermark(const ice::TableMetadata& metadata) {
  const ice::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    auto it = snapshot->summary.find(lake::kWatermarkSummaryKey);
    if (it != snapshot->summary.end()) {
      if (auto value = ParseUint64(it->second)) return *value;
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return 0;
}

const ice::Snapshot* LastMergeSnapshot(const ice::TableMetadata& metadata) {
  const ice::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    // A compaction (replace) carries the watermark forward but merges nothing.
    if (snapshot->operation != "replace" &&
        snapshot->summary.contains(lake::kWatermarkSummaryKey)) {
      return snapshot;
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return nullptr;
}

int32_t BucketCount(int64_t estimated_bytes, int64_t target_file_bytes) {
  if (target_file_bytes <= 0) target_file_bytes = kDefaultSilverTargetFileBytes;
  int32_t n = 1;
  while (n < kMaxBuckets &&
         estimated_bytes > static_cast<int64_t>(n) * target_file_bytes) {
    n *= 2;
  }
  return n;
}

arrow::Result<std::vector<std::string>> MergeKeyOf(
    const ice::TableMetadata& bronze,
    const std::optional<std::vector<std::string>>& override_key) {
  if (override_key && !override_key->empty()) return *override_key;
  std::vector<std::string> out;
  auto it = bronze.properties.find(lake::kPrimaryKeyProperty);
  if (it == bronze.properties.end()) return out;
  json parsed = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) {
    return arrow::Status::Invalid("table property ", lake::kPrimaryKeyProperty,
                                  " is not a JSON "
                                  "array of column names: ",
                                  it->second);
  }
  for (const auto& v : parsed) {
    if (!v.is_string()) {
      return arrow::Status::Invalid("table property ", lake::kPrimaryKeyProperty,
                                    " holds a non-string: ", it->second);
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

arrow::Result<MergeStats> MergeTable(ice::Catalog* catalog,
                                     std::shared_ptr<ice::FileIO> base_io,
                                     const ice::TableIdentifier& bronze_id,
                                     const ice::TableIdentifier& silver_id,
                                     const std::string& warehouse,
                                     const MergeOptions& options) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  MergeStats stats;
  // Parquet bytes read from Bronze, read from Silver, written to Silver (declared
  // before the FileIOs and tables that count into them, so they outlive them).
  IoCounter bronze_read;
  IoCounter silver_read;
  IoCounter silver_written;
  const std::shared_ptr<ice::FileIO> bronze_io =
      std::make_shared<CountingFileIO>(base_io, &bronze_read, nullptr);
  const std::shared_ptr<ice::FileIO> io =
      std::make_shared<CountingFileIO>(base_io, &silver_read, &silver_written);
  ARROW_ASSIGN_OR_RAISE(auto bronze_table,
                        ice::Table::Load(catalog, bronze_io, bronze_id));
  // The one Bronze snapshot this merge reads: its rows and its commit LSN.
  const ice::TableMetadata bronze = bronze_table->metadata();
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  const std::string source = SourceNameOf(bronze, bronze_id);

  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    stats.outcome = MergeOutcome::kNoKey;
    stats.message =
        bronze_id.ToString() +
        " has no primary key, so it gets no Silver table (a merge "
        "needs a key). Give the source table one (ALTER TABLE " +
        source +
        " ADD PRIMARY KEY (...)) or declare the merge key in the pipeline file:\n"
        "  silver:\n    keys:\n      " +
        source + ": [column, ...]";
    return stats;
  }
  // Silver's row columns by their source names, and the Bronze fields they are read
  // from (a retyped column's new field is `code__int`, its Silver column `code`).
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  std::vector<std::string> row_names, bronze_names;
  for (const RowColumn& c : row_columns) {
    row_names.push_back(c.name);
    bronze_names.push_back(c.bronze->name);
  }
  std::vector<int> key_columns;
  std::vector<const ice::NestedField*> key_bronze_fields;
  ARROW_RETURN_NOT_OK(ResolveKey(row_columns, key, bronze_id, &key_columns,
                                 &key_bronze_fields));
  // A declared key must be carried by a delete, or deletes cannot reach Silver.
  if (options.key && !options.key->empty()) {
    auto identity = bronze.properties.find(lake::kIdentityColumnsProperty);
    const json carried = identity == bronze.properties.end()
                             ? json()
                             : json::parse(identity->second, nullptr, false);
    // None: the table has no replica identity, so PostgreSQL refuses its updates and
    // deletes (or the publication does not publish them); inserts carry every column.
    if (carried.is_array() && !carried.empty()) {
      std::vector<std::string> missing;
      for (const auto& k : key) {
        if (!carried.is_array() ||
            std::find(carried.begin(), carried.end(), json(k)) == carried.end()) {
          missing.push_back(k);
        }
      }
      if (!missing.empty()) {
        return arrow::Status::Invalid(
            bronze_id.ToString() + ": silver.keys declares " + JsonArray(key) +
            " as the merge key of " + source + ", but a DELETE carries only " +
            identity->second + " (its replica identity), so deletes could not reach "
            "Silver; nothing is merged. Make every change carry the key (ALTER TABLE " +
            source + " REPLICA IDENTITY FULL, or USING INDEX on a unique index over " +
            "it), or remove the entry from silver.keys");
      }
    }
  }
  // Bronze's changes split an update into a delete and an insert only when it
  // changed the key declared then (none recorded: a Bronze table older than the
  // record, taken as written with it). A table without a replica identity has no
  // updates (PostgreSQL refuses them), so any declaration reads it right.
  if (options.key && !options.key->empty() && HasReplicaIdentity(bronze)) {
    auto declared = bronze.properties.find(lake::kDeclaredKeyProperty);
    if (declared != bronze.properties.end() && declared->second != JsonArray(key)) {
      stats.outcome = MergeOutcome::kWaiting;
      stats.message = bronze_id.ToString() + ": silver.keys declares " + JsonArray(key) +
                      " as the merge key of " + source + ", but floe run wrote its " +
                      "changes with " + declared->second + " declared (an update that " +
                      "changed the new key would leave its old row in Silver): start " +
                      "floe run with this pipeline file; it copies " + source +
                      " again, and a later pass merges it";
      return stats;
    }
  }
  // A column moved to a new field lacks the values of the rows not changed since
  // until floe run's copy of the table commits: merging now would leave them null.
  if (auto pending = bronze.properties.find(lake::kRecopyPendingProperty);
      pending != bronze.properties.end()) {
    stats.outcome = MergeOutcome::kWaiting;
    stats.message = bronze_id.ToString() + ": waiting for floe run to copy " + source +
                    " again: " + pending->second;
    return stats;
  }
  const uint64_t bronze_lsn = lake::CommittedLsnOf(bronze).value();
  stats.to_lsn = bronze_lsn;
  const std::string key_json = JsonArray(key);

  arrow::Status last_lost;  // why the last plan could not commit
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    stats.attempts = attempt;
    bronze_read.bytes = 0;
    silver_read.bytes = 0;
    silver_written.bytes = 0;
    stats.row_groups_read = 0;
    stats.row_groups_skipped_stats = 0;
    stats.row_groups_skipped_bloom = 0;
    auto loaded = ice::Table::Load(catalog, io, silver_id);
    std::unique_ptr<ice::Table> silver;
    if (!loaded.ok()) {
      if (ice::GetCatalogErrorKind(loaded.status()) !=
          ice::CatalogErrorKind::kNoSuchTable) {
        return loaded.status();
      }
    } else {
      silver = std::move(*loaded);
    }

    uint64_t watermark = 0;
    bool backfill = silver == nullptr;
    if (silver != nullptr) {
      auto it = silver->metadata().properties.find(lake::kSilverKeyProperty);
      const bool renamed_key =
          it != silver->metadata().properties.end() && it->second != key_json &&
          SameKeyColumns(silver->metadata(), bronze_schema, row_columns, key);
      if (it != silver->metadata().properties.end() && it->second != key_json &&
          !renamed_key) {
        // Bronze was copied again after its key changed (floe run does that, and its
        // `t` row ends everything before it): the merge replaces every Silver row
        // anyway, so the table is rebuilt with the new key.
        ARROW_ASSIGN_OR_RAISE(
            bool copied_since,
            TruncatedSince(bronze, *bronze_io, SilverWatermark(silver->metadata()),
                           bronze_lsn));
        if (copied_since) {
          spdlog::warn(
              "{}: the merge key changed from {} to {} and Bronze was copied again "
              "since: rebuilding the Silver table with the new key (dropped and "
              "backfilled from Bronze; readers find no table for that moment)",
              silver_id.ToString(), it->second, key_json);
          stats.schema_changes.push_back("rebuilt with merge key " + key_json);
          auto dropped = catalog->DropTable(silver_id);
          if (!dropped.ok() && ice::GetCatalogErrorKind(dropped) !=
                                   ice::CatalogErrorKind::kNoSuchTable) {
            return dropped;
          }
          continue;  // a backfill of the new table
        }
        return arrow::Status::Invalid(
            silver_id.ToString(), " was built with merge key ", it->second,
            " but the key is now ", key_json,
            "; a Silver table cannot change its key in place: drop it (it is rebuilt "
            "from "
            "Bronze on the next run) or declare the old key in silver.keys");
      }
      ARROW_RETURN_NOT_OK(
          EvolveSilver(silver.get(), bronze, &stats.schema_changes));
      if (renamed_key) {
        // The same columns under new names (RENAME COLUMN of a key column): the
        // partition spec and sort order follow them by field id.
        // Bloom filter properties are keyed by column name: they move along.
        const std::vector<std::string> old_names = SilverKeyNames(silver->metadata());
        ARROW_RETURN_NOT_OK(silver->UpdateMetadata([&](const ice::TableMetadata& base,
                                                       ice::TableMetadataBuilder* b) {
          std::map<std::string, std::string> set{{lake::kSilverKeyProperty, key_json}};
          std::vector<std::string> remove;
          for (size_t i = 0; i < old_names.size() && i < key.size(); ++i) {
            if (old_names[i] == key[i]) continue;
            for (const char* prefix :
                 {ice::kBloomFilterEnabledPrefix, ice::kBloomFilterFppPrefix}) {
              auto p = base.properties.find(prefix + old_names[i]);
              if (p == base.properties.end()) continue;
              set[prefix + key[i]] = p->second;
              remove.push_back(p->first);
            }
          }
          b->SetProperties(set);
          if (!remove.empty()) b->RemoveProperties(remove);
          return arrow::Status::OK();
        }));
        stats.schema_changes.push_back("merge key renamed to " + key_json);
      }
      ARROW_RETURN_NOT_OK(SyncConfiguredProperties(silver.get(), options));
      watermark = SilverWatermark(silver->metadata());
      if (watermark >= bronze_lsn) {
        if (watermark > bronze_lsn) {
          spdlog::warn(
              "{}: Silver watermark {} is above Bronze's commit LSN {} (Bronze "
              "was re-copied with --resnapshot?); nothing merged",
              silver_id.ToString(), Lsn(watermark).ToString(),
              Lsn(bronze_lsn).ToString());
        }
        stats.outcome = MergeOutcome::kUpToDate;
        stats.from_lsn = watermark;
        return stats;
      }
    }
    stats.from_lsn = watermark;

    // The increment, folded.
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> rows,
                          ReadBronze(bronze, *bronze_io, watermark, bronze_lsn));
    ARROW_ASSIGN_OR_RAISE(Changes changes, ChangesFromTable(*rows, bronze_names));
    changes.names = row_names;
    for (const RowColumn& c : row_columns) {
      changes.former_names.push_back(c.former_names);
      changes.former_through.push_back(c.former_through);
    }
    const bool silver_has_rows =
        silver != nullptr && silver->metadata().current_snapshot_id.has_value();
    ARROW_ASSIGN_OR_RAISE(FoldResult fold, Fold(changes, key_columns, silver_has_rows));
    if (!fold.undecided.empty()) {
      // Keys whose changes fit both a start with Silver's row and one without: ask
      // Silver which it holds, and fold again.
      ARROW_ASSIGN_OR_RAISE(std::unordered_set<std::string> held,
                            HeldKeys(silver->metadata(), *io, silver->schema(), changes,
                                     key_columns, key, fold.undecided));
      ARROW_ASSIGN_OR_RAISE(fold, Fold(changes, key_columns, silver_has_rows, &held));
    }
    stats.changes = changes.length();
    stats.truncated = fold.truncated;
    stats.upserted = fold.upserts();
    stats.deleted_keys = fold.deletes();

    if (backfill) {
      auto created =
          CreateSilverTable(catalog, io, bronze, bronze_id, silver_id, warehouse, key,
                            stats.upserted, options.target_file_bytes, &stats.buckets,
                            options.copy_on_write);
      if (!created.ok()) {
        // Another merge created it (a conflict), or the catalog hiccuped: plan again.
        if (floe::IsRetryable(created.status())) continue;
        return created.status();
      }
      silver = std::move(*created);
    }
    if (stats.buckets == 0 && !silver->spec().fields.empty()) {
      stats.buckets = silver->spec().fields[0].transform.param();
    }

    // Everything below is planned from this Silver snapshot, and the commit lands only
    // on it (one attempt: a concurrent commit makes the catalog's compare-and-swap
    // fail, and the merge is planned again from the new state).
    const ice::TableMetadata planned = silver->metadata();
    const std::optional<int64_t> planned_snapshot = planned.current_snapshot_id;
    ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver->schema()));
    std::vector<const ice::NestedField*> key_fields;
    for (const auto& k : key) key_fields.push_back(silver->schema().FindField(k));

    // Rows of Silver to delete (not needed after a truncate: every file goes).
    std::map<std::string, std::pair<ice::PartitionTuple, std::vector<RowPosition>>>
        deletes_by_partition;
    std::set<std::string> referenced;
    ExistingRows existing;
    if (silver_has_rows && !fold.truncated && !fold.keys.empty()) {
      std::vector<std::vector<ice::Literal>> values;
      ARROW_ASSIGN_OR_RAISE(auto filter,
                            KeyFilter(changes, fold, key_columns, key_fields, &values));
      ice::ScanOptions scan;
      scan.filter = filter;
      scan.columns = key;
      ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(planned, *io, scan));
      // Bucket pruning of our own when the IN list was too long to plan with.
      std::optional<std::set<int32_t>> buckets;
      const ice::PartitionSpec& spec = silver->spec();
      if (values[0].size() > kMaxInValues && spec.fields.size() == 1 &&
          spec.fields[0].transform.kind() == ice::TransformKind::kBucket) {
        buckets.emplace();
        for (const auto& v : values[0]) {
          ARROW_ASSIGN_OR_RAISE(auto b,
                                spec.fields[0].transform.Apply(*key_fields[0]->type, v));
          if (b && std::holds_alternative<int32_t>(*b))
            buckets->insert(std::get<int32_t>(*b));
        }
      }
      ARROW_ASSIGN_OR_RAISE(KeySet keys, KeySet::Make(changes, fold, key_columns));
      std::vector<const arrow::Array*> probe_columns;
      for (int c : key_columns) probe_columns.push_back(changes.columns[c].get());
      std::vector<int64_t> probe_rows;
      probe_rows.reserve(fold.keys.size());
      for (const FoldedKey& k : fold.keys) probe_rows.push_back(k.key_row);
      ARROW_ASSIGN_OR_RAISE(KeyProbe probe, KeyProbe::Make(probe_columns, probe_rows));
      PositionDeleteCache deletes;
      for (const ice::FileScanTask& task : plan.tasks) {
        if (buckets && task.spec_id == spec.spec_id &&
            task.data_file.partition.size() == 1 && task.data_file.partition[0] &&
            std::holds_alternative<int32_t>(*task.data_file.partition[0]) &&
            !buckets->contains(std::get<int32_t>(*task.data_file.partition[0]))) {
          continue;
        }
        std::vector<RowPosition> found;
        ARROW_RETURN_NOT_OK(
            FindRowsToDelete(*io, task, key_fields, keys, probe, deletes, &found, &stats));
        ++stats.files_scanned;
        if (found.empty()) continue;
        referenced.insert(task.data_file.file_path);
        const std::string where =
            std::to_string(task.spec_id) + "/" +
            ice::PartitionPath(spec, silver->schema(), task.data_file.partition);
        auto& entry = deletes_by_partition[where];
        entry.first = task.data_file.partition;
        for (auto& d : found) entry.second.push_back(std::move(d));
      }
      if (fold.needs_existing) {
        ARROW_ASSIGN_OR_RAISE(
            existing, ReadExistingRows(planned, *io, changes, key_columns, filter));
      }
    }

    ARROW_ASSIGN_OR_RAISE(
        auto upserts,
        BuildUpserts(changes, fold, fold.needs_existing ? &existing : nullptr,
                     silver_arrow));
    std::vector<ice::DataFile> written;
    ARROW_ASSIGN_OR_RAISE(std::vector<ice::DataFile> data_files,
                          WriteUpserts(*silver, upserts, key));
    written = data_files;
    std::vector<ice::DataFile> delete_files;
    CowRewrite cow;
    if (options.copy_on_write) {
      auto rewritten =
          RewriteForCopyOnWrite(*silver, planned_snapshot, deletes_by_partition, &stats);
      if (!rewritten.ok()) {
        DeleteFiles(*io, written);
        return rewritten.status();
      }
      cow = std::move(*rewritten);
      written.insert(written.end(), cow.add.begin(), cow.add.end());
    } else {
      for (auto& [where, entry] : deletes_by_partition) {
        stats.position_deletes += static_cast<int64_t>(entry.second.size());
        auto file = WriteRowPositions(*silver, entry.first, entry.second);
        if (!file.ok()) {
          DeleteFiles(*io, written);
          return file.status();
        }
        written.push_back(*file);
        delete_files.push_back(std::move(*file));
      }
    }
    stats.data_files = static_cast<int32_t>(data_files.size());
    stats.delete_files = static_cast<int32_t>(delete_files.size());
    stats.bronze_bytes_read = bronze_read.bytes;
    stats.silver_bytes_read = silver_read.bytes;
    stats.bytes_written = silver_written.bytes;

    ice::SummaryProperties summary = {
        {lake::kWatermarkSummaryKey, std::to_string(bronze_lsn)}};
    AddMergeCounters(stats, &summary);
    ice::CommitOptions once;
    once.max_attempts = 1;
    arrow::Status committed;
    if (options.before_commit) options.before_commit(attempt);
    if (fold.truncated && silver_has_rows) {
      ARROW_ASSIGN_OR_RAISE(auto live, silver->LiveFiles(planned_snapshot));
      ice::OverwriteRequest request;
      for (const auto& f : live) request.delete_files.push_back(f.entry.data_file);
      request.add_files = data_files;
      request.validate_from_snapshot_id = planned_snapshot;
      request.validate_no_conflicting_data_files = true;
      if (request.delete_files.empty() && request.add_files.empty()) {
        committed = silver->AppendFiles({}, summary, once).status();
      } else if (request.delete_files.empty()) {
        committed = silver->AppendFiles(data_files, summary, once).status();
      } else {
        committed = silver->Overwrite(request, summary, once).status();
      }
    } else if (!cow.remove.empty()) {
      // Copy-on-write: the rewritten files replace theirs, next to the new rows.
      ice::OverwriteRequest request;
      request.delete_files = cow.remove;
      request.add_files = cow.add;
      request.add_files.insert(request.add_files.end(), data_files.begin(),
                               data_files.end());
      request.validate_from_snapshot_id = planned_snapshot;
      request.validate_no_conflicting_data_files = true;
      committed = silver->Overwrite(request, summary, once).status();
    } else if (data_files.empty() && delete_files.empty()) {
      // Nothing changed (or only keys that never reached Silver were deleted): an
      // empty snapshot still moves the watermark.
      committed = silver->AppendFiles({}, summary, once).status();
    } else if (!silver_has_rows && delete_files.empty()) {
      committed = silver->AppendFiles(data_files, summary, once).status();
    } else {
      ice::RowDeltaRequest request;
      request.add_data_files = data_files;
      request.add_delete_files = delete_files;
      request.referenced_data_files.assign(referenced.begin(), referenced.end());
      request.validate_from_snapshot_id = planned_snapshot;
      request.validate_no_conflicting_data_files = true;
      committed = silver->RowDelta(request, summary, once).status();
    }
    if (!committed.ok()) {
      if (floe::IsRetryable(committed)) {
        // Definitely or possibly not ours: plan again from whatever Silver holds now
        // (an unknown outcome that did land shows up as the new watermark).
        const floe::ErrorKind kind = floe::ErrorKindOf(committed);
        if (kind != floe::ErrorKind::kCommitStateUnknown) DeleteFiles(*io, written);
        if (kind == floe::ErrorKind::kCommitConflict) {
          spdlog::info("{}: Silver changed while merging ({}); planning again",
                       silver_id.ToString(), committed.message());
        } else {
          spdlog::warn("{}: the commit failed ({}); planning again", silver_id.ToString(),
                       committed.ToString());
          if (attempt < options.max_attempts) floe::SleepBeforeRetry(attempt);
        }
        last_lost = committed;
        stats.position_deletes = 0;
        stats.files_scanned = 0;
        stats.rewritten_data_files = stats.rewrite_files_added = 0;
        stats.rewrite_rows_dropped = stats.rewrite_rows_copied = 0;
        stats.delete_files_removed = 0;
        continue;
      }
      DeleteFiles(*io, written);
      return committed;
    }
    stats.outcome = backfill ? MergeOutcome::kBackfilled : MergeOutcome::kMerged;
    return stats;
  }
  // Every plan lost its race or met a retryable failure (a full disk, a failing
  // catalog): say what the last attempt met, keeping its kind (the next pass tries
  // again).
  const std::string gave_up =
      "merging " + bronze_id.ToString() + " into " + silver_id.ToString() +
      ": gave up after " + std::to_string(options.max_attempts) +
      " plans, none of which could commit (Silver changing under the merge: is "
      "another floe silver running? The last attempt: " +
      (last_lost.ok() ? std::string("-") : last_lost.ToString()) + ")";
  if (last_lost.ok()) return floe::KindedError(floe::ErrorKind::kCommitConflict, gave_up);
  return last_lost.WithMessage(gave_up);
}

}  // namespace floe::silver
