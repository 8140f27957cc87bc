#include "floe/source/postgres/type_mapping.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/util/decimal.h>
#include <gtest/gtest.h>

#include "floe/common/test_util.h"

namespace floe::postgres {
namespace {

// ---------------------------------------------------------------------------
// Helpers

struct Converted {
  std::shared_ptr<arrow::Array> array;
  std::vector<ConversionIssue> issues;
};

// Converts each text (nullopt = SQL NULL) with the mapping of `type`.
Converted ConvertAll(const PgTypeInfo& type,
                     const std::vector<std::optional<std::string>>& texts) {
  ColumnConverter converter("col", MapType(type));
  auto builder = converter.MakeBuilder().ValueOrDie();
  Converted out;
  for (const auto& t : texts) {
    if (t) {
      EXPECT_TRUE(converter.Append(*t, builder.get(), &out.issues).ok());
    } else {
      EXPECT_TRUE(converter.AppendNull(builder.get()).ok());
    }
  }
  out.array = builder->Finish().ValueOrDie();
  EXPECT_TRUE(out.array->ValidateFull().ok()) << out.array->ValidateFull().ToString();
  return out;
}

Converted ConvertOne(const PgTypeInfo& type, const std::string& text) {
  return ConvertAll(type, {text});
}

PgTypeInfo B(const std::string& name, int32_t typmod = -1) {
  return PgTypeInfo::Builtin(name, 0, typmod);
}

PgTypeInfo Numeric(int32_t p, int32_t s) { return B("numeric", NumericTypmod(p, s)); }

template <typename ArrayType>
auto Value(const Converted& c, int64_t i = 0) {
  return static_cast<const ArrayType&>(*c.array).Value(i);
}

// The single value converted as a null with one issue of `reason`.
void ExpectIssue(const PgTypeInfo& type, const std::string& text, IssueReason reason) {
  Converted c = ConvertOne(type, text);
  ASSERT_EQ(c.array->length(), 1);
  EXPECT_TRUE(c.array->IsNull(0)) << text;
  ASSERT_EQ(c.issues.size(), 1u) << text;
  EXPECT_EQ(c.issues[0].reason, reason)
      << text << ": " << IssueReasonName(c.issues[0].reason) << " " << c.issues[0].detail;
  EXPECT_EQ(c.issues[0].raw_text, text);
  EXPECT_EQ(c.issues[0].column, "col");
}

std::string DecimalText(const Converted& c, int64_t i = 0) {
  const auto& a = static_cast<const arrow::Decimal128Array&>(*c.array);
  const auto& t = static_cast<const arrow::Decimal128Type&>(*a.type());
  return arrow::Decimal128(a.GetValue(i)).ToString(t.scale());
}

int64_t UnscaledLow(const Converted& c) {
  const auto& a = static_cast<const arrow::Decimal128Array&>(*c.array);
  arrow::Decimal128 d(a.GetValue(0));
  return static_cast<int64_t>(d.low_bits());
}

constexpr int64_t kDayMicros = 86'400'000'000;

// ---------------------------------------------------------------------------
// Mapping

TEST(MapType, BuiltinScalarsMapToTheDocumentedArrowTypes) {
  struct Case {
    const char* pg;
    std::shared_ptr<arrow::DataType> arrow;
    ConverterKind kind;
  };
  const std::vector<Case> cases = {
      {"bool", arrow::boolean(), ConverterKind::kBoolean},
      {"int2", arrow::int16(), ConverterKind::kInt16},
      {"int4", arrow::int32(), ConverterKind::kInt32},
      {"int8", arrow::int64(), ConverterKind::kInt64},
      {"oid", arrow::int64(), ConverterKind::kInt64},
      {"float4", arrow::float32(), ConverterKind::kFloat32},
      {"float8", arrow::float64(), ConverterKind::kFloat64},
      {"numeric", arrow::utf8(), ConverterKind::kText},
      {"money", arrow::utf8(), ConverterKind::kText},
      {"text", arrow::utf8(), ConverterKind::kText},
      {"varchar", arrow::utf8(), ConverterKind::kText},
      {"bpchar", arrow::utf8(), ConverterKind::kText},
      {"name", arrow::utf8(), ConverterKind::kText},
      {"bytea", arrow::binary(), ConverterKind::kBytea},
      {"date", arrow::date32(), ConverterKind::kDate},
      {"time", arrow::time64(arrow::TimeUnit::MICRO), ConverterKind::kTime},
      {"timetz", arrow::utf8(), ConverterKind::kText},
      {"timestamp", arrow::timestamp(arrow::TimeUnit::MICRO), ConverterKind::kTimestamp},
      {"timestamptz", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
       ConverterKind::kTimestampTz},
      {"uuid", arrow::fixed_size_binary(16), ConverterKind::kUuid},
      {"json", arrow::utf8(), ConverterKind::kText},
      {"jsonb", arrow::utf8(), ConverterKind::kText},
      {"xml", arrow::utf8(), ConverterKind::kText},
      {"inet", arrow::utf8(), ConverterKind::kText},
      {"cidr", arrow::utf8(), ConverterKind::kText},
      {"macaddr", arrow::utf8(), ConverterKind::kText},
      {"macaddr8", arrow::utf8(), ConverterKind::kText},
      {"point", arrow::utf8(), ConverterKind::kText},
  };
  for (const Case& c : cases) {
    ColumnMapping m = MapType(B(c.pg));
    EXPECT_TRUE(m.type->Equals(*c.arrow)) << c.pg << " -> " << m.type->ToString();
    EXPECT_EQ(m.converter, c.kind) << c.pg;
  }
}

TEST(MapType, IntervalIsAStructOfPostgresOwnThreeFields) {
  ColumnMapping m = MapType(B("interval"));
  EXPECT_EQ(m.converter, ConverterKind::kInterval);
  EXPECT_EQ(m.type->ToString(),
            "struct<months: int32, days: int32, microseconds: int64>");
}

TEST(MapType, NumericWithTypmodUpTo38DigitsIsADecimalElseExactText) {
  EXPECT_TRUE(MapType(Numeric(10, 2)).type->Equals(*arrow::decimal128(10, 2)));
  EXPECT_TRUE(MapType(Numeric(38, 0)).type->Equals(*arrow::decimal128(38, 0)));
  EXPECT_TRUE(MapType(Numeric(5, 5)).type->Equals(*arrow::decimal128(5, 5)));
  // Beyond decimal128, or a scale Iceberg's decimal cannot have (Postgres 15
  // allows negative scales and scale > precision).
  EXPECT_EQ(MapType(Numeric(39, 2)).converter, ConverterKind::kText);
  EXPECT_EQ(MapType(Numeric(1000, 0)).converter, ConverterKind::kText);
  EXPECT_EQ(MapType(Numeric(5, -2)).converter, ConverterKind::kText);
  EXPECT_EQ(MapType(Numeric(3, 5)).converter, ConverterKind::kText);
  EXPECT_NE(MapType(B("numeric")).notes.find("unbounded"), std::string::npos);
}

TEST(MapType, CitextIsResolvedByNameInAnySchema) {
  PgTypeInfo t = B("citext");
  t.namespace_name = "extensions";
  t.oid = 16400;
  EXPECT_TRUE(MapType(t).type->Equals(*arrow::utf8()));
}

TEST(MapType, AUserTypeNamedLikeABuiltinIsNotTakenForIt) {
  PgTypeInfo t = B("int4");
  t.namespace_name = "public";
  EXPECT_EQ(MapType(t).converter, ConverterKind::kText);
}

TEST(MapType, DomainsMapToTheirBaseTypeWithTheDomainTypmod) {
  PgTypeInfo d;
  d.kind = PgTypeKind::kDomain;
  d.name = "price";
  d.namespace_name = "public";
  d.element = std::make_shared<const PgTypeInfo>(Numeric(12, 4));
  ColumnMapping m = MapType(d);
  EXPECT_TRUE(m.type->Equals(*arrow::decimal128(12, 4)));
  EXPECT_NE(m.notes.find("domain price"), std::string::npos);
}

TEST(MapType, EnumsAndMultirangesAreText) {
  PgTypeInfo e;
  e.kind = PgTypeKind::kEnum;
  e.name = "mood";
  EXPECT_EQ(MapType(e).converter, ConverterKind::kText);
  PgTypeInfo mr;
  mr.kind = PgTypeKind::kMultirange;
  mr.name = "int4multirange";
  EXPECT_EQ(MapType(mr).converter, ConverterKind::kText);
}

TEST(MapType, ArraysCompositesAndRangesNest) {
  EXPECT_EQ(MapType(PgTypeInfo::ArrayOf(B("int4"))).type->ToString(),
            "list<item: int32>");
  PgTypeInfo c;
  c.kind = PgTypeKind::kComposite;
  c.name = "pair";
  c.fields.push_back({"a", std::make_shared<const PgTypeInfo>(B("int4"))});
  c.fields.push_back(
      {"b", std::make_shared<const PgTypeInfo>(PgTypeInfo::ArrayOf(B("text")))});
  EXPECT_EQ(MapType(c).type->ToString(), "struct<a: int32, b: list<item: string>>");
  PgTypeInfo r;
  r.kind = PgTypeKind::kRange;
  r.name = "int4range";
  r.element = std::make_shared<const PgTypeInfo>(B("int4"));
  EXPECT_EQ(MapType(r).type->ToString(),
            "struct<lower: int32, upper: int32, lower_inclusive: bool, upper_inclusive: "
            "bool, empty: bool>");
}

// ---------------------------------------------------------------------------
// Resolver over an in-memory catalog

class MapCatalog : public TypeCatalog {
 public:
  arrow::Result<PgCatalogType> LookupType(Oid oid) override {
    ++lookups;
    auto it = types.find(oid);
    if (it == types.end()) return arrow::Status::KeyError("no type ", oid);
    return it->second;
  }
  void Add(Oid oid, std::string name, char typtype, std::string ns = "pg_catalog") {
    PgCatalogType t;
    t.oid = oid;
    t.name = std::move(name);
    t.typtype = typtype;
    t.namespace_name = std::move(ns);
    types[oid] = t;
  }
  std::map<Oid, PgCatalogType> types;
  int lookups = 0;
};

TEST(CatalogTypeResolver, FollowsDomainsArraysCompositesAndRanges) {
  MapCatalog cat;
  cat.Add(23, "int4", 'b');
  cat.Add(25, "text", 'b');
  cat.Add(1700, "numeric", 'b');
  cat.Add(603, "box", 'b');
  cat.types[603].delimiter = ';';
  cat.Add(1020, "_box", 'b');
  cat.types[1020].is_array = true;
  cat.types[1020].element_oid = 603;
  cat.Add(1007, "_int4", 'b');
  cat.types[1007].is_array = true;
  cat.types[1007].element_oid = 23;
  cat.Add(3904, "int4range", 'r');
  cat.types[3904].range_subtype_oid = 23;
  cat.Add(20000, "price", 'd', "public");
  cat.types[20000].base_oid = 1700;
  cat.types[20000].base_typmod = NumericTypmod(12, 4);
  cat.Add(20001, "_price", 'b', "public");
  cat.types[20001].is_array = true;
  cat.types[20001].element_oid = 20000;
  cat.Add(20002, "pair", 'c', "public");
  cat.types[20002].attributes = {
      {"a", 23, -1}, {"b", 1007, -1}, {"c", 1700, NumericTypmod(5, 1)}};
  // int2vector-like: an element type but not array_in.
  cat.Add(22, "int2vector", 'b');
  cat.types[22].element_oid = 21;

  CatalogTypeResolver resolver(&cat);
  ASSERT_OK_AND_ASSIGN(PgTypeInfo arr, resolver.Resolve(20001, -1));
  EXPECT_EQ(arr.kind, PgTypeKind::kArray);
  ASSERT_NE(arr.element, nullptr);
  EXPECT_EQ(arr.element->kind, PgTypeKind::kDomain);
  EXPECT_EQ(arr.element->element->typmod, NumericTypmod(12, 4));
  EXPECT_EQ(MapType(arr).type->ToString(), "list<item: decimal128(12, 4)>");

  ASSERT_OK_AND_ASSIGN(PgTypeInfo boxes, resolver.Resolve(1020, -1));
  EXPECT_EQ(boxes.delimiter, ';');
  EXPECT_EQ(MapType(boxes).delimiter, ';');

  ASSERT_OK_AND_ASSIGN(PgTypeInfo pair, resolver.Resolve(20002, -1));
  EXPECT_EQ(pair.kind, PgTypeKind::kComposite);
  EXPECT_EQ(MapType(pair).type->ToString(),
            "struct<a: int32, b: list<item: int32>, c: decimal128(5, 1)>");

  ASSERT_OK_AND_ASSIGN(PgTypeInfo range, resolver.Resolve(3904, -1));
  EXPECT_EQ(range.kind, PgTypeKind::kRange);
  EXPECT_EQ(range.element->name, "int4");

  ASSERT_OK_AND_ASSIGN(PgTypeInfo vec, resolver.Resolve(22, -1));
  EXPECT_EQ(vec.kind, PgTypeKind::kBase);
  EXPECT_EQ(MapType(vec).converter, ConverterKind::kText);

  // An array column's typmod goes to its elements.
  cat.Add(1231, "_numeric", 'b');
  cat.types[1231].is_array = true;
  cat.types[1231].element_oid = 1700;
  ASSERT_OK_AND_ASSIGN(PgTypeInfo nums, resolver.Resolve(1231, NumericTypmod(9, 2)));
  EXPECT_EQ(MapType(nums).type->ToString(), "list<item: decimal128(9, 2)>");

  // Cached: no further lookups for a resolved (oid, typmod).
  const int before = cat.lookups;
  ASSERT_OK(resolver.Resolve(20002, -1).status());
  EXPECT_EQ(cat.lookups, before);

  EXPECT_TRUE(resolver.Resolve(99999, -1).status().IsKeyError());
}

TEST(CatalogTypeResolver, RejectsACycleInABrokenCatalog) {
  MapCatalog cat;
  cat.Add(30000, "loop", 'd', "public");
  cat.types[30000].base_oid = 30000;
  CatalogTypeResolver resolver(&cat);
  EXPECT_TRUE(resolver.Resolve(30000, -1).status().IsInvalid());
}

// ---------------------------------------------------------------------------
// Scalar converters

TEST(Converter, BooleansAreTAndF) {
  Converted c = ConvertAll(B("bool"), {"t", "f", std::nullopt});
  EXPECT_TRUE(Value<arrow::BooleanArray>(c, 0));
  EXPECT_FALSE(Value<arrow::BooleanArray>(c, 1));
  EXPECT_TRUE(c.array->IsNull(2));
  ExpectIssue(B("bool"), "true", IssueReason::kMalformed);
}

TEST(Converter, IntegersKeepTheirFullRange) {
  Converted i2 = ConvertAll(B("int2"), {"-32768", "32767"});
  EXPECT_EQ(Value<arrow::Int16Array>(i2, 0), -32768);
  EXPECT_EQ(Value<arrow::Int16Array>(i2, 1), 32767);
  Converted i4 = ConvertAll(B("int4"), {"-2147483648", "2147483647"});
  EXPECT_EQ(Value<arrow::Int32Array>(i4, 0), INT32_MIN);
  EXPECT_EQ(Value<arrow::Int32Array>(i4, 1), INT32_MAX);
  Converted i8 = ConvertAll(B("int8"), {"-9223372036854775808", "9223372036854775807"});
  EXPECT_EQ(Value<arrow::Int64Array>(i8, 0), INT64_MIN);
  EXPECT_EQ(Value<arrow::Int64Array>(i8, 1), INT64_MAX);
  Converted oid = ConvertOne(B("oid"), "4294967295");
  EXPECT_EQ(Value<arrow::Int64Array>(oid), 4294967295LL);
  ExpectIssue(B("int2"), "32768", IssueReason::kMalformed);
  ExpectIssue(B("int4"), "12a", IssueReason::kMalformed);
  ExpectIssue(B("int4"), "", IssueReason::kMalformed);
}

TEST(Converter, FloatsKeepNaNAndInfinities) {
  Converted c = ConvertAll(B("float8"), {"1.5", "-0", "NaN", "Infinity", "-Infinity",
                                         "1e+308", "0.1", "5e-324"});
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 0), 1.5);
  EXPECT_TRUE(std::signbit(Value<arrow::DoubleArray>(c, 1)));
  EXPECT_TRUE(std::isnan(Value<arrow::DoubleArray>(c, 2)));
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 3), std::numeric_limits<double>::infinity());
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 4), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 5), 1e308);
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 6), 0.1);
  EXPECT_EQ(Value<arrow::DoubleArray>(c, 7), 5e-324);
  EXPECT_TRUE(c.issues.empty());
  Converted f = ConvertAll(B("float4"), {"3.4028235e+38", "1.1754944e-38", "NaN"});
  EXPECT_EQ(Value<arrow::FloatArray>(f, 0), 3.4028235e+38f);
  EXPECT_EQ(Value<arrow::FloatArray>(f, 1), 1.1754944e-38f);
  EXPECT_TRUE(std::isnan(Value<arrow::FloatArray>(f, 2)));
}

TEST(Converter, DecimalsPadTheScaleAndKeepTheSign) {
  Converted c = ConvertOne(Numeric(10, 3), "1.5");
  EXPECT_EQ(UnscaledLow(c), 1500);
  EXPECT_EQ(DecimalText(c), "1.500");
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(10, 2), "-0.05")), "-0.05");
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(10, 2), "-12345678.90")), "-12345678.90");
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(10, 2), "0")), "0.00");
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(10, 0), "-7")), "-7");
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(5, 5), "0.12345")), "0.12345");
  // Trailing zeros beyond the scale are exact.
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(10, 2), "1.2300")), "1.23");
  const std::string max38(38, '9');
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(38, 0), max38)), max38);
  EXPECT_EQ(DecimalText(ConvertOne(Numeric(38, 0), "-" + max38)), "-" + max38);
  EXPECT_EQ(DecimalText(
                ConvertOne(Numeric(38, 10), "-1234567890123456789012345678.0123456789")),
            "-1234567890123456789012345678.0123456789");
}

TEST(Converter, DecimalSpecialValuesAndOverflowsBecomeNullWithAnIssue) {
  ExpectIssue(Numeric(10, 2), "NaN", IssueReason::kNotANumber);
  ExpectIssue(Numeric(10, 2), "Infinity", IssueReason::kInfinite);
  ExpectIssue(Numeric(10, 2), "-Infinity", IssueReason::kInfinite);
  ExpectIssue(Numeric(10, 2), "123456789.00", IssueReason::kPrecisionExceeded);
  ExpectIssue(Numeric(38, 0), std::string(39, '9'), IssueReason::kPrecisionExceeded);
  ExpectIssue(Numeric(10, 2), "1.234", IssueReason::kScaleExceeded);
  ExpectIssue(Numeric(10, 2), "1e5", IssueReason::kMalformed);
  ExpectIssue(Numeric(10, 2), "-", IssueReason::kMalformed);
}

TEST(Converter, NumericWithoutTypmodKeepsTheExactText) {
  Converted c = ConvertAll(
      B("numeric"),
      {"NaN", "-1.50", "1e-5", "123456789012345678901234567890123456789012.5"});
  const auto& a = static_cast<const arrow::StringArray&>(*c.array);
  EXPECT_EQ(a.GetView(0), "NaN");
  EXPECT_EQ(a.GetView(1), "-1.50");
  EXPECT_EQ(a.GetView(3), "123456789012345678901234567890123456789012.5");
  EXPECT_TRUE(c.issues.empty());
}

TEST(Converter, TextIsVerbatimIncludingPadding) {
  Converted c = ConvertAll(B("bpchar"), {"ab  ", "", "é\n\"x\""});
  const auto& a = static_cast<const arrow::StringArray&>(*c.array);
  EXPECT_EQ(a.GetView(0), "ab  ");
  EXPECT_EQ(a.GetView(1), "");
  EXPECT_EQ(a.GetView(2), "é\n\"x\"");
}

TEST(Converter, ByteaDecodesTheHexForm) {
  std::string long_hex = "\\x";
  std::string long_bytes;
  for (int i = 0; i < 1000; ++i) {
    long_hex += "a5";
    long_bytes += '\xa5';
  }
  Converted c = ConvertAll(B("bytea"), {"\\x00ff10", "\\x", "\\xDEADbeef", long_hex});
  const auto& a = static_cast<const arrow::BinaryArray&>(*c.array);
  EXPECT_EQ(a.GetView(0), std::string("\x00\xff\x10", 3));
  EXPECT_EQ(a.GetView(1), "");
  EXPECT_EQ(a.GetView(2), "\xde\xad\xbe\xef");
  EXPECT_EQ(a.GetView(3), long_bytes);
  ExpectIssue(B("bytea"), "\\x0", IssueReason::kMalformed);
  ExpectIssue(B("bytea"), "\\xzz", IssueReason::kMalformed);
  ExpectIssue(B("bytea"), "abc", IssueReason::kMalformed);
}

TEST(Converter, DatesCountDaysFromTheUnixEpochIncludingBC) {
  Converted c = ConvertAll(
      B("date"), {"1970-01-01", "2024-01-02", "2024-02-29", "1969-12-31", "0001-01-01",
                  "0001-12-31 BC", "4714-11-24 BC", "5874897-12-31"});
  EXPECT_EQ(Value<arrow::Date32Array>(c, 0), 0);
  EXPECT_EQ(Value<arrow::Date32Array>(c, 1), 19724);
  EXPECT_EQ(Value<arrow::Date32Array>(c, 2), 19782);
  EXPECT_EQ(Value<arrow::Date32Array>(c, 3), -1);
  EXPECT_EQ(Value<arrow::Date32Array>(c, 4), -719162);
  // 1 BC is the year before 1 AD.
  EXPECT_EQ(Value<arrow::Date32Array>(c, 5), -719163);
  // Postgres' earliest date: Julian day 0.
  EXPECT_EQ(Value<arrow::Date32Array>(c, 6), -2440588);
  // Postgres' latest date ('5874897-12-31'::date - '1970-01-01'::date).
  EXPECT_EQ(Value<arrow::Date32Array>(c, 7), 2145042905);
  EXPECT_TRUE(c.issues.empty());
  ExpectIssue(B("date"), "infinity", IssueReason::kInfinite);
  ExpectIssue(B("date"), "-infinity", IssueReason::kInfinite);
  ExpectIssue(B("date"), "2023-02-29", IssueReason::kMalformed);
  ExpectIssue(B("date"), "2023-1-02", IssueReason::kMalformed);
}

TEST(Converter, TimesAcceptFractionsOfAnyLengthButNot2400) {
  Converted c = ConvertAll(B("time"), {"00:00:00", "03:04:05.5", "03:04:05.123456",
                                       "23:59:59.999999", "12:00:00.01"});
  EXPECT_EQ(Value<arrow::Time64Array>(c, 0), 0);
  EXPECT_EQ(Value<arrow::Time64Array>(c, 1), 11'045'500'000);
  EXPECT_EQ(Value<arrow::Time64Array>(c, 2), 11'045'123'456);
  EXPECT_EQ(Value<arrow::Time64Array>(c, 3), kDayMicros - 1);
  EXPECT_EQ(Value<arrow::Time64Array>(c, 4), 43'200'010'000);
  ExpectIssue(B("time"), "24:00:00", IssueReason::kOutOfRange);
  ExpectIssue(B("time"), "03:04:05.1234567", IssueReason::kMalformed);
  ExpectIssue(B("time"), "03:04", IssueReason::kMalformed);
}

TEST(Converter, TimestampsParseFractionalDigitsOfVaryingLength) {
  Converted c = ConvertAll(
      B("timestamp"),
      {"2024-01-02 03:04:05", "2024-01-02 03:04:05.1", "2024-01-02 03:04:05.12",
       "2024-01-02 03:04:05.123456", "1970-01-01 00:00:00", "1969-12-31 23:59:59.999999",
       "0044-03-15 12:00:00 BC", "294247-01-10 04:00:54.775807"});
  const int64_t base = 19724 * kDayMicros + 11'045'000'000;
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 0), base);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 1), base + 100'000);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 2), base + 120'000);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 3), base + 123'456);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 4), 0);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 5), -1);
  // 44 BC = astronomical year -43. Postgres:
  // extract(epoch from '0044-03-15 12:00:00 BC'::timestamp) = -63517780800.
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 6), -63'517'780'800'000'000);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 7), INT64_MAX);
  EXPECT_TRUE(c.issues.empty());
}

TEST(Converter, TimestampsBeyondInt64OrInfiniteBecomeNullWithAnIssue) {
  ExpectIssue(B("timestamp"), "infinity", IssueReason::kInfinite);
  ExpectIssue(B("timestamp"), "-infinity", IssueReason::kInfinite);
  ExpectIssue(B("timestamptz"), "infinity", IssueReason::kInfinite);
  ExpectIssue(B("timestamp"), "294247-01-10 04:00:54.775808", IssueReason::kOutOfRange);
  ExpectIssue(B("timestamp"), "294276-12-31 23:59:59.999999", IssueReason::kOutOfRange);
  ExpectIssue(B("timestamp"), "2024-01-02T03:04:05", IssueReason::kMalformed);
  ExpectIssue(B("timestamp"), "2024-01-02 03:04:05+00", IssueReason::kMalformed);
  ExpectIssue(B("timestamptz"), "2024-01-02 03:04:05", IssueReason::kMalformed);
}

TEST(Converter, TimestamptzAppliesTheOffsetToReachUtc) {
  Converted c =
      ConvertAll(B("timestamptz"),
                 {"2024-01-02 03:04:05.123456+00", "2024-01-02 08:34:05.123456+05:30",
                  "2024-01-01 19:04:05.123456-08", "0001-01-01 00:00:00+00 BC",
                  "1900-01-01 00:53:28+00:53:28"});
  const int64_t expected = 19724 * kDayMicros + 11'045'123'456;
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 0), expected);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 1), expected);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 2), expected);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 3), -62'167'219'200'000'000);
  EXPECT_EQ(Value<arrow::TimestampArray>(c, 4), -2'208'988'800'000'000);
  EXPECT_TRUE(c.issues.empty());
}

struct IntervalValue {
  int32_t months;
  int32_t days;
  int64_t micros;
};

IntervalValue IntervalAt(const Converted& c, int64_t i) {
  const auto& s = static_cast<const arrow::StructArray&>(*c.array);
  return {static_cast<const arrow::Int32Array&>(*s.field(0)).Value(i),
          static_cast<const arrow::Int32Array&>(*s.field(1)).Value(i),
          static_cast<const arrow::Int64Array&>(*s.field(2)).Value(i)};
}

TEST(Converter, IntervalsKeepMonthsDaysAndMicrosecondsApart) {
  Converted c =
      ConvertAll(B("interval"),
                 {"1 year 2 mons 3 days 04:05:06.789", "-1 days +02:03:00", "00:00:00",
                  "-1 years -2 mons +3 days -04:05:06", "2562047788:00:54.775807",
                  "3 days", "1 mon", "-00:00:00.000001", "-178956970 years -8 mons",
                  // '-9223372036854775808 us', the smallest count (PostgreSQL's own
                  // interval regression test); its magnitude does not fit int64.
                  "-2562047788:00:54.775808"});
  auto v = IntervalAt(c, 0);
  EXPECT_EQ(v.months, 14);
  EXPECT_EQ(v.days, 3);
  EXPECT_EQ(v.micros, 14'706'789'000);
  v = IntervalAt(c, 1);
  EXPECT_EQ(v.months, 0);
  EXPECT_EQ(v.days, -1);
  EXPECT_EQ(v.micros, 7'380'000'000);
  v = IntervalAt(c, 2);
  EXPECT_EQ(v.micros, 0);
  v = IntervalAt(c, 3);
  EXPECT_EQ(v.months, -14);
  EXPECT_EQ(v.days, 3);
  EXPECT_EQ(v.micros, -14'706'000'000);
  EXPECT_EQ(IntervalAt(c, 4).micros, INT64_MAX);
  EXPECT_EQ(IntervalAt(c, 5).days, 3);
  EXPECT_EQ(IntervalAt(c, 6).months, 1);
  EXPECT_EQ(IntervalAt(c, 7).micros, -1);
  EXPECT_EQ(IntervalAt(c, 8).months, INT32_MIN);
  EXPECT_EQ(IntervalAt(c, 9).micros, INT64_MIN);
  EXPECT_TRUE(c.issues.empty());
  ExpectIssue(B("interval"), "-2562047788:00:54.775809", IssueReason::kOutOfRange);
  ExpectIssue(B("interval"), "2562047788:00:54.775808", IssueReason::kOutOfRange);
  ExpectIssue(B("interval"), "infinity", IssueReason::kInfinite);
  ExpectIssue(B("interval"), "@ 1 day", IssueReason::kMalformed);
  ExpectIssue(B("interval"), "P1D", IssueReason::kMalformed);
}

TEST(Converter, UuidsBecomeSixteenBytes) {
  Converted c = ConvertOne(B("uuid"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  const auto& a = static_cast<const arrow::FixedSizeBinaryArray&>(*c.array);
  EXPECT_EQ(a.GetView(0), std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9"
                                      "\xbd\x38\x0a\x11",
                                      16));
  ExpectIssue(B("uuid"), "a0eebc99", IssueReason::kMalformed);
}

// ---------------------------------------------------------------------------
// Literal parsers

TEST(ParseArrayLiteral, HandlesQuotesEscapesNullsAndEmptyStrings) {
  ASSERT_OK_AND_ASSIGN(
      auto a,
      ParseArrayLiteral(R"({plain,"a,b","c\"d","e\\f",NULL,"NULL","",null, x y })"));
  EXPECT_EQ(a.dimensions, 1);
  ASSERT_EQ(a.elements.size(), 9u);
  EXPECT_EQ(a.elements[0].text, "plain");
  EXPECT_EQ(a.elements[1].text, "a,b");
  EXPECT_EQ(a.elements[2].text, "c\"d");
  EXPECT_EQ(a.elements[3].text, "e\\f");
  EXPECT_TRUE(a.elements[4].is_null);
  EXPECT_FALSE(a.elements[5].is_null);
  EXPECT_EQ(a.elements[5].text, "NULL");
  EXPECT_FALSE(a.elements[6].is_null);
  EXPECT_EQ(a.elements[6].text, "");
  EXPECT_TRUE(a.elements[7].is_null);
  EXPECT_EQ(a.elements[8].text, "x y");
}

TEST(ParseArrayLiteral, ReadsLowerBoundsAndDimensions) {
  ASSERT_OK_AND_ASSIGN(auto a, ParseArrayLiteral("[0:2]={1,2,3}"));
  EXPECT_EQ(a.dimensions, 1);
  EXPECT_EQ(a.lower_bounds, std::vector<int32_t>{0});
  EXPECT_EQ(a.lengths, std::vector<int32_t>{3});
  ASSERT_OK_AND_ASSIGN(auto m, ParseArrayLiteral("[-2:-1][3:5]={{1,2,3},{4,NULL,6}}"));
  EXPECT_EQ(m.dimensions, 2);
  EXPECT_EQ(m.lower_bounds, (std::vector<int32_t>{-2, 3}));
  EXPECT_EQ(m.lengths, (std::vector<int32_t>{2, 3}));
  ASSERT_EQ(m.elements.size(), 6u);
  EXPECT_TRUE(m.elements[4].is_null);
  ASSERT_OK_AND_ASSIGN(auto e, ParseArrayLiteral("{}"));
  EXPECT_EQ(e.dimensions, 0);
  EXPECT_TRUE(e.elements.empty());
  ASSERT_OK_AND_ASSIGN(auto d, ParseArrayLiteral("{{{1},{2}}}"));
  EXPECT_EQ(d.dimensions, 3);
  EXPECT_EQ(d.lengths, (std::vector<int32_t>{1, 2, 1}));
}

TEST(ParseArrayLiteral, RejectsWhatArrayOutNeverPrints) {
  for (const char* bad : {"", "{", "{1,2", "1,2}", "{1,,2}", "{{1,2},{3}}", "{1}x",
                          "[1:3]={1,2}", "[1:2]{1,2}", "{\"a}", "{a\"b}", "{{1},2}"}) {
    EXPECT_FALSE(ParseArrayLiteral(bad).ok()) << bad;
  }
}

TEST(ParseArrayLiteral, UsesTheElementTypesDelimiter) {
  ASSERT_OK_AND_ASSIGN(auto a, ParseArrayLiteral("{(1,1),(0,0);(2,2),(1,1)}", ';'));
  ASSERT_EQ(a.elements.size(), 2u);
  EXPECT_EQ(a.elements[0].text, "(1,1),(0,0)");
}

TEST(ParseCompositeLiteral, HandlesQuotedCommasDoubledQuotesAndNulls) {
  ASSERT_OK_AND_ASSIGN(auto f,
                       ParseCompositeLiteral(R"((1,"a,b",,"x""y","","back\\slash"))"));
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0].text, "1");
  EXPECT_EQ(f[1].text, "a,b");
  EXPECT_TRUE(f[2].is_null);
  EXPECT_EQ(f[3].text, "x\"y");
  EXPECT_FALSE(f[4].is_null);
  EXPECT_EQ(f[4].text, "");
  EXPECT_EQ(f[5].text, "back\\slash");
  ASSERT_OK_AND_ASSIGN(auto one_null, ParseCompositeLiteral("()"));
  ASSERT_EQ(one_null.size(), 1u);
  EXPECT_TRUE(one_null[0].is_null);
  ASSERT_OK_AND_ASSIGN(auto two_nulls, ParseCompositeLiteral("(,)"));
  EXPECT_EQ(two_nulls.size(), 2u);
  EXPECT_FALSE(ParseCompositeLiteral("(1,\"a)").ok());
  EXPECT_FALSE(ParseCompositeLiteral("1,2").ok());
}

TEST(ParseRangeLiteral, ReadsBoundsInclusivityAndEmpty) {
  ASSERT_OK_AND_ASSIGN(auto r, ParseRangeLiteral("[1,10)"));
  EXPECT_EQ(r.lower.text, "1");
  EXPECT_EQ(r.upper.text, "10");
  EXPECT_TRUE(r.lower_inclusive);
  EXPECT_FALSE(r.upper_inclusive);
  ASSERT_OK_AND_ASSIGN(auto u, ParseRangeLiteral("(,5]"));
  EXPECT_TRUE(u.lower.is_null);
  EXPECT_TRUE(u.upper_inclusive);
  ASSERT_OK_AND_ASSIGN(auto e, ParseRangeLiteral("empty"));
  EXPECT_TRUE(e.empty);
  ASSERT_OK_AND_ASSIGN(
      auto q,
      ParseRangeLiteral(R"(["2024-01-01 00:00:00+00","2024-01-02 00:00:00+00"))"));
  EXPECT_EQ(q.lower.text, "2024-01-01 00:00:00+00");
  EXPECT_EQ(q.upper.text, "2024-01-02 00:00:00+00");
  ASSERT_OK_AND_ASSIGN(auto all, ParseRangeLiteral("(,)"));
  EXPECT_TRUE(all.lower.is_null);
  EXPECT_TRUE(all.upper.is_null);
  EXPECT_FALSE(ParseRangeLiteral("[1,2").ok());
  EXPECT_FALSE(ParseRangeLiteral("1,2").ok());
}

// ---------------------------------------------------------------------------
// Nested converters

TEST(Converter, ArraysBecomeListsWithNullElements) {
  Converted c = ConvertAll(PgTypeInfo::ArrayOf(B("int4")),
                           {"{1,NULL,-3}", "{}", std::nullopt, "[0:2]={7,8,9}"});
  const auto& list = static_cast<const arrow::ListArray&>(*c.array);
  EXPECT_EQ(list.value_length(0), 3);
  const auto& values = static_cast<const arrow::Int32Array&>(*list.values());
  EXPECT_EQ(values.Value(0), 1);
  EXPECT_TRUE(values.IsNull(1));
  EXPECT_EQ(values.Value(2), -3);
  EXPECT_EQ(list.value_length(1), 0);
  EXPECT_FALSE(list.IsNull(1));
  EXPECT_TRUE(list.IsNull(2));
  // The lower bound is dropped, the elements kept in order.
  EXPECT_EQ(list.value_length(3), 3);
  EXPECT_EQ(values.Value(list.value_offset(3)), 7);
  EXPECT_TRUE(c.issues.empty());
}

TEST(Converter, TextArraysUnescapeElements) {
  Converted c = ConvertOne(PgTypeInfo::ArrayOf(B("text")),
                           R"({"a,b","c\"d","e\\f",NULL,"NULL",""})");
  const auto& list = static_cast<const arrow::ListArray&>(*c.array);
  const auto& v = static_cast<const arrow::StringArray&>(*list.values());
  EXPECT_EQ(v.GetView(0), "a,b");
  EXPECT_EQ(v.GetView(1), "c\"d");
  EXPECT_EQ(v.GetView(2), "e\\f");
  EXPECT_TRUE(v.IsNull(3));
  EXPECT_EQ(v.GetView(4), "NULL");
  EXPECT_EQ(v.GetView(5), "");
}

TEST(Converter, MultidimensionalArraysBecomeNullWithAnIssue) {
  ExpectIssue(PgTypeInfo::ArrayOf(B("int4")), "{{1,2},{3,4}}",
              IssueReason::kMultidimensionalArray);
}

TEST(Converter, ABadElementNullsTheWholeValueAndLeavesNoHalfRow) {
  Converted c =
      ConvertAll(PgTypeInfo::ArrayOf(B("timestamp")),
                 {"{\"2024-01-01 00:00:00\",infinity}", "{\"2024-01-01 00:00:00\"}"});
  const auto& list = static_cast<const arrow::ListArray&>(*c.array);
  EXPECT_TRUE(list.IsNull(0));
  EXPECT_EQ(list.value_length(0), 0);
  EXPECT_EQ(list.values()->length(), 1);
  ASSERT_EQ(c.issues.size(), 1u);
  EXPECT_EQ(c.issues[0].reason, IssueReason::kInfinite);
  EXPECT_EQ(c.issues[0].raw_text, "{\"2024-01-01 00:00:00\",infinity}");
  EXPECT_EQ(c.issues[0].detail.rfind("element 2: ", 0), 0u) << c.issues[0].detail;
}

PgTypeInfo Composite() {
  PgTypeInfo c;
  c.kind = PgTypeKind::kComposite;
  c.name = "item";
  c.namespace_name = "public";
  c.fields.push_back({"id", std::make_shared<const PgTypeInfo>(B("int4"))});
  c.fields.push_back({"label", std::make_shared<const PgTypeInfo>(B("text"))});
  c.fields.push_back({"price", std::make_shared<const PgTypeInfo>(Numeric(6, 2))});
  c.fields.push_back(
      {"tags", std::make_shared<const PgTypeInfo>(PgTypeInfo::ArrayOf(B("text")))});
  return c;
}

TEST(Converter, CompositesBecomeStructsWithQuotedCommasAndNulls) {
  Converted c = ConvertAll(Composite(), {R"((1,"a,b ""c""",1.50,"{x,""y z""}"))",
                                         "(2,,,)", R"((3,"",NaN,{}))"});
  const auto& s = static_cast<const arrow::StructArray&>(*c.array);
  const auto& id = static_cast<const arrow::Int32Array&>(*s.field(0));
  const auto& label = static_cast<const arrow::StringArray&>(*s.field(1));
  const auto& tags = static_cast<const arrow::ListArray&>(*s.field(3));
  EXPECT_EQ(id.Value(0), 1);
  EXPECT_EQ(label.GetView(0), "a,b \"c\"");
  EXPECT_EQ(tags.value_length(0), 2);
  EXPECT_EQ(static_cast<const arrow::StringArray&>(*tags.values()).GetView(1), "y z");
  EXPECT_EQ(id.Value(1), 2);
  EXPECT_TRUE(label.IsNull(1));
  EXPECT_TRUE(s.field(2)->IsNull(1));
  EXPECT_TRUE(tags.IsNull(1));
  // NaN in the decimal field: the whole row value is null, reported once.
  EXPECT_TRUE(s.IsNull(2));
  ASSERT_EQ(c.issues.size(), 1u);
  EXPECT_EQ(c.issues[0].reason, IssueReason::kNotANumber);
  EXPECT_EQ(c.issues[0].detail.rfind("field price: ", 0), 0u) << c.issues[0].detail;
  ExpectIssue(Composite(), "(1,2)", IssueReason::kMalformed);
}

PgTypeInfo RangeOf(PgTypeInfo sub) {
  PgTypeInfo r;
  r.kind = PgTypeKind::kRange;
  r.name = "range";
  r.namespace_name = "pg_catalog";
  r.element = std::make_shared<const PgTypeInfo>(std::move(sub));
  return r;
}

TEST(Converter, RangesBecomeBoundsAndFlags) {
  Converted c = ConvertAll(RangeOf(B("int4")), {"[1,10)", "empty", "(,5]", "[3,)"});
  const auto& s = static_cast<const arrow::StructArray&>(*c.array);
  const auto& lower = static_cast<const arrow::Int32Array&>(*s.field(0));
  const auto& upper = static_cast<const arrow::Int32Array&>(*s.field(1));
  const auto& lower_inc = static_cast<const arrow::BooleanArray&>(*s.field(2));
  const auto& upper_inc = static_cast<const arrow::BooleanArray&>(*s.field(3));
  const auto& empty = static_cast<const arrow::BooleanArray&>(*s.field(4));
  EXPECT_EQ(lower.Value(0), 1);
  EXPECT_EQ(upper.Value(0), 10);
  EXPECT_TRUE(lower_inc.Value(0));
  EXPECT_FALSE(upper_inc.Value(0));
  EXPECT_FALSE(empty.Value(0));
  EXPECT_TRUE(empty.Value(1));
  EXPECT_TRUE(c.issues.empty());
  EXPECT_TRUE(lower.IsNull(1));
  EXPECT_TRUE(lower.IsNull(2));
  EXPECT_EQ(upper.Value(2), 5);
  EXPECT_TRUE(upper_inc.Value(2));
  EXPECT_TRUE(upper.IsNull(3));
  EXPECT_FALSE(upper_inc.Value(3));

  Converted t = ConvertOne(RangeOf(B("timestamptz")),
                           R"(["2024-01-01 00:00:00+00","2024-01-02 00:00:00+00"))");
  const auto& ts = static_cast<const arrow::StructArray&>(*t.array);
  EXPECT_EQ(static_cast<const arrow::TimestampArray&>(*ts.field(1)).Value(0),
            19724 * kDayMicros);
  ExpectIssue(RangeOf(B("timestamp")), "[\"2024-01-01 00:00:00\",infinity)",
              IssueReason::kInfinite);
}

TEST(IssueReasonName, NamesAreStableSnakeCase) {
  EXPECT_EQ(IssueReasonName(IssueReason::kNotANumber), "not_a_number");
  EXPECT_EQ(IssueReasonName(IssueReason::kInfinite), "infinite");
  EXPECT_EQ(IssueReasonName(IssueReason::kPrecisionExceeded), "precision_exceeded");
  EXPECT_EQ(IssueReasonName(IssueReason::kScaleExceeded), "scale_exceeded");
  EXPECT_EQ(IssueReasonName(IssueReason::kOutOfRange), "out_of_range");
  EXPECT_EQ(IssueReasonName(IssueReason::kMultidimensionalArray),
            "multidimensional_array");
  EXPECT_EQ(IssueReasonName(IssueReason::kMalformed), "malformed");
}

// ---------------------------------------------------------------------------
// Binary send formats

std::string BigEndianBytes(uint64_t v, int n) {
  std::string out(static_cast<size_t>(n), '\0');
  for (int i = n - 1; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}
std::string I16(int16_t v) { return BigEndianBytes(static_cast<uint16_t>(v), 2); }
std::string I32(int32_t v) { return BigEndianBytes(static_cast<uint32_t>(v), 4); }
std::string I64(int64_t v) { return BigEndianBytes(static_cast<uint64_t>(v), 8); }
std::string F32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return BigEndianBytes(bits, 4);
}
std::string F64(double f) {
  uint64_t bits;
  std::memcpy(&bits, &f, 8);
  return BigEndianBytes(bits, 8);
}

// Decodes `binary` with the binary format of `type` and `text` with its text
// converter: the two must give equal arrays and identical issues.
void ExpectBinaryEqualsText(const PgTypeInfo& type, const std::string& binary,
                            const std::string& text) {
  ColumnMapping mapping = MapType(type);
  const BinaryFormat format = BinaryFormatFor(type, mapping);
  ASSERT_NE(format, BinaryFormat::kNone) << type.name;
  ColumnConverter converter("col", mapping);
  auto from_binary = converter.MakeBuilder().ValueOrDie();
  auto from_text = converter.MakeBuilder().ValueOrDie();
  std::vector<ConversionIssue> binary_issues, text_issues;
  ASSERT_TRUE(
      AppendBinaryValue(converter, format, binary, from_binary.get(), &binary_issues)
          .ok());
  ASSERT_TRUE(converter.Append(text, from_text.get(), &text_issues).ok());
  auto a = from_binary->Finish().ValueOrDie();
  auto b = from_text->Finish().ValueOrDie();
  ASSERT_TRUE(a->ValidateFull().ok());
  EXPECT_TRUE(a->Equals(*b)) << type.name << " " << text << ": " << a->ToString()
                             << " vs " << b->ToString();
  ASSERT_EQ(binary_issues.size(), text_issues.size()) << type.name << " " << text;
  for (size_t i = 0; i < text_issues.size(); ++i) {
    EXPECT_EQ(binary_issues[i].reason, text_issues[i].reason) << text;
    EXPECT_EQ(binary_issues[i].raw_text, text_issues[i].raw_text) << text;
    EXPECT_EQ(binary_issues[i].detail, text_issues[i].detail) << text;
    EXPECT_EQ(binary_issues[i].column, "col");
  }
}

TEST(BinaryFormat, OnlyTypesWhoseSendFormatFloeDecodesQualify) {
  for (const char* name : {"bool", "int2", "int4", "int8", "oid", "float4", "float8",
                           "date", "time", "timestamp", "timestamptz", "uuid", "bytea",
                           "text", "varchar", "bpchar", "name", "numeric"}) {
    EXPECT_NE(BinaryFormatFor(B(name), MapType(B(name))), BinaryFormat::kNone) << name;
  }
  for (const char* name : {"money", "char", "timetz", "interval", "json", "jsonb", "xml",
                           "inet", "cidr", "macaddr", "point"}) {
    EXPECT_EQ(BinaryFormatFor(B(name), MapType(B(name))), BinaryFormat::kNone) << name;
  }
  // Arrays, and a user type that shares a builtin's name, are read as text.
  const PgTypeInfo array = PgTypeInfo::ArrayOf(B("int4"));
  EXPECT_EQ(BinaryFormatFor(array, MapType(array)), BinaryFormat::kNone);
  PgTypeInfo fake = B("int4");
  fake.namespace_name = "public";
  EXPECT_EQ(BinaryFormatFor(fake, MapType(fake)), BinaryFormat::kNone);
  // A domain is its base type; an enum its label.
  PgTypeInfo domain;
  domain.kind = PgTypeKind::kDomain;
  domain.name = "posint";
  domain.namespace_name = "public";
  domain.element = std::make_shared<const PgTypeInfo>(B("int4"));
  EXPECT_EQ(BinaryFormatFor(domain, MapType(domain)), BinaryFormat::kInt32);
  PgTypeInfo mood;
  mood.kind = PgTypeKind::kEnum;
  mood.name = "mood";
  mood.namespace_name = "public";
  EXPECT_EQ(BinaryFormatFor(mood, MapType(mood)), BinaryFormat::kText);
}

TEST(BinaryFormat, ScalarsDecodeToWhatTheirTextFormGives) {
  ExpectBinaryEqualsText(B("bool"), std::string("\x01", 1), "t");
  ExpectBinaryEqualsText(B("bool"), std::string("\x00", 1), "f");
  ExpectBinaryEqualsText(B("int2"), I16(-32768), "-32768");
  ExpectBinaryEqualsText(B("int4"), I32(2147483647), "2147483647");
  ExpectBinaryEqualsText(B("int8"), I64(INT64_MIN), "-9223372036854775808");
  ExpectBinaryEqualsText(B("oid"), I32(-1), "4294967295");
  ExpectBinaryEqualsText(B("float4"), F32(3.14f), "3.14");
  ExpectBinaryEqualsText(B("float4"), F32(-std::numeric_limits<float>::infinity()),
                         "-Infinity");
  ExpectBinaryEqualsText(B("float8"), F64(1e-300), "1e-300");
  ExpectBinaryEqualsText(B("float8"), F64(2.718281828459045), "2.718281828459045");
  ExpectBinaryEqualsText(
      B("uuid"), "\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  ExpectBinaryEqualsText(B("bytea"), std::string("\x00\xff\x10", 3), "\\x00ff10");
  ExpectBinaryEqualsText(B("bytea"), "", "\\x");
  ExpectBinaryEqualsText(B("text"), "ünï \"q\"\n", "ünï \"q\"\n");
  ExpectBinaryEqualsText(B("bpchar"), "ab   ", "ab   ");
}

TEST(BinaryFormat, DatesTimesAndTimestampsCountFrom2000) {
  ExpectBinaryEqualsText(B("date"), I32(0), "2000-01-01");
  ExpectBinaryEqualsText(B("date"), I32(-10957), "1970-01-01");
  ExpectBinaryEqualsText(B("date"), I32(8825), "2024-02-29");
  // 44 BC, and Postgres' last date.
  ExpectBinaryEqualsText(B("date"), I32(-746117), "0044-03-15 BC");
  ExpectBinaryEqualsText(B("date"), I32(2145031948), "5874897-12-31");
  ExpectBinaryEqualsText(B("time"),
                         I64(3 * 3'600'000'000LL + 4 * 60'000'000LL + 5'123'456LL),
                         "03:04:05.123456");
  ExpectBinaryEqualsText(B("time"), I64(0), "00:00:00");
  ExpectBinaryEqualsText(B("timestamp"), I64(0), "2000-01-01 00:00:00");
  ExpectBinaryEqualsText(B("timestamp"), I64(-1), "1999-12-31 23:59:59.999999");
  ExpectBinaryEqualsText(B("timestamptz"), I64(-946684800000000LL - 1),
                         "1969-12-31 23:59:59.999999+00");
  ExpectBinaryEqualsText(B("timestamp"), I64(-63'486'201'600'000'000LL),
                         "0013-03-15 00:00:00 BC");
  // Arrow's last microsecond.
  ExpectBinaryEqualsText(B("timestamp"), I64(INT64_MAX - kPgEpochUnixMicros),
                         "294247-01-10 04:00:54.775807");
}

TEST(BinaryFormat, SpecialValuesFollowTheTextRulesWithPostgresRawText) {
  ExpectBinaryEqualsText(B("date"), I32(INT32_MAX), "infinity");
  ExpectBinaryEqualsText(B("date"), I32(INT32_MIN), "-infinity");
  ExpectBinaryEqualsText(B("timestamp"), I64(INT64_MAX), "infinity");
  ExpectBinaryEqualsText(B("timestamptz"), I64(INT64_MIN), "-infinity");
  ExpectBinaryEqualsText(B("time"), I64(kDayMicros), "24:00:00");
  // After Arrow's last microsecond: out of range, raw text as Postgres prints it.
  ExpectBinaryEqualsText(B("timestamp"), I64(INT64_MAX - kPgEpochUnixMicros + 1),
                         "294247-01-10 04:00:54.775808");
  ExpectBinaryEqualsText(B("timestamp"), I64(9'223'371'331'199'999'999LL),
                         "294276-12-31 23:59:59.999999");
  ExpectBinaryEqualsText(B("timestamptz"), I64(9'223'371'331'199'999'999LL),
                         "294276-12-31 23:59:59.999999+00");
}

TEST(BinaryFormat, FormatPgTimestampPrintsLikePostgres) {
  EXPECT_EQ(FormatPgTimestamp(0, false), "2000-01-01 00:00:00");
  EXPECT_EQ(FormatPgTimestamp(500'000, true), "2000-01-01 00:00:00.5+00");
  EXPECT_EQ(FormatPgTimestamp(-1, false), "1999-12-31 23:59:59.999999");
  EXPECT_EQ(FormatPgTimestamp(-63'082'281'600'000'000LL, false), "0001-01-01 00:00:00");
  EXPECT_EQ(FormatPgTimestamp(-63'082'281'600'000'001LL, false),
            "0001-12-31 23:59:59.999999 BC");
}

TEST(BinaryFormat, AValueOfTheWrongLengthIsAnErrorNotAnIssue) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"bool", ""},
      {"bool", std::string("\x02", 1)},
      {"int2", "abc"},
      {"int4", "ab"},
      {"int8", "abcd"},
      {"oid", "abcdefgh"},
      {"float4", "abcdefgh"},
      {"float8", "abcd"},
      {"date", "ab"},
      {"time", "abcd"},
      {"time", I64(-1)},
      {"timestamp", "abcd"},
      {"uuid", "0123456789abcde"}};
  for (const auto& [name, bytes] : cases) {
    ColumnMapping mapping = MapType(B(name));
    ColumnConverter converter("col", mapping);
    auto builder = converter.MakeBuilder().ValueOrDie();
    std::vector<ConversionIssue> issues;
    arrow::Status st = AppendBinaryValue(converter, BinaryFormatFor(B(name), mapping),
                                         bytes, builder.get(), &issues);
    EXPECT_TRUE(st.IsInvalid()) << name << " " << bytes.size();
    EXPECT_TRUE(issues.empty());
    EXPECT_EQ(builder->length(), 0) << name;
  }
}

std::string NumericBytes(int16_t weight, uint16_t sign, int16_t dscale,
                         const std::vector<int16_t>& digits) {
  std::string out = I16(static_cast<int16_t>(digits.size())) + I16(weight) +
                    BigEndianBytes(sign, 2) + I16(dscale);
  for (int16_t d : digits) out += I16(d);
  return out;
}

std::string NumericText(const std::string& bytes) {
  std::string out;
  arrow::Status st = NumericBinaryToText(bytes, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(BinaryFormat, NumericIsPrintedAsNumericOutPrintsIt) {
  EXPECT_EQ(NumericText(NumericBytes(0, 0, 0, {})), "0");
  EXPECT_EQ(NumericText(NumericBytes(0, 0, 2, {})), "0.00");
  EXPECT_EQ(NumericText(NumericBytes(0, 0, 2, {12, 5000})), "12.50");
  EXPECT_EQ(NumericText(NumericBytes(-1, 0x4000, 2, {500})), "-0.05");
  EXPECT_EQ(NumericText(NumericBytes(-2, 0, 5, {1000})), "0.00001");
  EXPECT_EQ(NumericText(NumericBytes(1, 0, 0, {1})), "10000");
  EXPECT_EQ(NumericText(NumericBytes(1, 0x4000, 0, {1, 2})), "-10002");
  EXPECT_EQ(
      NumericText(NumericBytes(
          7, 0, 9, {12, 3456, 7890, 1234, 5678, 9012, 3456, 7890, 1234, 5678, 9000})),
      "123456789012345678901234567890.123456789");
  EXPECT_EQ(NumericText(NumericBytes(0, 0xC000, 0, {})), "NaN");
  EXPECT_EQ(NumericText(NumericBytes(0, 0xD000, 0, {})), "Infinity");
  EXPECT_EQ(NumericText(NumericBytes(0, 0xF000, 0, {})), "-Infinity");
  std::string out;
  EXPECT_TRUE(NumericBinaryToText("abc", &out).IsInvalid());
  EXPECT_TRUE(NumericBinaryToText(NumericBytes(0, 0x1234, 0, {}), &out).IsInvalid());
  EXPECT_TRUE(NumericBinaryToText(NumericBytes(0, 0, 0, {10000}), &out).IsInvalid());
  EXPECT_TRUE(
      NumericBinaryToText(NumericBytes(0, 0, 0, {1}).substr(0, 9), &out).IsInvalid());
}

TEST(BinaryFormat, NumericFollowsTheDecimalAndTextRules) {
  ExpectBinaryEqualsText(Numeric(10, 2), NumericBytes(1, 0, 2, {1234, 5678, 9000}),
                         "12345678.90");
  ExpectBinaryEqualsText(Numeric(10, 2), NumericBytes(0, 0xC000, 0, {}), "NaN");
  ExpectBinaryEqualsText(Numeric(10, 2), NumericBytes(0, 0xF000, 0, {}), "-Infinity");
  ExpectBinaryEqualsText(Numeric(4, 2), NumericBytes(0, 0, 2, {123, 4500}), "123.45");
  ExpectBinaryEqualsText(B("numeric"), NumericBytes(-1, 0x4000, 4, {5}), "-0.0005");
}

// A binary numeric goes straight into decimal128 when it fits (not through its text);
// generated values of every shape must give what their text gives, issues included.
TEST(BinaryFormat, GeneratedNumericsGiveWhatTheirTextGives) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  for (int round = 0; round < 20000; ++round) {
    const int precision = pick(1, 40);
    const int scale = pick(0, std::min(precision, 12));
    std::vector<int16_t> digits(static_cast<size_t>(pick(0, 12)));
    for (auto& d : digits) {
      // Zeros and nines often: trailing zeros, carries, the precision's edge.
      const int kind = pick(0, 3);
      d = static_cast<int16_t>(kind == 0 ? 0 : kind == 1 ? 9999 : pick(0, 9999));
    }
    const uint16_t signs[] = {0x0000, 0x4000, 0x0000, 0x4000, 0xC000, 0xD000, 0xF000};
    const uint16_t sign = signs[pick(0, round % 50 == 0 ? 6 : 3)];
    const auto weight = static_cast<int16_t>(pick(-6, 10));
    const auto dscale = static_cast<int16_t>(pick(0, 16));
    const std::string bytes = NumericBytes(weight, sign, dscale, digits);
    ExpectBinaryEqualsText(Numeric(precision, scale), bytes, NumericText(bytes));
    if (::testing::Test::HasFailure()) {
      FAIL() << "round " << round << ": numeric(" << precision << "," << scale
             << ") from " << NumericText(bytes);
    }
  }
}

}  // namespace
}  // namespace floe::postgres
