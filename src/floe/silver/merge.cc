#include "floe/silver/merge.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
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
#include "floe/silver/merge_internal.h"

namespace floe::silver {

namespace merge_internal {

void DeleteFiles(iceberg::FileIO& io, const std::vector<iceberg::DataFile>& files) {
  for (const auto& f : files) ARROW_UNUSED(io.Delete(f.file_path));
}

}  // namespace merge_internal

using merge_internal::CacheSilverReads;
using merge_internal::CommitPlan;
using merge_internal::EvolveSilver;
using merge_internal::FieldMapJson;
using merge_internal::FoldChanges;
using merge_internal::HeldIncrement;
using merge_internal::HeldKeys;
using merge_internal::MergeColumns;
using merge_internal::MergeFiles;
using merge_internal::SilverBuckets;
using merge_internal::SilverDeletes;
using merge_internal::SilverKeyNames;
using merge_internal::TierSmallFiles;
using merge_internal::WritePlan;
using merge_internal::WriteSlices;

namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;
using json = nlohmann::json;

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

// Silver's properties the pipeline file does not set, given to a table that has no
// value of its own: manifests merged once 16 of them pile up (Iceberg's default is
// 100), since every merge adds a data and a delete manifest and planning a merge
// reads them all.
const std::map<std::string, std::string>& DefaultProperties() {
  static const std::map<std::string, std::string> defaults = {
      {ice::kManifestMinMergeCountProperty, "16"}};
  return defaults;
}

arrow::Status SyncConfiguredProperties(ice::Table* silver, const MergeOptions& options) {
  std::map<std::string, std::string> want = ConfiguredProperties(options);
  const auto& have = silver->metadata().properties;
  for (const auto& [key, value] : DefaultProperties()) {
    want[key] = have.contains(key) ? have.at(key) : value;
  }
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



}  // namespace

// The Bronze rows with lower < cdc_commit_lsn <= upper of `bronze`'s current snapshot,
// files pruned by their cdc_commit_lsn bounds.
arrow::Result<std::shared_ptr<arrow::Table>> ReadBronze(const ice::TableMetadata& bronze,
                                                        ice::FileIO& io, uint64_t lower,
                                                        uint64_t upper) {
  ice::ScanOptions scan;
  scan.filter = CommitLsnRange(lower, upper);
  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> columns,
                        merge_internal::BronzeColumnsOf(bronze));
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

int SliceWorkers(int concurrency, int merges) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, std::min(concurrency, cores) / std::max(1, merges));
}

// The upserted rows sorted by key, written as data files of their buckets.
arrow::Result<std::vector<ice::DataFile>> WriteUpserts(
    const ice::Table& silver, const std::shared_ptr<arrow::RecordBatch>& rows,
    const std::vector<std::string>& key_names,
    const std::optional<ice::PartitionSpec>& spec) {
  ARROW_ASSIGN_OR_RAISE(auto parts,
                        merge_internal::SortedPartitions(silver, rows, key_names, spec));
  return merge_internal::WriteSortedPartitions(silver, std::move(parts), spec);
}

namespace merge_internal {

std::map<std::string, std::string> SilverLayoutProperties(
    const ice::Schema& schema, const std::vector<std::string>& key,
    int64_t target_file_bytes, bool copy_on_write) {
  std::map<std::string, std::string> props = {
      {lake::kSilverKeyProperty, JsonArray(key)},
      {ice::kTargetFileSizeProperty, std::to_string(target_file_bytes)},
  };
  for (const char* mode_key : kWriteModeProperties) {
    props[mode_key] = copy_on_write ? kCopyOnWrite : kMergeOnRead;
  }
  for (const auto& k : key) {
    // Parquet has no bloom filters for booleans (a boolean key column after the first).
    if (schema.FindField(k)->type->id() == ice::TypeId::kBoolean) continue;
    props[std::string(ice::kBloomFilterEnabledPrefix) + k] = "true";
  }
  return props;
}

}  // namespace merge_internal

arrow::Result<std::unique_ptr<ice::Table>> CreateSilverTable(
    ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
    const ice::TableMetadata& bronze, const ice::TableIdentifier& bronze_id,
    const ice::TableIdentifier& silver_id, const std::string& warehouse,
    const std::vector<std::string>& key, int64_t rows, int64_t target_file_bytes,
    int32_t* buckets_out, bool copy_on_write, const std::string& seeding) {
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  const std::string source = SourceNameOf(bronze, bronze_id);
  // Layout: bucket(N, first key column) with N from Bronze's bytes per row times
  // the rows Silver will hold; sorted by the key; bloom filters on the key.
  int64_t bytes_per_row = 0;
  const int32_t buckets =
      merge_internal::SilverBucketsFor(bronze, rows, target_file_bytes, &bytes_per_row);
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
  const ice::SortOrder order = merge_internal::SilverSortOrder(schema, key);
  std::map<std::string, std::string> props = merge_internal::SilverLayoutProperties(
      schema, key, target_file_bytes, copy_on_write);
  props[lake::kSilverFieldMapProperty] = FieldMapJson(field_map);
  props[lake::kSourceTableProperty] = source;
  if (!seeding.empty()) props[lake::kSilverSeedingProperty] = seeding;
  props.insert(DefaultProperties().begin(), DefaultProperties().end());
  ARROW_RETURN_NOT_OK(catalog->CatalogOf(silver_id)->EnsureNamespace(silver_id.ns));
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

namespace {

// The merge key against what Bronze recorded, before any plan: an error when a
// declared key is not carried by deletes; false, with the reason to wait in `stats`,
// while Bronze's changes were written with another declared key or a copy again is
// pending.
arrow::Result<bool> KeyAllowsMerge(const ice::TableMetadata& bronze,
                                   const std::vector<std::string>& key,
                                   const MergeOptions& options,
                                   const ice::TableIdentifier& bronze_id,
                                   const std::string& source, MergeStats* stats) {
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
      stats->outcome = MergeOutcome::kWaiting;
      stats->message = bronze_id.ToString() + ": silver.keys declares " + JsonArray(key) +
                      " as the merge key of " + source + ", but floe run wrote its " +
                      "changes with " + declared->second + " declared (an update that " +
                      "changed the new key would leave its old row in Silver): start " +
                      "floe run with this pipeline file; it copies " + source +
                      " again, and a later pass merges it";
      return false;
    }
  }
  // A column moved to a new field lacks the values of the rows not changed since
  // until floe run's copy of the table commits: merging now would leave them null.
  if (auto pending = bronze.properties.find(lake::kRecopyPendingProperty);
      pending != bronze.properties.end()) {
    stats->outcome = MergeOutcome::kWaiting;
    stats->message = bronze_id.ToString() + ": waiting for floe run to copy " + source +
                    " again: " + pending->second;
    return false;
  }
  return true;
}

// What PrepareSilver found.
enum class SilverState { kReady, kRebuilding, kUpToDate, kWaiting };

// Brings an existing Silver table in line with Bronze before a plan: a key changed
// while Bronze was copied again since drops it (kRebuilding: the next plan backfills
// it), a key column renamed follows, the schema evolves and the pipeline file's
// properties are set; kUpToDate (and so `stats`) when its watermark reached Bronze's
// commit LSN; kWaiting (and `stats`) while a backfill from an export has created the
// table and not committed its rows.
arrow::Result<SilverState> PrepareSilver(ice::Catalog* catalog, ice::Table* silver,
                                         const ice::TableMetadata& bronze,
                                         ice::FileIO& bronze_io,
                                         const std::vector<RowColumn>& row_columns,
                                         const std::vector<std::string>& key,
                                         uint64_t bronze_lsn, const MergeOptions& options,
                                         MergeStats* stats) {
  const ice::TableIdentifier& silver_id = silver->identifier();
  // Merging Bronze's history into it would make Silver whatever Bronze holds, which
  // may not be the whole table (why it is seeded from an export).
  if (auto seeding = silver->metadata().properties.find(lake::kSilverSeedingProperty);
      seeding != silver->metadata().properties.end() &&
      SilverWatermark(silver->metadata()) == 0) {
    stats->outcome = MergeOutcome::kWaiting;
    stats->message =
        silver_id.ToString() +
        ": waiting for `floe silver backfill` to commit the rows of " + seeding->second +
        " (if no backfill of it is still running, it failed or was killed: "
        "run it again with --replace, or drop the table to build Silver from "
        "Bronze's history)";
    return SilverState::kWaiting;
  }
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  const std::string key_json = JsonArray(key);
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
        TruncatedSince(bronze, bronze_io, SilverWatermark(silver->metadata()),
                       bronze_lsn));
    if (copied_since) {
      spdlog::warn(
          "{}: the merge key changed from {} to {} and Bronze was copied again "
          "since: rebuilding the Silver table with the new key (dropped and "
          "backfilled from Bronze; readers find no table for that moment)",
          silver_id.ToString(), it->second, key_json);
      stats->schema_changes.push_back("rebuilt with merge key " + key_json);
      auto dropped = catalog->DropTable(silver_id);
      if (!dropped.ok() && ice::GetCatalogErrorKind(dropped) !=
                               ice::CatalogErrorKind::kNoSuchTable) {
        return dropped;
      }
      return SilverState::kRebuilding;  // the next plan backfills the new table
    }
    return arrow::Status::Invalid(
        silver_id.ToString(), " was built with merge key ", it->second,
        " but the key is now ", key_json,
        "; a Silver table cannot change its key in place: drop it (it is rebuilt "
        "from "
        "Bronze on the next run) or declare the old key in silver.keys");
  }
  ARROW_RETURN_NOT_OK(EvolveSilver(silver, bronze, &stats->schema_changes));
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
    stats->schema_changes.push_back("merge key renamed to " + key_json);
  }
  ARROW_RETURN_NOT_OK(SyncConfiguredProperties(silver, options));
  const uint64_t watermark = SilverWatermark(silver->metadata());
  if (watermark >= bronze_lsn) {
    // A table seeded from an export taken after Bronze's last commit of it (a quiet
    // table) waits for Bronze to pass the export's LSN: said once, not warned.
    const ice::Snapshot* last = lake::LastMergeSnapshot(silver->metadata());
    const bool seeded =
        last != nullptr && last->summary.contains(lake::kSeededFromSummaryKey);
    if (watermark > bronze_lsn && seeded) {
      spdlog::info(
          "{}: seeded from an export at {}, above Bronze's commit LSN {}: merges start "
          "once Bronze holds a change after it",
          silver_id.ToString(), Lsn(watermark).ToString(), Lsn(bronze_lsn).ToString());
    } else if (watermark > bronze_lsn) {
      spdlog::warn(
          "{}: Silver watermark {} is above Bronze's commit LSN {} (Bronze "
          "was re-copied with --resnapshot?); nothing merged",
          silver_id.ToString(), Lsn(watermark).ToString(),
          Lsn(bronze_lsn).ToString());
    }
    stats->outcome = MergeOutcome::kUpToDate;
    stats->from_lsn = watermark;
    return SilverState::kUpToDate;
  }
  return SilverState::kReady;
}

// What a merge of a table without a key says, with the fix.
std::string NoKeyMessage(const ice::TableIdentifier& bronze_id,
                         const std::string& source) {
  return bronze_id.ToString() +
         " has no primary key, so it gets no Silver table (a merge "
         "needs a key). Give the source table one (ALTER TABLE " +
         source +
         " ADD PRIMARY KEY (...)) or declare the merge key in the pipeline file:\n"
         "  silver:\n    keys:\n      " +
         source + ": [column, ...]";
}

arrow::Result<MergeColumns> MergeColumnsOf(const ice::TableMetadata& bronze,
                                           const std::vector<std::string>& key,
                                           const ice::TableIdentifier& bronze_id) {
  MergeColumns out;
  ARROW_ASSIGN_OR_RAISE(out.row_columns, RowColumnsOf(bronze));
  for (const RowColumn& c : out.row_columns) {
    out.row_names.push_back(c.name);
    out.bronze_names.push_back(c.bronze->name);
  }
  std::vector<const ice::NestedField*> key_bronze_fields;
  ARROW_RETURN_NOT_OK(
      ResolveKey(out.row_columns, key, bronze_id, &out.key_columns, &key_bronze_fields));
  return out;
}

// The Silver table, or null when there is none yet.
arrow::Result<std::unique_ptr<ice::Table>> LoadSilver(
    ice::Catalog* catalog, const std::shared_ptr<ice::FileIO>& io,
    const ice::TableIdentifier& silver_id) {
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
  return silver;
}

// Each plan counts from zero: the bytes it reads and writes, the row groups it reads
// and skips.
void StartCounting(IoCounter* bronze_read, IoCounter* silver_read,
                   IoCounter* silver_written, MergeStats* stats) {
  bronze_read->bytes = 0;
  silver_read->bytes = 0;
  silver_written->bytes = 0;
  stats->row_groups_read = 0;
  stats->row_groups_skipped_stats = 0;
  stats->row_groups_skipped_bloom = 0;
  stats->changes = stats->upserted = stats->deleted_keys = 0;
  stats->truncated = false;
  stats->slices = 1;
}

// The merge's FileIOs, counting the Parquet bytes read from Bronze, read from Silver
// and written to Silver.
struct MergeIo {
  explicit MergeIo(const std::shared_ptr<ice::FileIO>& base)
      : bronze(std::make_shared<CountingFileIO>(base, &bronze_read, nullptr)),
        silver(std::make_shared<CountingFileIO>(base, &silver_read, &silver_written)) {}
  IoCounter bronze_read;
  IoCounter silver_read;
  IoCounter silver_written;
  std::shared_ptr<ice::FileIO> bronze;
  std::shared_ptr<ice::FileIO> silver;
};

// Writes a plan's files: from the changes folded in memory (its upserts and
// merge-on-read's deletes held for TierSmallFiles), or a slice at a time (`workers`
// at once); then folds the small files of the buckets it writes in and writes what
// is held.
arrow::Status WriteIncrement(ice::Table& silver, const ice::TableMetadata& planned,
                             ice::FileIO& io, const Increment& increment,
                             const Changes& changes, const FoldResult& fold,
                             const MergeColumns& columns,
                             const std::vector<std::string>& key, bool silver_has_rows,
                             const MergeOptions& options, int workers, MergeFiles* files,
                             std::set<std::string>* referenced, bool* truncated,
                             MergeStats* stats) {
  const bool copy_on_write = options.copy_on_write;
  if (increment.spilled()) {
    ARROW_RETURN_NOT_OK(WriteSlices(silver, planned, io, increment, columns, key,
                                    silver_has_rows, copy_on_write, options.memory_limit,
                                    workers, files, referenced, truncated, stats,
                                    options.on_slices));
  } else {
    ARROW_ASSIGN_OR_RAISE(SilverDeletes found,
                          WritePlan(silver, planned, io, changes, fold, columns, key,
                                    silver_has_rows, copy_on_write, files, stats));
    *referenced = std::move(found.referenced);
  }
  return TierSmallFiles(silver, planned.current_snapshot_id, *truncated, key,
                        options.memory_limit, workers, copy_on_write, files, stats);
}

// Why a merge gave up: every plan lost its race or met a retryable failure (a full
// disk, a failing catalog): says what the last attempt met, keeping its kind (the
// next pass tries again).
arrow::Status GaveUp(const ice::TableIdentifier& bronze_id,
                     const ice::TableIdentifier& silver_id, int max_attempts,
                     const arrow::Status& last_lost) {
  const std::string gave_up =
      "merging " + bronze_id.ToString() + " into " + silver_id.ToString() +
      ": gave up after " + std::to_string(max_attempts) +
      " plans, none of which could commit (Silver changing under the merge: is "
      "another floe silver running? The last attempt: " +
      (last_lost.ok() ? std::string("-") : last_lost.ToString()) + ")";
  if (last_lost.ok()) return floe::KindedError(floe::ErrorKind::kCommitConflict, gave_up);
  return last_lost.WithMessage(gave_up);
}

}  // namespace

arrow::Result<MergeStats> MergeTable(ice::Catalog* catalog,
                                     std::shared_ptr<ice::FileIO> base_io,
                                     const ice::TableIdentifier& bronze_id,
                                     const ice::TableIdentifier& silver_id,
                                     const std::string& warehouse,
                                     const MergeOptions& options) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  MergeStats stats;
  // Declared before the tables that count into it, so that it outlives them.
  MergeIo counted(base_io);
  const std::shared_ptr<ice::FileIO>& bronze_io = counted.bronze;
  const std::shared_ptr<ice::FileIO>& io = counted.silver;
  ARROW_ASSIGN_OR_RAISE(auto bronze_table,
                        ice::Table::Load(catalog, bronze_io, bronze_id));
  // The one Bronze snapshot this merge reads: its rows and its commit LSN.
  const ice::TableMetadata bronze = bronze_table->metadata();
  const std::string source = SourceNameOf(bronze, bronze_id);

  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    stats.outcome = MergeOutcome::kNoKey;
    stats.message = NoKeyMessage(bronze_id, source);
    return stats;
  }
  ARROW_ASSIGN_OR_RAISE(MergeColumns columns, MergeColumnsOf(bronze, key, bronze_id));
  columns.declared_key = options.key.has_value() && !options.key->empty();
  ARROW_ASSIGN_OR_RAISE(const bool ready,
                        KeyAllowsMerge(bronze, key, options, bronze_id, source, &stats));
  if (!ready) return stats;
  const uint64_t bronze_lsn = lake::CommittedLsnOf(bronze).value();
  stats.to_lsn = bronze_lsn;

  HeldIncrement held;       // read once for every plan from the same watermark
  arrow::Status last_lost;  // why the last plan could not commit
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    stats.attempts = attempt;
    StartCounting(&counted.bronze_read, &counted.silver_read, &counted.silver_written,
                  &stats);
    ARROW_ASSIGN_OR_RAISE(std::unique_ptr<ice::Table> silver,
                          LoadSilver(catalog, io, silver_id));

    uint64_t watermark = 0;
    const bool backfill = silver == nullptr;
    if (silver != nullptr) {
      ARROW_ASSIGN_OR_RAISE(
          SilverState state,
          PrepareSilver(catalog, silver.get(), bronze, *bronze_io, columns.row_columns,
                        key, bronze_lsn, options, &stats));
      if (state == SilverState::kRebuilding) continue;
      watermark = SilverWatermark(silver->metadata());
      if (state == SilverState::kUpToDate || state == SilverState::kWaiting) return stats;
    }
    stats.from_lsn = watermark;

    const bool silver_has_rows =
        silver != nullptr && silver->metadata().current_snapshot_id.has_value();
    ARROW_RETURN_NOT_OK(held.Read(bronze, *bronze_io, watermark, bronze_lsn, columns,
                                  silver.get(), options, counted.bronze_read.bytes));
    const Increment* increment = held.increment.get();
    stats.increment_bytes = increment->bytes();
    Changes changes;
    FoldResult fold;
    if (!increment->spilled()) {
      ARROW_ASSIGN_OR_RAISE(
          fold, FoldChanges(*increment->All(), columns, silver.get(), silver_has_rows,
                            *io, key, &changes, &stats));
    }

    if (backfill) {
      auto created = CreateSilverTable(
          catalog, io, bronze, bronze_id, silver_id, warehouse, key,
          increment->spilled() ? increment->live_estimate() : stats.upserted,
          options.target_file_bytes, &stats.buckets, options.copy_on_write,
          /*seeding=*/"");
      if (!created.ok()) {
        // Another merge created it (a conflict), or the catalog hiccuped: plan again.
        if (floe::IsRetryable(created.status())) continue;
        return created.status();
      }
      silver = std::move(*created);
    }
    if (stats.buckets == 0) stats.buckets = SilverBuckets(*silver);
    silver->set_row_group_bytes(RowGroupBytes(options.memory_limit));

    // Everything below is planned from this Silver snapshot, and the commit lands only
    // on it (one attempt: a concurrent commit makes the catalog's compare-and-swap
    // fail, and the merge is planned again from the new state).
    const ice::TableMetadata planned = silver->metadata();
    const std::optional<int64_t> planned_snapshot = planned.current_snapshot_id;
    MergeFiles files;
    std::set<std::string> referenced;
    bool truncated = fold.truncated;
    ARROW_RETURN_NOT_OK(CacheSilverReads(*silver, *increment, silver_id));
    ARROW_RETURN_NOT_OK(WriteIncrement(
        *silver, planned, silver->io(), *increment, changes, fold, columns, key,
        silver_has_rows, options, held.workers, &files, &referenced, &truncated, &stats));
    stats.bronze_bytes_read = held.bronze_bytes + counted.bronze_read.bytes;
    stats.silver_bytes_read = counted.silver_read.bytes;
    stats.bytes_written = counted.silver_written.bytes;

    const arrow::Status committed =
        CommitPlan(*silver, *io, planned_snapshot, truncated, silver_has_rows, files,
                   referenced, bronze_lsn, attempt, options, &stats);
    if (!committed.ok()) {
      if (!floe::IsRetryable(committed)) return committed;
      last_lost = committed;
      continue;
    }
    stats.outcome = backfill ? MergeOutcome::kBackfilled : MergeOutcome::kMerged;
    return stats;
  }
  return GaveUp(bronze_id, silver_id, options.max_attempts, last_lost);
}

}  // namespace floe::silver
