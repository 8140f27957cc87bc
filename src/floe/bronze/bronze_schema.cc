#include "floe/bronze/bronze_schema.h"
#include "floe/bronze/bronze_schema_internal.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/util/checked_cast.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/arrow_compute.h"
#include "floe/lake/keys.h"
#include "floe/source/postgres/change_stream.h"

namespace floe::bronze {

using internal::CheckSourceColumns;
using internal::IsCdcName;
using internal::MatchBindings;
using internal::TopLevelField;

namespace {

using iceberg::NestedField;
using iceberg::Schema;
using iceberg::Type;
using iceberg::TypeId;
using iceberg::TypePtr;
using nlohmann::json;

// The Bronze CDC columns in table order.
constexpr std::array<const char*, 8> kCdcColumns = {
    kCdcOp,         kCdcTs,        kCdcProcessedAt, kCdcSourceLsn,
    kCdcSourceTxId, kCdcCommitLsn, kCdcSeq,         kCdcUnchanged};

TypePtr CdcType(std::string_view name) {
  if (name == kCdcOp) return Type::String();
  if (name == kCdcTs || name == kCdcProcessedAt) return Type::TimestampTz();
  if (name == kCdcSeq) return Type::Int();
  if (name == kCdcUnchanged) return Type::List(0, Type::String(), false);
  return Type::Long();  // the three LSN / xid columns
}

// Iceberg rejects '.' in a new column name (it would make dotted names ambiguous);
// Postgres allows it. The Bronze field takes '_' in its place.
std::string BaseName(std::string_view source_name) {
  std::string out(source_name);
  std::replace(out.begin(), out.end(), '.', '_');
  return out;
}

// The type part of a `<name>__<type>` name: the primitive's spec name with every
// run of other characters than [a-z0-9] turned into one '_' (decimal(12,4) ->
// decimal_12_4, fixed[16] -> fixed_16); the kind for nested types.
std::string TypeToken(const Type& type) {
  switch (type.id()) {
    case TypeId::kStruct:
      return "struct";
    case TypeId::kList:
      return "list";
    case TypeId::kMap:
      return "map";
    default:
      break;
  }
  std::string out;
  for (char c : type.ToString()) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// Whether field name `name` was chosen for a column whose base name is `base`: the
// base itself, or the base with a `__` suffix.
bool BelongsTo(std::string_view name, std::string_view base) {
  if (name == base) return true;
  return name.size() > base.size() + 2 && name.substr(0, base.size()) == base &&
         name.substr(base.size(), 2) == "__";
}

// The first of `base`, `base__<type>`, `base__<type>_2`, ... that is not taken.
std::string FreeName(const std::string& base, const Type& type,
                     const std::function<bool(const std::string&)>& taken) {
  if (!taken(base)) return base;
  const std::string suffixed = base + "__" + TypeToken(type);
  if (!taken(suffixed)) return suffixed;
  for (int n = 2;; ++n) {
    std::string candidate = suffixed + "_" + std::to_string(n);
    if (!taken(candidate)) return candidate;
  }
}

// Same types, nested field ids ignored (a fresh IcebergTypeFor has placeholders).
bool SameShape(const Type& a, const Type& b) {
  if (a.id() != b.id() || a.precision() != b.precision() || a.scale() != b.scale() ||
      a.length() != b.length() || a.fields().size() != b.fields().size()) {
    return false;
  }
  for (size_t i = 0; i < a.fields().size(); ++i) {
    const NestedField& x = a.fields()[i];
    const NestedField& y = b.fields()[i];
    if (x.name != y.name || x.required != y.required || !SameShape(*x.type, *y.type)) {
      return false;
    }
  }
  return true;
}

// Whether a field of type `field` can hold every value of type `value` exactly:
// the same shape, or a type Iceberg could have widened `value` to (int -> long,
// float -> double, decimal precision), at any depth.
bool CanHold(const Type& field, const Type& value) {
  if (field.is_primitive() && value.is_primitive()) {
    return iceberg::IsAllowedPromotion(value, field);
  }
  if (field.id() != value.id() || field.fields().size() != value.fields().size()) {
    return false;
  }
  for (size_t i = 0; i < field.fields().size(); ++i) {
    const NestedField& f = field.fields()[i];
    const NestedField& v = value.fields()[i];
    if (f.name != v.name || (f.required && !v.required) || !CanHold(*f.type, *v.type)) {
      return false;
    }
  }
  return true;
}

enum class Fit {
  kSame,     // nothing to do
  kHolds,    // the field is wider: values are cast on write
  kPromote,  // an Iceberg type promotion of the field
  kNone,     // needs another field
};

Fit FitOf(const Type& field, const Type& value) {
  if (SameShape(field, value)) return Fit::kSame;
  if (CanHold(field, value)) return Fit::kHolds;
  if (field.is_primitive() && value.is_primitive() &&
      iceberg::IsAllowedPromotion(field, value)) {
    return Fit::kPromote;
  }
  return Fit::kNone;
}

// Assigns ids the way Table::Create does (iceberg::AssignFreshFieldIds): a struct's
// own fields first, then their children.
TypePtr WithFreshIds(const TypePtr& type, int32_t* last_id) {
  if (type->is_primitive()) return type;
  std::vector<NestedField> fields = type->fields();
  for (NestedField& f : fields) f.id = ++*last_id;
  for (NestedField& f : fields) f.type = WithFreshIds(f.type, last_id);
  return type->WithFields(std::move(fields));
}

// A readable Postgres type for the change log: the common built-ins by oid (their
// oids are fixed), anything else by number.
std::string PgTypeName(postgres::Oid oid, int32_t typmod) {
  switch (oid) {
    case 16:
      return "bool";
    case 17:
      return "bytea";
    case 20:
      return "int8";
    case 21:
      return "int2";
    case 23:
      return "int4";
    case 25:
      return "text";
    case 26:
      return "oid";
    case 114:
      return "json";
    case 700:
      return "float4";
    case 701:
      return "float8";
    case 1042:
      return typmod >= 4 ? "char(" + std::to_string(typmod - 4) + ")" : "bpchar";
    case 1043:
      return typmod >= 4 ? "varchar(" + std::to_string(typmod - 4) + ")" : "varchar";
    case 1082:
      return "date";
    case 1083:
      return "time";
    case 1114:
      return "timestamp";
    case 1184:
      return "timestamptz";
    case 1186:
      return "interval";
    case 1700:
      if (typmod >= 4) {
        const int32_t t = typmod - 4;
        return "numeric(" + std::to_string((t >> 16) & 0xffff) + "," +
               std::to_string(t & 0x7ff) + ")";
      }
      return "numeric";
    case 2950:
      return "uuid";
    case 3802:
      return "jsonb";
    default:
      break;
  }
  std::string out = "type oid " + std::to_string(oid);
  if (typmod >= 0) out += " (typmod " + std::to_string(typmod) + ")";
  return out;
}

arrow::Result<TypePtr> TypeForAt(const arrow::DataType& arrow_type,
                                 const postgres::ColumnMapping* mapping, int32_t* next_id,
                                 int depth) {
  if (depth > 64) {
    return arrow::Status::Invalid("type nested more than 64 levels deep: ",
                                  arrow_type.ToString());
  }
  if (mapping != nullptr && mapping->converter == postgres::ConverterKind::kUuid) {
    if (arrow_type.id() != arrow::Type::FIXED_SIZE_BINARY ||
        arrow::internal::checked_cast<const arrow::FixedSizeBinaryType&>(arrow_type)
                .byte_width() != 16) {
      return arrow::Status::Invalid(
          "a uuid column must map to fixed_size_binary(16), "
          "not ",
          arrow_type.ToString());
    }
    return Type::Uuid();
  }
  switch (arrow_type.id()) {
    case arrow::Type::BOOL:
      return Type::Boolean();
    case arrow::Type::INT8:
    case arrow::Type::UINT8:
    case arrow::Type::INT16:
    case arrow::Type::UINT16:
    case arrow::Type::INT32:
      return Type::Int();
    case arrow::Type::UINT32:
    case arrow::Type::INT64:
      return Type::Long();
    case arrow::Type::FLOAT:
      return Type::Float();
    case arrow::Type::DOUBLE:
      return Type::Double();
    case arrow::Type::DECIMAL128: {
      const auto& d =
          arrow::internal::checked_cast<const arrow::Decimal128Type&>(arrow_type);
      return Type::MakeDecimal(d.precision(), d.scale());
    }
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
      return Type::String();
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY:
      return Type::Binary();
    case arrow::Type::FIXED_SIZE_BINARY:
      return Type::MakeFixed(
          arrow::internal::checked_cast<const arrow::FixedSizeBinaryType&>(arrow_type)
              .byte_width());
    case arrow::Type::DATE32:
      return Type::Date();
    case arrow::Type::TIME64:
      if (arrow::internal::checked_cast<const arrow::Time64Type&>(arrow_type).unit() ==
          arrow::TimeUnit::MICRO) {
        return Type::Time();
      }
      break;
    case arrow::Type::TIMESTAMP: {
      const auto& ts =
          arrow::internal::checked_cast<const arrow::TimestampType&>(arrow_type);
      if (ts.unit() != arrow::TimeUnit::MICRO) break;
      // Any zone means instants (the source writes "UTC"); none means local times.
      return ts.timezone().empty() ? Type::Timestamp() : Type::TimestampTz();
    }
    case arrow::Type::LIST: {
      const postgres::ColumnMapping* element_mapping = nullptr;
      if (mapping != nullptr && mapping->converter == postgres::ConverterKind::kArray &&
          mapping->children.size() == 1) {
        element_mapping = &mapping->children[0];
      }
      const int32_t element_id = ++*next_id;
      ARROW_ASSIGN_OR_RAISE(
          TypePtr element,
          TypeForAt(*arrow_type.field(0)->type(), element_mapping, next_id, depth + 1));
      return Type::List(element_id, std::move(element), /*element_required=*/false);
    }
    case arrow::Type::STRUCT: {
      std::vector<NestedField> fields;
      for (int i = 0; i < arrow_type.num_fields(); ++i) {
        const postgres::ColumnMapping* child = nullptr;
        if (mapping != nullptr) {
          if (mapping->converter == postgres::ConverterKind::kComposite &&
              mapping->children.size() == static_cast<size_t>(arrow_type.num_fields())) {
            child = &mapping->children[i];
          } else if (mapping->converter == postgres::ConverterKind::kRange &&
                     mapping->children.size() == 1 && i < 2) {
            child = &mapping->children[0];  // lower and upper share the subtype
          }
        }
        const auto& f = arrow_type.field(i);
        const int32_t id = ++*next_id;
        ARROW_ASSIGN_OR_RAISE(TypePtr type,
                              TypeForAt(*f->type(), child, next_id, depth + 1));
        fields.push_back(NestedField::Optional(id, f->name(), std::move(type)));
      }
      return Type::Struct(std::move(fields));
    }
    default:
      break;
  }
  return arrow::Status::NotImplemented(
      "no Iceberg type for Arrow type ", arrow_type.ToString(),
      "; the Postgres type mapping produced a type the Bronze layer does not know");
}

}  // namespace

namespace internal {

bool IsCdcName(std::string_view name) {
  return std::find(kCdcColumns.begin(), kCdcColumns.end(), name) != kCdcColumns.end();
}

// A top-level field by id, or null (also for nested ids).
const NestedField* TopLevelField(const Schema& schema, int32_t id) {
  return schema.as_struct()->FindChild(id);
}

arrow::Status CheckSourceColumns(const std::vector<SourceColumn>& columns) {
  std::unordered_set<int16_t> attnums;
  std::unordered_set<std::string> names;
  for (const SourceColumn& c : columns) {
    if (c.name.empty()) {
      return arrow::Status::Invalid("a source column has an empty name");
    }
    if (!names.insert(c.name).second) {
      return arrow::Status::Invalid("source column '", c.name,
                                    "' appears twice in the column list");
    }
    if (c.attnum != 0 && !attnums.insert(c.attnum).second) {
      return arrow::Status::Invalid("source columns share attnum ", c.attnum,
                                    " (second: '", c.name,
                                    "'); attnums must be unique, or 0 when unknown");
    }
  }
  return arrow::Status::OK();
}

// For each source column, the index of its binding in `bound`, or -1: by attnum
// where both sides know it, then by name where either side does not.
std::vector<int> MatchBindings(const std::vector<SourceColumn>& source,
                               const std::vector<ColumnBinding>& bound) {
  std::vector<int> match(source.size(), -1);
  std::vector<bool> used(bound.size(), false);
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i].attnum == 0) continue;
    for (size_t j = 0; j < bound.size(); ++j) {
      if (!used[j] && bound[j].attnum == source[i].attnum) {
        match[i] = static_cast<int>(j);
        used[j] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < source.size(); ++i) {
    if (match[i] != -1) continue;
    for (size_t j = 0; j < bound.size(); ++j) {
      if (!used[j] && (source[i].attnum == 0 || bound[j].attnum == 0) &&
          bound[j].name == source[i].name) {
        match[i] = static_cast<int>(j);
        used[j] = true;
        break;
      }
    }
  }
  // Then by a name the column had before (a shape from before a rename, described
  // after the catalog moved on: a restart replaying changes Bronze does not hold yet).
  for (size_t i = 0; i < source.size(); ++i) {
    if (match[i] != -1) continue;
    for (size_t j = 0; j < bound.size(); ++j) {
      const auto& former = bound[j].former_names;
      if (!used[j] && (source[i].attnum == 0 || bound[j].attnum == 0) &&
          std::find(former.begin(), former.end(), source[i].name) != former.end()) {
        match[i] = static_cast<int>(j);
        used[j] = true;
        break;
      }
    }
  }
  return match;
}

}  // namespace internal

// ---- Types -----------------------------------------------------------------------

arrow::Result<TypePtr> IcebergTypeFor(const postgres::ColumnMapping& mapping) {
  if (mapping.type == nullptr) {
    return arrow::Status::Invalid("column mapping has no Arrow type");
  }
  int32_t next_id = 0;
  return TypeForAt(*mapping.type, &mapping, &next_id, 0);
}

// ---- New tables ------------------------------------------------------------------

arrow::Result<BronzeLayout> NewBronzeLayout(const std::vector<SourceColumn>& columns) {
  ARROW_RETURN_NOT_OK(CheckSourceColumns(columns));
  std::set<std::string> names;
  auto taken = [&](const std::string& n) { return IsCdcName(n) || names.count(n) > 0; };

  std::vector<NestedField> fields;
  ColumnMap map;
  int32_t id = 0;
  for (const SourceColumn& c : columns) {
    auto type = IcebergTypeFor(c.mapping);
    if (!type.ok()) {
      return type.status().WithMessage("source column '", c.name,
                                       "': ", type.status().message());
    }
    std::string name = FreeName(BaseName(c.name), **type, taken);
    names.insert(name);
    fields.push_back(NestedField::Optional(++id, std::move(name), *type));
    map.columns.push_back(
        ColumnBinding{c.attnum, c.name, id, c.type_oid, c.type_modifier, {}});
  }
  for (const char* name : kCdcColumns) {
    fields.push_back(NestedField::Optional(++id, name, CdcType(name)));
  }
  for (NestedField& f : fields) f.type = WithFreshIds(f.type, &id);
  ARROW_ASSIGN_OR_RAISE(Schema schema, Schema::Make(0, std::move(fields)));
  return BronzeLayout{std::move(schema), std::move(map)};
}

arrow::Result<ColumnMap> BindByName(const Schema& schema,
                                    const ColumnMap& layout_columns) {
  ColumnMap out = layout_columns;
  const auto& fields = schema.fields();
  for (ColumnBinding& b : out.columns) {
    const int32_t position = b.field_id - 1;
    if (position < 0 || static_cast<size_t>(position) >= fields.size() ||
        !BelongsTo(fields[position].name, BaseName(b.name)) ||
        IsCdcName(fields[position].name)) {
      return arrow::Status::Invalid(
          "column '", b.name, "' (layout field id ", b.field_id,
          ") has no field in the created schema at that position; BindByName takes "
          "the column map NewBronzeLayout returned with the schema Table::Create "
          "made from its schema");
    }
    b.field_id = fields[position].id;
    b.retired_field_ids.clear();
  }
  return out;
}

// ---- Evolution -------------------------------------------------------------------

namespace {

struct Decision {
  const SourceColumn* source = nullptr;
  TypePtr type;
  // The binding the column had, if any.
  const ColumnBinding* old = nullptr;
  // The field it will write to; 0 while a new field is still to be added.
  int32_t field_id = 0;
  bool promote = false;
  std::vector<int32_t> retired;
  // The change-log line of a type change still waiting for its new field's name.
  std::optional<size_t> pending_line;
};

// 1. Keep every matched column on its field where the field can take the new type.
arrow::Status KeepMatchedFields(const Schema& s, const std::vector<SourceColumn>& source,
                                const ColumnMap& bound, const std::vector<int>& match,
                                std::vector<Decision>& decisions,
                                std::unordered_set<int32_t>& claimed,
                                std::vector<std::string>& changes) {
  for (size_t i = 0; i < source.size(); ++i) {
    Decision& d = decisions[i];
    d.source = &source[i];
    auto type = IcebergTypeFor(source[i].mapping);
    if (!type.ok()) {
      return type.status().WithMessage("source column '", source[i].name,
                                       "': ", type.status().message());
    }
    d.type = *type;
    if (match[i] < 0) continue;
    d.old = &bound.columns[match[i]];
    for (int32_t id : d.old->retired_field_ids) {
      if (TopLevelField(s, id) != nullptr) d.retired.push_back(id);
    }
    const NestedField* f = TopLevelField(s, d.old->field_id);
    if (f == nullptr || IsCdcName(f->name)) {
      changes.push_back("column " + source[i].name + ": its field id " +
                        std::to_string(d.old->field_id) +
                        " is no longer in the table; it gets a new field");
      continue;
    }
    const Fit fit = FitOf(*f->type, *d.type);
    if (fit == Fit::kNone) continue;
    d.field_id = f->id;
    d.promote = fit == Fit::kPromote;
    claimed.insert(f->id);
    const bool retyped = d.old->type_oid != source[i].type_oid ||
                         d.old->type_modifier != source[i].type_modifier;
    if (d.promote) {
      changes.push_back("column " + source[i].name + ": " +
                        PgTypeName(d.old->type_oid, d.old->type_modifier) + " -> " +
                        PgTypeName(source[i].type_oid, source[i].type_modifier) +
                        " promotes field " + f->name + " from " + f->type->ToString() +
                        " to " + d.type->ToString());
    } else if (retyped) {
      changes.push_back("column " + source[i].name + ": " +
                        PgTypeName(d.old->type_oid, d.old->type_modifier) + " -> " +
                        PgTypeName(source[i].type_oid, source[i].type_modifier) +
                        " keeps field " + f->name + " (" + f->type->ToString() +
                        (fit == Fit::kSame ? ", unchanged)" : ", wide enough)"));
    }
  }
  return arrow::Status::OK();
}

// 2. A type change the field cannot take: back to one of the column's own earlier
//    fields that fits, else (step 5) a new field.
void ReturnToEarlierFields(const Schema& s, const std::vector<SourceColumn>& source,
                           std::vector<Decision>& decisions,
                           std::unordered_set<int32_t>& claimed,
                           std::vector<std::string>& changes) {
  for (size_t i = 0; i < source.size(); ++i) {
    Decision& d = decisions[i];
    if (d.old == nullptr || d.field_id != 0) continue;
    const NestedField* old_field = TopLevelField(s, d.old->field_id);
    if (old_field == nullptr || IsCdcName(old_field->name)) continue;
    std::erase(d.retired, old_field->id);
    d.retired.push_back(old_field->id);
    const NestedField* pick = nullptr;
    Fit pick_fit = Fit::kNone;
    for (int32_t id : d.retired) {
      const NestedField* f = TopLevelField(s, id);
      if (f == nullptr || id == old_field->id || claimed.count(id) > 0) continue;
      const Fit fit = FitOf(*f->type, *d.type);
      // The closest fit wins: the same type, then one that holds it, then a
      // promotion.
      if (fit != Fit::kNone && (pick == nullptr || fit < pick_fit)) {
        pick = f;
        pick_fit = fit;
      }
    }
    std::string line = "column " + source[i].name + ": " +
                       PgTypeName(d.old->type_oid, d.old->type_modifier) + " -> " +
                       PgTypeName(source[i].type_oid, source[i].type_modifier) +
                       " is not an Iceberg promotion (" + old_field->type->ToString() +
                       " -> " + d.type->ToString() + "); ";
    if (pick != nullptr) {
      d.field_id = pick->id;
      d.promote = pick_fit == Fit::kPromote;
      claimed.insert(pick->id);
      std::erase(d.retired, pick->id);
      changes.push_back(line + "written to its earlier field " + pick->name + " (id " +
                        std::to_string(pick->id) + ") again" +
                        (d.promote ? ", promoted to " + d.type->ToString() : "") + "; " +
                        old_field->name + " keeps the values written since");
    } else {
      // The new field's name is known after the renames (step 4); the line is
      // finished in step 5.
      d.pending_line = changes.size();
      changes.push_back(line);
    }
  }
}

// Whether a name is taken in `s`: by a CDC column or by a field other than `self`.
auto TakenByOther(const Schema& s, int32_t self) {
  return [&s, self](const std::string& n) {
    if (IsCdcName(n)) return true;
    const NestedField* f = s.as_struct()->FindChild(n);
    return f != nullptr && f->id != self;
  };
}

// 4. Renames: a renamed column's field, or a re-bound field named for another
//    name, takes the column's name. Every such field first gets a temporary name so
//    that names can move between columns (a <-> b) in one step.
arrow::Status RenameFields(Schema& s, int32_t last,
                           const std::vector<Decision>& decisions,
                           std::vector<std::string>& changes) {
  std::vector<size_t> renamed;
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    if (d.field_id == 0) continue;
    const NestedField* f = TopLevelField(s, d.field_id);
    if (d.old->name != d.source->name || !BelongsTo(f->name, BaseName(d.source->name))) {
      renamed.push_back(i);
    }
  }
  std::unordered_map<int32_t, std::string> old_names;
  for (size_t i : renamed) {
    const int32_t id = decisions[i].field_id;
    const std::string name = TopLevelField(s, id)->name;
    old_names[id] = name;
    std::string temp = "__floe_renaming_" + std::to_string(id);
    while (s.as_struct()->FindChild(temp) != nullptr) temp += "_";
    ARROW_ASSIGN_OR_RAISE(iceberg::SchemaChange c,
                          iceberg::RenameColumn(s, last, id, temp));
    s = std::move(c.schema);
  }
  for (size_t i : renamed) {
    const Decision& d = decisions[i];
    const std::string name =
        FreeName(BaseName(d.source->name), *d.type, TakenByOther(s, d.field_id));
    ARROW_ASSIGN_OR_RAISE(iceberg::SchemaChange c,
                          iceberg::RenameColumn(s, last, d.field_id, name));
    s = std::move(c.schema);
    const std::string& before = old_names[d.field_id];
    if (before == name) continue;
    std::string what = d.old->name != d.source->name
                           ? "column " + d.old->name + " renamed to " + d.source->name
                           : "column " + d.source->name;
    changes.push_back(what + ": field " + before + " (id " + std::to_string(d.field_id) +
                      ") renamed to " + name);
  }
  return arrow::Status::OK();
}

// Appends the column's binding after the evolution to `columns`: its field, the
// earlier fields still in `s` and the names it had before.
void AppendBinding(Decision& d, const Schema& s, ChangePosition written_through,
                   ColumnMap& columns) {
  std::erase_if(d.retired, [&](int32_t id) {
    return id == d.field_id || TopLevelField(s, id) == nullptr;
  });
  int16_t attnum = d.source->attnum;
  if (attnum == 0 && d.old != nullptr) attnum = d.old->attnum;
  std::vector<std::string> former;
  std::vector<ChangePosition> through;
  if (d.old != nullptr) {
    former = d.old->former_names;
    through = d.old->former_through;
    through.resize(former.size(), ChangePosition{0, 0});
    // A name the column had before and has again, or had twice: its entries with
    // a known last position all stay, so that a change names the column that had
    // the name when it was written (a swap and a swap back: each side held the
    // other's name in between). Only entries without one (maps written before
    // floe kept positions) go, as they cannot be told apart.
    auto forget = [&](const std::string& name) {
      for (size_t k = former.size(); k-- > 0;) {
        if (former[k] != name || through[k] != ChangePosition{0, 0}) continue;
        former.erase(former.begin() + static_cast<std::ptrdiff_t>(k));
        through.erase(through.begin() + static_cast<std::ptrdiff_t>(k));
      }
    };
    if (d.old->name != d.source->name) {
      forget(d.old->name);
      former.push_back(d.old->name);
      through.push_back(written_through);
    }
    forget(d.source->name);
    if (former.size() > kMaxFormerNames) {
      const auto extra = static_cast<std::ptrdiff_t>(former.size() - kMaxFormerNames);
      former.erase(former.begin(), former.begin() + extra);
      through.erase(through.begin(), through.begin() + extra);
    }
  }
  columns.columns.push_back(ColumnBinding{
      attnum, d.source->name, d.field_id, d.source->type_oid, d.source->type_modifier,
      std::move(d.retired), std::move(former), std::move(through)});
}

}  // namespace

arrow::Result<EvolutionPlan> PlanEvolution(const Schema& current, int32_t last_column_id,
                                           const ColumnMap& bound,
                                           const std::vector<SourceColumn>& source,
                                           ChangePosition written_through) {
  ARROW_RETURN_NOT_OK(CheckSourceColumns(source));
  ARROW_RETURN_NOT_OK(lake::CheckColumnMap(bound));
  // EvolutionPlan holds a Schema, which has no empty state: built at the end.
  std::vector<std::string> changes;
  ColumnMap columns;
  Schema s = current;
  int32_t last = std::max(last_column_id, current.highest_field_id());

  const std::vector<int> match = MatchBindings(source, bound.columns);
  std::vector<Decision> decisions(source.size());
  std::unordered_set<int32_t> claimed;

  // 1. Matched columns keep their fields; 2. type changes go back to earlier ones.
  ARROW_RETURN_NOT_OK(
      KeepMatchedFields(s, source, bound, match, decisions, claimed, changes));
  ReturnToEarlierFields(s, source, decisions, claimed, changes);

  // 3. Promotions.
  for (const Decision& d : decisions) {
    if (!d.promote) continue;
    ARROW_ASSIGN_OR_RAISE(iceberg::SchemaChange c,
                          iceberg::UpdateColumnType(s, last, d.field_id, d.type));
    s = std::move(c.schema);
    last = c.last_column_id;
  }

  // 4. Renames.
  ARROW_RETURN_NOT_OK(RenameFields(s, last, decisions, changes));

  // 5. New fields: added columns and type changes with no field to go back to.
  for (Decision& d : decisions) {
    if (d.field_id != 0) continue;
    const std::string name =
        FreeName(BaseName(d.source->name), *d.type, TakenByOther(s, 0));
    ARROW_ASSIGN_OR_RAISE(iceberg::SchemaChange c,
                          iceberg::AddColumn(s, last, "", name, d.type));
    s = std::move(c.schema);
    last = c.last_column_id;
    d.field_id = s.as_struct()->FindChild(name)->id;
    const std::string where =
        name + " (id " + std::to_string(d.field_id) + ", " + d.type->ToString() + ")";
    if (d.pending_line) {
      changes[*d.pending_line] += "now written to " + where + "; " +
                                  TopLevelField(s, d.old->field_id)->name +
                                  " keeps the older values";
    } else {
      changes.push_back("column " + d.source->name + ": added as field " + where);
    }
  }

  // 6. Dropped columns: their fields stay for the rows already written.
  for (size_t j = 0; j < bound.columns.size(); ++j) {
    if (std::find(match.begin(), match.end(), static_cast<int>(j)) != match.end()) {
      continue;
    }
    const ColumnBinding& b = bound.columns[j];
    const NestedField* f = TopLevelField(s, b.field_id);
    changes.push_back("column " + b.name + ": dropped; field " +
                      (f != nullptr ? f->name : std::string("?")) + " (id " +
                      std::to_string(b.field_id) +
                      ") kept for older rows, new rows read null");
  }

  // 7. CDC columns missing from an older table, then the order the design promises:
  //    row columns, then the CDC columns.
  for (const char* name : kCdcColumns) {
    if (s.as_struct()->FindChild(std::string_view(name)) != nullptr) continue;
    ARROW_ASSIGN_OR_RAISE(iceberg::SchemaChange c,
                          iceberg::AddColumn(s, last, "", name, CdcType(name)));
    s = std::move(c.schema);
    last = c.last_column_id;
    changes.push_back(std::string("CDC column ") + name + " added");
  }
  std::vector<NestedField> ordered;
  for (const NestedField& f : s.fields()) {
    if (!IsCdcName(f.name)) ordered.push_back(f);
  }
  for (const char* name : kCdcColumns) {
    ordered.push_back(*s.as_struct()->FindChild(std::string_view(name)));
  }
  if (ordered != s.fields()) {
    ARROW_ASSIGN_OR_RAISE(
        s, Schema::Make(s.schema_id(), std::move(ordered), s.identifier_field_ids()));
  }

  for (Decision& d : decisions) {
    AppendBinding(d, s, written_through, columns);
  }
  const bool changed = !s.SameSchema(current);
  return EvolutionPlan{changed, std::move(s), last, std::move(columns),
                       std::move(changes)};
}

}  // namespace floe::bronze
