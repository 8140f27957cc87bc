// Text values to Arrow: the scalar parsers (pure, locale-free, allocation-free) and
// ColumnConverter (type_mapping.h).

#include "floe/source/postgres/type_mapping.h"

#include <charconv>
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
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "floe/common/civil_date.h"
#include "floe/common/parse.h"
#include "floe/source/postgres/type_internal.h"

namespace floe::postgres {

using internal::As;

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

// bool, int2/4/8 and float4/8: parsed whole, as Postgres prints them.
arrow::Status ConvertNumber(const ColumnMapping& m, std::string_view s,
                            arrow::ArrayBuilder* b, Problem* p) {
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
    default:
      break;
  }
  return Fail(p, IssueReason::kMalformed, "unknown converter");
}

// numeric(p,s) -> decimal128(p,s): never rounded; NaN and infinities have no decimal.
arrow::Status ConvertDecimal(const ColumnMapping& m, std::string_view s,
                             arrow::ArrayBuilder* b, Problem* p) {
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

// text, bytea and uuid.
arrow::Status ConvertTextLike(const ColumnMapping& m, std::string_view s,
                              arrow::ArrayBuilder* b, Problem* p) {
  switch (m.converter) {
    case ConverterKind::kText:
      return b ? As<arrow::StringBuilder>(b)->Append(s) : arrow::Status::OK();
    case ConverterKind::kBytea:
      return AppendBytea(s, b, p);
    case ConverterKind::kUuid: {
      uint8_t bytes[16];
      if (!ParseUuid(s, bytes)) {
        return Fail(p, IssueReason::kMalformed, "not a uuid: " + Quoted(s));
      }
      return b ? As<arrow::FixedSizeBinaryBuilder>(b)->Append(bytes)
               : arrow::Status::OK();
    }
    default:
      break;
  }
  return Fail(p, IssueReason::kMalformed, "unknown converter");
}

// date, time, timestamp[tz] and interval.
arrow::Status ConvertTemporal(const ColumnMapping& m, std::string_view s,
                              arrow::ArrayBuilder* b, Problem* p) {
  switch (m.converter) {
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
    default:
      break;
  }
  return Fail(p, IssueReason::kMalformed, "unknown converter");
}

// array -> list: each element converted in turn; the first bad one stops it.
arrow::Status ConvertArray(const ColumnMapping& m, std::string_view s,
                           arrow::ArrayBuilder* b, Problem* p, int depth) {
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

// composite -> struct: each field converted in turn; the first bad one stops it.
arrow::Status ConvertComposite(const ColumnMapping& m, std::string_view s,
                               arrow::ArrayBuilder* b, Problem* p, int depth) {
  auto parsed = ParseCompositeLiteral(s);
  if (parsed.ok() && m.children.empty() && parsed->size() == 1 && (*parsed)[0].is_null) {
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

// range -> struct<lower, upper, lower_inclusive, upper_inclusive, empty>.
arrow::Status ConvertRange(const ColumnMapping& m, std::string_view s,
                           arrow::ArrayBuilder* b, Problem* p, int depth) {
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
  ARROW_RETURN_NOT_OK(
      As<arrow::BooleanBuilder>(builder->field_builder(2))->Append(r.lower_inclusive));
  ARROW_RETURN_NOT_OK(
      As<arrow::BooleanBuilder>(builder->field_builder(3))->Append(r.upper_inclusive));
  return As<arrow::BooleanBuilder>(builder->field_builder(4))->Append(r.empty);
}

// `s` converted into `b` (nullptr: only checked) by the family of m's type.
arrow::Status Convert(const ColumnMapping& m, std::string_view s, arrow::ArrayBuilder* b,
                      Problem* p, int depth) {
  switch (m.converter) {
    case ConverterKind::kBoolean:
    case ConverterKind::kInt16:
    case ConverterKind::kInt32:
    case ConverterKind::kInt64:
    case ConverterKind::kFloat32:
    case ConverterKind::kFloat64:
      return ConvertNumber(m, s, b, p);
    case ConverterKind::kDecimal:
      return ConvertDecimal(m, s, b, p);
    case ConverterKind::kText:
    case ConverterKind::kBytea:
    case ConverterKind::kUuid:
      return ConvertTextLike(m, s, b, p);
    case ConverterKind::kDate:
    case ConverterKind::kTime:
    case ConverterKind::kTimestamp:
    case ConverterKind::kTimestampTz:
    case ConverterKind::kInterval:
      return ConvertTemporal(m, s, b, p);
    case ConverterKind::kArray:
      return ConvertArray(m, s, b, p, depth);
    case ConverterKind::kComposite:
      return ConvertComposite(m, s, b, p, depth);
    case ConverterKind::kRange:
      return ConvertRange(m, s, b, p, depth);
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

}  // namespace floe::postgres
