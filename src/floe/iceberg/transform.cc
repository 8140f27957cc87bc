#include "floe/iceberg/transform.h"

#include <bit>
#include <cmath>
#include <limits>

#include "floe/common/civil_date.h"
#include "floe/common/parse.h"
#include "floe/iceberg/conversions.h"

namespace floe::iceberg {
namespace {

constexpr int64_t kMicrosPerHour = int64_t{3600} * 1000 * 1000;
constexpr int64_t kMicrosPerDay = 24 * kMicrosPerHour;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

uint32_t HashLong(int64_t v) {
  uint8_t bytes[8];
  const auto bits = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(bits >> (8 * i));
  return Murmur3Hash32(bytes, sizeof(bytes));
}

uint32_t HashBytes(const void* data, size_t size) {
  return Murmur3Hash32(static_cast<const uint8_t*>(data), size);
}

bool IsOneOf(TypeId id, std::initializer_list<TypeId> ids) {
  for (TypeId x : ids) {
    if (x == id) return true;
  }
  return false;
}

int32_t YearsFromEpoch(int64_t days) {
  return static_cast<int32_t>(CivilFromDays(days).year - 1970);
}

int32_t MonthsFromEpoch(int64_t days) {
  const CivilDate ym = CivilFromDays(days);
  return static_cast<int32_t>((ym.year - 1970) * 12 + ym.month - 1);
}

// The length in bytes of the first `code_points` UTF-8 code points of `s` (a code
// point starts at every byte that is not a continuation byte 10xxxxxx).
size_t Utf8PrefixLength(const std::string& s, int32_t code_points) {
  int32_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) {
      if (seen == code_points) return i;
      ++seen;
    }
  }
  return s.size();
}

arrow::Result<int32_t> ParseParam(std::string_view text, std::string_view name) {
  // text is "<name>[<n>]".
  std::string_view digits = text.substr(name.size() + 1, text.size() - name.size() - 2);
  const int32_t n = ParseInt32(digits).value_or(0);
  if (n <= 0) {
    return arrow::Status::Invalid("transform '", text, "' needs a positive integer in ",
                                  name, "[...]");
  }
  return n;
}

}  // namespace

uint32_t Murmur3Hash32(const uint8_t* data, size_t size, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51;
  constexpr uint32_t c2 = 0x1b873593;
  uint32_t h = seed;
  const size_t blocks = size / 4;
  for (size_t i = 0; i < blocks; ++i) {
    const uint8_t* p = data + 4 * i;
    uint32_t k = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                 uint32_t{p[3]} << 24;
    k *= c1;
    k = std::rotl(k, 15);
    k *= c2;
    h ^= k;
    h = std::rotl(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  const uint8_t* tail = data + 4 * blocks;
  uint32_t k = 0;
  switch (size & 3) {
    case 3:
      k ^= uint32_t{tail[2]} << 16;
      [[fallthrough]];
    case 2:
      k ^= uint32_t{tail[1]} << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = std::rotl(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(size);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

uint32_t IcebergHashLong(int64_t value) { return HashLong(value); }

arrow::Result<int32_t> IcebergHash32(const Type& type, const Literal& value) {
  ARROW_RETURN_NOT_OK(CheckLiteralType(type, value));
  uint32_t h = 0;
  switch (type.id()) {
    case TypeId::kBoolean:
      h = HashLong(std::get<bool>(value) ? 1 : 0);
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      h = HashLong(std::get<int32_t>(value));
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      h = HashLong(std::get<int64_t>(value));
      break;
    case TypeId::kFloat:
    case TypeId::kDouble: {
      double d = type.id() == TypeId::kFloat ? static_cast<double>(std::get<float>(value))
                                             : std::get<double>(value);
      uint64_t bits = 0;
      if (std::isnan(d)) {
        bits = 0x7ff8000000000000ULL;
      } else {
        if (d == 0.0) d = 0.0;  // -0.0 hashes like 0.0
        bits = std::bit_cast<uint64_t>(d);
      }
      h = HashLong(static_cast<int64_t>(bits));
      break;
    }
    case TypeId::kDecimal: {
      const std::string bytes = MinimalBigEndian(std::get<Decimal>(value).unscaled);
      h = HashBytes(bytes.data(), bytes.size());
      break;
    }
    case TypeId::kString: {
      const auto& s = std::get<std::string>(value);
      h = HashBytes(s.data(), s.size());
      break;
    }
    case TypeId::kUuid: {
      const auto& b = std::get<Uuid>(value).bytes;
      h = HashBytes(b.data(), b.size());
      break;
    }
    case TypeId::kBinary:
    case TypeId::kFixed: {
      const auto& b = std::get<Bytes>(value);
      h = HashBytes(b.data(), b.size());
      break;
    }
    default:
      return arrow::Status::TypeError("type ", type.ToString(), " cannot be hashed");
  }
  return static_cast<int32_t>(h);
}

arrow::Result<int32_t> BucketValue(const Type& type, const Literal& value,
                                   int32_t num_buckets) {
  if (num_buckets <= 0) {
    return arrow::Status::Invalid("bucket count must be positive, got ", num_buckets);
  }
  ARROW_ASSIGN_OR_RAISE(int32_t hash, IcebergHash32(type, value));
  return (hash & std::numeric_limits<int32_t>::max()) % num_buckets;
}

arrow::Result<Transform> Transform::Parse(std::string_view text) {
  if (text == "identity") return Identity();
  if (text == "year") return Year();
  if (text == "month") return Month();
  if (text == "day") return Day();
  if (text == "hour") return Hour();
  if (text == "void") return Void();
  for (auto [name, kind] :
       {std::pair{std::string_view("bucket"), TransformKind::kBucket},
        std::pair{std::string_view("truncate"), TransformKind::kTruncate}}) {
    if (text.size() > name.size() + 2 && text.starts_with(name) &&
        text[name.size()] == '[' && text.back() == ']') {
      ARROW_ASSIGN_OR_RAISE(int32_t n, ParseParam(text, name));
      return Transform(kind, n);
    }
  }
  return arrow::Status::Invalid("unknown partition transform '", text,
                                "'; expected identity, bucket[N], truncate[W], year, "
                                "month, day, hour or void");
}

std::string Transform::ToString() const {
  switch (kind_) {
    case TransformKind::kIdentity:
      return "identity";
    case TransformKind::kBucket:
      return "bucket[" + std::to_string(param_) + "]";
    case TransformKind::kTruncate:
      return "truncate[" + std::to_string(param_) + "]";
    case TransformKind::kYear:
      return "year";
    case TransformKind::kMonth:
      return "month";
    case TransformKind::kDay:
      return "day";
    case TransformKind::kHour:
      return "hour";
    case TransformKind::kVoid:
      return "void";
  }
  return "?";
}

bool Transform::CanTransform(const Type& source) const {
  const TypeId id = source.id();
  switch (kind_) {
    case TransformKind::kIdentity:
      return source.is_primitive();
    case TransformKind::kBucket:
      return IsOneOf(
          id, {TypeId::kInt, TypeId::kLong, TypeId::kDecimal, TypeId::kDate,
               TypeId::kTime, TypeId::kTimestamp, TypeId::kTimestampTz, TypeId::kString,
               TypeId::kUuid, TypeId::kFixed, TypeId::kBinary});
    case TransformKind::kTruncate:
      return IsOneOf(id, {TypeId::kInt, TypeId::kLong, TypeId::kDecimal, TypeId::kString,
                          TypeId::kBinary});
    case TransformKind::kYear:
    case TransformKind::kMonth:
    case TransformKind::kDay:
      return IsOneOf(id, {TypeId::kDate, TypeId::kTimestamp, TypeId::kTimestampTz});
    case TransformKind::kHour:
      return IsOneOf(id, {TypeId::kTimestamp, TypeId::kTimestampTz});
    case TransformKind::kVoid:
      return true;
  }
  return false;
}

arrow::Result<TypePtr> Transform::ResultType(const TypePtr& source) const {
  if (!CanTransform(*source)) {
    return arrow::Status::Invalid("transform ", ToString(), " cannot be applied to ",
                                  source->ToString());
  }
  switch (kind_) {
    case TransformKind::kBucket:
    case TransformKind::kYear:
    case TransformKind::kMonth:
    case TransformKind::kHour:
      return Type::Int();
    case TransformKind::kDay:
      return Type::Date();
    default:
      return source;
  }
}

arrow::Result<std::optional<Literal>> Transform::Apply(
    const Type& source, const std::optional<Literal>& value) const {
  if (!CanTransform(source)) {
    return arrow::Status::Invalid("transform ", ToString(), " cannot be applied to ",
                                  source.ToString());
  }
  if (!value.has_value()) return std::nullopt;
  ARROW_RETURN_NOT_OK(CheckLiteralType(source, *value));
  const Literal& v = *value;
  switch (kind_) {
    case TransformKind::kIdentity:
      return v;
    case TransformKind::kVoid:
      return std::nullopt;
    case TransformKind::kBucket: {
      ARROW_ASSIGN_OR_RAISE(int32_t bucket, BucketValue(source, v, param_));
      return Literal(bucket);
    }
    case TransformKind::kTruncate: {
      const int64_t w = param_;
      switch (source.id()) {
        case TypeId::kInt: {
          // In 64 bits, then wrapped to 32 as Java's int arithmetic does.
          const int64_t x = std::get<int32_t>(v);
          return Literal(static_cast<int32_t>(x - (((x % w) + w) % w)));
        }
        case TypeId::kLong: {
          const __int128 x = std::get<int64_t>(v);
          return Literal(static_cast<int64_t>(x - (((x % w) + w) % w)));
        }
        case TypeId::kDecimal: {
          // W applies to the unscaled value: decimal(W, scale) scaled_W.
          const Decimal& d = std::get<Decimal>(v);
          const __int128 x = d.unscaled;
          return Literal(Decimal{x - (((x % w) + w) % w), d.scale});
        }
        case TypeId::kString: {
          const auto& s = std::get<std::string>(v);
          return Literal(s.substr(0, Utf8PrefixLength(s, param_)));
        }
        case TypeId::kBinary: {
          const auto& b = std::get<Bytes>(v);
          const size_t n = std::min(b.size(), static_cast<size_t>(param_));
          return Literal(Bytes(b.begin(), b.begin() + n));
        }
        default:
          break;
      }
      break;
    }
    case TransformKind::kYear:
    case TransformKind::kMonth:
    case TransformKind::kDay:
    case TransformKind::kHour: {
      const bool is_date = source.id() == TypeId::kDate;
      if (kind_ == TransformKind::kHour) {
        return Literal(
            static_cast<int32_t>(FloorDiv(std::get<int64_t>(v), kMicrosPerHour)));
      }
      const int64_t days =
          is_date ? std::get<int32_t>(v) : FloorDiv(std::get<int64_t>(v), kMicrosPerDay);
      if (kind_ == TransformKind::kDay) return Literal(static_cast<int32_t>(days));
      if (kind_ == TransformKind::kMonth) return Literal(MonthsFromEpoch(days));
      return Literal(YearsFromEpoch(days));
    }
  }
  return arrow::Status::Invalid("transform ", ToString(), " cannot be applied to ",
                                source.ToString());
}

}  // namespace floe::iceberg
