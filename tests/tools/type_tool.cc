// Converts a whole Postgres table with floe's type mapping so integration tests can
// check every converter against what the server itself renders: resolves the
// columns' types from the catalog, runs a text-format SELECT, feeds every value to
// the column's converter, and prints one JSON document: the columns (Postgres type,
// Arrow type, converter), the rows read back from the Arrow arrays, and the
// conversion issues. In the rows, decimals are strings, binary is lowercase hex,
// dates / times / timestamps are ISO 8601 strings (astronomical years, `-0043` for
// 44 BC; a `Z` suffix for timestamptz), non-finite floats are "NaN" / "Infinity" /
// "-Infinity", intervals and composites are objects, arrays are lists.
// Exit codes: 0 done, 2 bad arguments, 3 floe error (printed as {"error": ...}).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/util/decimal.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/type_mapping.h"
#include "arrow_json.h"

namespace {

using namespace floe::postgres;
using floe_tools::Json;
using floe_tools::ValueJson;

arrow::Status Run(const std::string& conninfo, const std::string& table,
                  const std::string& order_by) {
  ARROW_ASSIGN_OR_RAISE(auto conn, PgConnection::Connect(conninfo));
  ARROW_ASSIGN_OR_RAISE(
      auto relname, conn->Query("SELECT $1::regclass::oid, $1::regclass::text", {table}));
  const std::string relid = *relname[0][0];
  const std::string quoted_table = *relname[0][1];
  ARROW_ASSIGN_OR_RAISE(
      auto attrs,
      conn->Query(
          "SELECT attname, atttypid, atttypmod FROM pg_catalog.pg_attribute "
          "WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
          {relid}));
  PgTypeResolver resolver(conn.get());
  Json columns = Json::array();
  std::vector<ColumnConverter> converters;
  std::string select_list;
  for (const PgRow& a : attrs) {
    const std::string name = *a[0];
    const Oid oid = static_cast<Oid>(std::stoul(*a[1]));
    const int32_t typmod = std::stoi(*a[2]);
    ARROW_ASSIGN_OR_RAISE(PgTypeInfo type, resolver.Resolve(oid, typmod));
    ColumnMapping mapping = MapType(type);
    columns.push_back(
        Json{{"name", name},
             {"pg_type", type.name},
             {"kind", std::string(PgTypeKindName(type.kind))},
             {"arrow_type", mapping.type->ToString()},
             {"converter", std::string(ConverterKindName(mapping.converter))},
             {"notes", mapping.notes}});
    converters.emplace_back(name, std::move(mapping));
    ARROW_ASSIGN_OR_RAISE(std::string quoted, conn->QuoteIdentifier(name));
    select_list += (select_list.empty() ? "" : ", ") + quoted;
  }
  std::string sql = "SELECT " + select_list + " FROM " + quoted_table;
  if (!order_by.empty()) {
    ARROW_ASSIGN_OR_RAISE(std::string quoted, conn->QuoteIdentifier(order_by));
    sql += " ORDER BY " + quoted;
  }
  ARROW_ASSIGN_OR_RAISE(auto rows, conn->Query(sql));

  std::vector<std::unique_ptr<arrow::ArrayBuilder>> builders;
  for (const auto& c : converters) {
    ARROW_ASSIGN_OR_RAISE(auto b, c.MakeBuilder());
    builders.push_back(std::move(b));
  }
  Json issues = Json::array();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < converters.size(); ++c) {
      std::vector<ConversionIssue> found;
      if (rows[r][c]) {
        ARROW_RETURN_NOT_OK(converters[c].Append(*rows[r][c], builders[c].get(), &found));
      } else {
        ARROW_RETURN_NOT_OK(converters[c].AppendNull(builders[c].get()));
      }
      for (const auto& issue : found) {
        issues.push_back(Json{{"row", r},
                              {"column", issue.column},
                              {"raw", issue.raw_text},
                              {"reason", std::string(IssueReasonName(issue.reason))},
                              {"detail", issue.detail}});
      }
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (auto& b : builders) {
    ARROW_ASSIGN_OR_RAISE(auto a, b->Finish());
    ARROW_RETURN_NOT_OK(a->ValidateFull());
    arrays.push_back(std::move(a));
  }
  Json out_rows = Json::array();
  for (size_t r = 0; r < rows.size(); ++r) {
    Json row = Json::object();
    for (size_t c = 0; c < converters.size(); ++c) {
      row[converters[c].column_name()] = ValueJson(*arrays[c], static_cast<int64_t>(r));
    }
    out_rows.push_back(std::move(row));
  }
  Json doc{{"columns", columns}, {"rows", out_rows}, {"issues", issues}};
  std::cout << doc.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Convert a table with floe's Postgres type mapping and print it as JSON"};
  std::string conninfo;
  std::string table;
  std::string order_by;
  app.add_option("--conninfo", conninfo, "libpq conninfo")->required();
  app.add_option("--table", table, "table name (as regclass text)")->required();
  app.add_option("--order-by", order_by, "column to order rows by");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  arrow::Status st = Run(conninfo, table, order_by);
  if (!st.ok()) {
    std::cout << Json{{"error", st.ToString()}}.dump() << "\n";
    return 3;
  }
  return 0;
}
