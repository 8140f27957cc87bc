// The JSON form of Arrow values that the type-mapping tools print (type_tool, and
// snapshot_tool with --output arrow), so that the integration tests compare both
// paths with one set of expectations: decimals as strings, binary as hex, ISO dates,
// times and timestamps (a trailing Z when the type has a time zone), NaN and the
// infinities as strings, lists as arrays and structs as objects.
#pragma once

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include <arrow/api.h>
#include <nlohmann/json.hpp>

namespace floe_tools {

using Json = nlohmann::ordered_json;

inline std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

inline int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Days since 1970-01-01 -> proleptic Gregorian date with an astronomical year.
inline void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

inline std::string IsoDate(int64_t days) {
  int64_t y = 0, m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%04" PRId64 "-%02" PRId64 "-%02" PRId64,
                y < 0 ? "-" : "", y < 0 ? -y : y, m, d);
  return buf;
}

inline std::string IsoTime(int64_t micros) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%06" PRId64,
                micros / 3'600'000'000, micros / 60'000'000 % 60, micros / 1'000'000 % 60,
                micros % 1'000'000);
  return buf;
}

inline std::string IsoTimestamp(int64_t micros, bool utc) {
  const int64_t day = 86'400'000'000;
  const int64_t days = FloorDiv(micros, day);
  return IsoDate(days) + "T" + IsoTime(micros - days * day) + (utc ? "Z" : "");
}

inline Json FloatJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

inline Json ValueJson(const arrow::Array& a, int64_t i) {
  if (a.IsNull(i)) return nullptr;
  switch (a.type_id()) {
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(a).Value(i);
    case arrow::Type::INT16:
      return static_cast<const arrow::Int16Array&>(a).Value(i);
    case arrow::Type::INT32:
      return static_cast<const arrow::Int32Array&>(a).Value(i);
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(a).Value(i);
    case arrow::Type::FLOAT:
      return FloatJson(static_cast<const arrow::FloatArray&>(a).Value(i));
    case arrow::Type::DOUBLE:
      return FloatJson(static_cast<const arrow::DoubleArray&>(a).Value(i));
    case arrow::Type::DECIMAL128: {
      const auto& t = static_cast<const arrow::Decimal128Type&>(*a.type());
      return arrow::Decimal128(static_cast<const arrow::Decimal128Array&>(a).GetValue(i))
          .ToString(t.scale());
    }
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(a).GetView(i));
    case arrow::Type::BINARY:
      return Hex(static_cast<const arrow::BinaryArray&>(a).GetView(i));
    case arrow::Type::FIXED_SIZE_BINARY:
      return Hex(static_cast<const arrow::FixedSizeBinaryArray&>(a).GetView(i));
    case arrow::Type::DATE32:
      return IsoDate(static_cast<const arrow::Date32Array&>(a).Value(i));
    case arrow::Type::TIME64:
      return IsoTime(static_cast<const arrow::Time64Array&>(a).Value(i));
    case arrow::Type::TIMESTAMP: {
      const auto& t = static_cast<const arrow::TimestampType&>(*a.type());
      return IsoTimestamp(static_cast<const arrow::TimestampArray&>(a).Value(i),
                          !t.timezone().empty());
    }
    case arrow::Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(a);
      Json out = Json::array();
      for (int64_t j = l.value_offset(i); j < l.value_offset(i + 1); ++j) {
        out.push_back(ValueJson(*l.values(), j));
      }
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      Json out = Json::object();
      for (int f = 0; f < s.num_fields(); ++f) {
        out[s.type()->field(f)->name()] = ValueJson(*s.field(f), i);
      }
      return out;
    }
    default:
      return "<unsupported " + a.type()->ToString() + ">";
  }
}

}  // namespace floe_tools
