// Iceberg partition specs: which transformed source columns make up a table's
// partition tuple, their validation against a schema, the struct type of partition
// tuples, the spec's JSON form, a builder that assigns partition field ids and the
// default names Java and PyIceberg use, and the partition tuple of one row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json_fwd.hpp>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/transform.h"

namespace floe::iceberg {

/// Partition field ids start here (so they never clash with low column ids); a
/// table with no partition fields ever has last-partition-id 999.
inline constexpr int32_t kFirstPartitionFieldId = 1000;
inline constexpr int32_t kUnpartitionedLastPartitionId = kFirstPartitionFieldId - 1;

struct PartitionField {
  /// The schema column the value comes from.
  int32_t source_id = 0;
  /// The partition field's own id (>= 1000), unique in the table across specs for
  /// different fields.
  int32_t field_id = 0;
  std::string name;
  Transform transform = Transform::Identity();

  friend bool operator==(const PartitionField&, const PartitionField&) = default;
};

/// The values of one row's partition tuple, in spec field order; nullopt is null.
using PartitionTuple = std::vector<std::optional<Literal>>;

struct PartitionSpec {
  int32_t spec_id = 0;
  /// No fields: the table is unpartitioned.
  std::vector<PartitionField> fields;

  bool is_unpartitioned() const { return fields.empty(); }
  /// The largest partition field id, or 999 with no fields.
  int32_t last_assigned_field_id() const;

  /// Same fields (ids, names, sources, transforms) in the same order; the spec id is
  /// not compared.
  bool SameFields(const PartitionSpec& other) const { return fields == other.fields; }

  /// Checks this spec against `schema`: every source column exists, is a primitive
  /// not nested in a list or map, and its type accepts the transform; partition
  /// field ids are >= 1000 and unique; names are non-empty and unique; a name equal
  /// to a schema column's full name is allowed only for an identity of that column;
  /// no source is partitioned twice by the same transform (or by two of year,
  /// month, day, hour).
  arrow::Status Validate(const Schema& schema) const;

  /// The struct type of this spec's partition tuples under `schema`: one optional
  /// field per partition field, with the partition field's id and name and the
  /// transform's result type.
  arrow::Result<TypePtr> PartitionType(const Schema& schema) const;

  /// The partition tuple of one row: each field's transform applied to its source
  /// column's value in `source_values` (keyed by source field id; a missing key is
  /// null).
  arrow::Result<PartitionTuple> Partition(
      const Schema& schema,
      const std::unordered_map<int32_t, std::optional<Literal>>& source_values) const;

  std::string ToString() const;

  friend bool operator==(const PartitionSpec&, const PartitionSpec&) = default;
};

/// `{"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"id_bucket",
/// "transform":"bucket[16]"}]}`.
nlohmann::json PartitionSpecToJson(const PartitionSpec& spec);
/// Parses a spec object (structure only; Validate checks it against a schema).
arrow::Result<PartitionSpec> PartitionSpecFromJson(const nlohmann::json& json);

/// Builds a spec for a schema, naming columns by their full dotted names. Partition
/// field ids continue from the table's last-partition-id (1000 for a table's first),
/// and fields get the default names Java's PartitionSpec.Builder gives them:
/// `<column>` for identity, `<column>_bucket`, `<column>_trunc`, `<column>_year`,
/// `_month`, `_day`, `_hour`, and `<column>_null` for void. Errors (unknown column,
/// a transform that does not apply, clashing names) are collected and returned by
/// Build.
class PartitionSpecBuilder {
 public:
  explicit PartitionSpecBuilder(
      Schema schema, int32_t spec_id = 0,
      int32_t last_partition_id = kUnpartitionedLastPartitionId);

  /// Adds `transform` of `column`. An empty `name` means the default name; a
  /// `field_id` keeps that id (e.g. to reuse the id of an equal field of an older
  /// spec) instead of assigning the next one.
  PartitionSpecBuilder& Add(std::string_view column, Transform transform,
                            std::string_view name = {},
                            std::optional<int32_t> field_id = std::nullopt);
  PartitionSpecBuilder& Identity(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Identity(), name);
  }
  PartitionSpecBuilder& Bucket(std::string_view column, int32_t num_buckets,
                               std::string_view name = {});
  PartitionSpecBuilder& Truncate(std::string_view column, int32_t width,
                                 std::string_view name = {});
  PartitionSpecBuilder& Year(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Year(), name);
  }
  PartitionSpecBuilder& Month(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Month(), name);
  }
  PartitionSpecBuilder& Day(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Day(), name);
  }
  PartitionSpecBuilder& Hour(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Hour(), name);
  }
  PartitionSpecBuilder& Void(std::string_view column, std::string_view name = {}) {
    return Add(column, Transform::Void(), name);
  }

  /// The validated spec, or the first error met.
  arrow::Result<PartitionSpec> Build() const;
  /// The table's last-partition-id once this spec is added.
  int32_t last_partition_id() const { return last_partition_id_; }

 private:
  Schema schema_;
  PartitionSpec spec_;
  int32_t last_partition_id_;
  arrow::Status error_;
};

/// The default partition field name for `transform` of the column named `column`.
std::string DefaultPartitionFieldName(std::string_view column,
                                      const Transform& transform);

}  // namespace floe::iceberg
