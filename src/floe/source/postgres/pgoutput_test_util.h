// Test-only: builds replication wire messages byte by byte, big-endian, the way
// the walsender sends them, for the decoder and change-stream unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "floe/source/postgres/pgoutput.h"

namespace floe::postgres::testing {

class Bytes {
 public:
  Bytes& U8(uint8_t v) {
    data_.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes& Tag(char c) { return U8(static_cast<uint8_t>(c)); }
  Bytes& U16(uint16_t v) { return BigEndian(v, 2); }
  Bytes& U32(uint32_t v) { return BigEndian(v, 4); }
  Bytes& I32(int32_t v) { return BigEndian(static_cast<uint32_t>(v), 4); }
  Bytes& U64(uint64_t v) { return BigEndian(v, 8); }
  Bytes& I64(int64_t v) { return BigEndian(static_cast<uint64_t>(v), 8); }
  // A NUL-terminated string.
  Bytes& Str(std::string_view s) {
    data_.append(s);
    data_.push_back('\0');
    return *this;
  }
  Bytes& Raw(std::string_view s) {
    data_.append(s);
    return *this;
  }
  // TupleData helpers.
  Bytes& Columns(uint16_t n) { return U16(n); }
  Bytes& Text(std::string_view s) {
    return Tag('t').I32(static_cast<int32_t>(s.size())).Raw(s);
  }
  Bytes& Binary(std::string_view s) {
    return Tag('b').I32(static_cast<int32_t>(s.size())).Raw(s);
  }
  Bytes& Null() { return Tag('n'); }
  // One column of a Relation message: flags, name, type oid, type modifier.
  Bytes& Attr(uint8_t flags, std::string_view name, uint32_t type_oid, int32_t typmod) {
    return U8(flags).Str(name).U32(type_oid).I32(typmod);
  }
  Bytes& Unchanged() { return Tag('u'); }
  // The xid that data messages carry inside a stream block, if any.
  Bytes& Xid(std::optional<TransactionId> xid) { return xid ? U32(*xid) : *this; }

  const std::string& str() const { return data_; }
  size_t size() const { return data_.size(); }

 private:
  Bytes& BigEndian(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i)
      data_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }

  std::string data_;
};

}  // namespace floe::postgres::testing
