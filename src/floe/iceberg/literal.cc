#include "floe/iceberg/literal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "floe/iceberg/schema.h"

namespace floe::iceberg {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The variant alternative each primitive type uses (see Literal).
size_t AlternativeFor(TypeId id) {
  switch (id) {
    case TypeId::kBoolean:
      return 0;
    case TypeId::kInt:
    case TypeId::kDate:
      return 1;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return 2;
    case TypeId::kFloat:
      return 3;
    case TypeId::kDouble:
      return 4;
    case TypeId::kDecimal:
      return 5;
    case TypeId::kString:
      return 6;
    case TypeId::kBinary:
    case TypeId::kFixed:
      return 7;
    case TypeId::kUuid:
      return 8;
    default:
      return std::variant_npos;
  }
}

constexpr const char* kAlternativeNames[] = {
    "bool", "int32", "int64", "float", "double", "decimal", "string", "bytes", "uuid"};

}  // namespace

arrow::Result<Uuid> Uuid::Parse(std::string_view text) {
  Uuid out;
  size_t byte = 0;
  constexpr size_t kDashes[] = {8, 13, 18, 23};
  if (text.size() != 36) {
    return arrow::Status::Invalid("'", text, "' is not a UUID (8-4-4-4-12 hex digits)");
  }
  for (size_t i = 0; i < text.size();) {
    if (std::find(std::begin(kDashes), std::end(kDashes), i) != std::end(kDashes)) {
      if (text[i] != '-') break;
      ++i;
      continue;
    }
    int hi = HexValue(text[i]);
    int lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) break;
    out.bytes[byte++] = static_cast<uint8_t>(hi << 4 | lo);
    i += 2;
  }
  if (byte != 16) {
    return arrow::Status::Invalid("'", text, "' is not a UUID (8-4-4-4-12 hex digits)");
  }
  return out;
}

std::string Uuid::ToString() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xF];
  }
  return out;
}

std::string Int128ToString(__int128 value) {
  if (value == 0) return "0";
  const bool negative = value < 0;
  // Work on the unsigned magnitude so the most negative value does not overflow.
  unsigned __int128 magnitude = negative ? -static_cast<unsigned __int128>(value)
                                         : static_cast<unsigned __int128>(value);
  std::string digits;
  while (magnitude > 0) {
    digits += static_cast<char>('0' + static_cast<int>(magnitude % 10));
    magnitude /= 10;
  }
  if (negative) digits += '-';
  std::reverse(digits.begin(), digits.end());
  return digits;
}

arrow::Status CheckLiteralType(const Type& type, const Literal& value) {
  const size_t want = AlternativeFor(type.id());
  if (want == std::variant_npos) {
    return arrow::Status::TypeError("type ", type.ToString(), " has no single values");
  }
  if (value.index() != want) {
    return arrow::Status::TypeError("a ", type.ToString(), " value must be held as ",
                                    kAlternativeNames[want], ", got ",
                                    kAlternativeNames[value.index()]);
  }
  if (type.id() == TypeId::kDecimal && std::get<Decimal>(value).scale != type.scale()) {
    return arrow::Status::TypeError("a ", type.ToString(), " value must have scale ",
                                    type.scale(), ", got ",
                                    std::get<Decimal>(value).scale);
  }
  if (type.id() == TypeId::kFixed &&
      std::get<Bytes>(value).size() != static_cast<size_t>(type.length())) {
    return arrow::Status::TypeError("a ", type.ToString(), " value must have ",
                                    type.length(), " bytes, got ",
                                    std::get<Bytes>(value).size());
  }
  return arrow::Status::OK();
}

bool IsNaN(const Literal& value) {
  if (const auto* f = std::get_if<float>(&value)) return std::isnan(*f);
  if (const auto* d = std::get_if<double>(&value)) return std::isnan(*d);
  return false;
}

std::string LiteralToString(const Literal& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int32_t v) const { return std::to_string(v); }
    std::string operator()(int64_t v) const { return std::to_string(v) + "L"; }
    std::string operator()(float v) const {
      std::ostringstream out;
      out << v << "F";
      return out.str();
    }
    std::string operator()(double v) const {
      std::ostringstream out;
      out << v << "D";
      return out.str();
    }
    std::string operator()(const Decimal& v) const {
      return Int128ToString(v.unscaled) + "E-" + std::to_string(v.scale);
    }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const Bytes& v) const {
      std::string out = "0x";
      char buf[3];
      for (uint8_t b : v) {
        std::snprintf(buf, sizeof(buf), "%02x", b);
        out += buf;
      }
      return out;
    }
    std::string operator()(const Uuid& v) const { return v.ToString(); }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace floe::iceberg
