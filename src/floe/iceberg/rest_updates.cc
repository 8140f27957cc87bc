#include "floe/iceberg/rest_updates.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace floe::iceberg {
namespace {

using json = nlohmann::json;

// The members of `array` (schemas, specs, orders, snapshots) by their `id_key`.
std::map<int64_t, json> ById(const json& doc, const char* array, const char* id_key) {
  std::map<int64_t, json> out;
  auto it = doc.find(array);
  if (it == doc.end() || !it->is_array()) return out;
  for (const json& member : *it) out.emplace(member.at(id_key).get<int64_t>(), member);
  return out;
}

json RefOrNull(const json& refs, const std::string& name) {
  auto it = refs.find(name);
  return it == refs.end() ? json(nullptr) : it->at("snapshot-id");
}

// Schemas, partition specs or sort orders: one kind of versioned member with a
// current (or default) id.
struct Versioned {
  const char* array;
  const char* id_key;
  const char* current_key;
  const char* add_action;
  const char* member_key;
  const char* set_action;
  const char* set_key;
};

struct VersionedDiff {
  bool added = false;
  bool set = false;
};

// Adds an `add_action` update for each member `next_doc` has and `base_doc` lacks,
// then a `set_action` when the current id changed (-1 when it is the last added).
VersionedDiff DiffVersioned(const json& base_doc, const json& next_doc,
                            const Versioned& v, json* updates) {
  const auto base = ById(base_doc, v.array, v.id_key);
  const auto next = ById(next_doc, v.array, v.id_key);
  VersionedDiff diff;
  std::optional<int64_t> last_added;
  for (const auto& [id, member] : next) {
    auto it = base.find(id);
    if (it != base.end() && it->second == member) continue;
    json update = {{"action", v.add_action}, {v.member_key, member}};
    if (std::string_view(v.add_action) == "add-schema") {
      update["last-column-id"] = next_doc.at("last-column-id");
    }
    updates->push_back(std::move(update));
    last_added = id;
    diff.added = true;
  }
  const int64_t base_current = base_doc.at(v.current_key).get<int64_t>();
  const int64_t next_current = next_doc.at(v.current_key).get<int64_t>();
  if (base_current != next_current) {
    updates->push_back({{"action", v.set_action},
                        {v.set_key, last_added == next_current ? -1 : next_current}});
    diff.set = true;
  }
  return diff;
}

}  // namespace

arrow::Result<json> CreateTableRequest(const std::string& name,
                                       const TableMetadata& metadata) {
  ARROW_ASSIGN_OR_RAISE(const std::string text, TableMetadataToJson(metadata));
  const json doc = json::parse(text);
  auto current = [&](const char* array, const char* id_key,
                     const char* current_key) -> arrow::Result<json> {
    const auto members = ById(doc, array, id_key);
    auto it = members.find(doc.at(current_key).get<int64_t>());
    if (it == members.end()) {
      return arrow::Status::Invalid("table metadata without its ", current_key);
    }
    return it->second;
  };
  json body = {{"name", name},
               {"location", metadata.location},
               {"properties", doc.value("properties", json::object())},
               {"stage-create", false}};
  ARROW_ASSIGN_OR_RAISE(body["schema"],
                        current("schemas", "schema-id", "current-schema-id"));
  ARROW_ASSIGN_OR_RAISE(body["partition-spec"],
                        current("partition-specs", "spec-id", "default-spec-id"));
  ARROW_ASSIGN_OR_RAISE(body["write-order"],
                        current("sort-orders", "order-id", "default-sort-order-id"));
  return body;
}

arrow::Result<json> TableCommitRequest(const TableMetadata& base,
                                       const TableMetadata& next) {
  if (base.table_uuid != next.table_uuid) {
    return arrow::Status::Invalid("a commit turns table ", base.table_uuid,
                                  " into another table (", next.table_uuid, ")");
  }
  ARROW_ASSIGN_OR_RAISE(const std::string base_text, TableMetadataToJson(base));
  ARROW_ASSIGN_OR_RAISE(const std::string next_text, TableMetadataToJson(next));
  const json b = json::parse(base_text);
  const json n = json::parse(next_text);
  json requirements = json::array();
  json updates = json::array();
  requirements.push_back({{"type", "assert-table-uuid"}, {"uuid", base.table_uuid}});

  if (next.format_version != base.format_version) {
    updates.push_back(
        {{"action", "upgrade-format-version"}, {"format-version", next.format_version}});
  }
  const VersionedDiff schemas =
      DiffVersioned(b, n,
                    {"schemas", "schema-id", "current-schema-id", "add-schema", "schema",
                     "set-current-schema", "schema-id"},
                    &updates);
  if (schemas.added) {
    requirements.push_back({{"type", "assert-last-assigned-field-id"},
                            {"last-assigned-field-id", base.last_column_id}});
  }
  if (schemas.set) {
    requirements.push_back({{"type", "assert-current-schema-id"},
                            {"current-schema-id", base.current_schema_id}});
  }
  const VersionedDiff specs =
      DiffVersioned(b, n,
                    {"partition-specs", "spec-id", "default-spec-id", "add-spec", "spec",
                     "set-default-spec", "spec-id"},
                    &updates);
  if (specs.added) {
    requirements.push_back({{"type", "assert-last-assigned-partition-id"},
                            {"last-assigned-partition-id", base.last_partition_id}});
  }
  if (specs.set) {
    requirements.push_back(
        {{"type", "assert-default-spec-id"}, {"default-spec-id", base.default_spec_id}});
  }
  const VersionedDiff orders =
      DiffVersioned(b, n,
                    {"sort-orders", "order-id", "default-sort-order-id", "add-sort-order",
                     "sort-order", "set-default-sort-order", "sort-order-id"},
                    &updates);
  if (orders.set) {
    requirements.push_back({{"type", "assert-default-sort-order-id"},
                            {"default-sort-order-id", base.default_sort_order_id}});
  }

  if (next.location != base.location) {
    updates.push_back({{"action", "set-location"}, {"location", next.location}});
  }
  json set = json::object();
  for (const auto& [key, value] : next.properties) {
    auto it = base.properties.find(key);
    if (it == base.properties.end() || it->second != value) set[key] = value;
  }
  if (!set.empty()) updates.push_back({{"action", "set-properties"}, {"updates", set}});
  json removed = json::array();
  for (const auto& [key, value] : base.properties) {
    if (!next.properties.contains(key)) removed.push_back(key);
  }
  if (!removed.empty()) {
    updates.push_back({{"action", "remove-properties"}, {"removals", removed}});
  }

  // Refs: those gone first (a removed snapshot may be their head), then the
  // snapshots, then the refs that moved onto them.
  const json empty = json::object();
  const json& base_refs = b.contains("refs") ? b["refs"] : empty;
  const json& next_refs = n.contains("refs") ? n["refs"] : empty;
  for (const auto& [name, ref] : base_refs.items()) {
    if (next_refs.contains(name)) continue;
    updates.push_back({{"action", "remove-snapshot-ref"}, {"ref-name", name}});
    requirements.push_back({{"type", "assert-ref-snapshot-id"},
                            {"ref", name},
                            {"snapshot-id", ref.at("snapshot-id")}});
  }
  const auto base_snapshots = ById(b, "snapshots", "snapshot-id");
  const auto next_snapshots = ById(n, "snapshots", "snapshot-id");
  json gone = json::array();
  for (const auto& [id, snapshot] : base_snapshots) {
    if (!next_snapshots.contains(id)) gone.push_back(id);
  }
  if (!gone.empty()) {
    updates.push_back({{"action", "remove-snapshots"}, {"snapshot-ids", gone}});
  }
  std::vector<const json*> added;
  for (const auto& [id, snapshot] : next_snapshots) {
    if (!base_snapshots.contains(id)) added.push_back(&snapshot);
  }
  std::sort(added.begin(), added.end(), [](const json* x, const json* y) {
    return x->value("sequence-number", int64_t{0}) <
           y->value("sequence-number", int64_t{0});
  });
  for (const json* snapshot : added) {
    updates.push_back({{"action", "add-snapshot"}, {"snapshot", *snapshot}});
  }
  for (const auto& [name, ref] : next_refs.items()) {
    auto it = base_refs.find(name);
    if (it != base_refs.end() && *it == ref) continue;
    json update = ref;
    update["action"] = "set-snapshot-ref";
    update["ref-name"] = name;
    updates.push_back(std::move(update));
    requirements.push_back({{"type", "assert-ref-snapshot-id"},
                            {"ref", name},
                            {"snapshot-id", RefOrNull(base_refs, name)}});
  }
  return json{{"requirements", std::move(requirements)}, {"updates", std::move(updates)}};
}

arrow::Result<bool> HoldsChanges(const TableMetadata& current,
                                 const TableMetadata& next) {
  ARROW_ASSIGN_OR_RAISE(json request, TableCommitRequest(current, next));
  return request["updates"].empty();
}

}  // namespace floe::iceberg
