// Scans an Iceberg table with floe's reader so the integration tests can compare the
// rows with PyIceberg's and DuckDB's. Prints one JSON object per row (timestamps as
// microseconds, dates as days, decimals as text) and a trailer line
// `{"planned_files": N, ...}`; `--arrow-out` also writes the rows as an Arrow IPC
// file, so a test can compare values with their exact types.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"

namespace {

using namespace floe::iceberg;

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

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// 'text' -> string; a number with '.' or 'e' -> double; true/false; else int64.
arrow::Result<Literal> ParseValue(const std::string& text) {
  if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
    return Literal(text.substr(1, text.size() - 2));
  }
  if (text == "true" || text == "false") return Literal(text == "true");
  try {
    if (text.find_first_of(".eE") != std::string::npos) return Literal(std::stod(text));
    return Literal(static_cast<int64_t>(std::stoll(text)));
  } catch (...) {
    return arrow::Status::Invalid("cannot read value '", text, "'");
  }
}

// One predicate: `col op value`, `col is [not] null`, `col [not] in (v, ...)`.
arrow::Result<ExpressionPtr> ParsePredicate(const std::string& text) {
  if (text.starts_with("not ")) {
    ARROW_ASSIGN_OR_RAISE(auto child, ParsePredicate(Trim(text.substr(4))));
    return Not(child);
  }
  const size_t sp = text.find(' ');
  if (sp == std::string::npos) return arrow::Status::Invalid("bad filter '", text, "'");
  const std::string col = text.substr(0, sp);
  std::string rest = Trim(text.substr(sp));
  if (rest == "is null") return IsNull(col);
  if (rest == "is not null") return NotNull(col);
  for (std::string_view kw : {"not in ", "in "}) {
    if (rest.starts_with(kw)) {
      std::string list = Trim(rest.substr(kw.size()));
      if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
        return arrow::Status::Invalid("bad IN list '", list, "'");
      }
      std::vector<Literal> values;
      size_t start = 1;
      while (start < list.size() - 1) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size() - 1;
        ARROW_ASSIGN_OR_RAISE(auto v,
                              ParseValue(Trim(list.substr(start, comma - start))));
        values.push_back(std::move(v));
        start = comma + 1;
      }
      return kw == "in " ? In(col, values) : NotIn(col, values);
    }
  }
  for (std::string_view op : {"<=", ">=", "!=", "=", "<", ">"}) {
    if (rest.starts_with(op)) {
      ARROW_ASSIGN_OR_RAISE(auto v, ParseValue(Trim(rest.substr(op.size()))));
      if (op == "=") return Equal(col, v);
      if (op == "!=") return NotEqual(col, v);
      if (op == "<") return LessThan(col, v);
      if (op == "<=") return LessThanOrEqual(col, v);
      if (op == ">") return GreaterThan(col, v);
      return GreaterThanOrEqual(col, v);
    }
  }
  return arrow::Status::Invalid("bad filter '", text, "'");
}

// Predicates joined by ` and ` / ` or ` (left to right, no parentheses).
arrow::Result<ExpressionPtr> ParseFilter(const std::string& text) {
  ExpressionPtr result;
  bool is_or = false;
  size_t start = 0;
  while (true) {
    size_t and_at = text.find(" and ", start);
    size_t or_at = text.find(" or ", start);
    size_t end = std::min(and_at, or_at);
    ARROW_ASSIGN_OR_RAISE(auto pred,
                          ParsePredicate(Trim(text.substr(start, end - start))));
    result = result == nullptr ? pred : (is_or ? Or(result, pred) : And(result, pred));
    if (end == std::string::npos) return result;
    is_or = end == or_at;
    start = end + (is_or ? 4 : 5);
  }
}

nlohmann::json CellToJson(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(array).Value(i);
    case arrow::Type::INT32:
      return static_cast<const arrow::Int32Array&>(array).Value(i);
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(array).Value(i);
    case arrow::Type::FLOAT:
      return static_cast<const arrow::FloatArray&>(array).Value(i);
    case arrow::Type::DOUBLE:
      return static_cast<const arrow::DoubleArray&>(array).Value(i);
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
    case arrow::Type::DATE32:
      return static_cast<const arrow::Date32Array&>(array).Value(i);
    case arrow::Type::TIMESTAMP:
      return static_cast<const arrow::TimestampArray&>(array).Value(i);
    case arrow::Type::TIME64:
      return static_cast<const arrow::Time64Array&>(array).Value(i);
    default: {
      auto scalar = array.GetScalar(i);
      return scalar.ok() ? (*scalar)->ToString() : "?";
    }
  }
}

int Fail(const arrow::Status& st) {
  std::cerr << "scan_tool: " << st.ToString() << "\n";
  return 1;
}

arrow::Status Run(const std::string& db, const std::string& catalog_name,
                  const std::string& ident, const std::string& filter,
                  std::optional<int64_t> snapshot_id, const std::string& columns,
                  const std::string& arrow_out, bool quiet) {
  ARROW_ASSIGN_OR_RAISE(auto conn, OpenSqlite(db));
  ARROW_ASSIGN_OR_RAISE(auto catalog, SqlCatalog::Open(catalog_name, std::move(conn)));
  ARROW_ASSIGN_OR_RAISE(auto table,
                        Table::Load(catalog.get(), MakeLocalFileIO(), ParseId(ident)));
  ScanOptions options;
  options.snapshot_id = snapshot_id;
  if (!filter.empty()) {
    ARROW_ASSIGN_OR_RAISE(options.filter, ParseFilter(filter));
  }
  if (!columns.empty()) {
    std::vector<std::string> names;
    size_t start = 0;
    while (true) {
      size_t comma = columns.find(',', start);
      names.push_back(Trim(columns.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    options.columns = names;
  }
  ARROW_ASSIGN_OR_RAISE(ScanPlan plan, PlanScan(*table, options));
  nlohmann::json trailer{
      {"planned_files", plan.tasks.size()},
      {"manifests", plan.stats.manifests},
      {"manifests_skipped", plan.stats.manifests_skipped},
      {"data_files", plan.stats.data_files},
      {"files_skipped_by_partition", plan.stats.files_skipped_by_partition},
      {"files_skipped_by_metrics", plan.stats.files_skipped_by_metrics},
      {"delete_files", plan.stats.delete_files}};
  int64_t deletes_applied = 0;
  for (const auto& t : plan.tasks) deletes_applied += t.delete_files.size();
  trailer["task_delete_files"] = deletes_applied;
  ARROW_ASSIGN_OR_RAISE(auto reader, ScanPlanBatches(table->io(), std::move(plan)));
  ARROW_ASSIGN_OR_RAISE(auto result, reader->ToTable());
  if (!quiet) {
    for (const auto& batch_or : arrow::TableBatchReader(*result)) {
      ARROW_ASSIGN_OR_RAISE(auto batch, batch_or);
      for (int64_t r = 0; r < batch->num_rows(); ++r) {
        nlohmann::json row = nlohmann::json::object();
        for (int c = 0; c < batch->num_columns(); ++c) {
          row[batch->schema()->field(c)->name()] = CellToJson(*batch->column(c), r);
        }
        std::cout << row.dump() << "\n";
      }
    }
  }
  if (!arrow_out.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto out, arrow::io::FileOutputStream::Open(arrow_out));
    ARROW_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeFileWriter(out, result->schema()));
    ARROW_RETURN_NOT_OK(writer->WriteTable(*result));
    ARROW_RETURN_NOT_OK(writer->Close());
    ARROW_RETURN_NOT_OK(out->Close());
  }
  trailer["rows"] = result->num_rows();
  std::cout << trailer.dump() << "\n";
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe Iceberg scan test tool"};
  std::string db, catalog_name = "floe", ident, filter, columns, arrow_out;
  std::optional<int64_t> snapshot_id;
  bool quiet = false;
  app.add_option("--db", db, "SQLite catalog file")->required();
  app.add_option("--catalog-name", catalog_name, "catalog name (default floe)");
  app.add_option("table", ident, "namespace.table")->required();
  app.add_option("--filter", filter, "e.g. \"id >= 10 and name = 'x'\"");
  app.add_option("--snapshot-id", snapshot_id);
  app.add_option("--columns", columns, "a,b,c");
  app.add_option("--arrow-out", arrow_out, "also write the rows as an Arrow IPC file");
  app.add_flag("--quiet", quiet, "print only the trailer line");
  CLI11_PARSE(app, argc, argv);
  auto st = Run(db, catalog_name, ident, filter, snapshot_id, columns, arrow_out, quiet);
  if (!st.ok()) return Fail(st);
  return 0;
}
