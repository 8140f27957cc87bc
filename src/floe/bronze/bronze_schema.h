// The Bronze table schema of a source table, and how it follows the source's schema
// changes (DESIGN.md §2, issue "floe run" item 5).
//
// A Bronze table holds the source row's columns, then the CDC metadata columns
// (cdc_op, cdc_ts, cdc_processed_at, cdc_source_lsn, cdc_source_tx_id,
// cdc_commit_lsn, cdc_seq, cdc_unchanged). Each source column is bound to an Iceberg
// field id through its Postgres attnum; the bindings are kept in the table property
// `floe.source.columns` (JSON) so that a restart, or a schema change made while floe
// was down, is still told apart correctly: the same attnum under a new name is a
// rename, a new attnum an added column, a vanished attnum a dropped column, the same
// attnum with a new type a retype.
//
// The rules (docs/schema-evolution.md):
//  * added column   -> a new optional field; older rows read null.
//  * dropped column -> its field stays (old rows keep their values), no longer
//                      written: new rows read null.
//  * renamed column -> Iceberg rename, same field id.
//  * widened type   -> Iceberg promotion where Iceberg has one (int -> long, float ->
//                      double, decimal precision increase); no change at all where the
//                      Iceberg type stays the same (int2 -> int4, varchar(n) ->
//                      varchar(m), text <-> varchar). A narrower type the field
//                      still holds (int8 -> int4) changes nothing either.
//  * any other type change (text -> int, numeric scale change, ...) -> the column is
//    re-bound to a new field `<name>__<type>` (e.g. `amount__string`,
//    `qty__decimal_12_4`); the old field keeps the old values. Nothing stops,
//    nothing is lost. Changing back re-binds to the column's earlier field of that
//    type (ColumnBinding::retired_field_ids).
//  * a new column whose name is taken by a kept (dropped) field, or a source column
//    named like a CDC metadata column, gets a free name by the same suffix rule;
//    the binding, not the name, is what identifies the column.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "floe/iceberg/schema.h"
#include "floe/source/postgres/pgoutput.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::bronze {

/// Names of the CDC metadata columns of a Bronze table, in order, after the row
/// columns. cdc_processed_at is added by the Bronze writer; the others come from the
/// change stream (floe::postgres::CdcMetadataFields).
inline constexpr const char* kCdcOp = "cdc_op";
inline constexpr const char* kCdcTs = "cdc_ts";
inline constexpr const char* kCdcProcessedAt = "cdc_processed_at";
inline constexpr const char* kCdcSourceLsn = "cdc_source_lsn";
inline constexpr const char* kCdcSourceTxId = "cdc_source_tx_id";
inline constexpr const char* kCdcCommitLsn = "cdc_commit_lsn";
inline constexpr const char* kCdcSeq = "cdc_seq";
inline constexpr const char* kCdcUnchanged = "cdc_unchanged";

/// The table property holding the column bindings (ColumnMap::ToJson).
inline constexpr const char* kSourceColumnsProperty = "floe.source.columns";
/// Set (to the moved columns) in the commit whose bindings moved a column to another
/// field (a type change Iceberg cannot promote), removed when `floe run`'s copy of
/// the table that follows commits: until then the new field lacks the values of
/// the rows not changed since, and `floe silver` waits.
inline constexpr const char* kRecopyPendingProperty = "floe.source.recopy-pending";
/// Bronze table property: the point (cdc_commit_lsn of its `t` and `r` rows) of a copy
/// again that committed before the stream reached it; floe.source.recopy-pending
/// stays until the table's floe.commit-lsn passes it.
inline constexpr const char* kRecopyUntilProperty = "floe.source.recopy-until";

/// One column of the source table as the Bronze layer needs it: from a change
/// stream TableShape (relation column + its mapping) or from the catalog (snapshot).
struct SourceColumn {
  std::string name;
  /// pg_attribute.attnum; 0 when unknown (then the column is matched by name).
  int16_t attnum = 0;
  postgres::Oid type_oid = 0;
  int32_t type_modifier = -1;
  /// Part of the key that identifies a row in every change (the source's primary
  /// key, or its replica identity index: RelationInfo::row_key), recorded for
  /// Silver's merge key.
  bool is_row_key = false;
  /// Carried by every change, a delete included: part of the replica identity (the
  /// primary key, the identity index's columns, or every column under FULL).
  bool in_identity = false;
  /// The catalog gives the column a default or an identity: added to a table with
  /// rows, it filled them without a change in the WAL (the table is copied again).
  bool defaulted = false;
  /// The Arrow type and converter kind the source produces for it.
  postgres::ColumnMapping mapping;
};

/// The Iceberg type for a column mapping: int16 / int32 -> int, int64 -> long,
/// float32 -> float, float64 -> double, decimal128(p,s) -> decimal(p,s), utf8 ->
/// string, binary -> binary, date32 -> date, time64(us) -> time, timestamp(us) ->
/// timestamp, timestamp(us, UTC) -> timestamptz, kUuid -> uuid, bool -> boolean,
/// list -> list (optional elements), struct -> struct (optional fields). Nested field
/// ids are placeholders (iceberg::AddColumn / Table::Create assign real ones).
arrow::Result<iceberg::TypePtr> IcebergTypeFor(const postgres::ColumnMapping& mapping);

/// Binding of one live source column to the Iceberg field that receives it.
/// A Bronze row's place in the table's order: (cdc_commit_lsn, cdc_seq).
using ChangePosition = std::pair<int64_t, int32_t>;

struct ColumnBinding {
  int16_t attnum = 0;
  /// The source column's current name.
  std::string name;
  int32_t field_id = 0;
  postgres::Oid type_oid = 0;
  int32_t type_modifier = -1;
  /// Fields this column wrote to before a type change moved it to a new field
  /// (oldest first). Changing the type back re-binds to one of them, found by id, so
  /// it works after a rename too, and a dropped column's field is never taken over
  /// by another column that happens to get its name.
  std::vector<int32_t> retired_field_ids;
  /// Names the column had before (oldest first, at most kMaxFormerNames): the
  /// cdc_unchanged lists of rows written before a rename name it by them.
  std::vector<std::string> former_names;
  /// Per former name: the (cdc_commit_lsn, cdc_seq) of the table's last row written
  /// while the column had it, so that a name a new column took since reads right in
  /// older rows ({0, 0}: not known, for maps written before floe kept it).
  std::vector<ChangePosition> former_through;
  bool operator==(const ColumnBinding&) const = default;
};

inline constexpr size_t kMaxFormerNames = 16;

/// The bindings of a Bronze table's live source columns (dropped columns have none).
struct ColumnMap {
  std::vector<ColumnBinding> columns;

  /// JSON array of {"attnum", "name", "field-id", "type-oid", "typmod"} plus
  /// "retired-field-ids", "former-names" and "former-through" (an [lsn, seq] pair
  /// per former name) when the column has any. FromJson ignores unknown members
  /// and reports the first malformed entry.
  std::string ToJson() const;
  static arrow::Result<ColumnMap> FromJson(std::string_view json);
  bool operator==(const ColumnMap&) const = default;
};

/// A new Bronze table's schema (row columns in source order, then the CDC metadata
/// columns; every field optional; field ids 1..n in order, nested ids after, as
/// Table::Create will reassign them anyway) and its column map (with those ids).
struct BronzeLayout {
  iceberg::Schema schema;
  ColumnMap columns;
};
arrow::Result<BronzeLayout> NewBronzeLayout(const std::vector<SourceColumn>& columns);

/// After Table::Create reassigned field ids: the column map re-read against the
/// created schema. NewBronzeLayout numbers the top-level fields 1..n in order and
/// Table::Create keeps that order, so a layout field id is the field's position; the
/// field found there must carry the name NewBronzeLayout chose for the column (the
/// column's name, or it with a `__<type>` suffix), else this is an error.
arrow::Result<ColumnMap> BindByName(const iceberg::Schema& schema,
                                    const ColumnMap& layout_columns);

/// How a Bronze table changes to follow the source's current columns.
struct EvolutionPlan {
  /// True when `schema` differs from the current one (commit it before writing).
  bool schema_changed = false;
  iceberg::Schema schema;
  int32_t last_column_id = 0;
  /// The new bindings (always returned; compare with the old map to know whether
  /// the property must be rewritten).
  ColumnMap columns;
  /// One human-readable line per change, for the log ("column amount: numeric(10,2)
  /// -> text is not an Iceberg promotion; now written to amount__string").
  std::vector<std::string> changes;
};

/// Plans the evolution of a Bronze table whose current schema is `current` (with
/// `last_column_id`) and bindings `bound`, to receive rows of `source`. Pure: the
/// caller commits the result (Table::UpdateMetadata: schema + the property).
/// Source columns match bindings by attnum where both know it, else by name. New
/// fields go after the existing row fields and before the CDC columns (which are
/// moved last, and added if an older table lacks one). The schema id is kept (the
/// table metadata assigns the new one). Errors only on inconsistent input
/// (duplicate columns, a map binding one field twice, a type with no Iceberg type).
/// `written_through`: the position of the table's last row written with the
/// bound names (ColumnBinding::former_through of a column renamed now).
arrow::Result<EvolutionPlan> PlanEvolution(const iceberg::Schema& current,
                                           int32_t last_column_id, const ColumnMap& bound,
                                           const std::vector<SourceColumn>& source,
                                           ChangePosition written_through = {0, 0});

/// Turns change-stream batches (the source columns in `source` order, then the
/// change stream's CDC columns: cdc_op, cdc_ts, cdc_source_lsn, cdc_source_tx_id,
/// cdc_commit_lsn, cdc_seq, cdc_unchanged) into batches of the Bronze table's Arrow
/// schema (iceberg::ToArrowSchema of `schema`): columns placed by field id through
/// `columns`, cast where the Iceberg type is wider (int16 -> int32, int32 -> int64,
/// float32 -> float64, decimal precision), fields with no bound source column all
/// null, cdc_processed_at filled with the given time.
class BatchConformer {
 public:
  static arrow::Result<BatchConformer> Make(const iceberg::Schema& schema,
                                            const ColumnMap& columns,
                                            const std::vector<SourceColumn>& source);
  /// `processed_at_us`: microseconds since the epoch (UTC).
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Conform(
      const arrow::RecordBatch& batch, int64_t processed_at_us) const;
  const std::shared_ptr<arrow::Schema>& output_schema() const { return output_schema_; }

 private:
  BatchConformer() = default;

  std::shared_ptr<arrow::Schema> output_schema_;
  /// For each output column: the input column index, or -1 (all null / processed_at).
  std::vector<int> input_index_;
  int processed_at_index_ = -1;
  /// source.size() + the change stream's 7 CDC columns.
  int input_columns_ = 0;
};

/// Where rows that are not changes of a streamed transaction stand in Bronze: a
/// copy's rows (and the `t` row that starts a copy again), a watermark backfill's
/// chunk rows. Every row gets the same op, time and LSNs; cdc_seq counts from
/// first_seq.
struct SyntheticPosition {
  std::string op;
  int64_t ts_us = 0;
  Lsn source_lsn;
  /// Null when the rows belong to no transaction (a copy).
  std::optional<int64_t> xid;
  Lsn commit_lsn;
  int64_t first_seq = 0;
};

/// `arrays` (n rows of `columns`, in order) with the change stream's CDC columns
/// (postgres::CdcMetadataFields(); cdc_unchanged null) appended for `at`.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> WithCdcColumns(
    const std::vector<SourceColumn>& columns, arrow::ArrayVector arrays, int64_t n,
    const SyntheticPosition& at);

}  // namespace floe::bronze
