// Iceberg partition transforms (identity, bucket[N], truncate[W], year, month, day,
// hour, void): their spec strings, result types, and application to single values,
// with the spec's 32-bit Murmur3 hash (Appendix B) behind bucket[N].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

enum class TransformKind {
  kIdentity,
  kBucket,
  kTruncate,
  kYear,
  kMonth,
  kDay,
  kHour,
  kVoid
};

class Transform {
 public:
  static Transform Identity() { return Transform(TransformKind::kIdentity, 0); }
  /// REQUIRES: num_buckets > 0.
  static Transform Bucket(int32_t num_buckets) {
    return Transform(TransformKind::kBucket, num_buckets);
  }
  /// REQUIRES: width > 0.
  static Transform Truncate(int32_t width) {
    return Transform(TransformKind::kTruncate, width);
  }
  static Transform Year() { return Transform(TransformKind::kYear, 0); }
  static Transform Month() { return Transform(TransformKind::kMonth, 0); }
  static Transform Day() { return Transform(TransformKind::kDay, 0); }
  static Transform Hour() { return Transform(TransformKind::kHour, 0); }
  static Transform Void() { return Transform(TransformKind::kVoid, 0); }

  /// Parses the spec's string form: `identity`, `bucket[16]`, `truncate[10]`, `year`,
  /// `month`, `day`, `hour`, `void`.
  static arrow::Result<Transform> Parse(std::string_view text);
  /// The spec's string form.
  std::string ToString() const;

  TransformKind kind() const { return kind_; }
  /// N of bucket[N], W of truncate[W]; 0 otherwise.
  int32_t param() const { return param_; }

  /// Whether this transform accepts a source column of `source` type.
  bool CanTransform(const Type& source) const;
  /// The type of the partition values this transform produces from `source`:
  /// identity, truncate and void keep the source type; bucket, year, month and hour
  /// give int; day gives date (days from 1970-01-01, as the reference
  /// implementations type it).
  arrow::Result<TypePtr> ResultType(const TypePtr& source) const;

  /// Transforms one value of `source` type; null (nullopt) gives null, as does any
  /// value under void. Errors when the transform does not apply to `source` or the
  /// value is not the literal `source` uses.
  arrow::Result<std::optional<Literal>> Apply(const Type& source,
                                              const std::optional<Literal>& value) const;

  friend bool operator==(const Transform&, const Transform&) = default;

 private:
  Transform(TransformKind kind, int32_t param) : kind_(kind), param_(param) {}

  TransformKind kind_;
  int32_t param_;
};

/// 32-bit Murmur3, x86 variant, of `data` with `seed` (the spec uses seed 0).
uint32_t Murmur3Hash32(const uint8_t* data, size_t size, uint32_t seed = 0);

/// The spec's hash of a long (and of the int, date, time and timestamp types that hash
/// as one): Murmur3Hash32 of its 8 little-endian bytes.
uint32_t IcebergHashLong(int64_t value);

/// The spec's 32-bit hash of one value (Appendix B): ints, longs, dates, times and
/// timestamps hash as 8-byte little-endian longs; decimals as the minimal big-endian
/// two's complement bytes of the unscaled value; strings as UTF-8; uuids as their 16
/// big-endian bytes; binary and fixed as themselves; booleans as ints 0/1; floats and
/// doubles as the IEEE bits of the value widened to double (with -0 and NaN
/// canonicalized), though bucket[N] does not accept those three.
arrow::Result<int32_t> IcebergHash32(const Type& type, const Literal& value);

/// bucket[N] of one value: (hash & INT32_MAX) % N.
arrow::Result<int32_t> BucketValue(const Type& type, const Literal& value,
                                   int32_t num_buckets);

}  // namespace floe::iceberg
