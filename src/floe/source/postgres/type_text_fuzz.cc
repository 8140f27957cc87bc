// libFuzzer target for the text-format value converters (ColumnConverter::Append,
// the conversion of every value pgoutput and text COPY deliver) and the literal
// parsers behind them (ParseArrayLiteral, ParseCompositeLiteral, ParseRangeLiteral).
//
// Input: byte 0 picks the column's type from kTypes (every ConverterKind: scalars,
// decimals of several typmods, arrays, composites, ranges and nestings of them); the
// rest is split at 0xff bytes (never part of UTF-8) into values appended in order to
// one builder, and each value is also given to the three literal parsers.
//
// Asserted (std::abort, besides ASan/UBSan), per ColumnConverter::Append's contract:
// Append never fails on a value (an error Status is for a failing builder only); it
// appends exactly one value; when the type cannot hold the value it appends null and
// reports one ConversionIssue naming the column, with the whole text as raw_text and
// a known reason; the array built is valid (ValidateFull). The parsers give a result
// or an Invalid status; a parsed array's dimensions, lower bounds and lengths agree,
// and its element count is the product of the lengths. Values that are not UTF-8 are
// skipped: the server sends text in floe's pinned client encoding, UTF8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/util/utf8.h>

#include "floe/source/postgres/type_mapping.h"

namespace {

namespace pg = floe::postgres;

std::shared_ptr<const pg::PgTypeInfo> Share(pg::PgTypeInfo t) {
  return std::make_shared<const pg::PgTypeInfo>(std::move(t));
}

pg::PgTypeInfo B(const char* name, int32_t typmod = -1) {
  return pg::PgTypeInfo::Builtin(name, 0, typmod);
}

pg::PgTypeInfo Numeric(int32_t precision, int32_t scale) {
  return B("numeric", pg::NumericTypmod(precision, scale));
}

pg::PgTypeInfo ArrayOf(pg::PgTypeInfo element) {
  return pg::PgTypeInfo::ArrayOf(std::move(element));
}

pg::PgTypeInfo RangeOf(pg::PgTypeInfo subtype, const char* name) {
  pg::PgTypeInfo r;
  r.kind = pg::PgTypeKind::kRange;
  r.name = name;
  r.namespace_name = "pg_catalog";
  r.element = Share(std::move(subtype));
  return r;
}

pg::PgTypeInfo Composite(const char* name,
                         std::vector<std::pair<const char*, pg::PgTypeInfo>> fields) {
  pg::PgTypeInfo c;
  c.kind = pg::PgTypeKind::kComposite;
  c.name = name;
  c.namespace_name = "public";
  for (auto& [field_name, type] : fields) {
    c.fields.push_back({field_name, Share(std::move(type))});
  }
  return c;
}

pg::PgTypeInfo Item() {
  return Composite("item", {{"id", B("int4")},
                            {"label", B("text")},
                            {"price", Numeric(6, 2)},
                            {"tags", ArrayOf(B("text"))}});
}

std::vector<pg::PgTypeInfo> MakeTypes() {
  std::vector<pg::PgTypeInfo> t;
  t.push_back(B("bool"));                    // 0
  t.push_back(B("int2"));                    // 1
  t.push_back(B("int4"));                    // 2
  t.push_back(B("int8"));                    // 3
  t.push_back(B("oid"));                     // 4
  t.push_back(B("float4"));                  // 5
  t.push_back(B("float8"));                  // 6
  t.push_back(Numeric(10, 2));               // 7
  t.push_back(Numeric(38, 10));              // 8
  t.push_back(Numeric(3, 0));                // 9
  t.push_back(B("numeric"));                 // 10: text
  t.push_back(B("text"));                    // 11
  t.push_back(B("bytea"));                   // 12
  t.push_back(B("date"));                    // 13
  t.push_back(B("time"));                    // 14
  t.push_back(B("timestamp"));               // 15
  t.push_back(B("timestamptz"));             // 16
  t.push_back(B("interval"));                // 17
  t.push_back(B("uuid"));                    // 18
  t.push_back(ArrayOf(B("int4")));           // 19
  t.push_back(ArrayOf(B("text")));           // 20
  t.push_back(ArrayOf(B("timestamptz")));    // 21
  t.push_back(ArrayOf(Numeric(5, 2)));       // 22
  pg::PgTypeInfo boxes = ArrayOf(B("box"));  // 23: `;` between elements
  boxes.delimiter = ';';
  t.push_back(std::move(boxes));
  t.push_back(Item());                                  // 24
  t.push_back(RangeOf(B("int4"), "int4range"));         // 25
  t.push_back(RangeOf(B("timestamptz"), "tstzrange"));  // 26
  t.push_back(RangeOf(B("date"), "daterange"));         // 27
  t.push_back(RangeOf(B("numeric"), "numrange"));       // 28
  t.push_back(ArrayOf(Item()));                         // 29
  t.push_back(Composite("outer", {{"inner", Item()},    // 30
                                  {"span", RangeOf(B("int8"), "int8range")},
                                  {"at", B("timestamp")},
                                  {"uuids", ArrayOf(B("uuid"))}}));
  t.push_back(ArrayOf(B("interval")));                    // 31
  t.push_back(ArrayOf(B("bytea")));                       // 32
  t.push_back(ArrayOf(B("date")));                        // 33
  t.push_back(ArrayOf(B("float8")));                      // 34
  t.push_back(ArrayOf(B("bool")));                        // 35
  t.push_back(ArrayOf(RangeOf(B("int4"), "int4range")));  // 36
  pg::PgTypeInfo domain;                                  // 37: domain over numeric(4,1)
  domain.kind = pg::PgTypeKind::kDomain;
  domain.name = "price";
  domain.namespace_name = "public";
  domain.element = Share(Numeric(4, 1));
  t.push_back(std::move(domain));
  return t;
}

bool IsUtf8(std::string_view s) {
  static const bool initialized = [] {
    arrow::util::InitializeUTF8();
    return true;
  }();
  (void)initialized;
  return arrow::util::ValidateUTF8(s);
}

void CheckArrayLiteral(const pg::ArrayLiteral& a) {
  const size_t dims = static_cast<size_t>(a.dimensions);
  if (a.dimensions < 0 || a.lengths.size() != dims || a.lower_bounds.size() != dims) {
    std::abort();
  }
  if (dims == 0) {
    if (!a.elements.empty()) std::abort();
    return;
  }
  uint64_t product = 1;
  for (int32_t length : a.lengths) {
    if (length < 0) std::abort();
    product *= static_cast<uint64_t>(length);
    if (product > a.elements.size()) break;
  }
  if (product != a.elements.size()) std::abort();
}

void ParseLiterals(std::string_view text, char delimiter) {
  auto array = pg::ParseArrayLiteral(text, delimiter);
  if (array.ok()) {
    CheckArrayLiteral(*array);
  } else if (!array.status().IsInvalid()) {
    std::abort();
  }
  auto composite = pg::ParseCompositeLiteral(text);
  if (!composite.ok() && !composite.status().IsInvalid()) std::abort();
  auto range = pg::ParseRangeLiteral(text);
  if (!range.ok() && !range.status().IsInvalid()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<pg::PgTypeInfo> types = MakeTypes();
  if (size == 0) return 0;
  const pg::PgTypeInfo& type = types[data[0] % types.size()];
  const pg::ColumnConverter converter("col", pg::MapType(type));
  auto made = converter.MakeBuilder();
  if (!made.ok()) std::abort();
  std::unique_ptr<arrow::ArrayBuilder> builder = std::move(made).MoveValueUnsafe();

  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  while (true) {
    const size_t cut = rest.find('\xff');
    const std::string_view text = rest.substr(0, cut);
    if (IsUtf8(text)) {
      ParseLiterals(text, type.delimiter);
      std::vector<pg::ConversionIssue> issues;
      const int64_t before = builder->length();
      const int64_t nulls_before = builder->null_count();
      if (!converter.Append(text, builder.get(), &issues).ok()) std::abort();
      if (builder->length() != before + 1) std::abort();
      if (issues.size() > 1) std::abort();
      if (issues.size() == 1) {
        const pg::ConversionIssue& issue = issues[0];
        if (builder->null_count() != nulls_before + 1) std::abort();
        if (issue.column != "col" || issue.raw_text != text) std::abort();
        if (pg::IssueReasonName(issue.reason) == "unknown") std::abort();
      }
    }
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }

  std::shared_ptr<arrow::Array> array;
  if (!builder->Finish(&array).ok()) std::abort();
  if (!array->ValidateFull().ok()) std::abort();
  return 0;
}
