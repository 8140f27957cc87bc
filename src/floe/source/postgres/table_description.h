// One description of a source table, read from the catalog in one statement, that
// every path describing a table uses: the stream's relation cache (attnums and
// keys), the table copies (which columns to read), the watermark backfill (the key
// it chunks by) and `floe silver verify` (which columns to compare). Before there
// was one query per path, and they disagreed: the copy read stored generated
// columns that the stream never carries, and the merge key ignored a replica
// identity index, so deletes carrying only the index's columns matched nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/source/postgres/pgoutput.h"

namespace floe::postgres {

class PgConnection;

struct DescribedColumn {
  int16_t attnum = 0;
  std::string name;
  Oid type_oid = 0;
  int32_t type_modifier = -1;
  /// 1-based position in the primary key's index, 0 when not part of it.
  int primary_key_position = 0;
  /// 1-based position in the replica identity index (REPLICA IDENTITY USING INDEX),
  /// 0 when not part of it.
  int identity_index_position = 0;
  /// A generated column (`GENERATED ALWAYS AS (...) STORED` or, from PostgreSQL 18,
  /// `VIRTUAL`).
  bool generated = false;
  /// The column has a default or an identity (atthasdef, atthasmissing or
  /// attidentity): added to a table with rows, it filled them without a change in
  /// the WAL.
  bool defaulted = false;
  /// The type's output function, schema-qualified and quoted (for text COPY).
  std::string output_function;
  /// In the publication's column list (every column is when it has none, or when
  /// the table was described without a publication).
  bool published = true;
};

struct TableDescription {
  Oid oid = 0;
  /// pg_class.relkind: 'r' table, 'p' partitioned table, ...
  char relkind = 'r';
  /// pg_class.relreplident: 'd' default, 'n' nothing, 'f' full, 'i' index.
  char replica_identity = 'd';
  /// Every live column, generated and unpublished ones included, in attnum order.
  std::vector<DescribedColumn> columns;
  /// The publication's row filter on the table (`CREATE PUBLICATION ... FOR TABLE t
  /// WHERE (...)`), as PostgreSQL prints it (pg_publication_tables.rowfilter): SQL
  /// of the catalog's own making, to AND into a copy's WHERE. Empty when none.
  std::string row_filter;
  /// False when described with a publication the table is not in (now): its rows
  /// must not be copied, whatever its name was once published under.
  bool in_publication = true;
  /// Whether the server sends the generated columns the publication publishes
  /// (PostgreSQL 18: stored ones under `publish_generated_columns = stored` or named
  /// in its column list; pg_publication_tables lists exactly those). False before
  /// 18, and when described without a publication.
  bool generated_sent = false;

  /// The columns a change of this table carries, in attnum order: never a column
  /// outside the publication's column list, and a generated column only when
  /// generated_sent and published (pgoutput before PostgreSQL 18 sends none), so the
  /// copy, the backfill and verify leave the others out too
  /// (docs/schema-evolution.md, "Generated columns").
  std::vector<DescribedColumn> Replicated() const;
  /// Names of the generated columns left out of Replicated().
  std::vector<std::string> GeneratedColumns() const;
  /// The columns that identify a row in every change, deletes included, in index
  /// order: the replica identity index's under REPLICA IDENTITY USING INDEX (unless
  /// it contains the whole primary key), else the primary key's (DEFAULT, FULL and
  /// NOTHING). Empty when there is neither.
  std::vector<std::string> RowKey() const;
  /// RowKey() in attnum order (the order Bronze records it in).
  std::vector<std::string> RowKeyInColumnOrder() const;
  /// The replicated columns a delete carries, in attnum order: every one under
  /// REPLICA IDENTITY FULL, the identity index's under USING INDEX, the primary
  /// key's under DEFAULT, none under NOTHING (what pgoutput flags as key columns).
  std::vector<std::string> IdentityColumns() const;
};

/// Describes the relation `oid`; nullopt when it does not exist (any more). With a
/// `publication`, the table's column list and row filter in it are read too
/// (DescribedColumn::published, row_filter, in_publication); a table not in it
/// has neither.
arrow::Result<std::optional<TableDescription>> DescribeTable(
    PgConnection& conn, Oid oid, const std::string& publication = "");
/// Describes `schema`.`table` (names as they are, unquoted); nullopt when there is
/// no such relation.
arrow::Result<std::optional<TableDescription>> DescribeTable(
    PgConnection& conn, const std::string& schema, const std::string& table,
    const std::string& publication = "");

}  // namespace floe::postgres
