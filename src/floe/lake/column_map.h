// The column bindings of a Bronze table: which Iceberg field receives each live
// source column, with the fields and names it had before. Kept in the Bronze table
// property floe.source.columns (keys.h) by `floe run`; read by `floe silver` to carry
// columns across renames and retypes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/source/postgres/pgoutput.h"

namespace floe::lake {

/// A Bronze row's place in the table's order: (cdc_commit_lsn, cdc_seq).
using ChangePosition = std::pair<int64_t, int32_t>;

/// Binding of one live source column to the Iceberg field that receives it.
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

/// A column keeps at most this many former names.
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

/// Error unless every attnum (but 0, unknown) and every field id is bound once.
arrow::Status CheckColumnMap(const ColumnMap& map);

}  // namespace floe::lake
