// Creates and appends to Iceberg tables with floe's Table so the integration tests
// can read the result with PyIceberg and DuckDB. Rows i have id = i, name =
// "name-<i>", amount = i * 1.5 and ts = 2024-01-01T00:00:00Z + i hours.
#include <unistd.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"

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
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  arrow::DoubleBuilder amount;
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                             arrow::default_memory_pool());
  for (int64_t i : ids) {
    ARROW_RETURN_NOT_OK(id.Append(i));
    ARROW_RETURN_NOT_OK(name.Append("name-" + std::to_string(i)));
    ARROW_RETURN_NOT_OK(amount.Append(static_cast<double>(i) * 1.5));
    ARROW_RETURN_NOT_OK(ts.Append(kBaseMicros + i * kHourMicros));
  }
  std::vector<std::shared_ptr<arrow::Array>> cols(4);
  ARROW_RETURN_NOT_OK(id.Finish(&cols[0]));
  ARROW_RETURN_NOT_OK(name.Finish(&cols[1]));
  ARROW_RETURN_NOT_OK(amount.Finish(&cols[2]));
  ARROW_RETURN_NOT_OK(ts.Finish(&cols[3]));
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(ids.size()), cols);
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
  } else {
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
  }
  std::cout << out.dump() << "\n";
  return 0;
}
