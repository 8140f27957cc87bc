// Iceberg v2 types and schemas: primitive and nested types with field ids, a Schema
// with lookup by id and by dotted name, the JSON form of the spec's Appendix C,
// conversion to an Arrow schema whose fields carry `PARQUET:field_id` (what
// ParquetFileWriter needs), and the schema-evolution changes Iceberg allows (add an
// optional column, rename, delete, make optional, widen a type) as pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>
#include <nlohmann/json_fwd.hpp>

namespace floe::iceberg {

enum class TypeId {
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kDecimal,
  kDate,
  kTime,
  kTimestamp,
  kTimestampTz,
  kString,
  kUuid,
  kBinary,
  kFixed,
  kStruct,
  kList,
  kMap,
};

class Type;
using TypePtr = std::shared_ptr<const Type>;

/// A named, id-carrying member of a struct, or the element of a list, or the key or
/// value of a map (named `element`, `key` and `value`).
struct NestedField {
  int32_t id = 0;
  std::string name;
  TypePtr type;
  bool required = false;
  /// Optional comment; empty means none.
  std::string doc;

  static NestedField Required(int32_t id, std::string name, TypePtr type,
                              std::string doc = {});
  static NestedField Optional(int32_t id, std::string name, TypePtr type,
                              std::string doc = {});
};

bool operator==(const NestedField& a, const NestedField& b);

/// An immutable Iceberg type. Primitive types are shared singletons (or small
/// values for decimal / fixed); nested types own their fields.
class Type {
 public:
  static TypePtr Boolean();
  static TypePtr Int();
  static TypePtr Long();
  static TypePtr Float();
  static TypePtr Double();
  /// REQUIRES: 1 <= precision <= 38, 0 <= scale <= precision (see MakeDecimal).
  static TypePtr Decimal(int32_t precision, int32_t scale);
  static TypePtr Date();
  static TypePtr Time();
  static TypePtr Timestamp();
  static TypePtr TimestampTz();
  static TypePtr String();
  static TypePtr Uuid();
  static TypePtr Binary();
  /// REQUIRES: length > 0 (see MakeFixed).
  static TypePtr Fixed(int32_t length);
  static TypePtr Struct(std::vector<NestedField> fields);
  static TypePtr List(int32_t element_id, TypePtr element, bool element_required);
  /// Map keys are always required.
  static TypePtr Map(int32_t key_id, TypePtr key, int32_t value_id, TypePtr value,
                     bool value_required);

  /// Checked variants of Decimal / Fixed.
  static arrow::Result<TypePtr> MakeDecimal(int32_t precision, int32_t scale);
  static arrow::Result<TypePtr> MakeFixed(int32_t length);

  /// Parses a primitive type's spec name: `long`, `decimal(9,2)`, `decimal(9, 2)`,
  /// `fixed[16]`, ...
  static arrow::Result<TypePtr> FromPrimitiveString(std::string_view text);

  TypeId id() const { return id_; }
  bool is_primitive() const { return id_ < TypeId::kStruct; }
  bool is_nested() const { return !is_primitive(); }

  /// decimal only.
  int32_t precision() const { return precision_; }
  int32_t scale() const { return scale_; }
  /// fixed only.
  int32_t length() const { return length_; }

  /// Struct: its fields. List: the element. Map: key, then value.
  const std::vector<NestedField>& fields() const { return fields_; }
  /// REQUIRES: list.
  const NestedField& element() const { return fields_[0]; }
  /// REQUIRES: map.
  const NestedField& key() const { return fields_[0]; }
  const NestedField& value() const { return fields_[1]; }

  /// The field with this id directly inside this type, or null.
  const NestedField* FindChild(int32_t id) const;
  /// The struct field with this name directly inside this struct, or null.
  const NestedField* FindChild(std::string_view name) const;

  /// The spec name of a primitive type (`decimal(9,2)`, `fixed[16]`), and a readable
  /// rendering of nested ones (`struct<1: a: optional int>`, `list<string>`, ...).
  std::string ToString() const;

  bool Equals(const Type& other) const;

  /// The same kind of nested type holding `fields` (struct: any number; list: one,
  /// the element; map: key and value).
  TypePtr WithFields(std::vector<NestedField> fields) const;

  /// Use the factories above.
  Type(TypeId id, int32_t precision, int32_t scale, int32_t length,
       std::vector<NestedField> fields);

 private:
  TypeId id_;
  int32_t precision_ = 0;
  int32_t scale_ = 0;
  int32_t length_ = 0;
  std::vector<NestedField> fields_;
};

inline bool operator==(const Type& a, const Type& b) { return a.Equals(b); }

/// A table schema: a struct of fields with unique ids, plus the id of this schema and
/// the ids of the fields that identify a row (a primary key, not enforced).
class Schema {
 public:
  /// Validates: every field id (nested ones too) is unique and non-negative, field
  /// names are non-empty and unique within their struct, no two fields get the same
  /// full name, and identifier fields exist, are required primitives other than
  /// float/double, and are not inside a list, a map or an optional struct.
  static arrow::Result<Schema> Make(int32_t schema_id, std::vector<NestedField> fields,
                                    std::vector<int32_t> identifier_field_ids = {});

  int32_t schema_id() const { return schema_id_; }
  const std::vector<NestedField>& fields() const { return root_->fields(); }
  const std::vector<int32_t>& identifier_field_ids() const {
    return identifier_field_ids_;
  }
  /// The schema as one struct type.
  const TypePtr& as_struct() const { return root_; }

  /// The field with this id at any depth (list elements and map keys / values
  /// included), or null. The pointer lives as long as any copy of this schema.
  const NestedField* FindField(int32_t id) const;
  /// The field with this full dotted name, or null. Full names join struct field
  /// names with `.`; a list's element is `<list>.element`, a map's key and value
  /// `<map>.key` and `<map>.value` (e.g. `points.element.x`). Case-sensitive.
  const NestedField* FindField(std::string_view name) const;
  /// The full dotted name of the field with this id.
  std::optional<std::string> FindColumnName(int32_t id) const;
  /// The id of the field holding field `id`, or nullopt for top-level fields (and
  /// unknown ids).
  std::optional<int32_t> FindParentId(int32_t id) const;

  /// The largest field id in use, nested ids included; 0 for an empty schema.
  int32_t highest_field_id() const { return highest_field_id_; }

  /// The same fields and identifier fields under another schema id.
  Schema WithSchemaId(int32_t schema_id) const;

  /// Same fields (ids, names, types, required flags, docs) and identifier fields;
  /// the schema id is not compared.
  bool SameSchema(const Schema& other) const;
  /// SameSchema and the same schema id.
  bool Equals(const Schema& other) const;

  std::string ToString() const;

 private:
  Schema() = default;

  int32_t schema_id_ = 0;
  TypePtr root_;
  std::vector<int32_t> identifier_field_ids_;
  int32_t highest_field_id_ = 0;
  std::unordered_map<int32_t, const NestedField*> by_id_;
  std::unordered_map<int32_t, int32_t> parent_of_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::unordered_map<int32_t, std::string> name_of_;
};

inline bool operator==(const Schema& a, const Schema& b) { return a.Equals(b); }

// ---- JSON (spec Appendix C) ------------------------------------------------------

/// A type as JSON: a string for primitives, an object for struct / list / map.
nlohmann::json TypeToJson(const Type& type);
arrow::Result<TypePtr> TypeFromJson(const nlohmann::json& json);

/// A schema as a JSON object: `{"type":"struct","schema-id":..,"fields":[..]}` plus
/// `identifier-field-ids` when there are any.
nlohmann::json SchemaToJson(const Schema& schema);
/// Parses a schema object. A missing `schema-id` (allowed in v1) reads as 0.
arrow::Result<Schema> SchemaFromJson(const nlohmann::json& json);
/// Parses JSON text holding a schema object.
arrow::Result<Schema> SchemaFromJsonString(std::string_view text);

// ---- Arrow -----------------------------------------------------------------------

/// The Arrow type that holds values of `type`; nested fields carry their field ids.
/// timestamp -> timestamp(us), timestamptz -> timestamp(us, "UTC"), date -> date32,
/// time -> time64(us), decimal -> decimal128, uuid -> fixed_size_binary(16),
/// fixed[L] -> fixed_size_binary(L), list -> list, map -> map, struct -> struct.
arrow::Result<std::shared_ptr<arrow::DataType>> ToArrowType(const Type& type);
/// One Arrow field (nullable unless required) carrying `PARQUET:field_id`.
arrow::Result<std::shared_ptr<arrow::Field>> ToArrowField(const NestedField& field);
/// The Arrow schema for `schema`, ready for ParquetFileWriter.
arrow::Result<std::shared_ptr<arrow::Schema>> ToArrowSchema(const Schema& schema);

// ---- Schema evolution ------------------------------------------------------------
//
// Each change is a pure function of a schema and the table's `last-column-id`: it
// returns the new schema (same schema id; the table metadata assigns a new one) and
// the new last-column-id, or an error naming the invalid change. Columns are named
// by their full dotted name (see Schema::FindField).

struct SchemaChange {
  Schema schema;
  int32_t last_column_id = 0;
};

/// Adds an optional column `name` of `type` to the struct named `parent` (the top
/// level when `parent` is empty, where `name` may hold '.'; a list of structs or a map with struct values may be
/// named directly). The column gets id last_column_id + 1 and every field nested in
/// `type` a fresh id after it (the ids inside `type` are ignored), in the order
/// Iceberg assigns them: a struct's own fields first, then their children.
arrow::Result<SchemaChange> AddColumn(const Schema& schema, int32_t last_column_id,
                                      std::string_view parent, std::string_view name,
                                      const TypePtr& type, std::string_view doc = {});
/// Renames a struct field (its id and everything else stay). By field id too: a
/// top-level name may hold '.', which a dotted name cannot tell from a nested one.
arrow::Result<SchemaChange> RenameColumn(const Schema& schema, int32_t last_column_id,
                                         std::string_view name,
                                         std::string_view new_name);
arrow::Result<SchemaChange> RenameColumn(const Schema& schema, int32_t last_column_id,
                                         int32_t id, std::string_view new_name);
/// Deletes a struct field and everything nested in it. Identifier fields cannot be
/// deleted, nor list elements or map keys / values.
arrow::Result<SchemaChange> DeleteColumn(const Schema& schema, int32_t last_column_id,
                                         std::string_view name);
/// Makes a required struct field, list element or map value optional (no-op if it
/// already is). Identifier fields and map keys must stay required.
arrow::Result<SchemaChange> MakeColumnOptional(const Schema& schema,
                                               int32_t last_column_id,
                                               std::string_view name);
/// Changes a primitive column's type to a wider one: int -> long, float -> double,
/// decimal(P,S) -> decimal(P2,S) with P2 > P. Changing to the same type is a no-op.
arrow::Result<SchemaChange> UpdateColumnType(const Schema& schema, int32_t last_column_id,
                                             std::string_view name,
                                             const TypePtr& new_type);
arrow::Result<SchemaChange> UpdateColumnType(const Schema& schema, int32_t last_column_id,
                                             int32_t id, const TypePtr& new_type);

/// Whether Iceberg v2 allows widening a `from` column to `to` (identical types
/// included).
bool IsAllowedPromotion(const Type& from, const Type& to);

}  // namespace floe::iceberg
