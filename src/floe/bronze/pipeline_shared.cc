// Helpers more than one of the pipeline's files use (pipeline_internal.h):
// times, positions, source names and the source's columns and tables, and
// writing a table's buffered changes.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>

#include <arrow/array.h>

#include <nlohmann/json.hpp>

#include "floe/source/postgres/table_description.h"

namespace floe::bronze {

// lake::kColumnsPositionProperty's value: `[commit_lsn, seq]`.
std::string PositionJson(ChangePosition at) {
  return nlohmann::json::array({at.first, at.second}).dump();
}

int32_t FirstSeqOf(const arrow::RecordBatch& batch) {
  const int column = batch.num_columns() - pg::kCdcColumnCount + 5;
  if (batch.num_rows() == 0 || column < 0) return 0;
  const auto* seq = dynamic_cast<const arrow::Int32Array*>(batch.column(column).get());
  return seq != nullptr ? seq->Value(0) : 0;
}

int64_t NowUnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string SourceName(const pg::QualifiedName& name) {
  return name.schema + "." + name.table;
}

// ---------------------------------------------------------------------------
// Source columns

std::vector<SourceColumn> SourceColumnsOf(const pg::TableShape& shape) {
  std::vector<SourceColumn> out;
  const std::vector<int> key = shape.relation.row_key();
  for (size_t i = 0; i < shape.relation.columns.size(); ++i) {
    const auto& c = shape.relation.columns[i];
    SourceColumn col;
    col.name = c.name;
    col.attnum = c.attnum;
    col.type_oid = c.type_oid;
    col.type_modifier = c.type_modifier;
    col.is_row_key = std::find(key.begin(), key.end(), static_cast<int>(i)) != key.end();
    col.defaulted = c.defaulted;
    col.in_identity = c.is_replica_identity;
    col.mapping = shape.mappings.at(i);
    out.push_back(std::move(col));
  }
  return out;
}

// The replicated columns of a table, from the catalog (for rows that do not come
// through a Relation message: the copies), described as pg::DescribeTable describes
// it for every path: in attnum order, the order pgoutput sends them in, and without
// generated columns, which pgoutput does not send either.
arrow::Result<std::vector<SourceColumn>> SourceColumnsFromCatalog(
    pg::SourceSession& source, pg::TypeResolver& types, const pg::QualifiedName& table,
    const std::string& publication, pg::Oid* relation_id) {
  ARROW_ASSIGN_OR_RAISE(auto described, source.Describe(table, publication));
  if (!described || described->Replicated().empty()) {
    return arrow::Status::KeyError("table ", SourceName(table),
                                   " has no columns or does not exist");
  }
  if (!described->in_publication) {
    // Another table under a name that was published (dropped and re-created, or
    // renamed into the name, or the table removed from the publication): its rows
    // are not the publication's to copy.
    return arrow::Status::KeyError("table ", SourceName(table), " is not in publication ",
                                   publication);
  }
  if (relation_id != nullptr) *relation_id = described->oid;
  const std::vector<std::string> key = described->RowKey();
  const std::vector<std::string> identity = described->IdentityColumns();
  std::vector<SourceColumn> out;
  for (const pg::DescribedColumn& c : described->Replicated()) {
    SourceColumn col;
    col.attnum = c.attnum;
    col.name = c.name;
    col.type_oid = c.type_oid;
    col.type_modifier = c.type_modifier;
    col.is_row_key = std::find(key.begin(), key.end(), c.name) != key.end();
    col.defaulted = c.defaulted;
    col.in_identity = std::find(identity.begin(), identity.end(), c.name) != identity.end();
    ARROW_ASSIGN_OR_RAISE(pg::PgTypeInfo type,
                          types.Resolve(col.type_oid, col.type_modifier));
    col.mapping = pg::MapType(type);
    out.push_back(std::move(col));
  }
  return out;
}

// Conforms and writes what `table` has buffered.
arrow::Status FlushBuffered(BronzeTable* table) {
  if (table->buffered.empty()) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::RecordBatch> batch,
                        table->buffered.Take());
  ARROW_ASSIGN_OR_RAISE(auto conformed, table->conformer->Conform(*batch, NowUnixMicros()));
  return table->appender->Write(*conformed);
}

}  // namespace floe::bronze
