// Applies floe's partition transforms to values read as JSON lines on stdin and
// prints one JSON line per input, so tests can compare floe with PyIceberg.
// Input: {"type": "<iceberg primitive>", "transform": "bucket[16]", "value": V}
// where V is a number (int, long, date days, time / timestamp micros), a string
// (string; decimal as its exact text, e.g. "-12.30"; uuid canonical; binary and
// fixed as hex) or null. Output: {"result": <number, string or null>}.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "floe/iceberg/transform.h"

namespace {

using namespace floe::iceberg;

arrow::Result<Literal> ToLiteral(const Type& type, const nlohmann::json& v) {
  switch (type.id()) {
    case TypeId::kInt:
    case TypeId::kDate:
      return Literal(v.get<int32_t>());
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return Literal(v.get<int64_t>());
    case TypeId::kString:
      return Literal(v.get<std::string>());
    case TypeId::kUuid: {
      ARROW_ASSIGN_OR_RAISE(Uuid u, Uuid::Parse(v.get<std::string>()));
      return Literal(u);
    }
    case TypeId::kBinary:
    case TypeId::kFixed: {
      const std::string hex = v.get<std::string>();
      Bytes bytes;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      }
      return Literal(bytes);
    }
    case TypeId::kDecimal: {
      std::string text = v.get<std::string>();
      bool negative = !text.empty() && text[0] == '-';
      if (negative) text.erase(0, 1);
      __int128 unscaled = 0;
      int32_t scale = 0;
      bool after_point = false;
      for (char c : text) {
        if (c == '.') {
          after_point = true;
          continue;
        }
        unscaled = unscaled * 10 + (c - '0');
        if (after_point) ++scale;
      }
      if (scale != type.scale()) {
        return arrow::Status::Invalid("decimal ", v.dump(), " does not have scale ",
                                      type.scale());
      }
      return Literal(Decimal{negative ? -unscaled : unscaled, scale});
    }
    default:
      return arrow::Status::NotImplemented("type ", type.ToString());
  }
}

nlohmann::json FromLiteral(const std::optional<Literal>& value) {
  if (!value) return nullptr;
  if (const auto* i = std::get_if<int32_t>(&*value)) return *i;
  if (const auto* l = std::get_if<int64_t>(&*value)) return *l;
  if (const auto* s = std::get_if<std::string>(&*value)) return *s;
  if (const auto* d = std::get_if<Decimal>(&*value)) {
    return Int128ToString(d->unscaled) + "e-" + std::to_string(d->scale);
  }
  if (const auto* b = std::get_if<Bytes>(&*value)) {
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    for (uint8_t c : *b) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    return hex;
  }
  return LiteralToString(*value);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json in = nlohmann::json::parse(line);
    nlohmann::json out;
    auto type = Type::FromPrimitiveString(in["type"].get<std::string>());
    auto transform = Transform::Parse(in["transform"].get<std::string>());
    if (!type.ok() || !transform.ok()) {
      out["error"] = (!type.ok() ? type.status() : transform.status()).ToString();
    } else if (in["value"].is_null()) {
      auto r = transform->Apply(**type, std::nullopt);
      out["result"] = r.ok() ? FromLiteral(*r) : nlohmann::json(r.status().ToString());
    } else {
      auto literal = ToLiteral(**type, in["value"]);
      auto r = literal.ok() ? transform->Apply(**type, *literal)
                            : arrow::Result<std::optional<Literal>>(literal.status());
      if (r.ok()) {
        out["result"] = FromLiteral(*r);
      } else {
        out["error"] = r.status().ToString();
      }
    }
    std::cout << out.dump() << "\n";
  }
  return 0;
}
