// A PostgreSQL WAL position (an LSN, `XLogRecPtr` on the server): a 64-bit byte
// offset into the write-ahead log, written as text in Postgres' `X/YYYYYYYY` form
// (high and low 32 bits in hex). Zero is never a valid WAL position and stands for
// "no LSN" (`InvalidXLogRecPtr`).
#pragma once

#include <compare>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include <arrow/result.h>

namespace floe {

class Lsn {
 public:
  /// The invalid LSN (0).
  constexpr Lsn() = default;
  constexpr explicit Lsn(uint64_t value) : value_(value) {}

  static constexpr Lsn Invalid() { return Lsn(); }

  /// Parses `X/Y`: one to eight hex digits (either case) on each side of the slash,
  /// nothing before or after. This accepts what every Postgres version prints
  /// (`0/16B3748` as well as the zero-padded `0/016B3748`). `0/0` parses to the
  /// invalid LSN; callers that need a real position check is_valid().
  static arrow::Result<Lsn> Parse(std::string_view text);

  constexpr uint64_t value() const { return value_; }
  constexpr bool is_valid() const { return value_ != 0; }

  /// `X/YYYYYYYY`: the high 32 bits in upper-case hex without padding, the low 32
  /// bits zero-padded to eight digits. Parse(ToString()) round-trips.
  std::string ToString() const;

  friend constexpr auto operator<=>(Lsn, Lsn) = default;

 private:
  uint64_t value_ = 0;
};

std::ostream& operator<<(std::ostream& os, Lsn lsn);

}  // namespace floe
