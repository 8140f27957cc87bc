// Whole-string integer parsing, the one place that turns text (catalog properties,
// snapshot summaries, server settings, file names) into numbers. Unlike std::sto*,
// nothing throws: text that is not entirely a number of the type's range (empty,
// a sign where none is allowed, trailing characters, overflow) is nullopt.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace floe {

/// `text` as a base-10 integer of type T, or nullopt unless all of it is one.
template <typename T>
std::optional<T> ParseInteger(std::string_view text) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (text.empty()) return std::nullopt;
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

inline std::optional<int64_t> ParseInt64(std::string_view text) {
  return ParseInteger<int64_t>(text);
}
inline std::optional<uint64_t> ParseUint64(std::string_view text) {
  return ParseInteger<uint64_t>(text);
}
inline std::optional<int32_t> ParseInt32(std::string_view text) {
  return ParseInteger<int32_t>(text);
}

/// A count and its unit, as in `250ms`, `5min` or `64MiB`.
struct NumberWithUnit {
  int64_t number = 0;
  std::string_view unit;  // the rest of the text after the digits (may be empty)
};

/// The leading decimal digits of `text` (1 to max_digits of them, max_digits <= 18
/// so the number fits) and what follows them; nullopt when `text` does not start
/// with a digit or has more digits than that.
inline std::optional<NumberWithUnit> SplitNumberAndUnit(std::string_view text,
                                                        size_t max_digits) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > max_digits || max_digits > 18) return std::nullopt;
  const std::optional<int64_t> number = ParseInt64(text.substr(0, digits));
  if (!number) return std::nullopt;
  return NumberWithUnit{*number, text.substr(digits)};
}

}  // namespace floe
