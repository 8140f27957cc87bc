#include "floe/silver/backfill.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <spdlog/spdlog.h>

#include "floe/common/lsn.h"
#include "floe/common/progress.h"
#include "floe/iceberg/conversions.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/fold.h"
#include "floe/silver/merge.h"
#include "floe/silver/silver.h"
#include "floe/silver/verify.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;
namespace fs = std::filesystem;

arrow::Result<std::unique_ptr<parquet::arrow::FileReader>> OpenParquetFile(
    const std::string& path) {
  ARROW_ASSIGN_OR_RAISE(auto input, arrow::io::ReadableFile::Open(path));
  try {
    return parquet::arrow::OpenFile(input, arrow::default_memory_pool());
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", path, ": ", e.what());
  }
}

// The whole file, one row group at a time (each counted into `progress`).
arrow::Result<std::shared_ptr<arrow::Table>> ReadParquetFile(
    const std::string& path, parquet::arrow::FileReader& reader,
    ProgressReporter* progress) {
  try {
    std::vector<std::shared_ptr<arrow::Table>> groups;
    for (int g = 0; g < reader.num_row_groups(); ++g) {
      ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> group, reader.ReadRowGroup(g));
      if (progress != nullptr) progress->Add(group->num_rows());
      groups.push_back(std::move(group));
    }
    if (groups.empty()) {
      std::shared_ptr<arrow::Schema> schema;
      ARROW_RETURN_NOT_OK(reader.GetSchema(&schema));
      return arrow::Table::MakeEmpty(schema);
    }
    return arrow::ConcatenateTables(groups);
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", path, ": ", e.what());
  }
}

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = cp::Initialize(); });
  return status;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

arrow::Result<uint64_t> BronzeStartLsn(const ice::TableMetadata& bronze,
                                       ice::FileIO& io) {
  if (!bronze.current_snapshot_id) {
    return arrow::Status::Invalid(
        "Bronze has no committed snapshot yet; let `floe run` copy the table first");
  }
  const ice::NestedField* lsn_field = bronze.CurrentSchema()->FindField(kCdcCommitLsn);
  if (lsn_field == nullptr) {
    return arrow::Status::Invalid("Bronze table has no `", kCdcCommitLsn,
                                  "` column; is it a floe Bronze changelog?");
  }
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(bronze, io, {}));
  std::optional<int64_t> start;
  bool unbounded = false;
  for (const ice::FileScanTask& task : plan.tasks) {
    if (task.data_file.record_count == 0) continue;
    auto bound = task.data_file.lower_bounds.find(lsn_field->id);
    if (bound == task.data_file.lower_bounds.end()) {
      unbounded = true;
      break;
    }
    ARROW_ASSIGN_OR_RAISE(ice::Literal lit,
                          ice::FromBytes(*lsn_field->type, bound->second));
    if (!std::holds_alternative<int64_t>(lit)) {
      unbounded = true;
      break;
    }
    const int64_t v = std::get<int64_t>(lit);
    start = start ? std::min(*start, v) : v;
  }
  if (unbounded) {
    // A file without statistics: read the column.
    ice::ScanOptions scan;
    scan.columns = std::vector<std::string>{kCdcCommitLsn};
    ARROW_ASSIGN_OR_RAISE(auto table, ice::ScanToArrow(bronze, io, scan));
    ARROW_ASSIGN_OR_RAISE(arrow::Datum min_max, cp::MinMax(table->column(0)));
    const auto& pair = min_max.scalar_as<arrow::StructScalar>();
    start.reset();
    if (pair.value[0]->is_valid) {
      start = std::static_pointer_cast<arrow::Int64Scalar>(pair.value[0])->value;
    }
  }
  if (start) return static_cast<uint64_t>(*start);
  return lake::CommittedLsnOf(bronze).value();
}

arrow::Result<std::shared_ptr<arrow::Table>> ReadParquetExport(const std::string& path,
                                                               ProgressReporter* progress) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return arrow::Status::IOError("the export ", path, " does not exist");
  }
  std::vector<std::string> files;
  if (!fs::is_directory(path, ec)) {
    files.push_back(path);
  } else {
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file() && entry.path().extension() == ".parquet") {
        files.push_back(entry.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return arrow::Status::IOError("the directory ", path, " holds no *.parquet file");
    }
  }
  // Every footer first: the row count of the whole export, for progress.
  std::vector<std::unique_ptr<parquet::arrow::FileReader>> readers;
  for (const auto& f : files) {
    ARROW_ASSIGN_OR_RAISE(auto reader, OpenParquetFile(f));
    if (progress != nullptr) progress->AddTotal(reader->parquet_reader()->metadata()->num_rows());
    readers.push_back(std::move(reader));
  }
  std::vector<std::shared_ptr<arrow::Table>> tables;
  for (size_t i = 0; i < files.size(); ++i) {
    if (progress != nullptr) {
      progress->SetDetail("reading file " + std::to_string(i + 1) + "/" +
                          std::to_string(files.size()));
    }
    ARROW_ASSIGN_OR_RAISE(auto t, ReadParquetFile(files[i], *readers[i], progress));
    readers[i].reset();
    tables.push_back(std::move(t));
  }
  if (tables.size() == 1) return tables[0];
  auto combined = arrow::ConcatenateTables(tables);
  if (!combined.ok()) {
    return arrow::Status::Invalid(
        "the files of ", path, " do not share one schema: ", combined.status().message());
  }
  return combined;
}

namespace {

// Refuses an export older than the start of Bronze's history (`bronze_start`: its
// earliest cdc_commit_lsn): the changes between the two would be in neither.
arrow::Status CheckExportLsn(const ice::TableMetadata& bronze, ice::FileIO& io,
                             const ice::TableIdentifier& bronze_id,
                             const ice::TableIdentifier& silver_id, uint64_t lsn,
                             uint64_t* bronze_start) {
  ARROW_ASSIGN_OR_RAISE(*bronze_start, BronzeStartLsn(bronze, io));
  if (lsn < *bronze_start) {
    return arrow::Status::Invalid(
        "refusing to seed ", silver_id.ToString(), " from an export at LSN ",
        Lsn(lsn).ToString(), ": it is older than the start of Bronze's history of ",
        bronze_id.ToString(), " (its earliest cdc_commit_lsn is ",
        Lsn(*bronze_start).ToString(),
        "), so the changes committed between the two are in neither and Silver would "
        "silently miss them. Use an export taken at or after ",
        Lsn(*bronze_start).ToString(),
        ", or let `floe silver` build Silver from Bronze's own history (it does so for "
        "every table without a Silver table)");
  }
  return arrow::Status::OK();
}

// Refuses an export whose columns (by name) are not exactly Bronze's row columns.
arrow::Status CheckExportColumns(const std::vector<const ice::NestedField*>& row_fields,
                                 const arrow::Table& rows,
                                 const ice::TableIdentifier& bronze_id) {
  std::vector<std::string> missing, extra;
  std::set<std::string> bronze_names;
  for (const auto* f : row_fields) {
    bronze_names.insert(f->name);
    if (rows.schema()->GetFieldIndex(f->name) < 0) missing.push_back(f->name);
  }
  for (const auto& f : rows.schema()->fields()) {
    if (!bronze_names.contains(f->name())) extra.push_back(f->name());
  }
  if (!missing.empty() || !extra.empty()) {
    std::string what;
    if (!missing.empty()) {
      what += "Bronze column(s) missing from the export: " + Joined(missing);
    }
    if (!extra.empty()) {
      what += std::string(what.empty() ? "" : "; ") +
              "export column(s) that are not Bronze row columns: " + Joined(extra);
    }
    return arrow::Status::Invalid(
        "the export's columns do not match ", bronze_id.ToString(), ": ", what,
        ". Export exactly the source table's columns (SELECT * FROM the table), named "
        "as in Bronze (a column dropped from the source stays in Bronze: export it as "
        "a null column)");
  }
  return arrow::Status::OK();
}

// The export's columns by name, values in Bronze's types.
arrow::Result<std::map<std::string, std::shared_ptr<arrow::Array>>> ExportColumns(
    const std::vector<const ice::NestedField*>& row_fields, const arrow::Table& rows) {
  std::map<std::string, std::shared_ptr<arrow::Array>> columns;
  for (const auto* f : row_fields) {
    ARROW_ASSIGN_OR_RAISE(auto type, ice::ToArrowType(*f->type));
    auto chunked = rows.GetColumnByName(f->name);
    std::shared_ptr<arrow::Array> array;
    if (chunked->num_chunks() == 1) {
      array = chunked->chunk(0);
    } else if (chunked->num_chunks() == 0) {
      ARROW_ASSIGN_OR_RAISE(array, arrow::MakeEmptyArray(type));
    } else {
      ARROW_ASSIGN_OR_RAISE(array, arrow::Concatenate(chunked->chunks()));
    }
    if (!array->type()->Equals(*type)) {
      auto cast = cp::Cast(array, type);
      if (!cast.ok()) {
        return arrow::Status::Invalid("column `", f->name, "` of the export is ",
                                      array->type()->ToString(),
                                      ", which does not convert to Bronze's ",
                                      f->type->ToString(), ": ", cast.status().message());
      }
      array = cast->make_array();
    }
    columns[f->name] = array;
  }
  return columns;
}

// The export's key: not null, and unique.
arrow::Status CheckExportKey(
    const std::map<std::string, std::shared_ptr<arrow::Array>>& columns,
    const std::vector<std::string>& key, const arrow::Table& rows,
    const ice::TableIdentifier& bronze_id) {
  std::vector<const arrow::Array*> key_arrays;
  for (const auto& k : key) {
    auto it = columns.find(k);
    if (it == columns.end()) {
      return arrow::Status::Invalid("merge key column `", k, "` is not a column of ",
                                    bronze_id.ToString());
    }
    if (it->second->null_count() > 0) {
      return arrow::Status::Invalid("the export has rows with a null key column `", k,
                                    "`; a Silver key cannot be null");
    }
    key_arrays.push_back(it->second.get());
  }
  // Rows are named by their number, not their key: values from the source never go
  // into a message.
  std::unordered_map<std::string, int64_t> seen;
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    ARROW_ASSIGN_OR_RAISE(std::string encoded, EncodeKey(key_arrays, i));
    auto [it, added] = seen.emplace(std::move(encoded), i);
    if (!added) {
      std::string names;
      for (const std::string& k : key) names += (names.empty() ? "" : ", ") + k;
      return arrow::Status::Invalid("the export holds rows ", it->second + 1, " and ",
                                    i + 1, " with the same key (", names,
                                    "); it is not a consistent export of a table with "
                                    "that key");
    }
  }
  return arrow::Status::OK();
}

// The export's rows in Silver's schema `silver_arrow`.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> SilverRows(
    const std::shared_ptr<arrow::Schema>& silver_arrow,
    const std::map<std::string, std::shared_ptr<arrow::Array>>& columns,
    const arrow::Table& rows, uint64_t lsn) {
  arrow::ArrayVector arrays;
  for (const auto& field : silver_arrow->fields()) {
    if (field->name() == kCdcCommitLsn) {
      // The last change applied to each row is unknown: the export's LSN stands in.
      ARROW_ASSIGN_OR_RAISE(auto array, arrow::MakeArrayFromScalar(
                                            arrow::Int64Scalar(static_cast<int64_t>(lsn)),
                                            rows.num_rows()));
      arrays.push_back(array);
      continue;
    }
    auto it = columns.find(field->name());
    if (it == columns.end()) {
      ARROW_ASSIGN_OR_RAISE(auto array,
                            arrow::MakeArrayOfNull(field->type(), rows.num_rows()));
      arrays.push_back(array);
      continue;
    }
    std::shared_ptr<arrow::Array> array = it->second;
    if (!array->type()->Equals(*field->type())) {
      ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, field->type()));
      array = cast.make_array();
    }
    arrays.push_back(array);
  }
  return arrow::RecordBatch::Make(silver_arrow, rows.num_rows(), arrays);
}

}  // namespace

arrow::Result<BackfillStats> BackfillTable(ice::Catalog* catalog,
                                           std::shared_ptr<ice::FileIO> io,
                                           const ice::TableIdentifier& bronze_id,
                                           const ice::TableIdentifier& silver_id,
                                           const std::string& warehouse,
                                           const arrow::Table& rows, uint64_t lsn,
                                           const BackfillTableOptions& options) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  BackfillStats stats;
  stats.lsn = lsn;
  ARROW_ASSIGN_OR_RAISE(auto bronze_table, ice::Table::Load(catalog, io, bronze_id));
  const ice::TableMetadata bronze = bronze_table->metadata();
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    return arrow::Status::Invalid(
        bronze_id.ToString(),
        " has no primary key, so it gets no Silver table; declare the merge key in "
        "silver.keys of the pipeline file first");
  }

  // The guard: Bronze must hold every change after the export.
  ARROW_RETURN_NOT_OK(
      CheckExportLsn(bronze, *io, bronze_id, silver_id, lsn, &stats.bronze_start));

  // Columns: by name, exactly Bronze's row columns.
  std::vector<const ice::NestedField*> row_fields;
  for (const auto& f : bronze_schema.fields()) {
    if (!IsCdcColumn(f.name)) row_fields.push_back(&f);
  }
  ARROW_RETURN_NOT_OK(CheckExportColumns(row_fields, rows, bronze_id));

  // Silver's table: refuse to overwrite one unless asked.
  ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(silver_id));
  if (exists) {
    if (!options.replace) {
      return arrow::Status::Invalid(
          silver_id.ToString(),
          " already exists; pass --replace to drop it and seed it from the export "
          "(its files stay until orphan cleanup), or drop it yourself");
    }
  }

  // Values in Bronze's types, the key unique and not null.
  ARROW_ASSIGN_OR_RAISE(auto columns, ExportColumns(row_fields, rows));
  ARROW_RETURN_NOT_OK(CheckExportKey(columns, key, rows, bronze_id));

  if (exists) {
    ARROW_RETURN_NOT_OK(catalog->DropTable(silver_id));
    stats.replaced = true;
  }
  auto created =
      CreateSilverTable(catalog, io, bronze, bronze_id, silver_id, warehouse, key,
                        rows.num_rows(), options.target_file_bytes, &stats.buckets,
                        options.copy_on_write);
  if (!created.ok()) {
    if (ice::GetCatalogErrorKind(created.status()) ==
        ice::CatalogErrorKind::kAlreadyExists) {
      return arrow::Status::Invalid(silver_id.ToString(),
                                    " was created meanwhile (by `floe silver`?); stop "
                                    "it and pass --replace");
    }
    return created.status();
  }
  std::unique_ptr<ice::Table> silver = std::move(*created);
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver->schema()));
  ARROW_ASSIGN_OR_RAISE(auto batch, SilverRows(silver_arrow, columns, rows, lsn));
  auto written = WriteUpserts(*silver, batch, key);
  if (!written.ok()) {
    // Nothing committed: do not leave an empty table behind for a retry to trip on.
    ARROW_UNUSED(catalog->DropTable(silver_id));
    return written.status();
  }
  const std::vector<ice::DataFile>& files = *written;
  ice::SummaryProperties summary = {{lake::kWatermarkSummaryKey, std::to_string(lsn)}};
  if (!options.origin.empty()) summary[lake::kSeededFromSummaryKey] = options.origin;
  // One attempt: if anything committed to the new table meanwhile (a `floe silver`
  // pass filling it from Bronze), the catalog's compare-and-swap refuses this commit.
  ice::CommitOptions once;
  once.max_attempts = 1;
  auto committed = silver->AppendFiles(files, summary, once);
  if (!committed.ok()) {
    for (const auto& f : files) ARROW_UNUSED(io->Delete(f.file_path));
    return arrow::Status::IOError(
        "seeding ", silver_id.ToString(), " failed: ", committed.status().message(),
        ". If `floe silver` ran meanwhile, stop it and retry with --replace");
  }
  stats.rows = rows.num_rows();
  stats.data_files = static_cast<int32_t>(files.size());
  return stats;
}

arrow::Result<BackfillStats> BackfillFromExport(const config::PipelineConfig& config,
                                                const BackfillOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto catalog, lake::OpenPipelineCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeLocalFileIO();
  const TableNames names = NamesOf(config, options.table);
  ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(names.bronze));
  if (!exists) {
    return arrow::Status::KeyError(
        "no Bronze table ", names.bronze.ToString(), " for ", options.table.ToString(),
        "; start `floe run` with the table published first: Silver continues from "
        "Bronze's changes after the export");
  }
  ProgressReporter progress("backfill", "rows read", options.progress);
  ARROW_ASSIGN_OR_RAISE(auto rows, ReadParquetExport(options.parquet_path, &progress));
  progress.SetDetail("sorting and writing Silver");
  BackfillTableOptions table_options;
  table_options.key = names.key;
  table_options.replace = options.replace;
  table_options.target_file_bytes = config.silver.target_file_size;
  table_options.copy_on_write =
      config.silver.WriteModeOf(options.table) == config::SilverWriteMode::kCopyOnWrite;
  table_options.origin = options.parquet_path + " at " + Lsn(options.lsn).ToString();
  auto stats = BackfillTable(catalog.get(), io, names.bronze, names.silver,
                             config.warehouse, *rows, options.lsn, table_options);
  progress.SetDetail(stats.ok() ? "written" : "failed");
  progress.Finish();
  return stats;
}

}  // namespace floe::silver
