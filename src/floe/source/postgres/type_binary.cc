// Binary send formats to Arrow: the COPY BINARY path (type_mapping.h).

#include "floe/source/postgres/type_mapping.h"

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include <arrow/array/builder_base.h>
#include <arrow/array/builder_binary.h>
#include <arrow/array/builder_decimal.h>
#include <arrow/array/builder_primitive.h>
#include <arrow/builder.h>
#include <arrow/util/decimal.h>

#include "floe/common/big_endian.h"
#include "floe/common/civil_date.h"
#include "floe/source/postgres/type_internal.h"

namespace floe::postgres {

using internal::As;

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

namespace {

// The fields of a binary numeric (numeric_send): base-10000 digits, the weight of the
// first one, the sign word and the display scale.
struct BinaryNumeric {
  int16_t ndigits = 0;
  int16_t weight = 0;
  uint16_t sign = 0;
  int16_t dscale = 0;
  const char* digits = nullptr;

  // Digit i counts from the first one sent; those not sent are zero.
  int Digit(int i) const {
    return i >= 0 && i < ndigits ? LoadBigEndian<int16_t>(digits + 2 * i) : 0;
  }
};

arrow::Status ReadBinaryNumeric(std::string_view v, BinaryNumeric* n) {
  if (v.size() < 8) return arrow::Status::Invalid("binary numeric shorter than 8 bytes");
  const char* p = v.data();
  n->ndigits = LoadBigEndian<int16_t>(p);
  n->weight = LoadBigEndian<int16_t>(p + 2);
  n->sign = LoadBigEndian<uint16_t>(p + 4);
  n->dscale = LoadBigEndian<int16_t>(p + 6);
  n->digits = p + 8;
  if (n->ndigits < 0 || v.size() != 8 + 2 * static_cast<size_t>(n->ndigits) ||
      n->dscale < 0) {
    return arrow::Status::Invalid("binary numeric of ", v.size(), " bytes with ",
                                  n->ndigits, " digits");
  }
  switch (n->sign) {
    case 0x0000:
    case 0x4000:
      for (int i = 0; i < n->ndigits; ++i) {
        if (n->Digit(i) < 0 || n->Digit(i) > 9999) {
          return arrow::Status::Invalid("binary numeric digit out of range");
        }
      }
      return arrow::Status::OK();
    case 0xC000:  // NaN
    case 0xD000:  // Infinity
    case 0xF000:  // -Infinity
      return arrow::Status::OK();
    default:
      return arrow::Status::Invalid("binary numeric with sign 0x",
                                    std::to_string(n->sign));
  }
}

// Appends base-10000 digit d: all four decimal digits, or without leading zeros.
void AppendDigit(int d, bool pad, std::string* out) {
  char buf[4] = {static_cast<char>('0' + d / 1000), static_cast<char>('0' + d / 100 % 10),
                 static_cast<char>('0' + d / 10 % 10), static_cast<char>('0' + d % 10)};
  size_t skip = 0;
  if (!pad) {
    while (skip < 3 && buf[skip] == '0') ++skip;
  }
  out->append(buf + skip, 4 - skip);
}

// 10^0 .. 10^38.
const std::array<__int128, 39>& PowersOfTen() {
  static const std::array<__int128, 39> powers = [] {
    std::array<__int128, 39> p{};
    p[0] = 1;
    for (size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] * 10;
    return p;
  }();
  return powers;
}

// The value of a finite binary numeric as decimal128(precision, scale), when it fits
// exactly; false otherwise (the text path then says why, or takes it).
bool NumericToDecimal(const BinaryNumeric& n, int precision, int scale,
                      arrow::Decimal128* out) {
  if (n.sign != 0x0000 && n.sign != 0x4000) return false;
  if (precision > 38 || scale < 0 || scale > precision) return false;
  const auto& ten = PowersOfTen();
  // Digits past the display scale are not part of the value numeric_out prints
  // (PostgreSQL never sends any), nor may digits past the column's scale be other
  // than zero: those cases are the text path's to decide.
  const int keep = std::min<int>(n.dscale, scale);
  // Horner's rule over the digits; digit i is worth 10^(4 * (weight - i)) and lands
  // at 10^(4 * (weight - i) + scale) in the unscaled value.
  __int128 v = 0;
  int exponent = 0;  // of the last digit taken
  for (int i = 0; i < n.ndigits; ++i) {
    const int d = n.Digit(i);
    const int past = 4 * (i - n.weight) - keep;  // decimal places of d beyond `keep`
    if (past >= 4) {
      if (d != 0) return false;
      continue;
    }
    const int e = 4 * (n.weight - i) + scale;
    if (past > 0) {
      const int unit = static_cast<int>(ten[static_cast<size_t>(past)]);
      if (d % unit != 0) return false;
    }
    if (e >= 0) {
      if (__builtin_mul_overflow(v, ten[4], &v) || __builtin_add_overflow(v, d, &v)) {
        return false;
      }
      exponent = e;
    } else {
      // Its last -e places are zero (past > 0 above, since keep <= scale).
      const auto places = static_cast<size_t>(-e);
      if (__builtin_mul_overflow(v, ten[4 - places], &v) ||
          __builtin_add_overflow(v, d / static_cast<int>(ten[places]), &v)) {
        return false;
      }
      exponent = 0;
    }
  }
  if (v != 0 && exponent > 0) {
    if (exponent > 38 ||
        __builtin_mul_overflow(v, ten[static_cast<size_t>(exponent)], &v)) {
      return false;
    }
  }
  if (v >= ten[static_cast<size_t>(precision)]) return false;
  if (n.sign == 0x4000) v = -v;
  *out = arrow::Decimal128(static_cast<int64_t>(v >> 64),
                           static_cast<uint64_t>(static_cast<unsigned __int128>(v)));
  return true;
}

}  // namespace

arrow::Status NumericBinaryToText(std::string_view v, std::string* out) {
  BinaryNumeric n;
  ARROW_RETURN_NOT_OK(ReadBinaryNumeric(v, &n));
  switch (n.sign) {
    case 0xC000:
      out->append("NaN");
      return arrow::Status::OK();
    case 0xD000:
      out->append("Infinity");
      return arrow::Status::OK();
    case 0xF000:
      out->append("-Infinity");
      return arrow::Status::OK();
    default:
      break;
  }
  if (n.sign == 0x4000) out->push_back('-');
  // Integer part: base-10000 digits 0..weight, the first without leading zeros.
  if (n.weight < 0) {
    out->push_back('0');
  } else {
    for (int i = 0; i <= n.weight; ++i) AppendDigit(n.Digit(i), i > 0, out);
  }
  // Fraction: exactly dscale decimal digits (numeric_out pads with zeros).
  if (n.dscale > 0) {
    out->push_back('.');
    int written = 0;
    for (int i = n.weight + 1; written < n.dscale; ++i) {
      const int take = std::min(4, n.dscale - written);
      AppendDigit(n.Digit(i), true, out);
      out->resize(out->size() - static_cast<size_t>(4 - take));
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
                           "timestamp '" + raw + "'" +
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
      if (c.mapping().converter == ConverterKind::kDecimal) {
        // Straight into decimal128 when it fits exactly: the text path below would
        // print and parse it again, and says why when it does not fit.
        BinaryNumeric n;
        const auto& type = static_cast<const arrow::Decimal128Type&>(*c.mapping().type);
        arrow::Decimal128 d;
        if (ReadBinaryNumeric(v, &n).ok() &&
            NumericToDecimal(n, type.precision(), type.scale(), &d)) {
          return As<arrow::Decimal128Builder>(b)->Append(d);
        }
      }
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
