// Iceberg sort orders: how a table's data files are meant to be sorted (a list of
// transformed source columns with a direction and a null order), their validation
// against a schema, and their JSON form. Order id 0 is reserved for "unsorted".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json_fwd.hpp>

#include "floe/iceberg/schema.h"
#include "floe/iceberg/transform.h"

namespace floe::iceberg {

enum class SortDirection { kAscending, kDescending };
enum class NullOrder { kNullsFirst, kNullsLast };

struct SortField {
  Transform transform = Transform::Identity();
  int32_t source_id = 0;
  SortDirection direction = SortDirection::kAscending;
  NullOrder null_order = NullOrder::kNullsFirst;

  friend bool operator==(const SortField&, const SortField&) = default;
};

inline constexpr int32_t kUnsortedOrderId = 0;

struct SortOrder {
  int32_t order_id = kUnsortedOrderId;
  /// No fields: unsorted (and then the order id must be 0).
  std::vector<SortField> fields;

  static SortOrder Unsorted() { return SortOrder{}; }
  bool is_unsorted() const { return fields.empty(); }

  /// Same fields in the same order; the order id is not compared.
  bool SameFields(const SortOrder& other) const { return fields == other.fields; }

  /// Checks: order 0 has no fields and a sorted order is not 0; every source column
  /// exists in `schema`, is a primitive not nested in a list or map, and accepts
  /// its transform.
  arrow::Status Validate(const Schema& schema) const;

  std::string ToString() const;

  friend bool operator==(const SortOrder&, const SortOrder&) = default;
};

/// `{"order-id":1,"fields":[{"transform":"identity","source-id":2,"direction":"asc",
/// "null-order":"nulls-first"}]}`.
nlohmann::json SortOrderToJson(const SortOrder& order);
/// Parses a sort order object (structure only; Validate checks it against a schema).
arrow::Result<SortOrder> SortOrderFromJson(const nlohmann::json& json);

}  // namespace floe::iceberg
