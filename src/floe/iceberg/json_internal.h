// Checked readers for members of Iceberg JSON objects (partition specs, sort orders,
// table metadata): each returns Invalid naming the object and key when a member is
// missing or has the wrong JSON type, instead of letting nlohmann-json throw.
// Internal to floe/iceberg.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nlohmann/json.hpp>

namespace floe::iceberg::internal {

/// The member `key` of `object`, or Invalid if it is absent. REQUIRES: object.
inline arrow::Result<const nlohmann::json*> JsonMember(const nlohmann::json& object,
                                                       const char* key,
                                                       const char* what) {
  auto it = object.find(key);
  if (it == object.end()) {
    return arrow::Status::Invalid(what, " JSON has no '", key, "'");
  }
  return &*it;
}

/// Whether `object` has `key` with a non-null value.
inline bool HasJsonMember(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

inline arrow::Result<int64_t> JsonToInt64(const nlohmann::json& v, const char* key,
                                          const char* what) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()})) {
    return arrow::Status::Invalid(what, " JSON '", key,
                                  "' must be a 64-bit integer, got ", v.dump());
  }
  return v.get<int64_t>();
}

inline arrow::Result<int64_t> JsonInt64(const nlohmann::json& object, const char* key,
                                        const char* what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, JsonMember(object, key, what));
  return JsonToInt64(*v, key, what);
}

inline arrow::Result<int32_t> JsonInt32(const nlohmann::json& object, const char* key,
                                        const char* what) {
  ARROW_ASSIGN_OR_RAISE(int64_t v, JsonInt64(object, key, what));
  if (v < std::numeric_limits<int32_t>::min() ||
      v > std::numeric_limits<int32_t>::max()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' is out of int range: ", v);
  }
  return static_cast<int32_t>(v);
}

inline arrow::Result<std::string> JsonString(const nlohmann::json& object,
                                             const char* key, const char* what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, JsonMember(object, key, what));
  if (!v->is_string()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be a string, got ",
                                  v->dump());
  }
  return v->get<std::string>();
}

/// The array member `key`; Invalid if absent or not an array.
inline arrow::Result<const nlohmann::json*> JsonArray(const nlohmann::json& object,
                                                      const char* key, const char* what) {
  ARROW_ASSIGN_OR_RAISE(const nlohmann::json* v, JsonMember(object, key, what));
  if (!v->is_array()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be an array, got ",
                                  v->dump());
  }
  return v;
}

/// A JSON object whose values are all strings, as a map.
inline arrow::Result<std::map<std::string, std::string>> JsonStringMap(
    const nlohmann::json& v, const char* key, const char* what) {
  if (!v.is_object()) {
    return arrow::Status::Invalid(what, " JSON '", key, "' must be an object, got ",
                                  v.dump());
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, value] : v.items()) {
    if (!value.is_string()) {
      return arrow::Status::Invalid(what, " JSON '", key, "' value of '", k,
                                    "' must be a string, got ", value.dump());
    }
    out.emplace(k, value.get<std::string>());
  }
  return out;
}

}  // namespace floe::iceberg::internal
