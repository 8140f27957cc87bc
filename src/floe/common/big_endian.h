// Reading the network byte order of PostgreSQL's binary formats (COPY BINARY, the
// binary send functions of numeric, dates and times).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace floe {

/// The big-endian integer of sizeof(T) bytes at `p` (no alignment needed).
template <typename T>
T LoadBigEndian(const char* p) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<U>((value << 8) | static_cast<unsigned char>(p[i]));
  }
  return static_cast<T>(value);
}

}  // namespace floe
