// Creates, appends to, deletes from, compacts, evolves and cleans up Iceberg tables
// with floe's Table so the integration tests can read the result with PyIceberg
// and DuckDB. Rows i have id = i, name = "name-<i>", amount = i * 1.5 and ts =
// 2024-01-01T00:00:00Z + i hours; columns added later hold i * 10 (int / long),
// i * 0.5 (double) or "note-<i>" (string).
#include <unistd.h>

#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_operations.h"

namespace {

using namespace floe::iceberg;

constexpr int64_t kBaseMicros = 1704067200LL * 1000000;  // 2024-01-01T00:00:00Z
constexpr int64_t kHourMicros = 3600LL * 1000000;

TableIdentifier ParseId(const std::string& text) {
  TableIdentifier id;
  size_t start = 0;
  while (true) {
    size_t dot = text.find('.', start);
    if (dot == std::string::npos) {
      id.name = text.substr(start);
      return id;
    }
    id.ns.push_back(text.substr(start, dot - start));
    start = dot + 1;
  }
}

arrow::Result<Schema> SampleSchema() {
  return Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                          NestedField::Optional(2, "name", Type::String()),
                          NestedField::Optional(3, "amount", Type::Double()),
                          NestedField::Optional(4, "ts", Type::TimestampTz())});
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> Rows(const Table& table,
                                                        const std::vector<int64_t>& ids) {
  ARROW_ASSIGN_OR_RAISE(auto schema, ToArrowSchema(table.schema()));
  std::vector<std::shared_ptr<arrow::Array>> cols;
  for (const NestedField& field : table.schema().fields()) {
    std::shared_ptr<arrow::Array> col;
    const TypeId type = field.type->id();
    if (field.id == 1 || (field.id > 4 && type == TypeId::kLong)) {
      arrow::Int64Builder b;
      for (int64_t i : ids) ARROW_RETURN_NOT_OK(b.Append(field.id == 1 ? i : i * 10));
      ARROW_RETURN_NOT_OK(b.Finish(&col));
    } else if (field.id == 2 || (field.id > 4 && type == TypeId::kString)) {
      arrow::StringBuilder b;
      for (int64_t i : ids) {
        ARROW_RETURN_NOT_OK(
            b.Append((field.id == 2 ? "name-" : "note-") + std::to_string(i)));
      }
      ARROW_RETURN_NOT_OK(b.Finish(&col));
    } else if (field.id == 3 || (field.id > 4 && type == TypeId::kDouble)) {
      arrow::DoubleBuilder b;
      for (int64_t i : ids) {
        ARROW_RETURN_NOT_OK(
            b.Append(static_cast<double>(i) * (field.id == 3 ? 1.5 : 0.5)));
      }
      ARROW_RETURN_NOT_OK(b.Finish(&col));
    } else if (field.id == 4) {
      arrow::TimestampBuilder b(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                arrow::default_memory_pool());
      for (int64_t i : ids) ARROW_RETURN_NOT_OK(b.Append(kBaseMicros + i * kHourMicros));
      ARROW_RETURN_NOT_OK(b.Finish(&col));
    } else if (type == TypeId::kInt) {
      arrow::Int32Builder b;
      for (int64_t i : ids) ARROW_RETURN_NOT_OK(b.Append(static_cast<int32_t>(i * 10)));
      ARROW_RETURN_NOT_OK(b.Finish(&col));
    } else {
      return arrow::Status::NotImplemented("table_tool cannot fill column ", field.name);
    }
    cols.push_back(std::move(col));
  }
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(ids.size()), cols);
}

// Every row of a Parquet file, as Arrow reads it (field ids kept in the metadata).
arrow::Result<std::shared_ptr<arrow::Table>> ReadParquet(FileIO& io,
                                                         const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(location));
  ARROW_ASSIGN_OR_RAISE(auto reader,
                        parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
  return reader->ReadTable();
}

// Positions deleted by the position delete files among `files`, by data file.
arrow::Result<std::map<std::string, std::set<int64_t>>> DeletedPositions(
    FileIO& io, const std::vector<LiveFile>& files) {
  std::map<std::string, std::set<int64_t>> deleted;
  for (const auto& f : files) {
    const DataFile& file = f.entry.data_file;
    if (file.content == DataFileContent::kData) continue;
    if (file.content != DataFileContent::kPositionDeletes) {
      return arrow::Status::NotImplemented("equality deletes in ", file.file_path);
    }
    ARROW_ASSIGN_OR_RAISE(auto rows, ReadParquet(io, file.file_path));
    ARROW_ASSIGN_OR_RAISE(auto combined, rows->CombineChunks());
    auto paths = std::static_pointer_cast<arrow::StringArray>(
        combined->GetColumnByName("file_path")->chunk(0));
    auto pos = std::static_pointer_cast<arrow::Int64Array>(
        combined->GetColumnByName("pos")->chunk(0));
    for (int64_t i = 0; i < combined->num_rows(); ++i) {
      deleted[paths->GetString(i)].insert(pos->Value(i));
    }
  }
  return deleted;
}

// Deletes the rows with the given ids: one position delete file per partition,
// committed as one row delta.
arrow::Result<nlohmann::json> DeleteRows(Table& table, const std::set<int64_t>& ids) {
  ARROW_ASSIGN_OR_RAISE(auto files, table.LiveFiles());
  const std::optional<int64_t> base = table.metadata().current_snapshot_id;
  std::map<std::string, std::pair<PartitionTuple, std::vector<PositionDelete>>> groups;
  RowDeltaRequest request;
  request.validate_from_snapshot_id = base;
  int64_t count = 0;
  for (const auto& f : files) {
    const DataFile& file = f.entry.data_file;
    if (file.content != DataFileContent::kData) continue;
    ARROW_ASSIGN_OR_RAISE(auto rows, ReadParquet(table.io(), file.file_path));
    auto column = rows->GetColumnByName("id");
    if (column == nullptr) return arrow::Status::Invalid(file.file_path, " has no id");
    int64_t pos = 0;
    bool referenced = false;
    for (const auto& chunk : column->chunks()) {
      auto values = std::static_pointer_cast<arrow::Int64Array>(chunk);
      for (int64_t i = 0; i < values->length(); ++i, ++pos) {
        if (!ids.contains(values->Value(i))) continue;
        auto& group = groups[PartitionPath(table.spec(), table.schema(), file.partition)];
        group.first = file.partition;
        group.second.push_back({file.file_path, pos});
        referenced = true;
        ++count;
      }
    }
    if (referenced) request.referenced_data_files.push_back(file.file_path);
  }
  nlohmann::json out;
  out["deleted_rows"] = count;
  if (groups.empty()) return out;
  for (auto& [key, group] : groups) {
    ARROW_ASSIGN_OR_RAISE(DataFile deletes,
                          WritePositionDeleteFile(table, group.first, group.second));
    out["delete_files"].push_back(deletes.file_path);
    request.add_delete_files.push_back(std::move(deletes));
  }
  ARROW_ASSIGN_OR_RAISE(Snapshot snap, table.RowDelta(request));
  out["snapshot_id"] = snap.snapshot_id;
  return out;
}

// Rewrites every live file into one data file per partition, without the deleted
// rows, as one replace snapshot.
arrow::Result<nlohmann::json> Compact(Table& table) {
  ARROW_ASSIGN_OR_RAISE(auto files, table.LiveFiles());
  ARROW_ASSIGN_OR_RAISE(auto deleted, DeletedPositions(table.io(), files));
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(table.schema()));
  std::map<std::string,
           std::pair<PartitionTuple, std::vector<std::shared_ptr<arrow::Table>>>>
      groups;
  std::vector<DataFile> removed;
  for (const auto& f : files) {
    const DataFile& file = f.entry.data_file;
    removed.push_back(file);
    if (file.content != DataFileContent::kData) continue;
    ARROW_ASSIGN_OR_RAISE(auto rows, ReadParquet(table.io(), file.file_path));
    if (rows->num_columns() != arrow_schema->num_fields()) {
      return arrow::Status::NotImplemented("compacting files of an older schema");
    }
    ARROW_ASSIGN_OR_RAISE(rows, rows->ReplaceSchemaMetadata(nullptr)->CombineChunks());
    auto& group = groups[PartitionPath(table.spec(), table.schema(), file.partition)];
    group.first = file.partition;
    const auto& gone = deleted[file.file_path];
    int64_t run_start = 0;
    for (int64_t pos = 0; pos <= rows->num_rows(); ++pos) {
      if (pos == rows->num_rows() || gone.contains(pos)) {
        if (pos > run_start)
          group.second.push_back(rows->Slice(run_start, pos - run_start));
        run_start = pos + 1;
      }
    }
  }
  std::vector<DataFile> added;
  for (auto& [key, group] : groups) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    for (const auto& part : group.second) {
      arrow::TableBatchReader reader(*part);
      std::shared_ptr<arrow::RecordBatch> batch;
      while (true) {
        ARROW_RETURN_NOT_OK(reader.ReadNext(&batch));
        if (!batch) break;
        ARROW_ASSIGN_OR_RAISE(batch, batch->ReplaceSchema(arrow_schema));
        batches.push_back(batch);
      }
    }
    if (batches.empty()) continue;
    ARROW_ASSIGN_OR_RAISE(DataFile file, table.WriteDataFile(batches, group.first));
    added.push_back(std::move(file));
  }
  nlohmann::json out;
  out["removed_files"] = removed.size();
  out["added_files"] = added.size();
  if (removed.empty()) return out;
  ARROW_ASSIGN_OR_RAISE(Snapshot snap, table.RewriteFiles(removed, added));
  out["snapshot_id"] = snap.snapshot_id;
  return out;
}

// Applies `--add-column name:type`, `--rename old=new`, `--drop name` and
// `--widen name:type` in that order as one schema change.
arrow::Status Evolve(Table& table, const std::vector<std::string>& add,
                     const std::vector<std::string>& rename,
                     const std::vector<std::string>& drop,
                     const std::vector<std::string>& widen) {
  return table.UpdateMetadata([&](const TableMetadata& base,
                                  TableMetadataBuilder* builder) -> arrow::Status {
    SchemaChange change{*base.CurrentSchema(), base.last_column_id};
    for (const auto& spec : add) {
      auto colon = spec.find(':');
      ARROW_ASSIGN_OR_RAISE(auto type, Type::FromPrimitiveString(spec.substr(colon + 1)));
      ARROW_ASSIGN_OR_RAISE(change, AddColumn(change.schema, change.last_column_id, "",
                                              spec.substr(0, colon), type));
    }
    for (const auto& spec : rename) {
      auto eq = spec.find('=');
      ARROW_ASSIGN_OR_RAISE(
          change, RenameColumn(change.schema, change.last_column_id, spec.substr(0, eq),
                               spec.substr(eq + 1)));
    }
    for (const auto& name : drop) {
      ARROW_ASSIGN_OR_RAISE(change,
                            DeleteColumn(change.schema, change.last_column_id, name));
    }
    for (const auto& spec : widen) {
      auto colon = spec.find(':');
      ARROW_ASSIGN_OR_RAISE(auto type, Type::FromPrimitiveString(spec.substr(colon + 1)));
      ARROW_ASSIGN_OR_RAISE(change, UpdateColumnType(change.schema, change.last_column_id,
                                                     spec.substr(0, colon), type));
    }
    builder->AddSchema(change.schema).SetCurrentSchema(kLastAdded);
    return arrow::Status::OK();
  });
}

std::vector<int64_t> ParseIds(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    ids.push_back(std::stoll(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return ids;
}

// Writes rows [start, start + rows) as data files (split by partition, then into
// `files` chunks) and commits them as one append.
arrow::Result<Snapshot> Append(Table& table, int64_t start, int64_t rows, int files,
                               const SummaryProperties& summary, bool crash) {
  std::map<std::string, std::pair<PartitionTuple, std::vector<int64_t>>> groups;
  for (int64_t i = start; i < start + rows; ++i) {
    std::unordered_map<int32_t, std::optional<Literal>> source{
        {1, Literal(i)},
        {2, Literal("name-" + std::to_string(i))},
        {3, Literal(static_cast<double>(i) * 1.5)},
        {4, Literal(int64_t{kBaseMicros + i * kHourMicros})}};
    ARROW_ASSIGN_OR_RAISE(PartitionTuple tuple,
                          table.spec().Partition(table.schema(), source));
    std::string key = PartitionPath(table.spec(), table.schema(), tuple);
    auto& group = groups[key];
    group.first = tuple;
    group.second.push_back(i);
  }
  std::vector<DataFile> written;
  for (auto& [key, group] : groups) {
    const auto& ids = group.second;
    const size_t per_file = (ids.size() + files - 1) / files;
    for (size_t off = 0; off < ids.size(); off += per_file) {
      std::vector<int64_t> chunk(ids.begin() + off,
                                 ids.begin() + std::min(ids.size(), off + per_file));
      ARROW_ASSIGN_OR_RAISE(auto batch, Rows(table, chunk));
      ARROW_ASSIGN_OR_RAISE(DataFile file, table.WriteDataFile({batch}, group.first));
      written.push_back(std::move(file));
    }
  }
  if (crash) _exit(9);  // as if killed between writing files and committing
  CommitOptions options;
  options.max_attempts = 200;
  options.min_backoff_ms = 2;
  options.max_backoff_ms = 200;
  return table.AppendFiles(written, summary, options);
}

int Fail(const arrow::Status& st) {
  std::cerr << "table_tool: " << st.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe Iceberg table test tool"};
  std::string db, warehouse, ident;
  app.add_option("--db", db, "SQLite catalog file")->required();
  app.add_option("--warehouse", warehouse, "warehouse location (file:///...)")
      ->required();
  app.require_subcommand(1);

  std::vector<std::string> partitions, properties, summary_kv;
  int64_t start = 0, rows = 100;
  int files = 1, commits = 1;
  bool crash = false;
  auto* create = app.add_subcommand("create", "create the sample table");
  create->add_option("table", ident)->required();
  create->add_option("--partition", partitions,
                     "day:ts, bucket:N:id, identity:name, ...");
  create->add_option("--property", properties, "key=value table property");
  auto* append = app.add_subcommand("append", "append rows in one commit");
  append->add_option("table", ident)->required();
  append->add_option("--start", start);
  append->add_option("--rows", rows);
  append->add_option("--files", files)->check(CLI::PositiveNumber);
  append->add_option("--summary", summary_kv, "key=value snapshot summary entry");
  append->add_flag("--crash-before-commit", crash);
  auto* loop = app.add_subcommand("append-loop", "append one row per commit, N times");
  loop->add_option("table", ident)->required();
  loop->add_option("--start", start);
  loop->add_option("--commits", commits);

  std::string ids_text;
  auto* del =
      app.add_subcommand("delete-rows", "position-delete the rows with these ids");
  del->add_option("table", ident)->required();
  del->add_option("--ids", ids_text, "comma-separated ids")->required();
  auto* compact = app.add_subcommand("compact", "rewrite all files, applying deletes");
  compact->add_option("table", ident)->required();
  int64_t older_than_ms = 0;
  int retain = 1;
  auto* expire = app.add_subcommand("expire", "expire snapshots and delete their files");
  expire->add_option("table", ident)->required();
  expire->add_option("--older-than-ms", older_than_ms)->required();
  expire->add_option("--retain", retain);
  bool dry_run = false;
  auto* orphans = app.add_subcommand("remove-orphans", "delete unreferenced files");
  orphans->add_option("table", ident)->required();
  orphans->add_option("--older-than-ms", older_than_ms)->required();
  orphans->add_flag("--dry-run", dry_run);
  std::vector<std::string> add_columns, renames, drops, widens;
  auto* evolve = app.add_subcommand("evolve", "change the schema");
  evolve->add_option("table", ident)->required();
  evolve->add_option("--add-column", add_columns, "name:type (optional column)");
  evolve->add_option("--rename", renames, "old=new");
  evolve->add_option("--drop", drops, "column name");
  evolve->add_option("--widen", widens, "name:type (int->long, float->double)");
  CLI11_PARSE(app, argc, argv);

  auto conn = OpenSqlite(db);
  if (!conn.ok()) return Fail(conn.status());
  auto catalog = SqlCatalog::Open("floe", std::move(*conn));
  if (!catalog.ok()) return Fail(catalog.status());
  auto io = MakeLocalFileIO();
  const TableIdentifier id = ParseId(ident);
  nlohmann::json out;

  if (*create) {
    auto schema = SampleSchema();
    if (!schema.ok()) return Fail(schema.status());
    PartitionSpecBuilder builder(*schema, 0, kUnpartitionedLastPartitionId);
    for (const auto& p : partitions) {
      std::vector<std::string> parts;
      size_t s = 0;
      while (true) {
        size_t c = p.find(':', s);
        parts.push_back(p.substr(s, c - s));
        if (c == std::string::npos) break;
        s = c + 1;
      }
      if (parts[0] == "day" && parts.size() == 2) {
        builder.Day(parts[1]);
      } else if (parts[0] == "bucket" && parts.size() == 3) {
        builder.Bucket(parts[2], std::stoi(parts[1]));
      } else if (parts[0] == "identity" && parts.size() == 2) {
        builder.Identity(parts[1]);
      } else {
        return Fail(arrow::Status::Invalid("bad --partition ", p));
      }
    }
    auto spec = builder.Build();
    if (!spec.ok()) return Fail(spec.status());
    std::map<std::string, std::string> props;
    for (const auto& kv : properties) {
      auto eq = kv.find('=');
      props[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (auto st = (*catalog)->EnsureNamespace(id.ns); !st.ok()) return Fail(st);
    auto table =
        Table::Create(catalog->get(), io, id, *schema, *spec, SortOrder::Unsorted(),
                      Table::DefaultLocation(warehouse, id), props);
    if (!table.ok()) return Fail(table.status());
    out["metadata_location"] = (*table)->metadata_location();
  } else if (*append || *loop) {
    auto table = Table::Load(catalog->get(), io, id);
    if (!table.ok()) return Fail(table.status());
    SummaryProperties summary;
    for (const auto& kv : summary_kv) {
      auto eq = kv.find('=');
      summary[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    const int n = *loop ? commits : 1;
    for (int c = 0; c < n; ++c) {
      auto snap = *loop ? Append(**table, start + c, 1, 1, summary, false)
                        : Append(**table, start, rows, files, summary, crash);
      if (!snap.ok()) return Fail(snap.status());
      out["snapshot_id"] = snap->snapshot_id;
    }
    out["metadata_location"] = (*table)->metadata_location();
  } else {
    auto loaded = Table::Load(catalog->get(), io, id);
    if (!loaded.ok()) return Fail(loaded.status());
    Table& table = **loaded;
    try {
      if (*del) {
        auto ids = ParseIds(ids_text);
        auto result = DeleteRows(table, std::set<int64_t>(ids.begin(), ids.end()));
        if (!result.ok()) return Fail(result.status());
        out = *result;
      } else if (*compact) {
        auto result = Compact(table);
        if (!result.ok()) return Fail(result.status());
        out = *result;
      } else if (*expire) {
        ExpireSnapshotsOptions options;
        options.older_than_ms = older_than_ms;
        options.retain_last = retain;
        auto result = ExpireSnapshots(table, options);
        if (!result.ok()) return Fail(result.status());
        out["expired_snapshot_ids"] = result->expired_snapshot_ids;
        out["deleted_manifest_lists"] = result->deleted_manifest_lists;
        out["deleted_manifests"] = result->deleted_manifests;
        out["deleted_data_files"] = result->deleted_data_files;
        out["deleted_delete_files"] = result->deleted_delete_files;
      } else if (*orphans) {
        RemoveOrphanFilesOptions options;
        options.older_than_ms = older_than_ms;
        options.dry_run = dry_run;
        auto result = RemoveOrphanFiles(table, options);
        if (!result.ok()) return Fail(result.status());
        out["removed"] = *result;
      } else if (*evolve) {
        if (auto st = Evolve(table, add_columns, renames, drops, widens); !st.ok()) {
          return Fail(st);
        }
        out["schema_id"] = table.metadata().current_schema_id;
      }
    } catch (const parquet::ParquetException& e) {
      return Fail(arrow::Status::IOError(e.what()));
    }
    out["metadata_location"] = table.metadata_location();
  }
  std::cout << out.dump() << "\n";
  return 0;
}
