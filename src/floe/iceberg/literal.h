// Single Iceberg values ("literals") as plain C++ values: partition values, column
// bounds and transform inputs/outputs. A Literal carries no type of its own; the
// Iceberg type it belongs to says how to read it (an int32 is an `int` or a `date`,
// an int64 a `long`, `time`, `timestamp` or `timestamptz`, in microseconds).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

namespace floe::iceberg {

class Type;

/// A decimal value: unscaled * 10^-scale. Iceberg decimals have at most 38 digits,
/// which always fit in 128 bits.
struct Decimal {
  __int128 unscaled = 0;
  int32_t scale = 0;

  friend bool operator==(const Decimal&, const Decimal&) = default;
};

/// A UUID as its 16 bytes in big-endian (RFC 4122) order.
struct Uuid {
  std::array<uint8_t, 16> bytes{};

  friend bool operator==(const Uuid&, const Uuid&) = default;

  /// Parses the canonical 8-4-4-4-12 hex form (either case).
  static arrow::Result<Uuid> Parse(std::string_view text);
  /// The canonical lower-case 8-4-4-4-12 form.
  std::string ToString() const;
};

/// Raw bytes of a `binary` or `fixed[L]` value.
using Bytes = std::vector<uint8_t>;

/// One value. Which alternative goes with which Iceberg type:
///   boolean -> bool; int, date (days from 1970-01-01) -> int32_t;
///   long, time (micros from midnight), timestamp, timestamptz (micros from epoch)
///   -> int64_t; float -> float; double -> double; decimal(P,S) -> Decimal;
///   string -> std::string (UTF-8); uuid -> Uuid; binary, fixed[L] -> Bytes.
using Literal = std::variant<bool, int32_t, int64_t, float, double, Decimal, std::string,
                             Bytes, Uuid>;

/// OK when `value` is the alternative that `type` (a primitive type) uses, and, for
/// decimals and fixed, its scale / length match the type.
arrow::Status CheckLiteralType(const Type& type, const Literal& value);

/// Whether `value` is a float or double NaN (no filter or bound can name one).
bool IsNaN(const Literal& value);

/// A readable rendering for error messages and test output (not a serialization).
std::string LiteralToString(const Literal& value);

/// Decimal text of a 128-bit integer (std::to_string has no __int128 overload).
std::string Int128ToString(__int128 value);

}  // namespace floe::iceberg
