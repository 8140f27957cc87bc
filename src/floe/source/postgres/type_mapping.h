// Postgres column types -> Arrow types, and the converters that turn one value in
// Postgres' text output format (what pgoutput sends with binary=false, what a text
// libpq result holds) into an Arrow builder of the mapped type. A type is first
// resolved from the catalog (pg_type / pg_attribute / pg_range) into a PgTypeInfo
// tree — domains, arrays, composites and ranges carry their inner types — then
// MapType picks the Arrow type, and ColumnConverter appends values.
//
// Values the Arrow type cannot hold (numeric NaN in a decimal, infinite dates,
// years beyond Arrow's range, multi-dimensional arrays, ...) are never rounded or
// dropped: the converter appends null and hands back a ConversionIssue carrying the
// raw text and the reason, for the pipeline's quarantine table. The full table of
// rules is docs/type-mapping.md. This folder knows nothing of Iceberg: the bronze
// layer converts the Arrow types (the doc lists the Iceberg type of each).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "floe/source/postgres/pgoutput.h"

namespace floe::postgres {

class PgConnection;

// ---------------------------------------------------------------------------
// Type descriptions

enum class PgTypeKind {
  /// A base (scalar) type: int4, text, numeric, citext, ...
  kBase,
  kEnum,
  /// A domain: `element` is its base type with the domain's typmod.
  kDomain,
  /// An array: `element` is the element type (with the column's typmod, which
  /// Postgres applies to the elements). The number of dimensions is not part of
  /// the type: every value says its own.
  kArray,
  /// A composite (row) type: `fields` in attribute order, dropped attributes left out.
  kComposite,
  /// A range: `element` is the subtype.
  kRange,
  /// A multirange (Postgres 14+); mapped to its text form.
  kMultirange,
  /// Pseudo-types and anything else.
  kOther,
};

std::string_view PgTypeKindName(PgTypeKind kind);

struct PgTypeField;

/// A column's type, resolved from the catalog.
struct PgTypeInfo {
  Oid oid = 0;
  /// The type modifier (pg_attribute.atttypmod); -1 when none.
  int32_t typmod = -1;
  PgTypeKind kind = PgTypeKind::kBase;
  /// pg_type.typname, e.g. "int4", "_int4", "citext".
  std::string name;
  /// The type's schema, e.g. "pg_catalog", "public".
  std::string namespace_name;
  /// kDomain: base type; kArray: element type; kRange: subtype. Null otherwise.
  std::shared_ptr<const PgTypeInfo> element;
  /// kArray: the element type's delimiter (pg_type.typdelim; ',' except for box).
  char delimiter = ',';
  /// kComposite: the attributes.
  std::vector<PgTypeField> fields;

  /// A pg_catalog base type, for tests and built-in knowledge.
  static PgTypeInfo Builtin(std::string name, Oid oid = 0, int32_t typmod = -1);
  static PgTypeInfo ArrayOf(PgTypeInfo element, Oid oid = 0);
};

struct PgTypeField {
  std::string name;
  std::shared_ptr<const PgTypeInfo> type;
};

/// The numeric typmod for numeric(precision, scale) (Postgres' own encoding:
/// ((precision << 16) | (scale & 0x7ff)) + 4).
int32_t NumericTypmod(int32_t precision, int32_t scale);

// ---------------------------------------------------------------------------
// Resolving types from the catalog

/// One pg_type row, as much of it as type mapping needs.
struct PgCatalogType {
  Oid oid = 0;
  std::string name;
  std::string namespace_name;
  /// pg_type.typtype: 'b' base, 'c' composite, 'd' domain, 'e' enum, 'p' pseudo,
  /// 'r' range, 'm' multirange.
  char typtype = 'b';
  /// True when the type's input function is array_in (a true array: int2vector and
  /// oidvector have an element type but a different text form).
  bool is_array = false;
  Oid element_oid = 0;
  /// Domains: typbasetype and typtypmod.
  Oid base_oid = 0;
  int32_t base_typmod = -1;
  /// Ranges: pg_range.rngsubtype.
  Oid range_subtype_oid = 0;
  char delimiter = ',';

  struct Attribute {
    std::string name;
    Oid type_oid = 0;
    int32_t typmod = -1;
  };
  /// Composites: live attributes in attnum order.
  std::vector<Attribute> attributes;
};

/// Where pg_type rows come from: the server, or a table in a test.
class TypeCatalog {
 public:
  virtual ~TypeCatalog() = default;
  /// The row for `oid`; KeyError when there is none.
  virtual arrow::Result<PgCatalogType> LookupType(Oid oid) = 0;
};

/// TypeCatalog over a plain SQL connection (which must outlive it): pg_type,
/// pg_namespace, pg_range and, for composites, pg_attribute. Rows are cached by oid
/// for the life of the object (a type's kind and structure do not change under the
/// same oid, except ALTER TYPE ... ADD ATTRIBUTE on a composite: call Invalidate).
class PgTypeCatalog : public TypeCatalog {
 public:
  explicit PgTypeCatalog(PgConnection* conn) : conn_(conn) {}
  arrow::Result<PgCatalogType> LookupType(Oid oid) override;
  void Invalidate() { cache_.clear(); }

 private:
  PgConnection* conn_;
  std::unordered_map<Oid, PgCatalogType> cache_;
};

/// Turns a column's (type oid, typmod) into a PgTypeInfo tree.
class TypeResolver {
 public:
  virtual ~TypeResolver() = default;
  virtual arrow::Result<PgTypeInfo> Resolve(Oid oid, int32_t typmod) = 0;
};

/// The TypeResolver over a TypeCatalog (which must outlive it): follows domains to
/// their base type, arrays to their element, ranges to their subtype and composites
/// to their attributes. Resolved trees are cached by (oid, typmod).
class CatalogTypeResolver : public TypeResolver {
 public:
  explicit CatalogTypeResolver(TypeCatalog* catalog) : catalog_(catalog) {}
  arrow::Result<PgTypeInfo> Resolve(Oid oid, int32_t typmod) override;

 private:
  arrow::Result<PgTypeInfo> ResolveAt(Oid oid, int32_t typmod, int depth);

  TypeCatalog* catalog_;
  std::unordered_map<uint64_t, PgTypeInfo> cache_;
};

/// A resolver that queries `conn` (which must outlive it) through a PgTypeCatalog.
class PgTypeResolver : public TypeResolver {
 public:
  explicit PgTypeResolver(PgConnection* conn) : catalog_(conn), resolver_(&catalog_) {}
  arrow::Result<PgTypeInfo> Resolve(Oid oid, int32_t typmod) override {
    return resolver_.Resolve(oid, typmod);
  }

 private:
  PgTypeCatalog catalog_;
  CatalogTypeResolver resolver_;
};

// ---------------------------------------------------------------------------
// Mapping

/// How a value's text is turned into the Arrow type. The bronze layer also reads
/// it to pick the Iceberg type where the Arrow type alone is ambiguous (kUuid ->
/// uuid rather than fixed[16]).
enum class ConverterKind {
  kBoolean,      // "t" / "f"
  kInt16,        // int2
  kInt32,        // int4
  kInt64,        // int8, oid
  kFloat32,      // float4, NaN / Infinity kept
  kFloat64,      // float8, NaN / Infinity kept
  kDecimal,      // numeric(p,s), p <= 38, 0 <= s <= p -> decimal128(p,s)
  kText,         // the text form, verbatim, as utf8
  kBytea,        // "\x<hex>" -> binary
  kDate,         // date32
  kTime,         // time64(us)
  kTimestamp,    // timestamp(us)
  kTimestampTz,  // timestamp(us, "UTC")
  kInterval,     // struct<months: int32, days: int32, microseconds: int64>
  kUuid,         // fixed_size_binary(16)
  kArray,        // list<element>
  kComposite,    // struct<attributes...>
  kRange,        // struct<lower, upper, lower_inclusive, upper_inclusive, empty>
};

std::string_view ConverterKindName(ConverterKind kind);

struct ColumnMapping {
  std::shared_ptr<arrow::DataType> type;
  ConverterKind converter = ConverterKind::kText;
  /// Why this mapping, for humans (docs, `floe` diagnostics); empty when obvious.
  std::string notes;
  /// kArray: {element}; kComposite: one per attribute; kRange: {subtype}.
  std::vector<ColumnMapping> children;
  /// kArray: the element delimiter.
  char delimiter = ',';
};

/// The Arrow type and converter for a column of type `type`. Total: a type it does
/// not know maps to utf8 holding the text form.
ColumnMapping MapType(const PgTypeInfo& type);

// ---------------------------------------------------------------------------
// Converting values

/// Why a value could not be represented; each reason's rule is in
/// docs/type-mapping.md.
enum class IssueReason {
  /// numeric NaN in a decimal column.
  kNotANumber,
  /// numeric / date / timestamp `infinity` or `-infinity` (and interval infinity on
  /// Postgres 17+).
  kInfinite,
  /// More digits before the decimal point than the decimal's precision allows.
  kPrecisionExceeded,
  /// Non-zero digits beyond the decimal's scale (never rounded).
  kScaleExceeded,
  /// A date / timestamp / interval / time outside the Arrow type's range (e.g. a
  /// timestamp after year 294247, time 24:00:00).
  kOutOfRange,
  /// An array value with more than one dimension.
  kMultidimensionalArray,
  /// The text is not what Postgres prints for the type.
  kMalformed,
};

/// Stable snake_case name ("not_a_number", "infinite", ...), stored in quarantine.
std::string_view IssueReasonName(IssueReason reason);

/// A value that was appended as null because its type cannot hold it.
struct ConversionIssue {
  std::string column;
  /// The whole value as Postgres rendered it (for a nested value, all of it).
  std::string raw_text;
  IssueReason reason = IssueReason::kMalformed;
  /// What exactly, e.g. "element 3: timestamp 'infinity'".
  std::string detail;
};

/// Appends text-format values of one column to an Arrow builder of the mapped type.
/// Scalar conversions parse in place (std::from_chars, no locale, no allocation);
/// nested values are parsed twice (check, then append) so a bad element never leaves
/// a half-appended row behind.
class ColumnConverter {
 public:
  ColumnConverter(std::string column_name, ColumnMapping mapping);

  const ColumnMapping& mapping() const { return mapping_; }
  const std::string& column_name() const { return column_name_; }

  /// A builder of mapping().type.
  arrow::Result<std::unique_ptr<arrow::ArrayBuilder>> MakeBuilder(
      arrow::MemoryPool* pool = nullptr) const;

  /// Appends the value whose text form is `text`. When the type cannot hold it,
  /// appends null and adds a ConversionIssue to `issues`. An error Status means the
  /// builder failed (out of memory, capacity), never a bad value.
  /// REQUIRES: `builder` came from MakeBuilder.
  arrow::Status Append(std::string_view text, arrow::ArrayBuilder* builder,
                       std::vector<ConversionIssue>* issues) const;

  /// A SQL NULL.
  arrow::Status AppendNull(arrow::ArrayBuilder* builder) const;

 private:
  std::string column_name_;
  ColumnMapping mapping_;
};

// ---------------------------------------------------------------------------
// Binary send formats (COPY ... (FORMAT binary), pgoutput `binary`)

/// A type whose binary send format floe decodes itself, straight into the Arrow
/// builder of its mapping; every other type is read in its text form (the snapshot
/// selects it through its output function) and goes through ColumnConverter::Append.
/// Layouts (big-endian, as the types' `*send` functions write them): bool 1 byte;
/// int2 / int4 / int8 two's complement; oid uint32; float4 / float8 IEEE 754; date
/// int32 days since 2000-01-01 (INT32_MIN / INT32_MAX = -infinity / infinity); time
/// int64 microseconds; timestamp / timestamptz int64 microseconds since 2000-01-01
/// UTC (INT64_MIN / INT64_MAX = -infinity / infinity); uuid 16 bytes; bytea its
/// bytes; text, varchar, bpchar, name and enums their characters (the client
/// encoding, UTF8 in floe's pinned session); numeric Int16 ndigits, Int16 weight,
/// UInt16 sign (0x0000 +, 0x4000 -, 0xC000 NaN, 0xD000 Infinity, 0xF000 -Infinity),
/// Int16 dscale, ndigits x Int16 base-10000 digits (rendered as numeric_out's text,
/// then converted by the text rules, so decimal and text mappings stay exact).
enum class BinaryFormat : uint8_t {
  kNone,
  kBool,
  kInt16,
  kInt32,
  kInt64,
  kOid,
  kFloat32,
  kFloat64,
  kDate,
  kTime,
  kTimestamp,
  kTimestampTz,
  kUuid,
  kBytes,
  kText,
  kNumeric,
};

std::string_view BinaryFormatName(BinaryFormat format);

/// The binary format floe decodes for `type` (domains follow their base type), or
/// kNone when the value must be read as text. Only types whose binary decoding gives
/// exactly what `mapping` (MapType(type)) gives for their text form qualify.
BinaryFormat BinaryFormatFor(const PgTypeInfo& type, const ColumnMapping& mapping);

/// Appends one value in binary format `format` (not kNone) to a builder of
/// `converter`'s mapping, with ColumnConverter::Append's rules: a value the Arrow type
/// cannot hold (date / timestamp +-infinity, a timestamp after 294247, time 24:00:00)
/// is appended as null and reported as a ConversionIssue whose raw_text is what
/// Postgres' output function prints for it. A value of the wrong length is an error
/// (the stream is broken), not an issue.
arrow::Status AppendBinaryValue(const ColumnConverter& converter, BinaryFormat format,
                                std::string_view bytes, arrow::ArrayBuilder* builder,
                                std::vector<ConversionIssue>* issues);

/// A timestamp (microseconds since 2000-01-01) as Postgres prints it with
/// DateStyle=ISO (and TimeZone=UTC when `with_zone`): `2024-01-02 03:04:05.5+00`,
/// ` BC` for years before 1. For issue texts of values decoded from binary.
std::string FormatPgTimestamp(int64_t micros, bool with_zone);

/// numeric's binary send format as numeric_out prints it (`-12.50`, `NaN`,
/// `Infinity`, `-Infinity`), appended to `out`. Invalid on a malformed value.
arrow::Status NumericBinaryToText(std::string_view bytes, std::string* out);

// ---------------------------------------------------------------------------
// Text-format literal parsers (exposed for tests and for other text consumers)

/// One element or field of an array / composite / range literal: its unescaped
/// text, or null.
struct LiteralItem {
  bool is_null = false;
  std::string text;
};

struct ArrayLiteral {
  /// Number of dimensions (0 for the empty array `{}`).
  int dimensions = 0;
  /// Lower bound of each dimension (1 unless a `[l:u]=` prefix says otherwise).
  std::vector<int32_t> lower_bounds;
  /// Length of each dimension.
  std::vector<int32_t> lengths;
  /// All elements in row-major order.
  std::vector<LiteralItem> elements;
};

/// Parses array_out's text: `[l:u]...=` prefix, braces, quoting with backslash
/// escapes, unquoted NULL, `delimiter` between elements. Errors are Invalid.
arrow::Result<ArrayLiteral> ParseArrayLiteral(std::string_view text,
                                              char delimiter = ',');

/// Parses record_out's text `(a,"b,c",,"d""e")`: an empty unquoted field is null,
/// `""` inside quotes is `"`, a backslash escapes the next character.
arrow::Result<std::vector<LiteralItem>> ParseCompositeLiteral(std::string_view text);

struct RangeLiteral {
  bool empty = false;
  bool lower_inclusive = false;
  bool upper_inclusive = false;
  /// Null bound = unbounded on that side.
  LiteralItem lower;
  LiteralItem upper;
};

/// Parses range_out's text: `empty`, or `[` / `(` lower `,` upper `]` / `)`, a
/// missing bound being unbounded, bounds quoted like composite fields.
arrow::Result<RangeLiteral> ParseRangeLiteral(std::string_view text);

}  // namespace floe::postgres
