// The spec's binary single-value serialization (Appendix D), used for the lower and
// upper bounds in manifests: little-endian numbers (dates as 4-byte days, times and
// timestamps as 8-byte microseconds), UTF-8 strings, 16 big-endian bytes for a uuid,
// the minimal big-endian two's complement of a decimal's unscaled value, and one byte
// 0x00 / 0x01 for a boolean.
#pragma once

#include <string>
#include <string_view>

#include <arrow/result.h>

#include "floe/iceberg/literal.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

/// Serializes `value`, a value of primitive `type` (see Literal for which C++ type
/// goes with which Iceberg type). The bytes are returned in a std::string.
arrow::Result<std::string> ToBytes(const Type& type, const Literal& value);

/// Reads bytes written by ToBytes for `type`. As the spec allows after a type
/// promotion, a `long` also reads from 4 bytes (an `int` bound) and a `double` from 4
/// bytes (a `float` bound). Any non-zero byte reads as boolean true.
arrow::Result<Literal> FromBytes(const Type& type, std::string_view bytes);

/// The minimal big-endian two's complement bytes of `value` (one byte for 0).
std::string MinimalBigEndian(__int128 value);

}  // namespace floe::iceberg
