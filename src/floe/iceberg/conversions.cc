#include "floe/iceberg/conversions.h"

#include <bit>
#include <cstdint>

namespace floe::iceberg {
namespace {

template <typename U>
std::string LittleEndian(U bits) {
  std::string out(sizeof(U), '\0');
  for (size_t i = 0; i < sizeof(U); ++i) {
    out[i] = static_cast<char>(static_cast<uint8_t>(bits >> (8 * i)));
  }
  return out;
}

template <typename U>
U ReadLittleEndian(std::string_view bytes) {
  U bits = 0;
  for (size_t i = 0; i < sizeof(U); ++i) {
    bits |= static_cast<U>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return bits;
}

arrow::Status CheckSize(const Type& type, std::string_view bytes, size_t want) {
  if (bytes.size() != want) {
    return arrow::Status::Invalid("a serialized ", type.ToString(), " value has ", want,
                                  " bytes, got ", bytes.size());
  }
  return arrow::Status::OK();
}

// 10^digits as an unsigned 128-bit integer; digits <= 38.
unsigned __int128 PowerOfTen(int digits) {
  unsigned __int128 p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return p;
}

}  // namespace

std::string MinimalBigEndian(__int128 value) {
  const auto bits = static_cast<unsigned __int128>(value);
  std::string full(16, '\0');
  for (int i = 0; i < 16; ++i) {
    full[15 - i] = static_cast<char>(static_cast<uint8_t>(bits >> (8 * i)));
  }
  // Drop leading bytes that only repeat the sign: 0x00 before a byte whose top bit is
  // clear, 0xFF before one whose top bit is set.
  size_t start = 0;
  while (start < 15) {
    const auto lead = static_cast<uint8_t>(full[start]);
    const bool next_negative = (static_cast<uint8_t>(full[start + 1]) & 0x80) != 0;
    if ((lead == 0x00 && !next_negative) || (lead == 0xFF && next_negative)) {
      ++start;
    } else {
      break;
    }
  }
  return full.substr(start);
}

arrow::Result<std::string> ToBytes(const Type& type, const Literal& value) {
  ARROW_RETURN_NOT_OK(CheckLiteralType(type, value));
  switch (type.id()) {
    case TypeId::kBoolean:
      return std::string(1, std::get<bool>(value) ? '\x01' : '\x00');
    case TypeId::kInt:
    case TypeId::kDate:
      return LittleEndian(static_cast<uint32_t>(std::get<int32_t>(value)));
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return LittleEndian(static_cast<uint64_t>(std::get<int64_t>(value)));
    case TypeId::kFloat:
      return LittleEndian(std::bit_cast<uint32_t>(std::get<float>(value)));
    case TypeId::kDouble:
      return LittleEndian(std::bit_cast<uint64_t>(std::get<double>(value)));
    case TypeId::kDecimal: {
      const __int128 unscaled = std::get<Decimal>(value).unscaled;
      const auto magnitude = unscaled < 0 ? -static_cast<unsigned __int128>(unscaled)
                                          : static_cast<unsigned __int128>(unscaled);
      if (magnitude >= PowerOfTen(type.precision())) {
        return arrow::Status::Invalid("value ", LiteralToString(value), " has more than ",
                                      type.precision(), " digits for ", type.ToString());
      }
      return MinimalBigEndian(unscaled);
    }
    case TypeId::kString:
      return std::get<std::string>(value);
    case TypeId::kUuid: {
      const auto& b = std::get<Uuid>(value).bytes;
      return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    }
    case TypeId::kBinary:
    case TypeId::kFixed: {
      const Bytes& b = std::get<Bytes>(value);
      return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    }
    default:
      break;
  }
  return arrow::Status::TypeError("type ", type.ToString(),
                                  " has no single-value serialization");
}

arrow::Result<Literal> FromBytes(const Type& type, std::string_view bytes) {
  switch (type.id()) {
    case TypeId::kBoolean:
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 1));
      return Literal(bytes[0] != '\0');
    case TypeId::kInt:
    case TypeId::kDate:
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 4));
      return Literal(static_cast<int32_t>(ReadLittleEndian<uint32_t>(bytes)));
    case TypeId::kLong:
      // A bound written while the column was still an int.
      if (bytes.size() == 4) {
        return Literal(static_cast<int64_t>(
            static_cast<int32_t>(ReadLittleEndian<uint32_t>(bytes))));
      }
      [[fallthrough]];
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 8));
      return Literal(static_cast<int64_t>(ReadLittleEndian<uint64_t>(bytes)));
    case TypeId::kFloat:
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 4));
      return Literal(std::bit_cast<float>(ReadLittleEndian<uint32_t>(bytes)));
    case TypeId::kDouble:
      // A bound written while the column was still a float.
      if (bytes.size() == 4) {
        return Literal(
            static_cast<double>(std::bit_cast<float>(ReadLittleEndian<uint32_t>(bytes))));
      }
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 8));
      return Literal(std::bit_cast<double>(ReadLittleEndian<uint64_t>(bytes)));
    case TypeId::kDecimal: {
      if (bytes.empty() || bytes.size() > 16) {
        return arrow::Status::Invalid("a serialized ", type.ToString(),
                                      " value has 1 to 16 bytes, got ", bytes.size());
      }
      // Sign-extend from the first byte, then shift the bytes in.
      unsigned __int128 bits = (static_cast<uint8_t>(bytes[0]) & 0x80)
                                   ? ~static_cast<unsigned __int128>(0)
                                   : 0;
      for (char c : bytes) bits = (bits << 8) | static_cast<uint8_t>(c);
      return Literal(Decimal{static_cast<__int128>(bits), type.scale()});
    }
    case TypeId::kString:
      return Literal(std::string(bytes));
    case TypeId::kUuid: {
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, 16));
      Uuid uuid;
      for (size_t i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<uint8_t>(bytes[i]);
      return Literal(uuid);
    }
    case TypeId::kFixed:
      ARROW_RETURN_NOT_OK(CheckSize(type, bytes, static_cast<size_t>(type.length())));
      [[fallthrough]];
    case TypeId::kBinary:
      return Literal(Bytes(bytes.begin(), bytes.end()));
    default:
      break;
  }
  return arrow::Status::TypeError("type ", type.ToString(),
                                  " has no single-value serialization");
}

}  // namespace floe::iceberg
