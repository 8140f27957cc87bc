#include "floe/common/lsn.h"

#include <cstdio>
#include <ostream>

#include <arrow/status.h>

namespace floe {
namespace {

// One half of an LSN: 1..8 hex digits. Returns false on anything else.
bool ParseHalf(std::string_view digits, uint32_t* out) {
  if (digits.empty() || digits.size() > 8) return false;
  uint32_t value = 0;
  for (char c : digits) {
    uint32_t nibble;
    if (c >= '0' && c <= '9') {
      nibble = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      nibble = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      nibble = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    value = (value << 4) | nibble;
  }
  *out = value;
  return true;
}

}  // namespace

arrow::Result<Lsn> Lsn::Parse(std::string_view text) {
  const size_t slash = text.find('/');
  uint32_t high = 0;
  uint32_t low = 0;
  if (slash == std::string_view::npos || !ParseHalf(text.substr(0, slash), &high) ||
      !ParseHalf(text.substr(slash + 1), &low)) {
    return arrow::Status::Invalid("invalid LSN '", text,
                                  "': expected X/Y with 1 to 8 hex digits on each side");
  }
  return Lsn((static_cast<uint64_t>(high) << 32) | low);
}

std::string Lsn::ToString() const {
  char buffer[20];  // "FFFFFFFF/FFFFFFFF" + NUL
  std::snprintf(buffer, sizeof(buffer), "%X/%08X", static_cast<unsigned>(value_ >> 32),
                static_cast<unsigned>(value_ & 0xFFFFFFFFu));
  return buffer;
}

std::ostream& operator<<(std::ostream& os, Lsn lsn) { return os << lsn.ToString(); }

}  // namespace floe
