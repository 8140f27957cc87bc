#include "floe/source/postgres/type_mapping.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include <arrow/array/builder_base.h>
#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_decimal.h>
#include <arrow/array/builder_nested.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/builder.h>
#include <arrow/memory_pool.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "floe/common/big_endian.h"
#include "floe/common/civil_date.h"
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

// ---------------------------------------------------------------------------
// Literal parsers

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

arrow::Status BadLiteral(std::string_view what, std::string_view text, size_t pos) {
  return arrow::Status::Invalid("malformed ", what, " literal at offset ", pos, ": '",
                                text.substr(0, 200), "'");
}

class ArrayParser {
 public:
  ArrayParser(std::string_view text, char delimiter) : s_(text), delim_(delimiter) {}

  arrow::Result<ArrayLiteral> Parse() {
    ArrayLiteral out;
    SkipSpace();
    if (Peek() == '[') ARROW_RETURN_NOT_OK(ParseBounds(&out));
    SkipSpace();
    if (Peek() != '{') return Bad();
    // Dimension count = number of leading braces.
    size_t p = pos_;
    int dims = 0;
    while (p < s_.size() && (s_[p] == '{' || IsSpace(s_[p]))) {
      if (s_[p] == '{') ++dims;
      ++p;
    }
    std::vector<int32_t> lengths(dims, -1);
    ARROW_RETURN_NOT_OK(ParseLevel(0, dims, &lengths, &out.elements));
    SkipSpace();
    if (pos_ != s_.size()) return Bad();
    // `{}`: zero dimensions.
    if (dims == 1 && lengths[0] == 0) {
      dims = 0;
      lengths.clear();
    }
    if (!out.lower_bounds.empty() && static_cast<int>(out.lower_bounds.size()) != dims) {
      return Bad();
    }
    out.dimensions = dims;
    out.lengths = lengths;
    if (out.lower_bounds.empty()) out.lower_bounds.assign(dims, 1);
    if (!explicit_lengths_.empty() && explicit_lengths_ != out.lengths) return Bad();
    return out;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
  }
  arrow::Status Bad() const { return BadLiteral("array", s_, pos_); }

  bool ParseInt(int32_t* v) {
    const char* b = s_.data() + pos_;
    const char* e = s_.data() + s_.size();
    if (b < e && *b == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, *v);
    if (ec != std::errc()) return false;
    pos_ = static_cast<size_t>(ptr - s_.data());
    return true;
  }

  // `[l:u][l:u]...=`
  arrow::Status ParseBounds(ArrayLiteral* out) {
    while (Peek() == '[') {
      ++pos_;
      int32_t lower = 1;
      int32_t upper = 0;
      if (!ParseInt(&lower)) return Bad();
      if (Peek() == ':') {
        ++pos_;
        if (!ParseInt(&upper)) return Bad();
      } else {
        upper = lower;
        lower = 1;
      }
      if (Peek() != ']' || upper < lower - 1) return Bad();
      ++pos_;
      out->lower_bounds.push_back(lower);
      explicit_lengths_.push_back(upper - lower + 1);
    }
    if (Peek() != '=') return Bad();
    ++pos_;
    return arrow::Status::OK();
  }

  arrow::Status ParseLevel(int level, int dims, std::vector<int32_t>* lengths,
                           std::vector<LiteralItem>* elements) {
    SkipSpace();
    if (Peek() != '{') return Bad();
    ++pos_;
    int32_t count = 0;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
    } else {
      while (true) {
        SkipSpace();
        if (level + 1 < dims) {
          ARROW_RETURN_NOT_OK(ParseLevel(level + 1, dims, lengths, elements));
        } else {
          if (Peek() == '{') return Bad();
          ARROW_RETURN_NOT_OK(ParseElement(elements));
        }
        ++count;
        SkipSpace();
        if (Peek() == delim_) {
          ++pos_;
          continue;
        }
        if (Peek() == '}') {
          ++pos_;
          break;
        }
        return Bad();
      }
    }
    if ((*lengths)[level] == -1) {
      (*lengths)[level] = count;
    } else if ((*lengths)[level] != count) {
      return Bad();  // ragged
    }
    // An empty sub-array inside a multi-dimensional one is not valid Postgres output.
    if (count == 0 && dims > 1) return Bad();
    return arrow::Status::OK();
  }

  arrow::Status ParseElement(std::vector<LiteralItem>* elements) {
    LiteralItem item;
    if (Peek() == '"') {
      ++pos_;
      while (true) {
        if (pos_ >= s_.size()) return Bad();
        char c = s_[pos_++];
        if (c == '"') break;
        if (c == '\\') {
          if (pos_ >= s_.size()) return Bad();
          c = s_[pos_++];
        }
        item.text.push_back(c);
      }
    } else {
      const size_t start = pos_;
      bool escaped = false;
      size_t last_significant = 0;  // length of item.text up to the last escaped or
                                    // non-space character (trailing spaces trimmed)
      while (pos_ < s_.size()) {
        char c = s_[pos_];
        if (c == delim_ || c == '}') break;
        if (c == '{' || c == '"') return Bad();
        ++pos_;
        if (c == '\\') {
          if (pos_ >= s_.size()) return Bad();
          item.text.push_back(s_[pos_++]);
          escaped = true;
          last_significant = item.text.size();
          continue;
        }
        item.text.push_back(c);
        if (!IsSpace(c)) last_significant = item.text.size();
      }
      item.text.resize(last_significant);
      if (pos_ == start || (item.text.empty() && !escaped)) return Bad();
      if (!escaped && EqualsIgnoreCase(item.text, "NULL")) {
        item.is_null = true;
        item.text.clear();
      }
    }
    elements->push_back(std::move(item));
    return arrow::Status::OK();
  }

  std::string_view s_;
  char delim_;
  size_t pos_ = 0;
  std::vector<int32_t> explicit_lengths_;
};

// A composite field or range bound: quoted (with `""` and backslash escapes) or
// unquoted up to one of `stops`; empty and unquoted is null.
bool ParseRecordItem(std::string_view s, size_t* pos, std::string_view stops,
                     LiteralItem* item) {
  item->is_null = true;
  item->text.clear();
  bool any = false;
  bool in_quotes = false;
  while (*pos < s.size()) {
    const char c = s[*pos];
    if (!in_quotes && stops.find(c) != std::string_view::npos) break;
    ++*pos;
    any = true;
    if (c == '\\') {
      if (*pos >= s.size()) return false;
      item->text.push_back(s[(*pos)++]);
    } else if (c == '"') {
      if (!in_quotes) {
        in_quotes = true;
      } else if (*pos < s.size() && s[*pos] == '"') {
        item->text.push_back('"');
        ++*pos;
      } else {
        in_quotes = false;
      }
    } else {
      item->text.push_back(c);
    }
  }
  if (in_quotes) return false;
  item->is_null = !any;
  return true;
}

}  // namespace

arrow::Result<ArrayLiteral> ParseArrayLiteral(std::string_view text, char delimiter) {
  return ArrayParser(text, delimiter).Parse();
}

arrow::Result<std::vector<LiteralItem>> ParseCompositeLiteral(std::string_view text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return BadLiteral("composite", text, 0);
  }
  std::vector<LiteralItem> items;
  size_t pos = 1;
  const size_t end = text.size() - 1;
  const std::string_view body = text.substr(0, end);
  // `()` is one null field (a one-attribute row holding NULL; a zero-attribute row
  // prints the same and is handled by the caller).
  while (true) {
    LiteralItem item;
    if (!ParseRecordItem(body, &pos, ",", &item)) {
      return BadLiteral("composite", text, pos);
    }
    items.push_back(std::move(item));
    if (pos == end) break;
    ++pos;  // the comma
  }
  return items;
}

arrow::Result<RangeLiteral> ParseRangeLiteral(std::string_view text) {
  RangeLiteral r;
  if (EqualsIgnoreCase(text, "empty")) {
    r.empty = true;
    r.lower.is_null = true;
    r.upper.is_null = true;
    return r;
  }
  if (text.size() < 3) return BadLiteral("range", text, 0);
  const char open = text.front();
  const char close = text.back();
  if ((open != '[' && open != '(') || (close != ']' && close != ')')) {
    return BadLiteral("range", text, 0);
  }
  r.lower_inclusive = open == '[';
  r.upper_inclusive = close == ']';
  const std::string_view body = text.substr(0, text.size() - 1);
  size_t pos = 1;
  if (!ParseRecordItem(body, &pos, ",", &r.lower) || pos >= body.size()) {
    return BadLiteral("range", text, pos);
  }
  ++pos;
  if (!ParseRecordItem(body, &pos, "", &r.upper) || pos != body.size()) {
    return BadLiteral("range", text, pos);
  }
  // An unbounded side is never inclusive (range_out prints `(` / `)` for it).
  if (r.lower.is_null) r.lower_inclusive = false;
  if (r.upper.is_null) r.upper_inclusive = false;
  return r;
}

// ---------------------------------------------------------------------------
// Scalar parsers: pure, locale-free, allocation-free.

namespace {

struct Problem {
  bool set = false;
  IssueReason reason = IssueReason::kMalformed;
  std::string detail;
};

arrow::Status Fail(Problem* p, IssueReason reason, std::string detail) {
  p->set = true;
  p->reason = reason;
  p->detail = std::move(detail);
  return arrow::Status::OK();
}

std::string Quoted(std::string_view text) {
  constexpr size_t kMax = 120;
  std::string out = "'";
  out.append(text.substr(0, kMax));
  if (text.size() > kMax) out += "...";
  out += "'";
  return out;
}

// The whole of `s` as a number of type T (integers and floating point).
template <typename T>
bool ParseWhole(std::string_view s, T* v) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads exactly `n` digits at `*pos`.
bool FixedDigits(std::string_view s, size_t* pos, int n, int64_t* v) {
  if (*pos + n > s.size()) return false;
  int64_t r = 0;
  for (int i = 0; i < n; ++i) {
    const char c = s[*pos + i];
    if (!IsDigit(c)) return false;
    r = r * 10 + (c - '0');
  }
  *pos += n;
  *v = r;
  return true;
}

// Reads 1..max_digits digits.
bool SomeDigits(std::string_view s, size_t* pos, int max_digits, int64_t* v,
                int* count = nullptr) {
  int64_t r = 0;
  int n = 0;
  while (*pos < s.size() && IsDigit(s[*pos]) && n < max_digits) {
    r = r * 10 + (s[*pos] - '0');
    ++*pos;
    ++n;
  }
  if (n == 0 || (*pos < s.size() && IsDigit(s[*pos]))) return false;
  *v = r;
  if (count != nullptr) *count = n;
  return true;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

enum class Parsed { kOk, kMalformed, kInfinite, kOutOfRange };

// `Y...Y-MM-DD`; the year may have more than 4 digits. `bc` is resolved by the
// caller (it comes after the time in a timestamp).
Parsed ParseDatePart(std::string_view s, size_t* pos, int64_t* year, int64_t* month,
                     int64_t* day) {
  if (!SomeDigits(s, pos, 9, year)) return Parsed::kMalformed;
  if (*pos >= s.size() || s[*pos] != '-') return Parsed::kMalformed;
  ++*pos;
  if (!FixedDigits(s, pos, 2, month) || *pos >= s.size() || s[*pos] != '-') {
    return Parsed::kMalformed;
  }
  ++*pos;
  if (!FixedDigits(s, pos, 2, day)) return Parsed::kMalformed;
  return Parsed::kOk;
}

// ` BC` suffix at *pos: applies it to the year (n BC = astronomical 1 - n).
bool ApplyEra(std::string_view s, size_t* pos, int64_t* year) {
  if (s.substr(*pos) == " BC") {
    *pos = s.size();
    *year = 1 - *year;
  }
  return true;
}

bool ValidDate(int64_t year, int64_t month, int64_t day) {
  return month >= 1 && month <= 12 && day >= 1 && day <= DaysInMonth(year, month);
}

// `HH:MM:SS[.f{1,6}]` -> microseconds since midnight (24:00:00 allowed).
Parsed ParseTimePart(std::string_view s, size_t* pos, int64_t* micros) {
  int64_t h = 0;
  int64_t m = 0;
  int64_t sec = 0;
  if (!FixedDigits(s, pos, 2, &h) || *pos >= s.size() || s[*pos] != ':') {
    return Parsed::kMalformed;
  }
  ++*pos;
  if (!FixedDigits(s, pos, 2, &m) || *pos >= s.size() || s[*pos] != ':') {
    return Parsed::kMalformed;
  }
  ++*pos;
  if (!FixedDigits(s, pos, 2, &sec)) return Parsed::kMalformed;
  int64_t frac = 0;
  if (*pos < s.size() && s[*pos] == '.') {
    ++*pos;
    int n = 0;
    if (!SomeDigits(s, pos, 6, &frac, &n)) return Parsed::kMalformed;
    for (int i = n; i < 6; ++i) frac *= 10;
  }
  if (h > 24 || m > 59 || sec > 59) return Parsed::kMalformed;
  *micros = ((h * 60 + m) * 60 + sec) * 1'000'000 + frac;
  if (*micros > 86'400'000'000) return Parsed::kMalformed;
  return Parsed::kOk;
}

// `+HH[:MM[:SS]]` / `-HH...` -> seconds east of UTC.
bool ParseOffset(std::string_view s, size_t* pos, int64_t* seconds) {
  if (*pos >= s.size() || (s[*pos] != '+' && s[*pos] != '-')) return false;
  const int64_t sign = s[*pos] == '-' ? -1 : 1;
  ++*pos;
  int64_t h = 0;
  int64_t m = 0;
  int64_t sec = 0;
  if (!FixedDigits(s, pos, 2, &h)) return false;
  if (*pos < s.size() && s[*pos] == ':') {
    ++*pos;
    if (!FixedDigits(s, pos, 2, &m)) return false;
    if (*pos < s.size() && s[*pos] == ':') {
      ++*pos;
      if (!FixedDigits(s, pos, 2, &sec)) return false;
    }
  }
  *seconds = sign * (h * 3600 + m * 60 + sec);
  return true;
}

bool IsInfinity(std::string_view s) { return s == "infinity" || s == "-infinity"; }

Parsed ParseDate(std::string_view s, int32_t* days) {
  if (IsInfinity(s)) return Parsed::kInfinite;
  size_t pos = 0;
  int64_t y = 0;
  int64_t m = 0;
  int64_t d = 0;
  if (ParseDatePart(s, &pos, &y, &m, &d) != Parsed::kOk) return Parsed::kMalformed;
  ApplyEra(s, &pos, &y);
  if (pos != s.size() || !ValidDate(y, m, d)) return Parsed::kMalformed;
  const int64_t v = DaysFromCivil(y, m, d);
  if (v < std::numeric_limits<int32_t>::min() ||
      v > std::numeric_limits<int32_t>::max()) {
    return Parsed::kOutOfRange;
  }
  *days = static_cast<int32_t>(v);
  return Parsed::kOk;
}

Parsed ParseTimestamp(std::string_view s, bool with_zone, int64_t* micros) {
  if (IsInfinity(s)) return Parsed::kInfinite;
  size_t pos = 0;
  int64_t y = 0;
  int64_t mo = 0;
  int64_t d = 0;
  if (ParseDatePart(s, &pos, &y, &mo, &d) != Parsed::kOk) return Parsed::kMalformed;
  if (pos >= s.size() || s[pos] != ' ') return Parsed::kMalformed;
  ++pos;
  int64_t time = 0;
  if (ParseTimePart(s, &pos, &time) != Parsed::kOk) return Parsed::kMalformed;
  int64_t offset = 0;
  if (with_zone && !ParseOffset(s, &pos, &offset)) return Parsed::kMalformed;
  ApplyEra(s, &pos, &y);
  if (pos != s.size() || !ValidDate(y, mo, d) || time >= 86'400'000'000) {
    return Parsed::kMalformed;
  }
  // days * 86400e6 + time - offset, every step checked: Postgres reaches year 294276,
  // int64 microseconds since 1970 end in 294247.
  int64_t v = 0;
  if (__builtin_mul_overflow(DaysFromCivil(y, mo, d), int64_t{86'400'000'000}, &v) ||
      __builtin_add_overflow(v, time, &v) ||
      __builtin_sub_overflow(v, offset * 1'000'000, &v)) {
    return Parsed::kOutOfRange;
  }
  *micros = v;
  return Parsed::kOk;
}

// IntervalStyle=postgres: `[N year[s]] [N mon[s]] [N day[s]] [[+-]H+:MM:SS[.f]]`.
Parsed ParseInterval(std::string_view s, int32_t* months_out, int32_t* days_out,
                     int64_t* micros_out) {
  if (IsInfinity(s)) return Parsed::kInfinite;
  int64_t months = 0;
  int64_t days = 0;
  int64_t micros = 0;
  size_t pos = 0;
  bool any = false;
  bool seen_time = false;
  while (pos < s.size()) {
    if (any) {
      if (s[pos] != ' ') return Parsed::kMalformed;
      ++pos;
    }
    any = true;
    const size_t token_end = std::min(s.find(' ', pos), s.size());
    const std::string_view token = s.substr(pos, token_end - pos);
    if (token.find(':') != std::string_view::npos) {
      if (seen_time) return Parsed::kMalformed;
      seen_time = true;
      size_t p = 0;
      int64_t sign = 1;
      if (p < token.size() && (token[p] == '-' || token[p] == '+')) {
        sign = token[p] == '-' ? -1 : 1;
        ++p;
      }
      int64_t h = 0;
      if (!SomeDigits(token, &p, 18, &h) || p >= token.size() || token[p] != ':') {
        return Parsed::kMalformed;
      }
      ++p;
      int64_t m = 0;
      int64_t sec = 0;
      if (!FixedDigits(token, &p, 2, &m) || p >= token.size() || token[p] != ':' ||
          m > 59) {
        return Parsed::kMalformed;
      }
      ++p;
      if (!FixedDigits(token, &p, 2, &sec) || sec > 59) return Parsed::kMalformed;
      int64_t frac = 0;
      if (p < token.size() && token[p] == '.') {
        ++p;
        int n = 0;
        if (!SomeDigits(token, &p, 6, &frac, &n)) return Parsed::kMalformed;
        for (int i = n; i < 6; ++i) frac *= 10;
      }
      if (p != token.size()) return Parsed::kMalformed;
      // Summed with the sign, not negated at the end: the smallest count,
      // -2562047788:00:54.775808, has no positive counterpart in int64.
      int64_t hours = 0;
      const int64_t rest = (m * 60 + sec) * 1'000'000 + frac;
      if (__builtin_mul_overflow(h, int64_t{3'600'000'000}, &hours) ||
          (sign < 0 ? __builtin_sub_overflow(-hours, rest, &micros)
                    : __builtin_add_overflow(hours, rest, &micros))) {
        return Parsed::kOutOfRange;
      }
      pos = token_end;
      continue;
    }
    int64_t n = 0;
    std::string_view number = token;
    if (!number.empty() && number[0] == '+') number.remove_prefix(1);
    if (!ParseWhole(number, &n)) return Parsed::kMalformed;
    pos = token_end;
    if (pos >= s.size() || s[pos] != ' ') return Parsed::kMalformed;
    ++pos;
    const size_t unit_end = std::min(s.find(' ', pos), s.size());
    const std::string_view unit = s.substr(pos, unit_end - pos);
    pos = unit_end;
    if (unit == "year" || unit == "years") {
      if (__builtin_mul_overflow(n, int64_t{12}, &n) ||
          __builtin_add_overflow(months, n, &months)) {
        return Parsed::kOutOfRange;
      }
    } else if (unit == "mon" || unit == "mons") {
      if (__builtin_add_overflow(months, n, &months)) return Parsed::kOutOfRange;
    } else if (unit == "day" || unit == "days") {
      if (__builtin_add_overflow(days, n, &days)) return Parsed::kOutOfRange;
    } else {
      return Parsed::kMalformed;
    }
  }
  if (!any) return Parsed::kMalformed;
  if (months < std::numeric_limits<int32_t>::min() ||
      months > std::numeric_limits<int32_t>::max() ||
      days < std::numeric_limits<int32_t>::min() ||
      days > std::numeric_limits<int32_t>::max()) {
    return Parsed::kOutOfRange;
  }
  *months_out = static_cast<int32_t>(months);
  *days_out = static_cast<int32_t>(days);
  *micros_out = micros;
  return Parsed::kOk;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseUuid(std::string_view s, uint8_t out[16]) {
  int n = 0;
  int hi = -1;
  for (char c : s) {
    if (c == '-') continue;
    const int v = HexValue(c);
    if (v < 0 || n >= 16) return false;
    if (hi < 0) {
      hi = v;
    } else {
      out[n++] = static_cast<uint8_t>(hi << 4 | v);
      hi = -1;
    }
  }
  return n == 16 && hi < 0;
}

// numeric text (`-123.4500`) -> unscaled value at `scale`, checking that it fits
// `precision` and that no non-zero digit lies beyond `scale`.
Parsed ParseDecimal(std::string_view s, int32_t precision, int32_t scale,
                    arrow::Decimal128* out, IssueReason* reason) {
  if (s == "NaN") {
    *reason = IssueReason::kNotANumber;
    return Parsed::kOutOfRange;
  }
  if (s == "Infinity" || s == "-Infinity") {
    *reason = IssueReason::kInfinite;
    return Parsed::kOutOfRange;
  }
  size_t pos = 0;
  bool negative = false;
  if (pos < s.size() && (s[pos] == '-' || s[pos] == '+')) {
    negative = s[pos] == '-';
    ++pos;
  }
  const size_t int_start = pos;
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  const std::string_view int_digits = s.substr(int_start, pos - int_start);
  std::string_view frac_digits;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const size_t frac_start = pos;
    while (pos < s.size() && IsDigit(s[pos])) ++pos;
    frac_digits = s.substr(frac_start, pos - frac_start);
  }
  if (pos != s.size() || (int_digits.empty() && frac_digits.empty())) {
    *reason = IssueReason::kMalformed;
    return Parsed::kMalformed;
  }
  size_t lead = 0;
  while (lead < int_digits.size() && int_digits[lead] == '0') ++lead;
  const std::string_view significant = int_digits.substr(lead);
  if (significant.size() > static_cast<size_t>(precision - scale)) {
    *reason = IssueReason::kPrecisionExceeded;
    return Parsed::kOutOfRange;
  }
  for (size_t i = static_cast<size_t>(scale); i < frac_digits.size(); ++i) {
    if (frac_digits[i] != '0') {
      *reason = IssueReason::kScaleExceeded;
      return Parsed::kOutOfRange;
    }
  }
  // At most 38 digits: fits in 127 bits.
  unsigned __int128 v = 0;
  for (char c : significant) v = v * 10 + static_cast<unsigned>(c - '0');
  for (int32_t i = 0; i < scale; ++i) {
    const unsigned d = static_cast<size_t>(i) < frac_digits.size()
                           ? static_cast<unsigned>(frac_digits[i] - '0')
                           : 0;
    v = v * 10 + d;
  }
  __int128 signed_v = static_cast<__int128>(v);
  if (negative) signed_v = -signed_v;
  *out = arrow::Decimal128(static_cast<int64_t>(signed_v >> 64),
                           static_cast<uint64_t>(signed_v));
  return Parsed::kOk;
}

template <typename Builder>
Builder* As(arrow::ArrayBuilder* b) {
  return static_cast<Builder*>(b);
}

arrow::Status AppendBytea(std::string_view s, arrow::ArrayBuilder* b, Problem* p) {
  if (s.size() < 2 || s[0] != '\\' || s[1] != 'x' || s.size() % 2 != 0) {
    return Fail(p, IssueReason::kMalformed,
                "bytea is not in hex form \\x...: " + Quoted(s));
  }
  const std::string_view hex = s.substr(2);
  for (char c : hex) {
    if (HexValue(c) < 0) {
      return Fail(p, IssueReason::kMalformed, "bytea has a non-hex digit: " + Quoted(s));
    }
  }
  if (b == nullptr) return arrow::Status::OK();
  auto* builder = As<arrow::BinaryBuilder>(b);
  const size_t n = hex.size() / 2;
  ARROW_RETURN_NOT_OK(builder->ReserveData(static_cast<int64_t>(n)));
  ARROW_RETURN_NOT_OK(builder->Append(std::string_view()));
  uint8_t chunk[256];
  size_t filled = 0;
  for (size_t i = 0; i < n; ++i) {
    chunk[filled++] =
        static_cast<uint8_t>(HexValue(hex[2 * i]) << 4 | HexValue(hex[2 * i + 1]));
    if (filled == sizeof(chunk) || i + 1 == n) {
      builder->UnsafeExtendCurrent(chunk, static_cast<int32_t>(filled));
      filled = 0;
    }
  }
  return arrow::Status::OK();
}

arrow::Status Convert(const ColumnMapping& m, std::string_view s, arrow::ArrayBuilder* b,
                      Problem* p, int depth);

// Nested values: each item converted (or appended null) into `child`.
arrow::Status ConvertItem(const ColumnMapping& m, const LiteralItem& item,
                          arrow::ArrayBuilder* child, Problem* p, int depth,
                          std::string_view where) {
  if (item.is_null) {
    return child == nullptr ? arrow::Status::OK() : child->AppendNull();
  }
  ARROW_RETURN_NOT_OK(Convert(m, item.text, child, p, depth + 1));
  if (p->set) p->detail = std::string(where) + ": " + p->detail;
  return arrow::Status::OK();
}

arrow::Status Convert(const ColumnMapping& m, std::string_view s, arrow::ArrayBuilder* b,
                      Problem* p, int depth) {
  switch (m.converter) {
    case ConverterKind::kBoolean: {
      if (s != "t" && s != "f") {
        return Fail(p, IssueReason::kMalformed, "not a boolean: " + Quoted(s));
      }
      return b ? As<arrow::BooleanBuilder>(b)->Append(s == "t") : arrow::Status::OK();
    }
    case ConverterKind::kInt16: {
      int16_t v = 0;
      if (!ParseWhole(s, &v))
        return Fail(p, IssueReason::kMalformed, "not an int2: " + Quoted(s));
      return b ? As<arrow::Int16Builder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kInt32: {
      int32_t v = 0;
      if (!ParseWhole(s, &v))
        return Fail(p, IssueReason::kMalformed, "not an int4: " + Quoted(s));
      return b ? As<arrow::Int32Builder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kInt64: {
      int64_t v = 0;
      if (!ParseWhole(s, &v)) {
        return Fail(p, IssueReason::kMalformed, "not an integer: " + Quoted(s));
      }
      return b ? As<arrow::Int64Builder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kFloat32: {
      float v = 0;
      if (!ParseWhole(s, &v))
        return Fail(p, IssueReason::kMalformed, "not a float4: " + Quoted(s));
      return b ? As<arrow::FloatBuilder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kFloat64: {
      double v = 0;
      if (!ParseWhole(s, &v))
        return Fail(p, IssueReason::kMalformed, "not a float8: " + Quoted(s));
      return b ? As<arrow::DoubleBuilder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kDecimal: {
      const auto& type = static_cast<const arrow::Decimal128Type&>(*m.type);
      arrow::Decimal128 v;
      IssueReason reason = IssueReason::kMalformed;
      if (ParseDecimal(s, type.precision(), type.scale(), &v, &reason) != Parsed::kOk) {
        std::string detail;
        switch (reason) {
          case IssueReason::kNotANumber:
            detail = "numeric NaN has no decimal equivalent";
            break;
          case IssueReason::kInfinite:
            detail = "numeric " + std::string(s) + " has no decimal equivalent";
            break;
          case IssueReason::kPrecisionExceeded:
            detail = Quoted(s) + " has more digits than " + type.ToString() + " holds";
            break;
          case IssueReason::kScaleExceeded:
            detail = Quoted(s) + " has more fractional digits than " + type.ToString() +
                     " holds (never rounded)";
            break;
          default:
            detail = "not a numeric: " + Quoted(s);
            break;
        }
        return Fail(p, reason, std::move(detail));
      }
      return b ? As<arrow::Decimal128Builder>(b)->Append(v) : arrow::Status::OK();
    }
    case ConverterKind::kText:
      return b ? As<arrow::StringBuilder>(b)->Append(s) : arrow::Status::OK();
    case ConverterKind::kBytea:
      return AppendBytea(s, b, p);
    case ConverterKind::kDate: {
      int32_t days = 0;
      switch (ParseDate(s, &days)) {
        case Parsed::kOk:
          return b ? As<arrow::Date32Builder>(b)->Append(days) : arrow::Status::OK();
        case Parsed::kInfinite:
          return Fail(p, IssueReason::kInfinite,
                      "date " + std::string(s) + " has no date32 equivalent");
        case Parsed::kOutOfRange:
          return Fail(p, IssueReason::kOutOfRange,
                      "date " + Quoted(s) + " outside date32");
        case Parsed::kMalformed:
          break;
      }
      return Fail(p, IssueReason::kMalformed, "not a date: " + Quoted(s));
    }
    case ConverterKind::kTime: {
      size_t pos = 0;
      int64_t micros = 0;
      if (ParseTimePart(s, &pos, &micros) != Parsed::kOk || pos != s.size()) {
        return Fail(p, IssueReason::kMalformed, "not a time: " + Quoted(s));
      }
      if (micros == 86'400'000'000) {
        return Fail(p, IssueReason::kOutOfRange,
                    "time 24:00:00 is outside time64's [00:00, 24:00)");
      }
      return b ? As<arrow::Time64Builder>(b)->Append(micros) : arrow::Status::OK();
    }
    case ConverterKind::kTimestamp:
    case ConverterKind::kTimestampTz: {
      const bool tz = m.converter == ConverterKind::kTimestampTz;
      int64_t micros = 0;
      switch (ParseTimestamp(s, tz, &micros)) {
        case Parsed::kOk:
          return b ? As<arrow::TimestampBuilder>(b)->Append(micros) : arrow::Status::OK();
        case Parsed::kInfinite:
          return Fail(p, IssueReason::kInfinite,
                      "timestamp " + std::string(s) + " has no Arrow equivalent");
        case Parsed::kOutOfRange:
          return Fail(p, IssueReason::kOutOfRange,
                      "timestamp " + Quoted(s) +
                          " is outside int64 microseconds since 1970 (years "
                          "290308 BC to 294247 AD)");
        case Parsed::kMalformed:
          break;
      }
      return Fail(
          p, IssueReason::kMalformed,
          std::string(tz ? "not a timestamptz: " : "not a timestamp: ") + Quoted(s));
    }
    case ConverterKind::kInterval: {
      int32_t months = 0;
      int32_t days = 0;
      int64_t micros = 0;
      switch (ParseInterval(s, &months, &days, &micros)) {
        case Parsed::kOk:
          break;
        case Parsed::kInfinite:
          return Fail(p, IssueReason::kInfinite,
                      "interval " + std::string(s) + " has no struct equivalent");
        case Parsed::kOutOfRange:
          return Fail(p, IssueReason::kOutOfRange,
                      "interval " + Quoted(s) + " overflows");
        case Parsed::kMalformed:
          return Fail(p, IssueReason::kMalformed, "not an interval: " + Quoted(s));
      }
      if (b == nullptr) return arrow::Status::OK();
      auto* builder = As<arrow::StructBuilder>(b);
      ARROW_RETURN_NOT_OK(builder->Append());
      ARROW_RETURN_NOT_OK(
          As<arrow::Int32Builder>(builder->field_builder(0))->Append(months));
      ARROW_RETURN_NOT_OK(
          As<arrow::Int32Builder>(builder->field_builder(1))->Append(days));
      return As<arrow::Int64Builder>(builder->field_builder(2))->Append(micros);
    }
    case ConverterKind::kUuid: {
      uint8_t bytes[16];
      if (!ParseUuid(s, bytes)) {
        return Fail(p, IssueReason::kMalformed, "not a uuid: " + Quoted(s));
      }
      return b ? As<arrow::FixedSizeBinaryBuilder>(b)->Append(bytes)
               : arrow::Status::OK();
    }
    case ConverterKind::kArray: {
      auto parsed = ParseArrayLiteral(s, m.delimiter);
      if (!parsed.ok()) {
        return Fail(p, IssueReason::kMalformed, "not an array: " + Quoted(s));
      }
      const ArrayLiteral& array = *parsed;
      if (array.dimensions > 1) {
        return Fail(p, IssueReason::kMultidimensionalArray,
                    "array has " + std::to_string(array.dimensions) +
                        " dimensions; only one-dimensional arrays map to a list");
      }
      auto* builder = As<arrow::ListBuilder>(b);
      arrow::ArrayBuilder* child = b ? builder->value_builder() : nullptr;
      if (b) ARROW_RETURN_NOT_OK(builder->Append());
      for (size_t i = 0; i < array.elements.size(); ++i) {
        ARROW_RETURN_NOT_OK(ConvertItem(m.children[0], array.elements[i], child, p, depth,
                                        "element " + std::to_string(i + 1)));
        if (p->set) return arrow::Status::OK();
      }
      return arrow::Status::OK();
    }
    case ConverterKind::kComposite: {
      auto parsed = ParseCompositeLiteral(s);
      if (parsed.ok() && m.children.empty() && parsed->size() == 1 &&
          (*parsed)[0].is_null) {
        parsed->clear();  // `()` of a zero-attribute type
      }
      if (!parsed.ok() || parsed->size() != m.children.size()) {
        return Fail(p, IssueReason::kMalformed,
                    "not a composite of " + std::to_string(m.children.size()) +
                        " fields: " + Quoted(s));
      }
      auto* builder = As<arrow::StructBuilder>(b);
      if (b) ARROW_RETURN_NOT_OK(builder->Append());
      for (size_t i = 0; i < m.children.size(); ++i) {
        arrow::ArrayBuilder* child =
            b ? builder->field_builder(static_cast<int>(i)) : nullptr;
        ARROW_RETURN_NOT_OK(
            ConvertItem(m.children[i], (*parsed)[i], child, p, depth,
                        "field " + m.type->field(static_cast<int>(i))->name()));
        if (p->set) return arrow::Status::OK();
      }
      return arrow::Status::OK();
    }
    case ConverterKind::kRange: {
      auto parsed = ParseRangeLiteral(s);
      if (!parsed.ok()) {
        return Fail(p, IssueReason::kMalformed, "not a range: " + Quoted(s));
      }
      const RangeLiteral& r = *parsed;
      auto* builder = As<arrow::StructBuilder>(b);
      if (b) ARROW_RETURN_NOT_OK(builder->Append());
      ARROW_RETURN_NOT_OK(ConvertItem(m.children[0], r.lower,
                                      b ? builder->field_builder(0) : nullptr, p, depth,
                                      "lower bound"));
      if (p->set) return arrow::Status::OK();
      ARROW_RETURN_NOT_OK(ConvertItem(m.children[0], r.upper,
                                      b ? builder->field_builder(1) : nullptr, p, depth,
                                      "upper bound"));
      if (p->set || b == nullptr) return arrow::Status::OK();
      ARROW_RETURN_NOT_OK(As<arrow::BooleanBuilder>(builder->field_builder(2))
                              ->Append(r.lower_inclusive));
      ARROW_RETURN_NOT_OK(As<arrow::BooleanBuilder>(builder->field_builder(3))
                              ->Append(r.upper_inclusive));
      return As<arrow::BooleanBuilder>(builder->field_builder(4))->Append(r.empty);
    }
  }
  return Fail(p, IssueReason::kMalformed, "unknown converter");
}

bool IsNested(ConverterKind kind) {
  return kind == ConverterKind::kArray || kind == ConverterKind::kComposite ||
         kind == ConverterKind::kRange;
}

}  // namespace

ColumnConverter::ColumnConverter(std::string column_name, ColumnMapping mapping)
    : column_name_(std::move(column_name)), mapping_(std::move(mapping)) {}

arrow::Result<std::unique_ptr<arrow::ArrayBuilder>> ColumnConverter::MakeBuilder(
    arrow::MemoryPool* pool) const {
  return arrow::MakeBuilder(mapping_.type,
                            pool != nullptr ? pool : arrow::default_memory_pool());
}

arrow::Status ColumnConverter::Append(std::string_view text, arrow::ArrayBuilder* builder,
                                      std::vector<ConversionIssue>* issues) const {
  Problem problem;
  if (IsNested(mapping_.converter)) {
    // Check the whole value first, so that a bad element deep inside does not leave
    // half a row in the child builders.
    ARROW_RETURN_NOT_OK(Convert(mapping_, text, nullptr, &problem, 0));
    if (!problem.set) {
      ARROW_RETURN_NOT_OK(Convert(mapping_, text, builder, &problem, 0));
      if (problem.set) {
        return arrow::Status::UnknownError(
            "column ", column_name_, ": value passed the check but failed to append");
      }
      return arrow::Status::OK();
    }
  } else {
    ARROW_RETURN_NOT_OK(Convert(mapping_, text, builder, &problem, 0));
    if (!problem.set) return arrow::Status::OK();
  }
  issues->push_back(ConversionIssue{column_name_, std::string(text), problem.reason,
                                    std::move(problem.detail)});
  return builder->AppendNull();
}

arrow::Status ColumnConverter::AppendNull(arrow::ArrayBuilder* builder) const {
  return builder->AppendNull();
}

// ---------------------------------------------------------------------------
// Binary send formats

namespace {

constexpr int64_t kDayMicros = 86'400'000'000;
/// Days from 1970-01-01 to 2000-01-01 (Postgres' date epoch).
constexpr int32_t kPgEpochDays = 10'957;

int64_t FloorDivide(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

arrow::Status WrongLength(const ColumnConverter& c, BinaryFormat f, size_t n) {
  return arrow::Status::Invalid("column ", c.column_name(), ": binary ",
                                BinaryFormatName(f), " value of ", n, " bytes");
}

arrow::Status BinaryIssue(const ColumnConverter& c, arrow::ArrayBuilder* builder,
                          std::vector<ConversionIssue>* issues, std::string raw,
                          IssueReason reason, std::string detail) {
  issues->push_back(
      ConversionIssue{c.column_name(), std::move(raw), reason, std::move(detail)});
  return builder->AppendNull();
}

}  // namespace

std::string_view BinaryFormatName(BinaryFormat format) {
  switch (format) {
    case BinaryFormat::kNone:
      return "none";
    case BinaryFormat::kBool:
      return "bool";
    case BinaryFormat::kInt16:
      return "int2";
    case BinaryFormat::kInt32:
      return "int4";
    case BinaryFormat::kInt64:
      return "int8";
    case BinaryFormat::kOid:
      return "oid";
    case BinaryFormat::kFloat32:
      return "float4";
    case BinaryFormat::kFloat64:
      return "float8";
    case BinaryFormat::kDate:
      return "date";
    case BinaryFormat::kTime:
      return "time";
    case BinaryFormat::kTimestamp:
      return "timestamp";
    case BinaryFormat::kTimestampTz:
      return "timestamptz";
    case BinaryFormat::kUuid:
      return "uuid";
    case BinaryFormat::kBytes:
      return "bytea";
    case BinaryFormat::kText:
      return "text";
    case BinaryFormat::kNumeric:
      return "numeric";
  }
  return "?";
}

BinaryFormat BinaryFormatFor(const PgTypeInfo& type, const ColumnMapping& mapping) {
  const PgTypeInfo* t = &type;
  // A domain's send function is its base type's.
  for (int depth = 0; t->kind == PgTypeKind::kDomain; ++depth) {
    if (t->element == nullptr || depth > 64) return BinaryFormat::kNone;
    t = t->element.get();
  }
  BinaryFormat format = BinaryFormat::kNone;
  ConverterKind expected = ConverterKind::kText;
  if (t->kind == PgTypeKind::kEnum) {
    format = BinaryFormat::kText;
  } else if (t->kind == PgTypeKind::kBase && t->namespace_name == "pg_catalog") {
    static const std::pair<std::string_view, std::pair<BinaryFormat, ConverterKind>>
        kFormats[] = {
            {"bool", {BinaryFormat::kBool, ConverterKind::kBoolean}},
            {"int2", {BinaryFormat::kInt16, ConverterKind::kInt16}},
            {"int4", {BinaryFormat::kInt32, ConverterKind::kInt32}},
            {"int8", {BinaryFormat::kInt64, ConverterKind::kInt64}},
            {"oid", {BinaryFormat::kOid, ConverterKind::kInt64}},
            {"float4", {BinaryFormat::kFloat32, ConverterKind::kFloat32}},
            {"float8", {BinaryFormat::kFloat64, ConverterKind::kFloat64}},
            {"date", {BinaryFormat::kDate, ConverterKind::kDate}},
            {"time", {BinaryFormat::kTime, ConverterKind::kTime}},
            {"timestamp", {BinaryFormat::kTimestamp, ConverterKind::kTimestamp}},
            {"timestamptz", {BinaryFormat::kTimestampTz, ConverterKind::kTimestampTz}},
            {"uuid", {BinaryFormat::kUuid, ConverterKind::kUuid}},
            {"bytea", {BinaryFormat::kBytes, ConverterKind::kBytea}},
            // Not "char": its output escapes bytes >= 0x80 as octal, its send does not.
            {"text", {BinaryFormat::kText, ConverterKind::kText}},
            {"varchar", {BinaryFormat::kText, ConverterKind::kText}},
            {"bpchar", {BinaryFormat::kText, ConverterKind::kText}},
            {"name", {BinaryFormat::kText, ConverterKind::kText}},
        };
    for (const auto& [name, f] : kFormats) {
      if (t->name == name) {
        format = f.first;
        expected = f.second;
        break;
      }
    }
    // numeric maps to a decimal or to its exact text, both from numeric_out's text.
    if (t->name == "numeric" && (mapping.converter == ConverterKind::kDecimal ||
                                 mapping.converter == ConverterKind::kText)) {
      return BinaryFormat::kNumeric;
    }
  }
  if (format == BinaryFormat::kNone || mapping.converter != expected) {
    return BinaryFormat::kNone;
  }
  return format;
}

std::string FormatPgTimestamp(int64_t micros, bool with_zone) {
  const int64_t days = FloorDivide(micros, kDayMicros) + kPgEpochDays;
  int64_t time = micros - FloorDivide(micros, kDayMicros) * kDayMicros;
  const auto [y, m, d] = CivilFromDays(days);
  const bool bc = y <= 0;
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld",
                        static_cast<long long>(bc ? 1 - y : y), static_cast<long long>(m),
                        static_cast<long long>(d),
                        static_cast<long long>(time / 3'600'000'000),
                        static_cast<long long>(time / 60'000'000 % 60),
                        static_cast<long long>(time / 1'000'000 % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (int64_t frac = time % 1'000'000; frac != 0) {
    char f[24];
    std::snprintf(f, sizeof f, ".%06lld", static_cast<long long>(frac));
    std::string_view fs(f);
    while (fs.back() == '0') fs.remove_suffix(1);
    out += fs;
  }
  if (with_zone) out += "+00";
  if (bc) out += " BC";
  return out;
}

arrow::Status NumericBinaryToText(std::string_view v, std::string* out) {
  if (v.size() < 8) return arrow::Status::Invalid("binary numeric shorter than 8 bytes");
  const char* p = v.data();
  const int16_t ndigits = LoadBigEndian<int16_t>(p);
  const int16_t weight = LoadBigEndian<int16_t>(p + 2);
  const uint16_t sign = LoadBigEndian<uint16_t>(p + 4);
  const int16_t dscale = LoadBigEndian<int16_t>(p + 6);
  if (ndigits < 0 || v.size() != 8 + 2 * static_cast<size_t>(ndigits) || dscale < 0) {
    return arrow::Status::Invalid("binary numeric of ", v.size(), " bytes with ", ndigits,
                                  " digits");
  }
  switch (sign) {
    case 0xC000:
      out->append("NaN");
      return arrow::Status::OK();
    case 0xD000:
      out->append("Infinity");
      return arrow::Status::OK();
    case 0xF000:
      out->append("-Infinity");
      return arrow::Status::OK();
    case 0x0000:
    case 0x4000:
      break;
    default:
      return arrow::Status::Invalid("binary numeric with sign 0x", std::to_string(sign));
  }
  auto digit = [&](int i) -> int {
    // Digit i counts from the first one sent; those not sent are zero.
    return i >= 0 && i < ndigits ? LoadBigEndian<int16_t>(p + 8 + 2 * i) : 0;
  };
  for (int i = 0; i < ndigits; ++i) {
    if (digit(i) < 0 || digit(i) > 9999) {
      return arrow::Status::Invalid("binary numeric digit out of range");
    }
  }
  if (sign == 0x4000) out->push_back('-');
  // Integer part: base-10000 digits 0..weight, the first without leading zeros.
  if (weight < 0) {
    out->push_back('0');
  } else {
    for (int i = 0; i <= weight; ++i) {
      char buf[8];
      const int n = i == 0 ? std::snprintf(buf, sizeof buf, "%d", digit(i))
                           : std::snprintf(buf, sizeof buf, "%04d", digit(i));
      out->append(buf, static_cast<size_t>(n));
    }
  }
  // Fraction: exactly dscale decimal digits (numeric_out pads with zeros).
  if (dscale > 0) {
    out->push_back('.');
    int written = 0;
    for (int i = weight + 1; written < dscale; ++i) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%04d", digit(i));
      const int take = std::min(4, dscale - written);
      out->append(buf, static_cast<size_t>(take));
      written += take;
    }
  }
  return arrow::Status::OK();
}

arrow::Status AppendBinaryValue(const ColumnConverter& c, BinaryFormat format,
                                std::string_view v, arrow::ArrayBuilder* b,
                                std::vector<ConversionIssue>* issues) {
  const char* p = v.data();
  auto need = [&](size_t n) { return v.size() == n; };
  switch (format) {
    case BinaryFormat::kNone:
      break;
    case BinaryFormat::kBool:
      if (!need(1) || static_cast<uint8_t>(p[0]) > 1) {
        return arrow::Status::Invalid("column ", c.column_name(),
                                      ": binary bool is not one byte 0 or 1");
      }
      return As<arrow::BooleanBuilder>(b)->Append(p[0] == 1);
    case BinaryFormat::kInt16:
      if (!need(2)) return WrongLength(c, format, v.size());
      return As<arrow::Int16Builder>(b)->Append(LoadBigEndian<int16_t>(p));
    case BinaryFormat::kInt32:
      if (!need(4)) return WrongLength(c, format, v.size());
      return As<arrow::Int32Builder>(b)->Append(LoadBigEndian<int32_t>(p));
    case BinaryFormat::kInt64:
      if (!need(8)) return WrongLength(c, format, v.size());
      return As<arrow::Int64Builder>(b)->Append(LoadBigEndian<int64_t>(p));
    case BinaryFormat::kOid:
      if (!need(4)) return WrongLength(c, format, v.size());
      return As<arrow::Int64Builder>(b)->Append(LoadBigEndian<uint32_t>(p));
    case BinaryFormat::kFloat32: {
      if (!need(4)) return WrongLength(c, format, v.size());
      const uint32_t bits = LoadBigEndian<uint32_t>(p);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return As<arrow::FloatBuilder>(b)->Append(f);
    }
    case BinaryFormat::kFloat64: {
      if (!need(8)) return WrongLength(c, format, v.size());
      const uint64_t bits = LoadBigEndian<uint64_t>(p);
      double f;
      std::memcpy(&f, &bits, sizeof f);
      return As<arrow::DoubleBuilder>(b)->Append(f);
    }
    case BinaryFormat::kDate: {
      if (!need(4)) return WrongLength(c, format, v.size());
      const int32_t days = LoadBigEndian<int32_t>(p);
      if (days == std::numeric_limits<int32_t>::min() ||
          days == std::numeric_limits<int32_t>::max()) {
        const std::string raw = days > 0 ? "infinity" : "-infinity";
        return BinaryIssue(c, b, issues, raw, IssueReason::kInfinite,
                           "date " + raw + " has no date32 equivalent");
      }
      int32_t unix_days = 0;
      if (__builtin_add_overflow(days, kPgEpochDays, &unix_days)) {
        return arrow::Status::Invalid("column ", c.column_name(),
                                      ": binary date beyond Postgres' range");
      }
      return As<arrow::Date32Builder>(b)->Append(unix_days);
    }
    case BinaryFormat::kTime: {
      if (!need(8)) return WrongLength(c, format, v.size());
      const int64_t micros = LoadBigEndian<int64_t>(p);
      if (micros < 0 || micros > kDayMicros) {
        return arrow::Status::Invalid("column ", c.column_name(),
                                      ": binary time out of [00:00, 24:00]");
      }
      if (micros == kDayMicros) {
        return BinaryIssue(c, b, issues, "24:00:00", IssueReason::kOutOfRange,
                           "time 24:00:00 is outside time64's [00:00, 24:00)");
      }
      return As<arrow::Time64Builder>(b)->Append(micros);
    }
    case BinaryFormat::kTimestamp:
    case BinaryFormat::kTimestampTz: {
      if (!need(8)) return WrongLength(c, format, v.size());
      const int64_t micros = LoadBigEndian<int64_t>(p);
      if (micros == std::numeric_limits<int64_t>::min() ||
          micros == std::numeric_limits<int64_t>::max()) {
        const std::string raw = micros > 0 ? "infinity" : "-infinity";
        return BinaryIssue(c, b, issues, raw, IssueReason::kInfinite,
                           "timestamp " + raw + " has no Arrow equivalent");
      }
      int64_t unix_micros = 0;
      if (__builtin_add_overflow(micros, kPgEpochUnixMicros, &unix_micros)) {
        const std::string raw =
            FormatPgTimestamp(micros, format == BinaryFormat::kTimestampTz);
        return BinaryIssue(c, b, issues, raw, IssueReason::kOutOfRange,
                           "timestamp " + Quoted(raw) +
                               " is outside int64 microseconds since 1970 (years "
                               "290308 BC to 294247 AD)");
      }
      return As<arrow::TimestampBuilder>(b)->Append(unix_micros);
    }
    case BinaryFormat::kUuid:
      if (!need(16)) return WrongLength(c, format, v.size());
      return As<arrow::FixedSizeBinaryBuilder>(b)->Append(
          reinterpret_cast<const uint8_t*>(p));
    case BinaryFormat::kBytes:
      return As<arrow::BinaryBuilder>(b)->Append(v);
    case BinaryFormat::kText:
      return As<arrow::StringBuilder>(b)->Append(v);
    case BinaryFormat::kNumeric: {
      thread_local std::string text;
      text.clear();
      arrow::Status st = NumericBinaryToText(v, &text);
      if (!st.ok()) return st.WithMessage("column ", c.column_name(), ": ", st.message());
      return c.Append(text, b, issues);
    }
  }
  return arrow::Status::Invalid("column ", c.column_name(), ": no binary format");
}

}  // namespace floe::postgres
