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

namespace {

using namespace floe::postgres;
using Json = nlohmann::ordered_json;

std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Days since 1970-01-01 -> proleptic Gregorian date with an astronomical year.
void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

std::string IsoDate(int64_t days) {
  int64_t y = 0, m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%04" PRId64 "-%02" PRId64 "-%02" PRId64,
                y < 0 ? "-" : "", y < 0 ? -y : y, m, d);
  return buf;
}

std::string IsoTime(int64_t micros) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%06" PRId64,
                micros / 3'600'000'000, micros / 60'000'000 % 60, micros / 1'000'000 % 60,
                micros % 1'000'000);
  return buf;
}

std::string IsoTimestamp(int64_t micros, bool utc) {
  const int64_t day = 86'400'000'000;
  const int64_t days = FloorDiv(micros, day);
  return IsoDate(days) + "T" + IsoTime(micros - days * day) + (utc ? "Z" : "");
}

Json FloatJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

Json ValueJson(const arrow::Array& a, int64_t i) {
  if (a.IsNull(i)) return nullptr;
  switch (a.type_id()) {
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(a).Value(i);
    case arrow::Type::INT16:
      return static_cast<const arrow::Int16Array&>(a).Value(i);
    case arrow::Type::INT32:
      return static_cast<const arrow::Int32Array&>(a).Value(i);
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(a).Value(i);
    case arrow::Type::FLOAT:
      return FloatJson(static_cast<const arrow::FloatArray&>(a).Value(i));
    case arrow::Type::DOUBLE:
      return FloatJson(static_cast<const arrow::DoubleArray&>(a).Value(i));
    case arrow::Type::DECIMAL128: {
      const auto& t = static_cast<const arrow::Decimal128Type&>(*a.type());
      return arrow::Decimal128(static_cast<const arrow::Decimal128Array&>(a).GetValue(i))
          .ToString(t.scale());
    }
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(a).GetView(i));
    case arrow::Type::BINARY:
      return Hex(static_cast<const arrow::BinaryArray&>(a).GetView(i));
    case arrow::Type::FIXED_SIZE_BINARY:
      return Hex(static_cast<const arrow::FixedSizeBinaryArray&>(a).GetView(i));
    case arrow::Type::DATE32:
      return IsoDate(static_cast<const arrow::Date32Array&>(a).Value(i));
    case arrow::Type::TIME64:
      return IsoTime(static_cast<const arrow::Time64Array&>(a).Value(i));
    case arrow::Type::TIMESTAMP: {
      const auto& t = static_cast<const arrow::TimestampType&>(*a.type());
      return IsoTimestamp(static_cast<const arrow::TimestampArray&>(a).Value(i),
                          !t.timezone().empty());
    }
    case arrow::Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(a);
      Json out = Json::array();
      for (int64_t j = l.value_offset(i); j < l.value_offset(i + 1); ++j) {
        out.push_back(ValueJson(*l.values(), j));
      }
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      Json out = Json::object();
      for (int f = 0; f < s.num_fields(); ++f) {
        out[s.type()->field(f)->name()] = ValueJson(*s.field(f), i);
      }
      return out;
    }
    default:
      return "<unsupported " + a.type()->ToString() + ">";
  }
}

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
