#include "floe/silver/verify.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "floe/common/lsn.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/fold.h"
#include "floe/silver/increment.h"
#include "floe/silver/merge.h"
#include "floe/silver/merge_internal.h"
#include "floe/silver/silver.h"
#include "floe/silver/verify_internal.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;

std::string LsnText(uint64_t lsn) { return Lsn(lsn).ToString(); }

std::string KeysDiffer(int64_t n) {
  return std::to_string(n) + (n == 1 ? " key differs:" : " keys differ:");
}

std::string DigestText(const RowDigest& d) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(d.checksum));
  return std::to_string(d.rows) + " rows, checksum " + hex;
}

// `column` cast to `type` when it differs and the cast works; else as it is (values
// are compared by canonical text, so e.g. int16 and int32 agree anyway).
std::shared_ptr<arrow::Array> CastIfPossible(
    std::shared_ptr<arrow::Array> column, const std::shared_ptr<arrow::DataType>& type) {
  if (column->type()->Equals(*type)) return column;
  auto cast = cp::Cast(column, type);
  if (!cast.ok()) return column;
  return cast->make_array();
}

// How Bronze's row columns line up with Silver's, through the field-id map (so a
// rename not merged yet still lines up).
struct HistoryColumns {
  /// What is read of Bronze: the row columns, then the CDC columns (Bronze names).
  std::vector<std::string> bronze_columns;
  /// The row columns (Bronze names).
  std::vector<std::string> bronze_names;
  /// Per row column: its Silver name (a name no Silver field has when Silver lacks
  /// it), and the names cdc_unchanged may know it by, as the merge folds them.
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> former_names;
  std::vector<std::vector<std::pair<int64_t, int32_t>>> former_through;
  /// The key's row columns, in key order.
  std::vector<int> ordered_key;
};

// The columns of the Bronze history; the key's Silver names in v->key.
arrow::Result<HistoryColumns> HistoryColumnsOf(const ice::TableMetadata& bronze,
                                               const ice::TableMetadata& silver,
                                               const std::vector<std::string>& key,
                                               TableVerification* v) {
  const ice::Schema& silver_schema = *silver.CurrentSchema();
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  HistoryColumns h;
  ARROW_ASSIGN_OR_RAISE(h.bronze_columns, merge_internal::BronzeColumnsOf(bronze));
  for (const auto& c : h.bronze_columns) {
    if (!IsCdcColumn(c)) h.bronze_names.push_back(c);
  }
  const std::map<int32_t, int32_t> ids = FieldMapOf(silver, bronze_schema);
  // The key names source columns; a Bronze field may be named otherwise (a name
  // Iceberg cannot hold as it is, a `__<type>` suffix after a type change).
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  std::vector<std::string> key_fields;
  for (const auto& k : key) {
    auto rc = std::find_if(row_columns.begin(), row_columns.end(),
                           [&](const RowColumn& c) { return c.name == k; });
    key_fields.push_back(
        rc != row_columns.end() && rc->bronze != nullptr ? rc->bronze->name : k);
  }
  std::vector<int> key_columns;
  for (size_t c = 0; c < h.bronze_names.size(); ++c) {
    const std::string& bronze_name = h.bronze_names[c];
    const ice::NestedField* bf = bronze_schema.FindField(bronze_name);
    const ice::NestedField* sf = nullptr;
    if (bf != nullptr) {
      auto it = ids.find(bf->id);
      if (it != ids.end()) sf = silver_schema.FindField(it->second);
    }
    // A column Silver does not have yet is left out of the upserts under a name
    // no Silver field has.
    h.names.push_back(sf != nullptr ? sf->name : "\x01" + bronze_name);
    // cdc_unchanged names source columns as they were named when the row was
    // written: the column's former names with their positions, as the merge folds
    // them, and its source name where Silver's differs.
    std::vector<std::string> former;
    std::vector<std::pair<int64_t, int32_t>> through;
    if (bf != nullptr) {
      auto rc = std::find_if(row_columns.begin(), row_columns.end(),
                             [&](const RowColumn& r) { return r.bronze == bf; });
      if (rc != row_columns.end()) {
        former = rc->former_names;
        through = rc->former_through;
        through.resize(former.size(), {0, 0});
        if (rc->name != h.names.back()) {
          former.push_back(rc->name);
          through.push_back({0, 0});
        }
      }
    }
    h.former_names.push_back(std::move(former));
    h.former_through.push_back(std::move(through));
    if (std::find(key_fields.begin(), key_fields.end(), bronze_name) !=
        key_fields.end()) {
      key_columns.push_back(static_cast<int>(c));
    }
  }
  if (key_columns.size() != key.size()) {
    return arrow::Status::Invalid("merge key of ", v->bronze,
                                  " is not among its columns");
  }
  for (const auto& k : key_fields) {
    for (int c : key_columns) {
      if (h.bronze_names[c] == k) h.ordered_key.push_back(c);
    }
  }
  for (int c : h.ordered_key) v->key.push_back(h.names[c]);
  return h;
}

// What verify may hold at once: the working memory of a fold of one slice of
// Bronze, or of two partitions' RowSets; the digests of each side hold an eighth.
struct Budget {
  int64_t slice_bytes = 0;
  RowDigests::Options digests;
};

// The fold of Bronze's history up to the watermark, a slice of Silver's buckets at a
// time when it does not fit, into `expected`.
arrow::Status FoldDigests(const ice::TableMetadata& bronze, const ice::Table& silver,
                          ice::FileIO& io, const HistoryColumns& h, uint64_t watermark,
                          const Budget& budget, RowDigests* expected) {
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver.schema()));
  IncrementOptions read;
  read.slice_bytes = budget.slice_bytes;
  read.spill_parent = budget.digests.spill_dir;
  read.silver_buckets = merge_internal::SilverBuckets(silver);
  ARROW_ASSIGN_OR_RAISE(read.row_bytes, merge_internal::SilverRowBytes(silver));
  for (int k : h.ordered_key) read.key_columns.push_back(h.bronze_names[k]);
  ARROW_ASSIGN_OR_RAISE(auto history,
                        Increment::Read(bronze, io, 0, watermark, h.bronze_columns,
                                        h.bronze_names[h.ordered_key[0]], read));
  // `own_rows`: the rows whose keys are the slice's own (the others it imported).
  auto fold_into = [&](const arrow::Table& rows, int64_t own_rows) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(Changes changes, ChangesFromTable(rows, h.bronze_names));
    changes.names = h.names;
    changes.former_names = h.former_names;
    changes.former_through = h.former_through;
    ARROW_ASSIGN_OR_RAISE(FoldResult fold, Fold(changes, h.ordered_key, false));
    if (own_rows < changes.length()) fold = merge_internal::OwnKeys(fold, own_rows);
    ARROW_ASSIGN_OR_RAISE(auto upserts,
                          BuildUpserts(changes, fold, nullptr, silver_arrow));
    return expected->Add(*upserts);
  };
  if (!history->spilled()) {
    return fold_into(*history->All(), history->All()->num_rows());
  }
  for (const Slice& slice : history->PlanSlices(read.silver_buckets)) {
    int64_t own_rows = 0;
    ARROW_ASSIGN_OR_RAISE(auto rows, history->Load(slice, &own_rows));
    ARROW_RETURN_NOT_OK(fold_into(*rows, own_rows));
  }
  return arrow::Status::OK();
}

// Silver's rows (deletes applied), a batch at a time, into `out` (over its columns).
// The data files of a bucket are read one after the other, so that its delete file
// is read once, not once per data file.
arrow::Status SilverDigests(const ice::Table& silver, RowDigests* out) {
  ice::ScanOptions scan;
  scan.columns = out->columns();
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(silver, scan));
  auto first_deletes = [](const ice::FileScanTask& task) -> std::string_view {
    for (const ice::DataFile& d : task.delete_files) {
      if (d.content == ice::DataFileContent::kPositionDeletes) return d.file_path;
    }
    return {};
  };
  std::stable_sort(plan.tasks.begin(), plan.tasks.end(),
                   [&](const ice::FileScanTask& a, const ice::FileScanTask& b) {
                     return first_deletes(a) < first_deletes(b);
                   });
  ice::LastPositionDeletes deletes;
  for (const ice::FileScanTask& task : plan.tasks) {
    ARROW_RETURN_NOT_OK(ice::ReadFileScanTaskInBatches(
        silver.io(), task, *plan.schema, *plan.projection, plan.filter, 8192,
        [&](std::shared_ptr<arrow::RecordBatch> batch) { return out->Add(*batch); },
        int64_t{1} << 20, &deletes));
  }
  return arrow::Status::OK();
}

// The live source table's rows, over the Silver columns it still has (cast to
// Silver's types), into digests of their own.
class LiveDigests : public SourceSink {
 public:
  LiveDigests(TableVerification* v, std::shared_ptr<arrow::Schema> silver_arrow,
              RowDigests::Options options)
      : v_(v), silver_arrow_(std::move(silver_arrow)), options_(std::move(options)) {}

  arrow::Status Begin(const std::shared_ptr<arrow::Schema>& schema,
                      uint64_t lsn) override {
    v_->source_lsn = lsn;
    std::vector<std::string> missing;
    for (const auto& name : v_->columns) {
      if (schema->GetFieldIndex(name) < 0) {
        missing.push_back(name);
      } else {
        v_->source_columns.push_back(name);
      }
    }
    for (const auto& k : v_->key) {
      if (std::find(missing.begin(), missing.end(), k) != missing.end()) {
        no_key_ = "not compared: the source table has no key column `" + k + "`";
        return arrow::Status::Cancelled(no_key_);
      }
    }
    if (!missing.empty()) {
      std::string names;
      for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
      v_->source_note = "Silver columns the source no longer has, not compared: " + names;
    }
    digests_ = std::make_unique<RowDigests>(v_->key, v_->source_columns, options_);
    return arrow::Status::OK();
  }

  arrow::Status Add(const std::shared_ptr<arrow::RecordBatch>& rows) override {
    arrow::FieldVector fields;
    arrow::ArrayVector arrays;
    for (const auto& name : v_->source_columns) {
      auto array = CastIfPossible(rows->GetColumnByName(name),
                                  silver_arrow_->GetFieldByName(name)->type());
      fields.push_back(arrow::field(name, array->type()));
      arrays.push_back(std::move(array));
    }
    return digests_->Add(
        *arrow::RecordBatch::Make(arrow::schema(fields), rows->num_rows(), arrays));
  }

  const std::string& no_key() const { return no_key_; }
  std::unique_ptr<RowDigests> digests_;

 private:
  TableVerification* v_;
  std::shared_ptr<arrow::Schema> silver_arrow_;
  RowDigests::Options options_;
  std::string no_key_;
};

// Silver against the live source table (read by `source`) over the columns the source
// still has; a difference with changes above the watermark in Bronze (read again) is
// the source having moved on. `actual`: Silver's digests over every column.
arrow::Status CompareWithSource(ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
                                const ice::TableIdentifier& bronze_id,
                                const config::QualifiedName& source_name,
                                const SourceReader& source,
                                const VerifyTableOptions& options,
                                const ice::Table& silver, const RowDigests& actual,
                                const Budget& budget, TableVerification* v) {
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver.schema()));
  LiveDigests live(v, silver_arrow, budget.digests);
  const arrow::Status read = source(source_name, &live);
  if (!live.no_key().empty()) {
    v->source_note = live.no_key();
    return arrow::Status::OK();
  }
  if (!read.ok()) {
    v->source_note = "not compared: " + read.message();
    v->source_columns.clear();
    return arrow::Status::OK();
  }
  // Silver over the same columns: its digests when the source has all of them.
  const RowDigests* silver_digests = &actual;
  std::unique_ptr<RowDigests> narrower;
  if (v->source_columns != v->columns) {
    narrower = std::make_unique<RowDigests>(v->key, v->source_columns, budget.digests);
    ARROW_RETURN_NOT_OK(SilverDigests(silver, narrower.get()));
    silver_digests = narrower.get();
  }
  v->silver_source_digest = silver_digests->digest();
  v->source_digest = live.digests_->digest();
  ARROW_ASSIGN_OR_RAISE(
      v->source_differences,
      CompareDigests(*silver_digests, *live.digests_, "Silver", "the source",
                     options.max_keys, &v->source_differences_total));
  if (v->source_differences_total == 0 && v->silver_source_digest == v->source_digest) {
    v->source = SourceCheck::kMatches;
    return arrow::Status::OK();
  }
  if (v->silver_source_digest.rows == v->source_digest.rows) {
    v->source_differing_columns = DifferingColumns(*silver_digests, *live.digests_);
  }
  // Bronze read again after the source: changes above the watermark explain a
  // difference (the source moved on; Silver catches up on its next merge).
  ARROW_ASSIGN_OR_RAISE(auto bronze_now, ice::Table::Load(catalog, io, bronze_id));
  v->bronze_lsn = lake::CommittedLsnOf(bronze_now->metadata()).value();
  v->source =
      v->bronze_lsn > v->watermark ? SourceCheck::kMovedOn : SourceCheck::kDiffers;
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<TableVerification> VerifyTable(ice::Catalog* catalog,
                                             std::shared_ptr<ice::FileIO> io,
                                             const ice::TableIdentifier& bronze_id,
                                             const ice::TableIdentifier& silver_id,
                                             const config::QualifiedName& source_name,
                                             const SourceReader* source,
                                             const VerifyTableOptions& options) {
  ARROW_RETURN_NOT_OK(verify_internal::EnsureCompute());
  TableVerification v;
  v.table = source_name.ToString();
  v.bronze = bronze_id.ToString();
  v.silver = silver_id.ToString();
  ARROW_ASSIGN_OR_RAISE(auto bronze_table, ice::Table::Load(catalog, io, bronze_id));
  const ice::TableMetadata bronze = bronze_table->metadata();
  v.bronze_lsn = lake::CommittedLsnOf(bronze).value();
  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    v.skipped = "no merge key, so no Silver table";
    return v;
  }
  auto loaded = ice::Table::Load(catalog, io, silver_id);
  if (!loaded.ok()) {
    if (ice::GetCatalogErrorKind(loaded.status()) ==
        ice::CatalogErrorKind::kNoSuchTable) {
      // A key no merge can use: the table is never built, and saying so is the
      // verification's result.
      ARROW_RETURN_NOT_OK(CheckMergeKey(bronze, key, bronze_id));
      v.skipped = "no Silver table yet (the next `floe silver` pass builds it)";
      return v;
    }
    return loaded.status();
  }
  const ice::Table& silver_table = **loaded;
  const ice::TableMetadata& silver = silver_table.metadata();
  if (!silver.current_snapshot_id) {
    v.skipped = silver.properties.contains(lake::kSilverSeedingProperty)
                    ? "`floe silver backfill` created the Silver table and has not "
                      "committed its rows (if it is not still running, run it again "
                      "with --replace, or drop the table to build Silver from Bronze)"
                    : "the Silver table has no snapshot yet (the next `floe silver` "
                      "pass fills it)";
    return v;
  }
  v.watermark = SilverWatermark(silver);
  for (const auto& f : silver.CurrentSchema()->fields()) {
    if (f.name != kCdcCommitLsn) v.columns.push_back(f.name);
  }
  ARROW_ASSIGN_OR_RAISE(HistoryColumns h, HistoryColumnsOf(bronze, silver, key, &v));

  // The sides are compared a partition of keys at a time, as many as the rows of the
  // Silver table (the data files' counts) need.
  Budget budget;
  budget.slice_bytes =
      options.slice_bytes > 0 ? options.slice_bytes : SliceBytes(options.memory_limit);
  budget.digests.memory_bytes = std::max<int64_t>(1, options.memory_limit / 8);
  budget.digests.spill_dir = options.spill_dir;
  budget.digests.partitions = options.partitions;
  if (budget.digests.partitions <= 0) {
    ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(silver_table, {}));
    int64_t rows = 0;
    for (const auto& task : plan.tasks) rows += task.data_file.record_count;
    budget.digests.partitions = DigestPartitions(rows, options.memory_limit / 2);
  }

  // Silver == the fold of the Bronze history up to the watermark, in Silver's names.
  auto actual = std::make_unique<RowDigests>(v.key, v.columns, budget.digests);
  {
    RowDigests expected(v.key, v.columns, budget.digests);
    ARROW_RETURN_NOT_OK(
        FoldDigests(bronze, silver_table, *io, h, v.watermark, budget, &expected));
    ARROW_RETURN_NOT_OK(SilverDigests(silver_table, actual.get()));
    v.silver_digest = actual->digest();
    v.fold_digest = expected.digest();
    ARROW_ASSIGN_OR_RAISE(
        v.fold_differences,
        CompareDigests(*actual, expected, "Silver", "the fold of Bronze",
                       options.max_keys, &v.fold_differences_total));
    if (v.silver_differs_from_bronze() && v.silver_digest.rows == v.fold_digest.rows) {
      v.fold_differing_columns = DifferingColumns(*actual, expected);
    }
  }

  if (source == nullptr) return v;
  ARROW_RETURN_NOT_OK(CompareWithSource(catalog, io, bronze_id, source_name, *source,
                                        options, silver_table, *actual, budget, &v));
  return v;
}

std::string FormatVerification(const TableVerification& v) {
  std::string out = v.table + " (" + v.silver + ")";
  if (!v.error.empty()) return out + ": could not be verified: " + v.error;
  if (!v.skipped.empty()) return out + ": skipped: " + v.skipped;
  out += ": watermark " + LsnText(v.watermark) + ", Bronze at " + LsnText(v.bronze_lsn);
  auto keys = [&](const std::vector<KeyDifference>& diffs, int64_t total,
                  const std::vector<std::string>& columns) {
    std::string text;
    if (!columns.empty()) {
      text += "\n    columns with differences: ";
      for (size_t i = 0; i < columns.size(); ++i) text += (i ? ", " : "") + columns[i];
    }
    for (const auto& d : diffs) text += "\n    " + d.key + ": " + d.what;
    if (total > static_cast<int64_t>(diffs.size())) {
      text += "\n    ... and " +
              std::to_string(total - static_cast<int64_t>(diffs.size())) + " more keys";
    }
    return text;
  };
  if (v.silver_differs_from_bronze()) {
    out += "\n  Silver vs fold(Bronze <= watermark): DIFFERENT (Silver " +
           DigestText(v.silver_digest) + "; fold " + DigestText(v.fold_digest) + "), " +
           KeysDiffer(v.fold_differences_total) +
           keys(v.fold_differences, v.fold_differences_total, v.fold_differing_columns);
  } else {
    out += "\n  Silver vs fold(Bronze <= watermark): OK (" + DigestText(v.silver_digest) +
           ")";
  }
  const std::string at = " (source read at " + LsnText(v.source_lsn) + ")";
  switch (v.source) {
    case SourceCheck::kNotCompared:
      if (!v.source_note.empty()) out += "\n  Silver vs source: " + v.source_note;
      return out;
    case SourceCheck::kMatches:
      out += "\n  Silver vs source: OK" + at + " (" + DigestText(v.source_digest) + ")";
      break;
    case SourceCheck::kMovedOn:
    case SourceCheck::kDiffers:
      out += std::string("\n  Silver vs source: ") +
             (v.source == SourceCheck::kMovedOn
                  ? "source moved on since watermark " + LsnText(v.watermark) +
                        " (Bronze holds changes up to " + LsnText(v.bronze_lsn) +
                        " not merged yet: the next floe silver pass that merges this "
                        "table applies them; if its passes fail, its log says why)"
                  : "DIFFERENT although Bronze has nothing newer than watermark " +
                        LsnText(v.watermark) +
                        " (is floe run behind or stopped? otherwise Bronze missed "
                        "changes)") +
             at + ": Silver " + DigestText(v.silver_source_digest) + "; source " +
             DigestText(v.source_digest) + "; " + KeysDiffer(v.source_differences_total) +
             keys(v.source_differences, v.source_differences_total,
                  v.source_differing_columns);
      break;
  }
  if (!v.source_note.empty()) out += "\n  " + v.source_note;
  return out;
}

TableNames NamesOf(const config::PipelineConfig& config,
                   const config::QualifiedName& table) {
  TableNames out;
  out.bronze = ice::IdentifierFromLevels(config.BronzeIdentifier(table));
  out.silver = ice::IdentifierFromLevels(config.SilverIdentifier(table));
  if (auto it = config.silver.keys.find(table); it != config.silver.keys.end()) {
    out.key = it->second;
  }
  return out;
}

arrow::Result<std::vector<TableVerification>> VerifySilver(
    const config::PipelineConfig& config, const VerifyOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto catalog, lake::OpenPipelineCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeFileIO(config.s3);
  // The source tables to verify: the one asked for, or every Bronze changelog of the
  // service (as `floe silver` lists them).
  std::set<config::QualifiedName> tables;
  if (options.table) {
    const TableNames names = NamesOf(config, *options.table);
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(names.bronze));
    if (!exists) {
      return arrow::Status::KeyError(
          "no Bronze table ", names.bronze.ToString(), " for ", options.table->ToString(),
          "; is the table published and has `floe run` copied it?");
    }
    tables.insert(*options.table);
  } else {
    ARROW_ASSIGN_OR_RAISE(const std::vector<ice::TableIdentifier> bronze_ids,
                          lake::ListBronzeTables(catalog.get(), config));
    for (const auto& id : bronze_ids) {
      ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog.get(), io, id));
      const auto& props = table->metadata().properties;
      // Which source table this Bronze table follows. floe.source.table is
      // `schema.table` unquoted, ambiguous when a name holds a dot: a table named
      // in naming.tables is known by its entry, one named by default by its
      // identifier (bronze.<service>.<schema>.<table>); only otherwise is the
      // property parsed.
      std::optional<config::QualifiedName> source;
      for (const auto& [name, naming] : config.naming.tables) {
        if (ice::IdentifierFromLevels(config.BronzeIdentifier(name)) == id) source = name;
      }
      auto property = props.find(lake::kSourceTableProperty);
      if (!source && !id.ns.empty() &&
          (property == props.end() || property->second == id.ns.back() + "." + id.name)) {
        source = config::QualifiedName{id.ns.back(), id.name};
      }
      if (!source && property != props.end()) {
        source = config::ParseQualifiedName(property->second);
      }
      if (source) tables.insert(*source);
    }
  }
  const SourceReader reader =
      PostgresSourceReader(config.source.conninfo, config.source.publication);
  std::vector<TableVerification> out;
  for (const auto& table : tables) {
    const TableNames names = NamesOf(config, table);
    VerifyTableOptions table_options;
    table_options.key = names.key;
    table_options.max_keys = options.max_keys;
    table_options.memory_limit = MergeShare(config.silver.memory_limit, 1);
    table_options.spill_dir = config.silver.spill_dir;
    auto verified =
        VerifyTable(catalog.get(), io, names.bronze, names.silver, table,
                    options.compare_source ? &reader : nullptr, table_options);
    if (verified.ok()) {
      out.push_back(std::move(*verified));
    } else {
      TableVerification failed;
      failed.table = table.ToString();
      failed.bronze = names.bronze.ToString();
      failed.silver = names.silver.ToString();
      failed.error = verified.status().ToString();
      out.push_back(std::move(failed));
    }
  }
  return out;
}

}  // namespace floe::silver
