// The live source table for `floe silver verify`: read in one REPEATABLE READ
// transaction through a cursor, a batch at a time, converted like `floe run`.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>

#include "floe/common/lsn.h"
#include "floe/silver/verify.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/table_description.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::silver {
namespace {

namespace pg = floe::postgres;

// Rows fetched at once: about kBatchBytes of text, between kMinRows and kMaxRows.
constexpr int64_t kBatchBytes = int64_t{4} << 20;
constexpr int64_t kMinRows = 16;
constexpr int64_t kMaxRows = 10000;

// One fetch's rows as `converters`' columns.
arrow::Result<arrow::ArrayVector> Convert(const std::vector<pg::PgRow>& rows,
                                          std::vector<pg::ColumnConverter>& converters) {
  arrow::ArrayVector arrays;
  std::vector<pg::ConversionIssue> issues;
  for (size_t c = 0; c < converters.size(); ++c) {
    ARROW_ASSIGN_OR_RAISE(auto builder, converters[c].MakeBuilder());
    for (const auto& row : rows) {
      if (row[c]) {
        ARROW_RETURN_NOT_OK(converters[c].Append(*row[c], builder.get(), &issues));
      } else {
        ARROW_RETURN_NOT_OK(converters[c].AppendNull(builder.get()));
      }
    }
    std::shared_ptr<arrow::Array> array;
    ARROW_RETURN_NOT_OK(builder->Finish(&array));
    arrays.push_back(std::move(array));
  }
  return arrays;
}

}  // namespace

SourceReader PostgresSourceReader(std::string conninfo, std::string publication) {
  return [conninfo = std::move(conninfo), publication = std::move(publication)](
             const config::QualifiedName& table, SourceSink* sink) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto conn, pg::PgConnection::Connect(conninfo));
    ARROW_RETURN_NOT_OK(
        conn->Query("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").status());
    // The first statement takes the snapshot; the LSN is read inside it.
    ARROW_ASSIGN_OR_RAISE(
        auto lsn_rows, conn->Query(std::string("SELECT ") + pg::kWalEndSql + "::text"));
    ARROW_ASSIGN_OR_RAISE(std::string schema_q, conn->QuoteIdentifier(table.schema));
    ARROW_ASSIGN_OR_RAISE(std::string table_q, conn->QuoteIdentifier(table.table));
    // The columns floe replicates, as every path describes them (no generated
    // columns: Silver has none).
    ARROW_ASSIGN_OR_RAISE(
        auto described, pg::DescribeTable(*conn, table.schema, table.table, publication));
    if (!described || described->Replicated().empty()) {
      return arrow::Status::KeyError("source table ", table.ToString(),
                                     " does not exist (or has no columns)");
    }
    pg::PgTypeResolver types(conn.get());
    std::vector<pg::ColumnConverter> converters;
    std::string select;
    arrow::FieldVector fields;
    for (const pg::DescribedColumn& c : described->Replicated()) {
      ARROW_ASSIGN_OR_RAISE(pg::PgTypeInfo type,
                            types.Resolve(c.type_oid, c.type_modifier));
      converters.emplace_back(c.name, pg::MapType(type));
      ARROW_ASSIGN_OR_RAISE(std::string q, conn->QuoteIdentifier(c.name));
      select += (select.empty() ? "" : ", ") + q;
    }
    // The schema the converters build (an empty batch gives each column's type).
    ARROW_ASSIGN_OR_RAISE(arrow::ArrayVector empty, Convert({}, converters));
    for (size_t c = 0; c < converters.size(); ++c) {
      fields.push_back(arrow::field(converters[c].column_name(), empty[c]->type()));
    }
    auto schema = arrow::schema(fields);
    uint64_t lsn = 0;
    if (!lsn_rows.empty() && lsn_rows[0][0]) {
      ARROW_ASSIGN_OR_RAISE(Lsn parsed, Lsn::Parse(*lsn_rows[0][0]));
      lsn = parsed.value();
    }
    ARROW_RETURN_NOT_OK(sink->Begin(schema, lsn));
    ARROW_RETURN_NOT_OK(conn->Query("DECLARE floe_verify NO SCROLL CURSOR FOR SELECT " +
                                    select + " FROM " + schema_q + "." + table_q +
                                    (described->row_filter.empty()
                                         ? ""
                                         : " WHERE (" + described->row_filter + ")"))
                            .status());
    int64_t fetch = 1000;
    while (true) {
      ARROW_ASSIGN_OR_RAISE(
          auto rows,
          conn->Query("FETCH FORWARD " + std::to_string(fetch) + " FROM floe_verify"));
      if (rows.empty()) break;
      int64_t text_bytes = 0;
      for (const auto& row : rows) {
        for (const auto& value : row) text_bytes += value ? value->size() + 1 : 1;
      }
      ARROW_ASSIGN_OR_RAISE(arrow::ArrayVector arrays, Convert(rows, converters));
      auto batch = arrow::RecordBatch::Make(schema, static_cast<int64_t>(rows.size()),
                                            std::move(arrays));
      rows = {};
      ARROW_RETURN_NOT_OK(sink->Add(batch));
      // The next fetch sized from this one's bytes per row.
      const int64_t per_row =
          std::max<int64_t>(1, text_bytes / std::max<int64_t>(1, batch->num_rows()));
      fetch = std::clamp(kBatchBytes / per_row, kMinRows, kMaxRows);
    }
    return conn->Query("COMMIT").status();
  };
}

}  // namespace floe::silver
