#include "floe/iceberg/sort_order.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "floe/iceberg/json_internal.h"

namespace floe::iceberg {

using nlohmann::json;

arrow::Status SortOrder::Validate(const Schema& schema) const {
  if (order_id == kUnsortedOrderId && !fields.empty()) {
    return arrow::Status::Invalid("sort order id 0 is reserved for the unsorted order");
  }
  if (order_id != kUnsortedOrderId && fields.empty()) {
    return arrow::Status::Invalid("sort order ", order_id,
                                  " has no fields; only order 0 may be unsorted");
  }
  for (const SortField& f : fields) {
    const NestedField* source = schema.FindField(f.source_id);
    if (source == nullptr) {
      return arrow::Status::Invalid("sort order ", order_id, ": source field id ",
                                    f.source_id, " is not in the schema");
    }
    const std::string name = schema.FindColumnName(f.source_id).value_or("");
    if (!source->type->is_primitive()) {
      return arrow::Status::Invalid("sort order ", order_id, ": cannot sort by '", name,
                                    "', a ", source->type->ToString());
    }
    for (auto parent = schema.FindParentId(f.source_id); parent.has_value();
         parent = schema.FindParentId(*parent)) {
      const NestedField* p = schema.FindField(*parent);
      if (p != nullptr && p->type->id() != TypeId::kStruct) {
        return arrow::Status::Invalid("sort order ", order_id, ": cannot sort by '", name,
                                      "', which is nested in a list or map");
      }
    }
    if (!f.transform.CanTransform(*source->type)) {
      return arrow::Status::Invalid("sort order ", order_id, ": transform ",
                                    f.transform.ToString(), " cannot be applied to ",
                                    source->type->ToString(), " column '", name, "'");
    }
  }
  return arrow::Status::OK();
}

std::string SortOrder::ToString() const {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < fields.size(); ++i) {
    const SortField& f = fields[i];
    out << (i ? ", " : "") << f.transform.ToString() << "(" << f.source_id << ") "
        << (f.direction == SortDirection::kAscending ? "asc" : "desc") << " "
        << (f.null_order == NullOrder::kNullsFirst ? "nulls-first" : "nulls-last");
  }
  out << "]";
  return out.str();
}

json SortOrderToJson(const SortOrder& order) {
  json fields = json::array();
  for (const SortField& f : order.fields) {
    fields.push_back(
        json{{"transform", f.transform.ToString()},
             {"source-id", f.source_id},
             {"direction", f.direction == SortDirection::kAscending ? "asc" : "desc"},
             {"null-order",
              f.null_order == NullOrder::kNullsFirst ? "nulls-first" : "nulls-last"}});
  }
  return json{{"order-id", order.order_id}, {"fields", std::move(fields)}};
}

arrow::Result<SortOrder> SortOrderFromJson(const json& j) {
  using namespace internal;
  if (!j.is_object()) {
    return arrow::Status::Invalid("sort order JSON must be an object, got ", j.dump());
  }
  SortOrder order;
  ARROW_ASSIGN_OR_RAISE(order.order_id, JsonInt32(j, "order-id", "sort order"));
  ARROW_ASSIGN_OR_RAISE(const json* fields, JsonArray(j, "fields", "sort order"));
  for (const json& f : *fields) {
    if (!f.is_object()) {
      return arrow::Status::Invalid("sort field JSON must be an object, got ", f.dump());
    }
    SortField field;
    ARROW_ASSIGN_OR_RAISE(std::string transform,
                          JsonString(f, "transform", "sort field"));
    ARROW_ASSIGN_OR_RAISE(field.transform, Transform::Parse(transform));
    ARROW_ASSIGN_OR_RAISE(field.source_id, JsonInt32(f, "source-id", "sort field"));
    ARROW_ASSIGN_OR_RAISE(std::string direction,
                          JsonString(f, "direction", "sort field"));
    if (direction == "asc") {
      field.direction = SortDirection::kAscending;
    } else if (direction == "desc") {
      field.direction = SortDirection::kDescending;
    } else {
      return arrow::Status::Invalid(
          "sort field direction must be \"asc\" or \"desc\", got \"", direction, "\"");
    }
    ARROW_ASSIGN_OR_RAISE(std::string nulls, JsonString(f, "null-order", "sort field"));
    if (nulls == "nulls-first") {
      field.null_order = NullOrder::kNullsFirst;
    } else if (nulls == "nulls-last") {
      field.null_order = NullOrder::kNullsLast;
    } else {
      return arrow::Status::Invalid(
          "sort field null-order must be \"nulls-first\" or \"nulls-last\", got \"",
          nulls, "\"");
    }
    order.fields.push_back(std::move(field));
  }
  return order;
}

}  // namespace floe::iceberg
