#include "floe/iceberg/partition_spec.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "floe/iceberg/json_internal.h"

namespace floe::iceberg {

using nlohmann::json;

namespace {

bool IsTimeTransform(TransformKind kind) {
  return kind == TransformKind::kYear || kind == TransformKind::kMonth ||
         kind == TransformKind::kDay || kind == TransformKind::kHour;
}

// Whether two transforms of one source column would be redundant: the same
// transform, or two time granularities (Java rejects e.g. day and hour of one column
// in a spec, since one determines the other).
bool Redundant(const Transform& a, const Transform& b) {
  if (a.kind() == TransformKind::kVoid || b.kind() == TransformKind::kVoid) return false;
  if (a == b) return true;
  return IsTimeTransform(a.kind()) && IsTimeTransform(b.kind());
}

// Checks that field `id` is a primitive that is not inside a list or a map, which
// is what Iceberg requires of partition and sort sources.
arrow::Result<const NestedField*> FindSourceField(const Schema& schema, int32_t id,
                                                  const char* what) {
  const NestedField* field = schema.FindField(id);
  if (field == nullptr) {
    return arrow::Status::Invalid(what, " source field id ", id, " is not in the schema");
  }
  if (!field->type->is_primitive()) {
    return arrow::Status::Invalid(what, " source '",
                                  schema.FindColumnName(id).value_or(""), "' is a ",
                                  field->type->ToString(), ", not a primitive column");
  }
  for (std::optional<int32_t> parent = schema.FindParentId(id); parent.has_value();
       parent = schema.FindParentId(*parent)) {
    const NestedField* p = schema.FindField(*parent);
    if (p != nullptr && p->type->id() != TypeId::kStruct) {
      return arrow::Status::Invalid(what, " source '",
                                    schema.FindColumnName(id).value_or(""),
                                    "' is nested in a list or map");
    }
  }
  return field;
}

}  // namespace

int32_t PartitionSpec::last_assigned_field_id() const {
  int32_t last = kUnpartitionedLastPartitionId;
  for (const PartitionField& f : fields) last = std::max(last, f.field_id);
  return last;
}

arrow::Status PartitionSpec::Validate(const Schema& schema) const {
  std::set<int32_t> field_ids;
  std::set<std::string> names;
  for (size_t i = 0; i < fields.size(); ++i) {
    const PartitionField& f = fields[i];
    if (f.name.empty()) {
      return arrow::Status::Invalid("partition field ", f.field_id, " has an empty name");
    }
    if (!names.insert(f.name).second) {
      return arrow::Status::Invalid("partition spec ", spec_id, " has two fields named '",
                                    f.name, "'");
    }
    if (f.field_id < kFirstPartitionFieldId) {
      return arrow::Status::Invalid("partition field '", f.name, "' has id ", f.field_id,
                                    "; partition field ids start at ",
                                    kFirstPartitionFieldId);
    }
    if (!field_ids.insert(f.field_id).second) {
      return arrow::Status::Invalid("partition spec ", spec_id,
                                    " has two fields with id ", f.field_id);
    }
    ARROW_ASSIGN_OR_RAISE(const NestedField* source,
                          FindSourceField(schema, f.source_id, "partition field"));
    if (!f.transform.CanTransform(*source->type)) {
      return arrow::Status::Invalid("partition field '", f.name, "': transform ",
                                    f.transform.ToString(), " cannot be applied to ",
                                    source->type->ToString(), " column '",
                                    schema.FindColumnName(f.source_id).value_or(""), "'");
    }
    if (const NestedField* clash = schema.FindField(std::string_view(f.name));
        clash != nullptr) {
      if (f.transform.kind() != TransformKind::kIdentity || clash->id != f.source_id) {
        return arrow::Status::Invalid(
            "partition field name '", f.name,
            "' is a schema column; only an identity partition of that column may use it");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (fields[j].source_id == f.source_id &&
          Redundant(fields[j].transform, f.transform)) {
        return arrow::Status::Invalid(
            "partition field '", f.name, "' (", f.transform.ToString(),
            ") is redundant with '", fields[j].name, "' (",
            fields[j].transform.ToString(), ") of the same source");
      }
    }
  }
  return arrow::Status::OK();
}

arrow::Result<TypePtr> PartitionSpec::PartitionType(const Schema& schema) const {
  std::vector<NestedField> out;
  out.reserve(fields.size());
  for (const PartitionField& f : fields) {
    const NestedField* source = schema.FindField(f.source_id);
    if (source == nullptr) {
      return arrow::Status::Invalid("partition field '", f.name, "': source field id ",
                                    f.source_id, " is not in the schema");
    }
    ARROW_ASSIGN_OR_RAISE(TypePtr type, f.transform.ResultType(source->type));
    out.push_back(NestedField::Optional(f.field_id, f.name, std::move(type)));
  }
  return Type::Struct(std::move(out));
}

arrow::Result<PartitionTuple> PartitionSpec::Partition(
    const Schema& schema,
    const std::unordered_map<int32_t, std::optional<Literal>>& source_values) const {
  PartitionTuple tuple;
  tuple.reserve(fields.size());
  for (const PartitionField& f : fields) {
    const NestedField* source = schema.FindField(f.source_id);
    if (source == nullptr) {
      return arrow::Status::Invalid("partition field '", f.name, "': source field id ",
                                    f.source_id, " is not in the schema");
    }
    auto it = source_values.find(f.source_id);
    static const std::optional<Literal> kNull;
    const std::optional<Literal>& value = it == source_values.end() ? kNull : it->second;
    auto result = f.transform.Apply(*source->type, value);
    if (!result.ok()) {
      return result.status().WithMessage("partition field '", f.name,
                                         "': ", result.status().message());
    }
    tuple.push_back(std::move(*result));
  }
  return tuple;
}

std::string PartitionSpec::ToString() const {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < fields.size(); ++i) {
    const PartitionField& f = fields[i];
    out << (i ? ", " : "") << f.field_id << ": " << f.name << ": "
        << f.transform.ToString() << "(" << f.source_id << ")";
  }
  out << "]";
  return out.str();
}

// ---- JSON ------------------------------------------------------------------------

json PartitionSpecToJson(const PartitionSpec& spec) {
  json fields = json::array();
  for (const PartitionField& f : spec.fields) {
    fields.push_back(json{{"source-id", f.source_id},
                          {"field-id", f.field_id},
                          {"name", f.name},
                          {"transform", f.transform.ToString()}});
  }
  return json{{"spec-id", spec.spec_id}, {"fields", std::move(fields)}};
}

arrow::Result<PartitionSpec> PartitionSpecFromJson(const json& j) {
  using namespace internal;
  if (!j.is_object()) {
    return arrow::Status::Invalid("partition spec JSON must be an object, got ",
                                  j.dump());
  }
  PartitionSpec spec;
  ARROW_ASSIGN_OR_RAISE(spec.spec_id, JsonInt32(j, "spec-id", "partition spec"));
  ARROW_ASSIGN_OR_RAISE(const json* fields, JsonArray(j, "fields", "partition spec"));
  for (const json& f : *fields) {
    if (!f.is_object()) {
      return arrow::Status::Invalid("partition field JSON must be an object, got ",
                                    f.dump());
    }
    PartitionField field;
    ARROW_ASSIGN_OR_RAISE(field.source_id, JsonInt32(f, "source-id", "partition field"));
    ARROW_ASSIGN_OR_RAISE(field.field_id, JsonInt32(f, "field-id", "partition field"));
    ARROW_ASSIGN_OR_RAISE(field.name, JsonString(f, "name", "partition field"));
    ARROW_ASSIGN_OR_RAISE(std::string transform,
                          JsonString(f, "transform", "partition field"));
    ARROW_ASSIGN_OR_RAISE(field.transform, Transform::Parse(transform));
    spec.fields.push_back(std::move(field));
  }
  return spec;
}

// ---- Builder ---------------------------------------------------------------------

std::string DefaultPartitionFieldName(std::string_view column,
                                      const Transform& transform) {
  std::string name(column);
  switch (transform.kind()) {
    case TransformKind::kIdentity:
      return name;
    case TransformKind::kBucket:
      return name + "_bucket";
    case TransformKind::kTruncate:
      return name + "_trunc";
    case TransformKind::kYear:
      return name + "_year";
    case TransformKind::kMonth:
      return name + "_month";
    case TransformKind::kDay:
      return name + "_day";
    case TransformKind::kHour:
      return name + "_hour";
    case TransformKind::kVoid:
      return name + "_null";
  }
  return name;
}

PartitionSpecBuilder::PartitionSpecBuilder(Schema schema, int32_t spec_id,
                                           int32_t last_partition_id)
    : schema_(std::move(schema)), last_partition_id_(last_partition_id) {
  spec_.spec_id = spec_id;
}

PartitionSpecBuilder& PartitionSpecBuilder::Add(std::string_view column,
                                                Transform transform,
                                                std::string_view name,
                                                std::optional<int32_t> field_id) {
  if (!error_.ok()) return *this;
  const NestedField* source = schema_.FindField(column);
  if (source == nullptr) {
    error_ = arrow::Status::Invalid("cannot partition by '", column,
                                    "': no such column in the schema");
    return *this;
  }
  PartitionField field;
  field.source_id = source->id;
  field.transform = transform;
  field.name =
      name.empty() ? DefaultPartitionFieldName(column, transform) : std::string(name);
  if (field_id.has_value()) {
    field.field_id = *field_id;
    last_partition_id_ = std::max(last_partition_id_, *field_id);
  } else {
    field.field_id = ++last_partition_id_;
  }
  spec_.fields.push_back(std::move(field));
  return *this;
}

PartitionSpecBuilder& PartitionSpecBuilder::Bucket(std::string_view column,
                                                   int32_t num_buckets,
                                                   std::string_view name) {
  if (error_.ok() && num_buckets <= 0) {
    error_ = arrow::Status::Invalid("bucket count for '", column,
                                    "' must be positive, got ", num_buckets);
  }
  return Add(column, Transform::Bucket(num_buckets), name);
}

PartitionSpecBuilder& PartitionSpecBuilder::Truncate(std::string_view column,
                                                     int32_t width,
                                                     std::string_view name) {
  if (error_.ok() && width <= 0) {
    error_ = arrow::Status::Invalid("truncate width for '", column,
                                    "' must be positive, got ", width);
  }
  return Add(column, Transform::Truncate(width), name);
}

arrow::Result<PartitionSpec> PartitionSpecBuilder::Build() const {
  ARROW_RETURN_NOT_OK(error_);
  ARROW_RETURN_NOT_OK(spec_.Validate(schema_));
  return spec_;
}

}  // namespace floe::iceberg
