#include "floe/iceberg/schema.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_set>
#include <utility>

#include <arrow/type.h>
#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/parquet_writer.h"

namespace floe::iceberg {

using nlohmann::json;

NestedField NestedField::Required(int32_t id, std::string name, TypePtr type,
                                  std::string doc) {
  return NestedField{id, std::move(name), std::move(type), true, std::move(doc)};
}

NestedField NestedField::Optional(int32_t id, std::string name, TypePtr type,
                                  std::string doc) {
  return NestedField{id, std::move(name), std::move(type), false, std::move(doc)};
}

bool operator==(const NestedField& a, const NestedField& b) {
  if (a.id != b.id || a.name != b.name || a.required != b.required || a.doc != b.doc) {
    return false;
  }
  if (a.type == nullptr || b.type == nullptr) return a.type == b.type;
  return a.type->Equals(*b.type);
}

// ---- Type ------------------------------------------------------------------------

Type::Type(TypeId id, int32_t precision, int32_t scale, int32_t length,
           std::vector<NestedField> fields)
    : id_(id),
      precision_(precision),
      scale_(scale),
      length_(length),
      fields_(std::move(fields)) {}

namespace {

TypePtr MakePrimitive(TypeId id) {
  return std::make_shared<Type>(id, 0, 0, 0, std::vector<NestedField>{});
}

}  // namespace

#define FLOE_PRIMITIVE_SINGLETON(Name, Id)          \
  TypePtr Type::Name() {                            \
    static const TypePtr kType = MakePrimitive(Id); \
    return kType;                                   \
  }
FLOE_PRIMITIVE_SINGLETON(Boolean, TypeId::kBoolean)
FLOE_PRIMITIVE_SINGLETON(Int, TypeId::kInt)
FLOE_PRIMITIVE_SINGLETON(Long, TypeId::kLong)
FLOE_PRIMITIVE_SINGLETON(Float, TypeId::kFloat)
FLOE_PRIMITIVE_SINGLETON(Double, TypeId::kDouble)
FLOE_PRIMITIVE_SINGLETON(Date, TypeId::kDate)
FLOE_PRIMITIVE_SINGLETON(Time, TypeId::kTime)
FLOE_PRIMITIVE_SINGLETON(Timestamp, TypeId::kTimestamp)
FLOE_PRIMITIVE_SINGLETON(TimestampTz, TypeId::kTimestampTz)
FLOE_PRIMITIVE_SINGLETON(String, TypeId::kString)
FLOE_PRIMITIVE_SINGLETON(Uuid, TypeId::kUuid)
FLOE_PRIMITIVE_SINGLETON(Binary, TypeId::kBinary)
#undef FLOE_PRIMITIVE_SINGLETON

TypePtr Type::Decimal(int32_t precision, int32_t scale) {
  return std::make_shared<Type>(TypeId::kDecimal, precision, scale, 0,
                                std::vector<NestedField>{});
}

TypePtr Type::Fixed(int32_t length) {
  return std::make_shared<Type>(TypeId::kFixed, 0, 0, length, std::vector<NestedField>{});
}

TypePtr Type::Struct(std::vector<NestedField> fields) {
  return std::make_shared<Type>(TypeId::kStruct, 0, 0, 0, std::move(fields));
}

TypePtr Type::List(int32_t element_id, TypePtr element, bool element_required) {
  std::vector<NestedField> fields;
  fields.push_back(
      NestedField{element_id, "element", std::move(element), element_required, {}});
  return std::make_shared<Type>(TypeId::kList, 0, 0, 0, std::move(fields));
}

TypePtr Type::Map(int32_t key_id, TypePtr key, int32_t value_id, TypePtr value,
                  bool value_required) {
  std::vector<NestedField> fields;
  fields.push_back(NestedField{key_id, "key", std::move(key), true, {}});
  fields.push_back(NestedField{value_id, "value", std::move(value), value_required, {}});
  return std::make_shared<Type>(TypeId::kMap, 0, 0, 0, std::move(fields));
}

arrow::Result<TypePtr> Type::MakeDecimal(int32_t precision, int32_t scale) {
  if (precision < 1 || precision > 38) {
    return arrow::Status::Invalid("decimal precision must be in [1, 38], got ",
                                  precision);
  }
  if (scale < 0 || scale > precision) {
    return arrow::Status::Invalid("decimal scale must be in [0, precision=", precision,
                                  "], got ", scale);
  }
  return Decimal(precision, scale);
}

arrow::Result<TypePtr> Type::MakeFixed(int32_t length) {
  if (length <= 0) {
    return arrow::Status::Invalid("fixed length must be positive, got ", length);
  }
  return Fixed(length);
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

// Parses a whole (trimmed) string as a non-negative int32.
std::optional<int32_t> ParseNonNegative(std::string_view s) {
  const std::optional<int32_t> value = ParseInt32(Trim(s));
  if (!value || *value < 0) return std::nullopt;
  return value;
}

// Returns the text between `open` (right after `prefix`) and the final `close`.
std::optional<std::string_view> Between(std::string_view text, std::string_view prefix,
                                        char close) {
  if (text.size() < prefix.size() + 1 || text.substr(0, prefix.size()) != prefix ||
      text.back() != close) {
    return std::nullopt;
  }
  return text.substr(prefix.size(), text.size() - prefix.size() - 1);
}

}  // namespace

arrow::Result<TypePtr> Type::FromPrimitiveString(std::string_view text) {
  text = Trim(text);
  static const std::pair<std::string_view, TypePtr (*)()> kSimple[] = {
      {"boolean", &Type::Boolean},
      {"int", &Type::Int},
      {"long", &Type::Long},
      {"float", &Type::Float},
      {"double", &Type::Double},
      {"date", &Type::Date},
      {"time", &Type::Time},
      {"timestamp", &Type::Timestamp},
      {"timestamptz", &Type::TimestampTz},
      {"string", &Type::String},
      {"uuid", &Type::Uuid},
      {"binary", &Type::Binary},
  };
  for (const auto& [name, make] : kSimple) {
    if (text == name) return make();
  }
  if (auto inner = Between(text, "decimal(", ')')) {
    auto comma = inner->find(',');
    if (comma != std::string_view::npos) {
      auto precision = ParseNonNegative(inner->substr(0, comma));
      auto scale = ParseNonNegative(inner->substr(comma + 1));
      if (precision && scale) return MakeDecimal(*precision, *scale);
    }
    return arrow::Status::Invalid("malformed decimal type '", text,
                                  "'; expected decimal(<precision>,<scale>)");
  }
  if (auto inner = Between(text, "fixed[", ']')) {
    if (auto length = ParseNonNegative(*inner)) return MakeFixed(*length);
    return arrow::Status::Invalid("malformed fixed type '", text,
                                  "'; expected fixed[<length>]");
  }
  for (std::string_view v3 : {"timestamp_ns", "timestamptz_ns", "unknown", "variant"}) {
    if (text == v3) {
      return arrow::Status::NotImplemented(
          "type '", text, "' is an Iceberg v3 type; floe supports v2 types");
    }
  }
  if (text.starts_with("geometry") || text.starts_with("geography")) {
    return arrow::Status::NotImplemented(
        "type '", text, "' is an Iceberg v3 type; floe supports v2 types");
  }
  return arrow::Status::Invalid("unknown Iceberg primitive type '", text, "'");
}

const NestedField* Type::FindChild(int32_t id) const {
  for (const auto& f : fields_) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

const NestedField* Type::FindChild(std::string_view name) const {
  if (id_ != TypeId::kStruct) return nullptr;
  for (const auto& f : fields_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Type::ToString() const {
  switch (id_) {
    case TypeId::kBoolean:
      return "boolean";
    case TypeId::kInt:
      return "int";
    case TypeId::kLong:
      return "long";
    case TypeId::kFloat:
      return "float";
    case TypeId::kDouble:
      return "double";
    case TypeId::kDecimal:
      return "decimal(" + std::to_string(precision_) + "," + std::to_string(scale_) + ")";
    case TypeId::kDate:
      return "date";
    case TypeId::kTime:
      return "time";
    case TypeId::kTimestamp:
      return "timestamp";
    case TypeId::kTimestampTz:
      return "timestamptz";
    case TypeId::kString:
      return "string";
    case TypeId::kUuid:
      return "uuid";
    case TypeId::kBinary:
      return "binary";
    case TypeId::kFixed:
      return "fixed[" + std::to_string(length_) + "]";
    case TypeId::kStruct: {
      std::string out = "struct<";
      for (size_t i = 0; i < fields_.size(); ++i) {
        const NestedField& f = fields_[i];
        if (i > 0) out += ", ";
        out += std::to_string(f.id) + ": " + f.name + ": " +
               (f.required ? "required " : "optional ") + f.type->ToString();
      }
      return out + ">";
    }
    case TypeId::kList:
      return "list<" + fields_[0].type->ToString() + ">";
    case TypeId::kMap:
      return "map<" + fields_[0].type->ToString() + ", " + fields_[1].type->ToString() +
             ">";
  }
  return "?";
}

bool Type::Equals(const Type& other) const {
  return id_ == other.id_ && precision_ == other.precision_ && scale_ == other.scale_ &&
         length_ == other.length_ && fields_ == other.fields_;
}

TypePtr Type::WithFields(std::vector<NestedField> fields) const {
  return std::make_shared<Type>(id_, precision_, scale_, length_, std::move(fields));
}

// ---- Schema ----------------------------------------------------------------------

namespace {

struct Indexer {
  std::unordered_map<int32_t, const NestedField*>* by_id;
  std::unordered_map<int32_t, int32_t>* parent_of;
  std::unordered_map<std::string, int32_t>* by_name;
  std::unordered_map<int32_t, std::string>* name_of;
  int32_t highest = 0;

  arrow::Status Walk(const Type& type, std::optional<int32_t> parent,
                     const std::string& prefix) {
    std::unordered_set<std::string_view> names;
    for (const NestedField& f : type.fields()) {
      const std::string full = prefix.empty() ? f.name : prefix + "." + f.name;
      if (f.type == nullptr) {
        return arrow::Status::Invalid("field '", full, "' (id ", f.id, ") has no type");
      }
      if (f.id < 0) {
        return arrow::Status::Invalid("field '", full, "' has negative id ", f.id);
      }
      if (f.name.empty()) {
        return arrow::Status::Invalid("field id ", f.id, " has an empty name");
      }
      if (type.id() == TypeId::kStruct && !names.insert(f.name).second) {
        return arrow::Status::Invalid("field name '", full,
                                      "' is used twice in the same struct");
      }
      if (!by_id->emplace(f.id, &f).second) {
        return arrow::Status::Invalid("field id ", f.id, " is used twice ('",
                                      (*name_of)[f.id], "' and '", full,
                                      "'); field ids must be unique in a schema");
      }
      if (!by_name->emplace(full, f.id).second) {
        return arrow::Status::Invalid("two fields have the full name '", full, "'");
      }
      name_of->emplace(f.id, full);
      if (parent) parent_of->emplace(f.id, *parent);
      highest = std::max(highest, f.id);
      if (type.id() == TypeId::kMap && f.name == "key" && !f.required) {
        return arrow::Status::Invalid("map key '", full, "' must be required");
      }
      ARROW_RETURN_NOT_OK(Walk(*f.type, f.id, full));
    }
    return arrow::Status::OK();
  }
};

}  // namespace

arrow::Result<Schema> Schema::Make(int32_t schema_id, std::vector<NestedField> fields,
                                   std::vector<int32_t> identifier_field_ids) {
  Schema schema;
  schema.schema_id_ = schema_id;
  schema.root_ = Type::Struct(std::move(fields));
  schema.identifier_field_ids_ = std::move(identifier_field_ids);
  Indexer indexer{&schema.by_id_, &schema.parent_of_, &schema.by_name_, &schema.name_of_};
  ARROW_RETURN_NOT_OK(indexer.Walk(*schema.root_, std::nullopt, ""));
  schema.highest_field_id_ = indexer.highest;

  std::unordered_set<int32_t> seen;
  for (int32_t id : schema.identifier_field_ids_) {
    const NestedField* f = schema.FindField(id);
    if (f == nullptr) {
      return arrow::Status::Invalid("identifier field id ", id, " is not in the schema");
    }
    const std::string& name = schema.name_of_[id];
    if (!seen.insert(id).second) {
      return arrow::Status::Invalid("identifier field '", name, "' is listed twice");
    }
    if (!f->type->is_primitive()) {
      return arrow::Status::Invalid("identifier field '", name,
                                    "' must be a primitive, not ", f->type->ToString());
    }
    if (f->type->id() == TypeId::kFloat || f->type->id() == TypeId::kDouble) {
      return arrow::Status::Invalid("identifier field '", name, "' cannot be ",
                                    f->type->ToString());
    }
    if (!f->required) {
      return arrow::Status::Invalid("identifier field '", name, "' must be required");
    }
    for (auto parent = schema.FindParentId(id); parent;
         parent = schema.FindParentId(*parent)) {
      const NestedField* p = schema.FindField(*parent);
      if (p->type->id() != TypeId::kStruct) {
        return arrow::Status::Invalid("identifier field '", name,
                                      "' cannot be nested in a list or map");
      }
      if (!p->required) {
        return arrow::Status::Invalid("identifier field '", name,
                                      "' cannot be nested in optional struct '",
                                      schema.name_of_[*parent], "'");
      }
    }
  }
  return schema;
}

const NestedField* Schema::FindField(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

const NestedField* Schema::FindField(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : FindField(it->second);
}

std::optional<std::string> Schema::FindColumnName(int32_t id) const {
  auto it = name_of_.find(id);
  if (it == name_of_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> Schema::FindParentId(int32_t id) const {
  auto it = parent_of_.find(id);
  if (it == parent_of_.end()) return std::nullopt;
  return it->second;
}

Schema Schema::WithSchemaId(int32_t schema_id) const {
  Schema copy = *this;
  copy.schema_id_ = schema_id;
  return copy;
}

bool Schema::SameSchema(const Schema& other) const {
  return root_->Equals(*other.root_) &&
         identifier_field_ids_ == other.identifier_field_ids_;
}

bool Schema::Equals(const Schema& other) const {
  return schema_id_ == other.schema_id_ && SameSchema(other);
}

std::string Schema::ToString() const {
  std::ostringstream out;
  out << "schema " << schema_id_ << " " << root_->ToString();
  if (!identifier_field_ids_.empty()) {
    out << " identified by [";
    for (size_t i = 0; i < identifier_field_ids_.size(); ++i) {
      out << (i ? ", " : "") << identifier_field_ids_[i];
    }
    out << "]";
  }
  return out.str();
}

// ---- JSON ------------------------------------------------------------------------

json TypeToJson(const Type& type) {
  switch (type.id()) {
    case TypeId::kStruct: {
      json fields = json::array();
      for (const NestedField& f : type.fields()) {
        json field = {{"id", f.id},
                      {"name", f.name},
                      {"required", f.required},
                      {"type", TypeToJson(*f.type)}};
        if (!f.doc.empty()) field["doc"] = f.doc;
        fields.push_back(std::move(field));
      }
      return json{{"type", "struct"}, {"fields", std::move(fields)}};
    }
    case TypeId::kList:
      return json{{"type", "list"},
                  {"element-id", type.element().id},
                  {"element", TypeToJson(*type.element().type)},
                  {"element-required", type.element().required}};
    case TypeId::kMap:
      return json{{"type", "map"},
                  {"key-id", type.key().id},
                  {"key", TypeToJson(*type.key().type)},
                  {"value-id", type.value().id},
                  {"value", TypeToJson(*type.value().type)},
                  {"value-required", type.value().required}};
    default:
      return type.ToString();
  }
}

namespace {

arrow::Result<const json*> Member(const json& object, const char* key, const char* what) {
  auto it = object.find(key);
  if (it == object.end()) {
    return arrow::Status::Invalid(what, " JSON has no '", key, "': ", object.dump());
  }
  return &*it;
}

arrow::Result<int32_t> IntMember(const json& object, const char* key, const char* what) {
  ARROW_ASSIGN_OR_RAISE(const json* v, Member(object, key, what));
  if (!v->is_number_integer()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be an integer, got ",
                                  v->dump());
  }
  const int64_t i = v->get<int64_t>();
  if (i < std::numeric_limits<int32_t>::min() ||
      i > std::numeric_limits<int32_t>::max() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT32_MAX})) {
    return arrow::Status::Invalid(what, " JSON '", key,
                                  "' is out of int range: ", v->dump());
  }
  return static_cast<int32_t>(i);
}

arrow::Result<bool> BoolMember(const json& object, const char* key, const char* what) {
  ARROW_ASSIGN_OR_RAISE(const json* v, Member(object, key, what));
  if (!v->is_boolean()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be a boolean, got ",
                                  v->dump());
  }
  return v->get<bool>();
}

arrow::Result<std::string> StringMember(const json& object, const char* key,
                                        const char* what) {
  ARROW_ASSIGN_OR_RAISE(const json* v, Member(object, key, what));
  if (!v->is_string()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be a string, got ",
                                  v->dump());
  }
  return v->get<std::string>();
}

arrow::Result<std::vector<NestedField>> FieldsFromJson(const json& object) {
  ARROW_ASSIGN_OR_RAISE(const json* fields_json, Member(object, "fields", "struct"));
  if (!fields_json->is_array()) {
    return arrow::Status::Invalid("struct JSON 'fields' must be an array, got ",
                                  fields_json->dump());
  }
  std::vector<NestedField> fields;
  for (const json& f : *fields_json) {
    if (!f.is_object()) {
      return arrow::Status::Invalid("struct field JSON must be an object, got ",
                                    f.dump());
    }
    NestedField field;
    ARROW_ASSIGN_OR_RAISE(field.id, IntMember(f, "id", "field"));
    ARROW_ASSIGN_OR_RAISE(field.name, StringMember(f, "name", "field"));
    ARROW_ASSIGN_OR_RAISE(field.required, BoolMember(f, "required", "field"));
    ARROW_ASSIGN_OR_RAISE(const json* type, Member(f, "type", "field"));
    ARROW_ASSIGN_OR_RAISE(field.type, TypeFromJson(*type));
    if (f.contains("doc") && !f["doc"].is_null()) {
      ARROW_ASSIGN_OR_RAISE(field.doc, StringMember(f, "doc", "field"));
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

}  // namespace

arrow::Result<TypePtr> TypeFromJson(const json& j) {
  if (j.is_string()) return Type::FromPrimitiveString(j.get<std::string>());
  if (!j.is_object()) {
    return arrow::Status::Invalid("type JSON must be a string or an object, got ",
                                  j.dump());
  }
  ARROW_ASSIGN_OR_RAISE(std::string kind, StringMember(j, "type", "nested type"));
  if (kind == "struct") {
    ARROW_ASSIGN_OR_RAISE(auto fields, FieldsFromJson(j));
    return Type::Struct(std::move(fields));
  }
  if (kind == "list") {
    ARROW_ASSIGN_OR_RAISE(int32_t id, IntMember(j, "element-id", "list"));
    ARROW_ASSIGN_OR_RAISE(bool required, BoolMember(j, "element-required", "list"));
    ARROW_ASSIGN_OR_RAISE(const json* element, Member(j, "element", "list"));
    ARROW_ASSIGN_OR_RAISE(TypePtr element_type, TypeFromJson(*element));
    return Type::List(id, std::move(element_type), required);
  }
  if (kind == "map") {
    ARROW_ASSIGN_OR_RAISE(int32_t key_id, IntMember(j, "key-id", "map"));
    ARROW_ASSIGN_OR_RAISE(int32_t value_id, IntMember(j, "value-id", "map"));
    ARROW_ASSIGN_OR_RAISE(bool required, BoolMember(j, "value-required", "map"));
    ARROW_ASSIGN_OR_RAISE(const json* key, Member(j, "key", "map"));
    ARROW_ASSIGN_OR_RAISE(const json* value, Member(j, "value", "map"));
    ARROW_ASSIGN_OR_RAISE(TypePtr key_type, TypeFromJson(*key));
    ARROW_ASSIGN_OR_RAISE(TypePtr value_type, TypeFromJson(*value));
    return Type::Map(key_id, std::move(key_type), value_id, std::move(value_type),
                     required);
  }
  return arrow::Status::Invalid("unknown nested type '", kind,
                                "'; expected struct, list or map");
}

json SchemaToJson(const Schema& schema) {
  json out = TypeToJson(*schema.as_struct());
  out["schema-id"] = schema.schema_id();
  if (!schema.identifier_field_ids().empty()) {
    out["identifier-field-ids"] = schema.identifier_field_ids();
  }
  return out;
}

arrow::Result<Schema> SchemaFromJson(const json& j) {
  if (!j.is_object()) {
    return arrow::Status::Invalid("schema JSON must be an object, got ", j.dump());
  }
  ARROW_ASSIGN_OR_RAISE(std::string kind, StringMember(j, "type", "schema"));
  if (kind != "struct") {
    return arrow::Status::Invalid("schema JSON 'type' must be \"struct\", got \"", kind,
                                  "\"");
  }
  int32_t schema_id = 0;
  if (j.contains("schema-id")) {
    ARROW_ASSIGN_OR_RAISE(schema_id, IntMember(j, "schema-id", "schema"));
  }
  std::vector<int32_t> identifiers;
  if (auto it = j.find("identifier-field-ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return arrow::Status::Invalid(
          "schema JSON 'identifier-field-ids' must be an array");
    }
    for (const json& id : *it) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return arrow::Status::Invalid("schema JSON 'identifier-field-ids' holds ",
                                      id.dump(), ", not a field id");
      }
      identifiers.push_back(id.get<int32_t>());
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto fields, FieldsFromJson(j));
  return Schema::Make(schema_id, std::move(fields), std::move(identifiers));
}

arrow::Result<Schema> SchemaFromJsonString(std::string_view text) {
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return arrow::Status::Invalid("schema is not valid JSON");
  }
  return SchemaFromJson(j);
}

// ---- Arrow -----------------------------------------------------------------------

arrow::Result<std::shared_ptr<arrow::DataType>> ToArrowType(const Type& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return arrow::boolean();
    case TypeId::kInt:
      return arrow::int32();
    case TypeId::kLong:
      return arrow::int64();
    case TypeId::kFloat:
      return arrow::float32();
    case TypeId::kDouble:
      return arrow::float64();
    case TypeId::kDecimal:
      return arrow::Decimal128Type::Make(type.precision(), type.scale());
    case TypeId::kDate:
      return arrow::date32();
    case TypeId::kTime:
      return arrow::time64(arrow::TimeUnit::MICRO);
    case TypeId::kTimestamp:
      return arrow::timestamp(arrow::TimeUnit::MICRO);
    case TypeId::kTimestampTz:
      return arrow::timestamp(arrow::TimeUnit::MICRO, "UTC");
    case TypeId::kString:
      return arrow::utf8();
    case TypeId::kUuid:
      return arrow::fixed_size_binary(16);
    case TypeId::kBinary:
      return arrow::binary();
    case TypeId::kFixed:
      return arrow::fixed_size_binary(type.length());
    case TypeId::kStruct: {
      arrow::FieldVector fields;
      for (const NestedField& f : type.fields()) {
        ARROW_ASSIGN_OR_RAISE(auto field, ToArrowField(f));
        fields.push_back(std::move(field));
      }
      return arrow::struct_(std::move(fields));
    }
    case TypeId::kList: {
      ARROW_ASSIGN_OR_RAISE(auto element, ToArrowField(type.element()));
      return arrow::list(std::move(element));
    }
    case TypeId::kMap: {
      ARROW_ASSIGN_OR_RAISE(auto key, ToArrowField(type.key()));
      ARROW_ASSIGN_OR_RAISE(auto value, ToArrowField(type.value()));
      return std::make_shared<arrow::MapType>(std::move(key), std::move(value));
    }
  }
  return arrow::Status::Invalid("unknown Iceberg type");
}

arrow::Result<std::shared_ptr<arrow::Field>> ToArrowField(const NestedField& field) {
  ARROW_ASSIGN_OR_RAISE(auto type, ToArrowType(*field.type));
  return WithFieldId(arrow::field(field.name, std::move(type), !field.required),
                     field.id);
}

arrow::Result<std::shared_ptr<arrow::Schema>> ToArrowSchema(const Schema& schema) {
  arrow::FieldVector fields;
  for (const NestedField& f : schema.fields()) {
    ARROW_ASSIGN_OR_RAISE(auto field, ToArrowField(f));
    fields.push_back(std::move(field));
  }
  return arrow::schema(std::move(fields));
}

}  // namespace floe::iceberg
