// The Bronze table schema of a source table, and how it follows the source's schema
// changes (docs/design.md §2, issue "floe run" item 5).
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
#include "floe/lake/cdc_columns.h"
#include "floe/lake/column_map.h"
#include "floe/source/postgres/pgoutput.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::bronze {

// The CDC metadata columns (lake/cdc_columns.h).
using lake::kCdcCommitLsn;
using lake::kCdcOp;
using lake::kCdcProcessedAt;
using lake::kCdcSeq;
using lake::kCdcSourceLsn;
using lake::kCdcSourceTxId;
using lake::kCdcTs;
using lake::kCdcUnchanged;

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

using lake::ChangePosition;
using lake::ColumnBinding;
using lake::ColumnMap;
using lake::kMaxFormerNames;

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
  /// For changes described with an older shape of the table than the one `columns`
  /// binds (the stream still behind a copy, or replaying after a restart what
  /// Bronze's bindings already moved past): nothing is re-bound. A source column
  /// goes to its binding's field (by attnum, name or former name) when its type fits
  /// there, else to a retired field of the binding that fits, else, unbound, to a
  /// field of its name no live column holds (a dropped column's) that fits; one
  /// that fits nowhere is left out and named in `unplaced`.
  static arrow::Result<BatchConformer> MakeForOlderShape(
      const iceberg::Schema& schema, const ColumnMap& columns,
      const std::vector<SourceColumn>& source, std::vector<std::string>* unplaced);
  /// `processed_at_us`: microseconds since the epoch (UTC).
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Conform(
      const arrow::RecordBatch& batch, int64_t processed_at_us) const;
  const std::shared_ptr<arrow::Schema>& output_schema() const { return output_schema_; }

 private:
  BatchConformer() = default;
  /// `field_of[i]`: the field id source column i goes to (0: none).
  static arrow::Result<BatchConformer> Place(const iceberg::Schema& schema,
                                             const std::vector<SourceColumn>& source,
                                             const std::vector<int32_t>& field_of);

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
