#include "floe/lake/column_map.h"

#include <cstdint>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "floe/lake/keys.h"

namespace floe::lake {

using json = nlohmann::json;

arrow::Status CheckColumnMap(const ColumnMap& map) {
  std::unordered_set<int16_t> attnums;
  std::unordered_set<int32_t> ids;
  for (const ColumnBinding& b : map.columns) {
    if (b.attnum != 0 && !attnums.insert(b.attnum).second) {
      return arrow::Status::Invalid("table property ", kSourceColumnsProperty,
                                    " binds attnum ", b.attnum,
                                    " twice; restore it from an earlier metadata file");
    }
    if (!ids.insert(b.field_id).second) {
      return arrow::Status::Invalid("table property ", kSourceColumnsProperty,
                                    " binds field id ", b.field_id,
                                    " to two columns; restore it from an earlier "
                                    "metadata file");
    }
  }
  return arrow::Status::OK();
}

// ---- ColumnMap JSON --------------------------------------------------------------

std::string ColumnMap::ToJson() const {
  json out = json::array();
  for (const ColumnBinding& b : columns) {
    json entry = {{"attnum", b.attnum},
                  {"name", b.name},
                  {"field-id", b.field_id},
                  {"type-oid", b.type_oid},
                  {"typmod", b.type_modifier}};
    if (!b.retired_field_ids.empty()) entry["retired-field-ids"] = b.retired_field_ids;
    if (!b.former_names.empty()) {
      entry["former-names"] = b.former_names;
      json through = json::array();
      for (const ChangePosition& p : b.former_through)
        through.push_back({p.first, p.second});
      entry["former-through"] = std::move(through);
    }
    out.push_back(std::move(entry));
  }
  // Postgres sends names in UTF-8 (client_encoding is pinned); replace rather than
  // throw if one is not.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

arrow::Status BadEntry(size_t index, std::string_view what) {
  return arrow::Status::Invalid("table property ", kSourceColumnsProperty, ": entry ",
                                index, " ", what,
                                "; the property is written by floe, restore it from an "
                                "earlier metadata file of the table");
}

arrow::Result<int64_t> IntMember(const json& entry, size_t index, const char* key,
                                 int64_t min, int64_t max) {
  auto it = entry.find(key);
  if (it == entry.end()) {
    return BadEntry(index, std::string("has no \"") + key + "\"");
  }
  if (!it->is_number_integer()) {
    return BadEntry(index, std::string("\"") + key + "\" is not an integer: " +
                               it->dump(-1, ' ', false, json::error_handler_t::replace));
  }
  if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(max)
                               : (it->get<int64_t>() < min || it->get<int64_t>() > max)) {
    return BadEntry(index, std::string("\"") + key + "\" is out of range: " + it->dump());
  }
  return it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                  : it->get<int64_t>();
}

}  // namespace

arrow::Result<ColumnMap> ColumnMap::FromJson(std::string_view text) {
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return arrow::Status::Invalid("table property ", kSourceColumnsProperty,
                                  " is not valid JSON: '", text.substr(0, 200),
                                  "'; restore it from an earlier metadata file");
  }
  if (!j.is_array()) {
    return arrow::Status::Invalid("table property ", kSourceColumnsProperty,
                                  " must be a JSON array of column bindings, got: '",
                                  text.substr(0, 200), "'");
  }
  constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  ColumnMap map;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    if (!e.is_object()) return BadEntry(i, "is not a JSON object");
    ColumnBinding b;
    ARROW_ASSIGN_OR_RAISE(int64_t attnum, IntMember(e, i, "attnum", 0, 32767));
    b.attnum = static_cast<int16_t>(attnum);
    auto name = e.find("name");
    if (name == e.end() || !name->is_string() || name->get<std::string>().empty()) {
      return BadEntry(i, "has no \"name\" string");
    }
    b.name = name->get<std::string>();
    ARROW_ASSIGN_OR_RAISE(int64_t field_id, IntMember(e, i, "field-id", 1, kInt32Max));
    b.field_id = static_cast<int32_t>(field_id);
    ARROW_ASSIGN_OR_RAISE(
        int64_t oid,
        IntMember(e, i, "type-oid", 0, std::numeric_limits<postgres::Oid>::max()));
    b.type_oid = static_cast<postgres::Oid>(oid);
    ARROW_ASSIGN_OR_RAISE(int64_t typmod,
                          IntMember(e, i, "typmod", kInt32Min, kInt32Max));
    b.type_modifier = static_cast<int32_t>(typmod);
    if (auto r = e.find("retired-field-ids"); r != e.end()) {
      if (!r->is_array()) return BadEntry(i, "\"retired-field-ids\" is not an array");
      for (const json& id : *r) {
        if (!id.is_number_integer() || id.get<int64_t>() < 1 ||
            id.get<int64_t>() > kInt32Max) {
          return BadEntry(i, "\"retired-field-ids\" holds a non-id: " + id.dump());
        }
        b.retired_field_ids.push_back(id.get<int32_t>());
      }
    }
    if (auto r = e.find("former-names"); r != e.end()) {
      if (!r->is_array()) return BadEntry(i, "\"former-names\" is not an array");
      for (const json& n : *r) {
        if (!n.is_string()) {
          return BadEntry(i, "\"former-names\" holds a non-name: " + n.dump());
        }
        b.former_names.push_back(n.get<std::string>());
      }
    }
    if (auto r = e.find("former-through"); r != e.end()) {
      if (!r->is_array() || r->size() != b.former_names.size()) {
        return BadEntry(i,
                        "\"former-through\" is not an array as long as "
                        "\"former-names\"");
      }
      for (const json& p : *r) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
            !p[1].is_number_integer() || p[1].get<int64_t>() < INT32_MIN ||
            p[1].get<int64_t>() > kInt32Max) {
          return BadEntry(i, "\"former-through\" holds a non-position: " + p.dump());
        }
        b.former_through.emplace_back(p[0].get<int64_t>(), p[1].get<int32_t>());
      }
    } else {
      b.former_through.assign(b.former_names.size(), ChangePosition{0, 0});
    }
    map.columns.push_back(std::move(b));
  }
  ARROW_RETURN_NOT_OK(CheckColumnMap(map));
  return map;
}

}  // namespace floe::lake
