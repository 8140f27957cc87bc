// PostgreSQL types: their names, the catalog lookups that resolve them, and how each
// maps to Arrow (type_mapping.h). The conversions of values are in type_text.cc
// (text), type_binary.cc (COPY BINARY) and type_literals.cc (arrays, composites,
// ranges).

#include "floe/source/postgres/type_mapping.h"

#include <string>
#include <utility>

#include <arrow/type.h>

#include "floe/common/parse.h"
#include "floe/source/postgres/pg_connection.h"

namespace floe::postgres {

// ---------------------------------------------------------------------------
// Names

std::string_view PgTypeKindName(PgTypeKind kind) {
  switch (kind) {
    case PgTypeKind::kBase:
      return "base";
    case PgTypeKind::kEnum:
      return "enum";
    case PgTypeKind::kDomain:
      return "domain";
    case PgTypeKind::kArray:
      return "array";
    case PgTypeKind::kComposite:
      return "composite";
    case PgTypeKind::kRange:
      return "range";
    case PgTypeKind::kMultirange:
      return "multirange";
    case PgTypeKind::kOther:
      return "other";
  }
  return "unknown";
}

std::string_view ConverterKindName(ConverterKind kind) {
  switch (kind) {
    case ConverterKind::kBoolean:
      return "boolean";
    case ConverterKind::kInt16:
      return "int16";
    case ConverterKind::kInt32:
      return "int32";
    case ConverterKind::kInt64:
      return "int64";
    case ConverterKind::kFloat32:
      return "float32";
    case ConverterKind::kFloat64:
      return "float64";
    case ConverterKind::kDecimal:
      return "decimal";
    case ConverterKind::kText:
      return "text";
    case ConverterKind::kBytea:
      return "bytea";
    case ConverterKind::kDate:
      return "date";
    case ConverterKind::kTime:
      return "time";
    case ConverterKind::kTimestamp:
      return "timestamp";
    case ConverterKind::kTimestampTz:
      return "timestamptz";
    case ConverterKind::kInterval:
      return "interval";
    case ConverterKind::kUuid:
      return "uuid";
    case ConverterKind::kArray:
      return "array";
    case ConverterKind::kComposite:
      return "composite";
    case ConverterKind::kRange:
      return "range";
  }
  return "unknown";
}

std::string_view IssueReasonName(IssueReason reason) {
  switch (reason) {
    case IssueReason::kNotANumber:
      return "not_a_number";
    case IssueReason::kInfinite:
      return "infinite";
    case IssueReason::kPrecisionExceeded:
      return "precision_exceeded";
    case IssueReason::kScaleExceeded:
      return "scale_exceeded";
    case IssueReason::kOutOfRange:
      return "out_of_range";
    case IssueReason::kMultidimensionalArray:
      return "multidimensional_array";
    case IssueReason::kMalformed:
      return "malformed";
  }
  return "unknown";
}

PgTypeInfo PgTypeInfo::Builtin(std::string name, Oid oid, int32_t typmod) {
  PgTypeInfo t;
  t.oid = oid;
  t.typmod = typmod;
  t.kind = PgTypeKind::kBase;
  t.name = std::move(name);
  t.namespace_name = "pg_catalog";
  return t;
}

PgTypeInfo PgTypeInfo::ArrayOf(PgTypeInfo element, Oid oid) {
  PgTypeInfo t;
  t.oid = oid;
  t.typmod = element.typmod;
  t.kind = PgTypeKind::kArray;
  t.name = "_" + element.name;
  t.namespace_name = element.namespace_name;
  t.element = std::make_shared<const PgTypeInfo>(std::move(element));
  return t;
}

int32_t NumericTypmod(int32_t precision, int32_t scale) {
  return ((precision << 16) | (scale & 0x7ff)) + 4;
}

namespace {

// numeric's typmod, decoded as Postgres 15 does (the scale is an 11-bit signed
// field; negative scales and scale > precision are allowed since 15).
bool DecodeNumericTypmod(int32_t typmod, int32_t* precision, int32_t* scale) {
  if (typmod < 4) return false;
  const int32_t t = typmod - 4;
  *precision = (t >> 16) & 0xffff;
  *scale = ((t & 0x7ff) ^ 1024) - 1024;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// Catalog

arrow::Result<PgCatalogType> PgTypeCatalog::LookupType(Oid oid) {
  if (auto it = cache_.find(oid); it != cache_.end()) return it->second;
  ARROW_ASSIGN_OR_RAISE(
      auto rows,
      conn_->Query("SELECT t.typname, n.nspname, t.typtype, "
                   "t.typinput = 'pg_catalog.array_in'::pg_catalog.regproc, t.typelem, "
                   "t.typbasetype, t.typtypmod, t.typrelid, t.typdelim, r.rngsubtype "
                   "FROM pg_catalog.pg_type t "
                   "JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace "
                   "LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid "
                   "WHERE t.oid = $1",
                   {std::to_string(oid)}));
  if (rows.empty()) return arrow::Status::KeyError("no type with oid ", oid);
  const PgRow& row = rows[0];
  auto text = [&](size_t i) -> std::string { return row[i].value_or(""); };
  auto number = [&](size_t i) -> int64_t { return ParseInt64(text(i)).value_or(0); };
  PgCatalogType t;
  t.oid = oid;
  t.name = text(0);
  t.namespace_name = text(1);
  t.typtype = text(2).empty() ? 'b' : text(2)[0];
  t.is_array = text(3) == "t";
  t.element_oid = static_cast<Oid>(number(4));
  t.base_oid = static_cast<Oid>(number(5));
  t.base_typmod = static_cast<int32_t>(number(6));
  const Oid relation_oid = static_cast<Oid>(number(7));
  t.delimiter = text(8).empty() ? ',' : text(8)[0];
  t.range_subtype_oid = static_cast<Oid>(number(9));
  if (t.typtype == 'c' && relation_oid != 0) {
    ARROW_ASSIGN_OR_RAISE(
        auto attrs,
        conn_->Query("SELECT attname, atttypid, atttypmod FROM pg_catalog.pg_attribute "
                     "WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped "
                     "ORDER BY attnum",
                     {std::to_string(relation_oid)}));
    for (const PgRow& a : attrs) {
      PgCatalogType::Attribute attr;
      attr.name = a[0].value_or("");
      attr.type_oid = ParseInteger<Oid>(a[1].value_or("")).value_or(0);
      attr.typmod = ParseInt32(a[2].value_or("")).value_or(-1);
      t.attributes.push_back(std::move(attr));
    }
  }
  cache_.emplace(oid, t);
  return t;
}

arrow::Result<PgTypeInfo> CatalogTypeResolver::Resolve(Oid oid, int32_t typmod) {
  const uint64_t key = (static_cast<uint64_t>(oid) << 32) | static_cast<uint32_t>(typmod);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  ARROW_ASSIGN_OR_RAISE(PgTypeInfo info, ResolveAt(oid, typmod, 0));
  cache_.emplace(key, info);
  return info;
}

arrow::Result<PgTypeInfo> CatalogTypeResolver::ResolveAt(Oid oid, int32_t typmod,
                                                         int depth) {
  // Postgres forbids a composite containing itself; the limit only guards against a
  // corrupt catalog (or a test's) sending us round in circles.
  constexpr int kMaxDepth = 32;
  if (depth > kMaxDepth) {
    return arrow::Status::Invalid("type ", oid, " nests more than ", kMaxDepth,
                                  " levels deep");
  }
  ARROW_ASSIGN_OR_RAISE(PgCatalogType row, catalog_->LookupType(oid));
  PgTypeInfo info;
  info.oid = oid;
  info.typmod = typmod;
  info.name = row.name;
  info.namespace_name = row.namespace_name;
  auto resolve_inner =
      [&](Oid inner,
          int32_t inner_typmod) -> arrow::Result<std::shared_ptr<const PgTypeInfo>> {
    ARROW_ASSIGN_OR_RAISE(PgTypeInfo t, ResolveAt(inner, inner_typmod, depth + 1));
    return std::make_shared<const PgTypeInfo>(std::move(t));
  };
  switch (row.typtype) {
    case 'd': {
      info.kind = PgTypeKind::kDomain;
      ARROW_ASSIGN_OR_RAISE(info.element, resolve_inner(row.base_oid, row.base_typmod));
      break;
    }
    case 'e':
      info.kind = PgTypeKind::kEnum;
      break;
    case 'c': {
      info.kind = PgTypeKind::kComposite;
      for (const auto& attr : row.attributes) {
        PgTypeField field;
        field.name = attr.name;
        ARROW_ASSIGN_OR_RAISE(field.type, resolve_inner(attr.type_oid, attr.typmod));
        info.fields.push_back(std::move(field));
      }
      break;
    }
    case 'r': {
      info.kind = PgTypeKind::kRange;
      ARROW_ASSIGN_OR_RAISE(info.element, resolve_inner(row.range_subtype_oid, -1));
      break;
    }
    case 'm':
      info.kind = PgTypeKind::kMultirange;
      break;
    case 'b': {
      if (row.is_array && row.element_oid != 0) {
        info.kind = PgTypeKind::kArray;
        // The column's typmod belongs to the elements (varchar(10)[], numeric(9,2)[]).
        ARROW_ASSIGN_OR_RAISE(info.element, resolve_inner(row.element_oid, typmod));
        ARROW_ASSIGN_OR_RAISE(PgCatalogType element_row,
                              catalog_->LookupType(row.element_oid));
        info.delimiter = element_row.delimiter;
      } else {
        info.kind = PgTypeKind::kBase;
      }
      break;
    }
    default:
      info.kind = PgTypeKind::kOther;
      break;
  }
  return info;
}

// ---------------------------------------------------------------------------
// Mapping

namespace {

ColumnMapping Leaf(std::shared_ptr<arrow::DataType> type, ConverterKind kind,
                   std::string notes = {}) {
  ColumnMapping m;
  m.type = std::move(type);
  m.converter = kind;
  m.notes = std::move(notes);
  return m;
}

ColumnMapping Text(std::string notes = {}) {
  return Leaf(arrow::utf8(), ConverterKind::kText, std::move(notes));
}

ColumnMapping MapBase(const PgTypeInfo& t) {
  // citext is an extension type: its oid differs per database, its name does not.
  if (t.name == "citext") return Text("citext: case-insensitive text, stored as text");
  if (t.namespace_name != "pg_catalog") {
    return Text("no specific mapping for " + t.namespace_name + "." + t.name +
                ": its text form");
  }
  const std::string& n = t.name;
  if (n == "bool") return Leaf(arrow::boolean(), ConverterKind::kBoolean);
  if (n == "int2") return Leaf(arrow::int16(), ConverterKind::kInt16);
  if (n == "int4") return Leaf(arrow::int32(), ConverterKind::kInt32);
  if (n == "int8") return Leaf(arrow::int64(), ConverterKind::kInt64);
  if (n == "oid") {
    return Leaf(arrow::int64(), ConverterKind::kInt64,
                "oid is unsigned 32-bit: widened to int64");
  }
  if (n == "float4") return Leaf(arrow::float32(), ConverterKind::kFloat32);
  if (n == "float8") return Leaf(arrow::float64(), ConverterKind::kFloat64);
  if (n == "numeric") {
    int32_t precision = 0;
    int32_t scale = 0;
    if (DecodeNumericTypmod(t.typmod, &precision, &scale) && precision >= 1 &&
        precision <= 38 && scale >= 0 && scale <= precision) {
      return Leaf(arrow::decimal128(precision, scale), ConverterKind::kDecimal);
    }
    if (t.typmod < 0) {
      return Text(
          "numeric without typmod has unbounded precision and a per-value scale: "
          "exact text");
    }
    return Text("numeric(" + std::to_string(precision) + "," + std::to_string(scale) +
                ") does not fit decimal128 (precision <= 38, 0 <= scale <= "
                "precision): exact text");
  }
  if (n == "money") {
    return Text(
        "money's text depends on lc_monetary (symbol, separators, digits): "
        "kept as printed");
  }
  if (n == "text" || n == "varchar" || n == "bpchar" || n == "name" || n == "char") {
    return Text();
  }
  if (n == "bytea") return Leaf(arrow::binary(), ConverterKind::kBytea);
  if (n == "date") return Leaf(arrow::date32(), ConverterKind::kDate);
  if (n == "time")
    return Leaf(arrow::time64(arrow::TimeUnit::MICRO), ConverterKind::kTime);
  if (n == "timetz") {
    return Text("time with time zone has no Arrow/Iceberg equivalent: text form");
  }
  if (n == "timestamp") {
    return Leaf(arrow::timestamp(arrow::TimeUnit::MICRO), ConverterKind::kTimestamp);
  }
  if (n == "timestamptz") {
    return Leaf(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                ConverterKind::kTimestampTz);
  }
  if (n == "interval") {
    ColumnMapping m = Leaf(arrow::struct_({arrow::field("months", arrow::int32()),
                                           arrow::field("days", arrow::int32()),
                                           arrow::field("microseconds", arrow::int64())}),
                           ConverterKind::kInterval,
                           "Postgres' own three fields, exact (no month/day length "
                           "assumption)");
    return m;
  }
  if (n == "uuid") return Leaf(arrow::fixed_size_binary(16), ConverterKind::kUuid);
  if (n == "json" || n == "jsonb" || n == "xml" || n == "inet" || n == "cidr" ||
      n == "macaddr" || n == "macaddr8") {
    return Text();
  }
  return Text("no specific mapping for " + n + ": its text form");
}

ColumnMapping MapAt(const PgTypeInfo& t, int depth) {
  if (depth > 64) return Text("nested too deeply: text form");
  switch (t.kind) {
    case PgTypeKind::kBase:
      return MapBase(t);
    case PgTypeKind::kEnum:
      return Text("enum: its label");
    case PgTypeKind::kDomain: {
      if (t.element == nullptr) return Text("domain without base type: text form");
      ColumnMapping m = MapAt(*t.element, depth + 1);
      m.notes = "domain " + t.name + " over " + t.element->name +
                (m.notes.empty() ? "" : "; " + m.notes);
      return m;
    }
    case PgTypeKind::kArray: {
      if (t.element == nullptr) return Text("array without element type: text form");
      ColumnMapping element = MapAt(*t.element, depth + 1);
      ColumnMapping m;
      m.type = arrow::list(element.type);
      m.converter = ConverterKind::kArray;
      m.delimiter = t.delimiter;
      m.children.push_back(std::move(element));
      return m;
    }
    case PgTypeKind::kComposite: {
      ColumnMapping m;
      m.converter = ConverterKind::kComposite;
      arrow::FieldVector fields;
      for (const PgTypeField& f : t.fields) {
        ColumnMapping child =
            f.type ? MapAt(*f.type, depth + 1) : Text("unknown attribute type");
        fields.push_back(arrow::field(f.name, child.type));
        m.children.push_back(std::move(child));
      }
      m.type = arrow::struct_(std::move(fields));
      return m;
    }
    case PgTypeKind::kRange: {
      if (t.element == nullptr) return Text("range without subtype: text form");
      ColumnMapping bound = MapAt(*t.element, depth + 1);
      ColumnMapping m;
      m.converter = ConverterKind::kRange;
      m.type = arrow::struct_({arrow::field("lower", bound.type),
                               arrow::field("upper", bound.type),
                               arrow::field("lower_inclusive", arrow::boolean()),
                               arrow::field("upper_inclusive", arrow::boolean()),
                               arrow::field("empty", arrow::boolean())});
      m.notes = "an unbounded side has a null bound";
      m.children.push_back(std::move(bound));
      return m;
    }
    case PgTypeKind::kMultirange:
      return Text("multirange: its text form");
    case PgTypeKind::kOther:
      break;
  }
  return Text("no specific mapping for " + t.name + ": its text form");
}

}  // namespace

ColumnMapping MapType(const PgTypeInfo& type) { return MapAt(type, 0); }

}  // namespace floe::postgres
