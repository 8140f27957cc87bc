#include "floe/source/postgres/table_description.h"

#include <algorithm>

#include "floe/common/parse.h"
#include "floe/source/postgres/pg_connection.h"

namespace floe::postgres {
namespace {

// One row per live column; relation-level values repeat on every row. A relation
// without columns yields no rows (and reads as not found: nothing to replicate).
constexpr char kDescribe[] =
    "SELECT c.oid::text, c.relkind::text, c.relreplident::text, a.attnum::text, "
    "a.attname::text, a.atttypid::text, a.atttypmod::text, "
    // int2vector subscripts start at 0: positions are counted from array_lower.
    "COALESCE(array_position(pk.indkey::int2[], a.attnum) + 1 - "
    "array_lower(pk.indkey::int2[], 1), 0)::text, "
    "COALESCE(array_position(ri.indkey::int2[], a.attnum) + 1 - "
    "array_lower(ri.indkey::int2[], 1), 0)::text, "
    "(a.attgenerated <> '')::text, "
    "quote_ident(pn.nspname) || '.' || quote_ident(p.proname), "
    "(a.atthasdef OR a.atthasmissing OR a.attidentity <> '')::text "
    "FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
    "AND NOT a.attisdropped "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "JOIN pg_catalog.pg_proc p ON p.oid = t.typoutput "
    "JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace "
    "LEFT JOIN pg_catalog.pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary "
    "LEFT JOIN pg_catalog.pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident "
    "WHERE c.oid = ";

template <typename T>
arrow::Result<T> Parse(const std::optional<std::string>& text, const char* what) {
  if (!text) return arrow::Status::IOError("table description: ", what, " is null");
  const std::optional<T> value = ParseInteger<T>(*text);
  if (!value) {
    return arrow::Status::IOError("table description: bad ", what, " '", *text, "'");
  }
  return *value;
}

char FirstChar(const std::optional<std::string>& text, char otherwise) {
  return text && !text->empty() ? (*text)[0] : otherwise;
}

// The column list and row filter of the relation `oid` in a publication (PostgreSQL
// 15+): no row when the table is not in it (for a partition published through its
// root, the root is), else one per published column (attnames holds every published
// column when there is no list), the filter repeated on each.
constexpr char kPublished[] =
    "SELECT unnest(pt.attnames)::text, pt.rowfilter "
    "FROM pg_catalog.pg_publication_tables pt "
    "JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname "
    "JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
    "WHERE pt.pubname = $1 AND c.oid = $2::oid";

arrow::Result<std::optional<TableDescription>> Describe(
    PgConnection& conn, const std::string& where,
    const std::vector<std::optional<std::string>>& params,
    const std::string& publication) {
  ARROW_ASSIGN_OR_RAISE(auto rows, conn.Query(std::string(kDescribe) + where +
                                                  " ORDER BY a.attnum",
                                              params));
  if (rows.empty()) return std::nullopt;
  TableDescription d;
  ARROW_ASSIGN_OR_RAISE(d.oid, Parse<Oid>(rows[0][0], "oid"));
  d.relkind = FirstChar(rows[0][1], 'r');
  d.replica_identity = FirstChar(rows[0][2], 'd');
  for (const PgRow& row : rows) {
    DescribedColumn c;
    ARROW_ASSIGN_OR_RAISE(c.attnum, Parse<int16_t>(row[3], "attnum"));
    c.name = row[4].value_or("");
    ARROW_ASSIGN_OR_RAISE(c.type_oid, Parse<Oid>(row[5], "atttypid"));
    ARROW_ASSIGN_OR_RAISE(c.type_modifier, Parse<int32_t>(row[6], "atttypmod"));
    ARROW_ASSIGN_OR_RAISE(c.primary_key_position, Parse<int>(row[7], "key position"));
    ARROW_ASSIGN_OR_RAISE(c.identity_index_position,
                          Parse<int>(row[8], "identity position"));
    c.generated = row[9].value_or("false") == "true";
    c.output_function = row[10].value_or("");
    c.defaulted = row[11].value_or("false") == "true";
    d.columns.push_back(std::move(c));
  }
  if (!publication.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto published,
                          conn.Query(kPublished, {publication, std::to_string(d.oid)}));
    d.in_publication = !published.empty();
    d.generated_sent = PQserverVersion(conn.raw()) >= 180000;
    if (!published.empty()) {
      d.row_filter = published[0][1].value_or("");
      for (DescribedColumn& c : d.columns) {
        c.published = std::any_of(published.begin(), published.end(),
                                  [&](const PgRow& r) { return r[0] == c.name; });
      }
    }
  }
  return d;
}

std::vector<const DescribedColumn*> KeyColumns(const TableDescription& d) {
  std::vector<const DescribedColumn*> pk, identity;
  for (const auto& c : d.columns) {
    if (c.primary_key_position > 0) pk.push_back(&c);
    if (c.identity_index_position > 0) identity.push_back(&c);
  }
  bool pk_in_identity = !pk.empty();
  for (const auto* c : pk) pk_in_identity &= c->identity_index_position > 0;
  // Under REPLICA IDENTITY USING INDEX a delete carries only the index's columns:
  // they must be the key, unless the primary key is among them (the stream keys by
  // the primary key then; change_stream.cc ApplyRelation).
  if (d.replica_identity == 'i' && !identity.empty() && !pk_in_identity) {
    std::sort(identity.begin(), identity.end(), [](auto* a, auto* b) {
      return a->identity_index_position < b->identity_index_position;
    });
    return identity;
  }
  std::sort(pk.begin(), pk.end(), [](auto* a, auto* b) {
    return a->primary_key_position < b->primary_key_position;
  });
  return pk;
}

}  // namespace

std::vector<DescribedColumn> TableDescription::Replicated() const {
  std::vector<DescribedColumn> out;
  for (const auto& c : columns) {
    if (c.published && (!c.generated || generated_sent)) out.push_back(c);
  }
  return out;
}

std::vector<std::string> TableDescription::GeneratedColumns() const {
  std::vector<std::string> out;
  for (const auto& c : columns) {
    if (c.generated && !(c.published && generated_sent)) out.push_back(c.name);
  }
  return out;
}

std::vector<std::string> TableDescription::RowKey() const {
  std::vector<std::string> out;
  for (const auto* c : KeyColumns(*this)) out.push_back(c->name);
  return out;
}

std::vector<std::string> TableDescription::RowKeyInColumnOrder() const {
  auto key = KeyColumns(*this);
  std::sort(key.begin(), key.end(),
            [](auto* a, auto* b) { return a->attnum < b->attnum; });
  std::vector<std::string> out;
  for (const auto* c : key) out.push_back(c->name);
  return out;
}

std::vector<std::string> TableDescription::IdentityColumns() const {
  std::vector<std::string> out;
  for (const auto& c : Replicated()) {
    const bool in = replica_identity == 'f'   ? true
                    : replica_identity == 'i' ? c.identity_index_position > 0
                    : replica_identity == 'd' ? c.primary_key_position > 0
                                              : false;
    if (in) out.push_back(c.name);
  }
  return out;
}

arrow::Result<std::optional<TableDescription>> DescribeTable(
    PgConnection& conn, Oid oid, const std::string& publication) {
  return Describe(conn, "$1::oid", {std::to_string(oid)}, publication);
}

arrow::Result<std::optional<TableDescription>> DescribeTable(
    PgConnection& conn, const std::string& schema, const std::string& table,
    const std::string& publication) {
  // The names as they are: the catalog compares them, nothing is parsed.
  return Describe(conn,
                  "(SELECT c2.oid FROM pg_catalog.pg_class c2 JOIN "
                  "pg_catalog.pg_namespace n2 ON n2.oid = c2.relnamespace "
                  "WHERE n2.nspname = $1 AND c2.relname = $2)",
                  {schema, table}, publication);
}

}  // namespace floe::postgres
