#include "floe/iceberg/table_metadata.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/json_internal.h"
#include "floe/iceberg/literal.h"

namespace floe::iceberg {

using nlohmann::json;

namespace {

// The top-level members TableMetadataFromJson reads into fields. `schema` and
// `partition-spec` are format-version 1 leftovers that would go
// stale after evolution, so they are dropped rather than kept in raw_json.
const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> kKeys = {"format-version",
                                              "table-uuid",
                                              "location",
                                              "last-sequence-number",
                                              "last-updated-ms",
                                              "last-column-id",
                                              "schemas",
                                              "current-schema-id",
                                              "partition-specs",
                                              "default-spec-id",
                                              "last-partition-id",
                                              "properties",
                                              "current-snapshot-id",
                                              "snapshots",
                                              "snapshot-log",
                                              "metadata-log",
                                              "sort-orders",
                                              "default-sort-order-id",
                                              "refs",
                                              "schema",
                                              "partition-spec"};
  return kKeys;
}

// ---- JSON readers ----------------------------------------------------------------

arrow::Result<Snapshot> SnapshotFromJson(const json& j) {
  using namespace internal;
  if (!j.is_object()) {
    return arrow::Status::Invalid("snapshot JSON must be an object, got ", j.dump());
  }
  Snapshot s;
  ARROW_ASSIGN_OR_RAISE(s.snapshot_id, JsonInt64(j, "snapshot-id", "snapshot"));
  if (HasJsonMember(j, "parent-snapshot-id")) {
    ARROW_ASSIGN_OR_RAISE(s.parent_snapshot_id,
                          JsonInt64(j, "parent-snapshot-id", "snapshot"));
  }
  ARROW_ASSIGN_OR_RAISE(s.sequence_number, JsonInt64(j, "sequence-number", "snapshot"));
  ARROW_ASSIGN_OR_RAISE(s.timestamp_ms, JsonInt64(j, "timestamp-ms", "snapshot"));
  if (!HasJsonMember(j, "manifest-list")) {
    return arrow::Status::Invalid("snapshot ", s.snapshot_id,
                                  " has no 'manifest-list' (required in v2)");
  }
  ARROW_ASSIGN_OR_RAISE(s.manifest_list, JsonString(j, "manifest-list", "snapshot"));
  ARROW_ASSIGN_OR_RAISE(const json* summary, JsonMember(j, "summary", "snapshot"));
  ARROW_ASSIGN_OR_RAISE(s.summary, JsonStringMap(*summary, "summary", "snapshot"));
  auto op = s.summary.find("operation");
  if (op == s.summary.end()) {
    return arrow::Status::Invalid("snapshot ", s.snapshot_id,
                                  " summary has no 'operation'");
  }
  s.operation = op->second;
  s.summary.erase(op);
  if (HasJsonMember(j, "schema-id")) {
    ARROW_ASSIGN_OR_RAISE(s.schema_id, JsonInt32(j, "schema-id", "snapshot"));
  }
  return s;
}

arrow::Result<SnapshotRef> SnapshotRefFromJson(const std::string& name, const json& j) {
  using namespace internal;
  if (!j.is_object()) {
    return arrow::Status::Invalid("ref '", name, "' JSON must be an object, got ",
                                  j.dump());
  }
  SnapshotRef ref;
  ARROW_ASSIGN_OR_RAISE(ref.snapshot_id, JsonInt64(j, "snapshot-id", "ref"));
  ARROW_ASSIGN_OR_RAISE(std::string type, JsonString(j, "type", "ref"));
  if (type == "branch") {
    ref.type = SnapshotRefType::kBranch;
  } else if (type == "tag") {
    ref.type = SnapshotRefType::kTag;
  } else {
    return arrow::Status::Invalid(
        "ref '", name, "' type must be \"branch\" or \"tag\", got \"", type, "\"");
  }
  if (HasJsonMember(j, "min-snapshots-to-keep")) {
    ARROW_ASSIGN_OR_RAISE(ref.min_snapshots_to_keep,
                          JsonInt32(j, "min-snapshots-to-keep", "ref"));
  }
  if (HasJsonMember(j, "max-snapshot-age-ms")) {
    ARROW_ASSIGN_OR_RAISE(ref.max_snapshot_age_ms,
                          JsonInt64(j, "max-snapshot-age-ms", "ref"));
  }
  if (HasJsonMember(j, "max-ref-age-ms")) {
    ARROW_ASSIGN_OR_RAISE(ref.max_ref_age_ms, JsonInt64(j, "max-ref-age-ms", "ref"));
  }
  return ref;
}

// Reads the array `key` of `j` (absent or null reads as empty) with `read`.
template <typename T, typename Read>
arrow::Result<std::vector<T>> ReadArray(const json& j, const char* key, bool required,
                                        Read read) {
  std::vector<T> out;
  if (!internal::HasJsonMember(j, key)) {
    if (required) {
      return arrow::Status::Invalid("table metadata JSON has no '", key, "'");
    }
    return out;
  }
  ARROW_ASSIGN_OR_RAISE(const json* array, internal::JsonArray(j, key, "table metadata"));
  for (const json& item : *array) {
    ARROW_ASSIGN_OR_RAISE(T value, read(item));
    out.push_back(std::move(value));
  }
  return out;
}

// ---- JSON writers ----------------------------------------------------------------

json SnapshotToJson(const Snapshot& s) {
  json summary = json::object();
  for (const auto& [k, v] : s.summary) summary[k] = v;
  summary["operation"] = s.operation;
  json out = {{"snapshot-id", s.snapshot_id},
              {"sequence-number", s.sequence_number},
              {"timestamp-ms", s.timestamp_ms},
              {"manifest-list", s.manifest_list},
              {"summary", std::move(summary)}};
  if (s.parent_snapshot_id.has_value()) out["parent-snapshot-id"] = *s.parent_snapshot_id;
  if (s.schema_id.has_value()) out["schema-id"] = *s.schema_id;
  return out;
}

json SnapshotRefToJson(const SnapshotRef& ref) {
  json out = {{"snapshot-id", ref.snapshot_id},
              {"type", ref.type == SnapshotRefType::kBranch ? "branch" : "tag"}};
  if (ref.min_snapshots_to_keep.has_value()) {
    out["min-snapshots-to-keep"] = *ref.min_snapshots_to_keep;
  }
  if (ref.max_snapshot_age_ms.has_value()) {
    out["max-snapshot-age-ms"] = *ref.max_snapshot_age_ms;
  }
  if (ref.max_ref_age_ms.has_value()) out["max-ref-age-ms"] = *ref.max_ref_age_ms;
  return out;
}

// ---- Fresh ids -------------------------------------------------------------------

TypePtr FreshType(const TypePtr& type_ptr, int32_t* last_id,
                  std::map<int32_t, int32_t>* ids) {
  const Type& type = *type_ptr;
  switch (type.id()) {
    case TypeId::kStruct: {
      // A struct's own fields are numbered before anything nested in them.
      std::vector<NestedField> fields = type.fields();
      for (NestedField& f : fields) {
        const int32_t fresh = ++*last_id;
        (*ids)[f.id] = fresh;
        f.id = fresh;
      }
      for (NestedField& f : fields) f.type = FreshType(f.type, last_id, ids);
      return Type::Struct(std::move(fields));
    }
    case TypeId::kList: {
      const NestedField& element = type.element();
      const int32_t element_id = ++*last_id;
      (*ids)[element.id] = element_id;
      TypePtr element_type = FreshType(element.type, last_id, ids);
      return Type::List(element_id, std::move(element_type), element.required);
    }
    case TypeId::kMap: {
      const int32_t key_id = ++*last_id;
      const int32_t value_id = ++*last_id;
      (*ids)[type.key().id] = key_id;
      (*ids)[type.value().id] = value_id;
      TypePtr key = FreshType(type.key().type, last_id, ids);
      TypePtr value = FreshType(type.value().type, last_id, ids);
      return Type::Map(key_id, std::move(key), value_id, std::move(value),
                       type.value().required);
    }
    default:
      return type_ptr;
  }
}

}  // namespace

// ---- TableMetadata ---------------------------------------------------------------

const Schema* TableMetadata::FindSchema(int32_t schema_id) const {
  for (const Schema& s : schemas) {
    if (s.schema_id() == schema_id) return &s;
  }
  return nullptr;
}

const PartitionSpec* TableMetadata::FindSpec(int32_t spec_id) const {
  for (const PartitionSpec& s : partition_specs) {
    if (s.spec_id == spec_id) return &s;
  }
  return nullptr;
}

const SortOrder* TableMetadata::FindSortOrder(int32_t order_id) const {
  for (const SortOrder& o : sort_orders) {
    if (o.order_id == order_id) return &o;
  }
  return nullptr;
}

const Snapshot* TableMetadata::CurrentSnapshot() const {
  return current_snapshot_id.has_value() ? FindSnapshot(*current_snapshot_id) : nullptr;
}

const Snapshot* TableMetadata::FindSnapshot(int64_t snapshot_id) const {
  for (const Snapshot& s : snapshots) {
    if (s.snapshot_id == snapshot_id) return &s;
  }
  return nullptr;
}

std::vector<const Snapshot*> TableMetadata::SnapshotsAncestryOf(
    int64_t snapshot_id) const {
  std::vector<const Snapshot*> out;
  std::set<int64_t> seen;  // guards against a (corrupt) cycle
  for (const Snapshot* s = FindSnapshot(snapshot_id);
       s != nullptr && seen.insert(s->snapshot_id).second;
       s = s->parent_snapshot_id ? FindSnapshot(*s->parent_snapshot_id) : nullptr) {
    out.push_back(s);
  }
  return out;
}

// Schema ids unique and within last-column-id, the current schema among them.
arrow::Status TableMetadata::ValidateSchemas() const {
  std::set<int32_t> ids;
  for (const Schema& s : schemas) {
    if (!ids.insert(s.schema_id()).second) {
      return arrow::Status::Invalid("two schemas have id ", s.schema_id());
    }
    if (s.highest_field_id() > last_column_id) {
      return arrow::Status::Invalid("schema ", s.schema_id(), " uses field id ",
                                    s.highest_field_id(), " above last-column-id ",
                                    last_column_id);
    }
  }
  if (CurrentSchema() == nullptr) {
    return arrow::Status::Invalid("current-schema-id ", current_schema_id,
                                  " is not among the schemas");
  }
  return arrow::Status::OK();
}

// Spec ids unique and within last-partition-id, the default spec among them.
arrow::Status TableMetadata::ValidatePartitionSpecs() const {
  std::set<int32_t> ids;
  for (const PartitionSpec& s : partition_specs) {
    if (!ids.insert(s.spec_id).second) {
      return arrow::Status::Invalid("two partition specs have id ", s.spec_id);
    }
    if (s.last_assigned_field_id() > last_partition_id) {
      return arrow::Status::Invalid("partition spec ", s.spec_id, " uses field id ",
                                    s.last_assigned_field_id(),
                                    " above last-partition-id ", last_partition_id);
    }
  }
  if (DefaultSpec() == nullptr) {
    return arrow::Status::Invalid("default-spec-id ", default_spec_id,
                                  " is not among the partition specs");
  }
  return arrow::Status::OK();
}

// Sort order ids unique, only order 0 unsorted, the default order among them.
arrow::Status TableMetadata::ValidateSortOrders() const {
  std::set<int32_t> ids;
  for (const SortOrder& o : sort_orders) {
    if (!ids.insert(o.order_id).second) {
      return arrow::Status::Invalid("two sort orders have id ", o.order_id);
    }
    if ((o.order_id == kUnsortedOrderId) != o.is_unsorted()) {
      return arrow::Status::Invalid("sort order ", o.order_id,
                                    ": only order 0 is unsorted, and it has no fields");
    }
  }
  if (DefaultSortOrder() == nullptr) {
    return arrow::Status::Invalid("default-sort-order-id ", default_sort_order_id,
                                  " is not among the sort orders");
  }
  return arrow::Status::OK();
}

// Snapshots (unique ids, sequence numbers, schema ids), the current one and the
// refs, `main` matching current-snapshot-id.
arrow::Status TableMetadata::ValidateSnapshots() const {
  std::set<int64_t> snapshot_ids;
  for (const Snapshot& s : snapshots) {
    if (!snapshot_ids.insert(s.snapshot_id).second) {
      return arrow::Status::Invalid("two snapshots have id ", s.snapshot_id);
    }
    if (s.sequence_number > last_sequence_number) {
      return arrow::Status::Invalid("snapshot ", s.snapshot_id, " has sequence number ",
                                    s.sequence_number, " above last-sequence-number ",
                                    last_sequence_number);
    }
    if (s.schema_id.has_value() && FindSchema(*s.schema_id) == nullptr) {
      return arrow::Status::Invalid("snapshot ", s.snapshot_id, " has unknown schema id ",
                                    *s.schema_id);
    }
  }
  if (current_snapshot_id.has_value() && CurrentSnapshot() == nullptr) {
    return arrow::Status::Invalid("current-snapshot-id ", *current_snapshot_id,
                                  " is not among the snapshots");
  }
  for (const auto& [name, ref] : refs) {
    if (FindSnapshot(ref.snapshot_id) == nullptr) {
      return arrow::Status::Invalid("ref '", name, "' points at unknown snapshot ",
                                    ref.snapshot_id);
    }
    if (ref.type == SnapshotRefType::kTag &&
        (ref.min_snapshots_to_keep.has_value() || ref.max_snapshot_age_ms.has_value())) {
      return arrow::Status::Invalid("tag '", name,
                                    "' cannot have min-snapshots-to-keep or "
                                    "max-snapshot-age-ms");
    }
  }
  auto main = refs.find(kMainBranch);
  if (main != refs.end()) {
    if (main->second.type != SnapshotRefType::kBranch) {
      return arrow::Status::Invalid("ref 'main' must be a branch");
    }
    if (main->second.snapshot_id != current_snapshot_id) {
      return arrow::Status::Invalid(
          "ref 'main' points at snapshot ", main->second.snapshot_id,
          " but current-snapshot-id is ",
          current_snapshot_id ? std::to_string(*current_snapshot_id) : "unset");
    }
  } else if (current_snapshot_id.has_value()) {
    return arrow::Status::Invalid("current-snapshot-id is ", *current_snapshot_id,
                                  " but there is no 'main' branch");
  }
  return arrow::Status::OK();
}

// The logs and last-updated-ms not going back in time (beyond the clock skew
// tolerated).
arrow::Status TableMetadata::ValidateLogs() const {
  for (size_t i = 1; i < snapshot_log.size(); ++i) {
    if (snapshot_log[i].timestamp_ms <
        snapshot_log[i - 1].timestamp_ms - kClockSkewToleranceMs) {
      return arrow::Status::Invalid("snapshot-log goes back in time at entry ", i);
    }
  }
  for (size_t i = 1; i < metadata_log.size(); ++i) {
    if (metadata_log[i].timestamp_ms <
        metadata_log[i - 1].timestamp_ms - kClockSkewToleranceMs) {
      return arrow::Status::Invalid("metadata-log goes back in time at entry ", i);
    }
  }
  if (!snapshot_log.empty() &&
      last_updated_ms < snapshot_log.back().timestamp_ms - kClockSkewToleranceMs) {
    return arrow::Status::Invalid("last-updated-ms ", last_updated_ms,
                                  " is before the last snapshot-log entry at ",
                                  snapshot_log.back().timestamp_ms);
  }
  if (!metadata_log.empty() &&
      last_updated_ms < metadata_log.back().timestamp_ms - kClockSkewToleranceMs) {
    return arrow::Status::Invalid("last-updated-ms ", last_updated_ms,
                                  " is before the last metadata-log entry at ",
                                  metadata_log.back().timestamp_ms);
  }
  return arrow::Status::OK();
}

arrow::Status TableMetadata::Validate() const {
  if (format_version != kFormatVersion) {
    return arrow::Status::NotImplemented(
        "table metadata format-version ", format_version,
        " is not supported; floe reads and writes format-version 2 only");
  }
  if (!Uuid::Parse(table_uuid).ok()) {
    return arrow::Status::Invalid("table-uuid '", table_uuid, "' is not a UUID");
  }
  if (location.empty()) return arrow::Status::Invalid("table location is empty");

  ARROW_RETURN_NOT_OK(ValidateSchemas());
  ARROW_RETURN_NOT_OK(ValidatePartitionSpecs());
  ARROW_RETURN_NOT_OK(ValidateSortOrders());
  ARROW_RETURN_NOT_OK(ValidateSnapshots());
  return ValidateLogs();
}

// ---- JSON ------------------------------------------------------------------------

arrow::Result<TableMetadata> TableMetadataFromJson(std::string_view json_text) {
  using namespace internal;
  const json j = json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return arrow::Status::Invalid("table metadata is not valid JSON");
  }
  if (!j.is_object()) {
    return arrow::Status::Invalid("table metadata JSON must be an object");
  }
  const char* what = "table metadata";
  TableMetadata m;
  ARROW_ASSIGN_OR_RAISE(m.format_version, JsonInt32(j, "format-version", what));
  if (m.format_version != kFormatVersion) {
    return arrow::Status::NotImplemented(
        "table metadata format-version ", m.format_version,
        " is not supported; floe reads and writes format-version 2 only");
  }
  ARROW_ASSIGN_OR_RAISE(m.table_uuid, JsonString(j, "table-uuid", what));
  ARROW_ASSIGN_OR_RAISE(m.location, JsonString(j, "location", what));
  ARROW_ASSIGN_OR_RAISE(m.last_sequence_number,
                        JsonInt64(j, "last-sequence-number", what));
  ARROW_ASSIGN_OR_RAISE(m.last_updated_ms, JsonInt64(j, "last-updated-ms", what));
  ARROW_ASSIGN_OR_RAISE(m.last_column_id, JsonInt32(j, "last-column-id", what));
  ARROW_ASSIGN_OR_RAISE(
      m.schemas, ReadArray<Schema>(j, "schemas", /*required=*/true,
                                   [](const json& s) { return SchemaFromJson(s); }));
  ARROW_ASSIGN_OR_RAISE(m.current_schema_id, JsonInt32(j, "current-schema-id", what));
  ARROW_ASSIGN_OR_RAISE(
      m.partition_specs,
      ReadArray<PartitionSpec>(j, "partition-specs", /*required=*/true,
                               [](const json& s) { return PartitionSpecFromJson(s); }));
  ARROW_ASSIGN_OR_RAISE(m.default_spec_id, JsonInt32(j, "default-spec-id", what));
  ARROW_ASSIGN_OR_RAISE(m.last_partition_id, JsonInt32(j, "last-partition-id", what));
  if (HasJsonMember(j, "properties")) {
    ARROW_ASSIGN_OR_RAISE(m.properties,
                          JsonStringMap(j["properties"], "properties", what));
  }
  if (HasJsonMember(j, "current-snapshot-id")) {
    ARROW_ASSIGN_OR_RAISE(int64_t id, JsonInt64(j, "current-snapshot-id", what));
    // Java writes -1 for "no current snapshot" in v1 and v2.
    if (id != -1) m.current_snapshot_id = id;
  }
  ARROW_ASSIGN_OR_RAISE(
      m.snapshots,
      ReadArray<Snapshot>(j, "snapshots", /*required=*/false,
                          [](const json& s) { return SnapshotFromJson(s); }));
  ARROW_ASSIGN_OR_RAISE(
      m.snapshot_log,
      ReadArray<SnapshotLogEntry>(
          j, "snapshot-log", /*required=*/false,
          [](const json& e) -> arrow::Result<SnapshotLogEntry> {
            if (!e.is_object())
              return arrow::Status::Invalid("snapshot-log entry JSON must be an object");
            SnapshotLogEntry entry;
            ARROW_ASSIGN_OR_RAISE(entry.timestamp_ms,
                                  JsonInt64(e, "timestamp-ms", "snapshot-log entry"));
            ARROW_ASSIGN_OR_RAISE(entry.snapshot_id,
                                  JsonInt64(e, "snapshot-id", "snapshot-log entry"));
            return entry;
          }));
  ARROW_ASSIGN_OR_RAISE(
      m.metadata_log,
      ReadArray<MetadataLogEntry>(
          j, "metadata-log", /*required=*/false,
          [](const json& e) -> arrow::Result<MetadataLogEntry> {
            if (!e.is_object())
              return arrow::Status::Invalid("metadata-log entry JSON must be an object");
            MetadataLogEntry entry;
            ARROW_ASSIGN_OR_RAISE(entry.timestamp_ms,
                                  JsonInt64(e, "timestamp-ms", "metadata-log entry"));
            ARROW_ASSIGN_OR_RAISE(entry.metadata_file,
                                  JsonString(e, "metadata-file", "metadata-log entry"));
            return entry;
          }));
  ARROW_ASSIGN_OR_RAISE(
      m.sort_orders,
      ReadArray<SortOrder>(j, "sort-orders", /*required=*/true,
                           [](const json& o) { return SortOrderFromJson(o); }));
  ARROW_ASSIGN_OR_RAISE(m.default_sort_order_id,
                        JsonInt32(j, "default-sort-order-id", what));
  if (HasJsonMember(j, "refs")) {
    const json& refs = j["refs"];
    if (!refs.is_object()) {
      return arrow::Status::Invalid("table metadata JSON 'refs' must be an object");
    }
    for (const auto& [name, ref_json] : refs.items()) {
      ARROW_ASSIGN_OR_RAISE(SnapshotRef ref, SnapshotRefFromJson(name, ref_json));
      m.refs.emplace(name, ref);
    }
  } else if (m.current_snapshot_id.has_value()) {
    // Metadata written before refs existed: main is the current snapshot.
    m.refs.emplace(kMainBranch, SnapshotRef{*m.current_snapshot_id});
  }
  for (const auto& [key, value] : j.items()) {
    if (!KnownKeys().contains(key)) m.raw_json.emplace(key, value.dump());
  }
  ARROW_RETURN_NOT_OK(m.Validate());
  return m;
}

arrow::Result<std::string> TableMetadataToJson(const TableMetadata& m) {
  ARROW_RETURN_NOT_OK(m.Validate());
  json j = json::object();
  for (const auto& [key, text] : m.raw_json) {
    json value = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return arrow::Status::Invalid("table metadata raw member '", key,
                                    "' is not valid JSON");
    }
    j[key] = std::move(value);
  }
  j["format-version"] = m.format_version;
  j["table-uuid"] = m.table_uuid;
  j["location"] = m.location;
  j["last-sequence-number"] = m.last_sequence_number;
  j["last-updated-ms"] = m.last_updated_ms;
  j["last-column-id"] = m.last_column_id;
  json schemas = json::array();
  for (const Schema& s : m.schemas) schemas.push_back(SchemaToJson(s));
  j["schemas"] = std::move(schemas);
  j["current-schema-id"] = m.current_schema_id;
  json specs = json::array();
  for (const PartitionSpec& s : m.partition_specs)
    specs.push_back(PartitionSpecToJson(s));
  j["partition-specs"] = std::move(specs);
  j["default-spec-id"] = m.default_spec_id;
  j["last-partition-id"] = m.last_partition_id;
  json properties = json::object();
  for (const auto& [k, v] : m.properties) properties[k] = v;
  j["properties"] = std::move(properties);
  j["current-snapshot-id"] = m.current_snapshot_id.value_or(-1);
  json snapshots = json::array();
  for (const Snapshot& s : m.snapshots) snapshots.push_back(SnapshotToJson(s));
  j["snapshots"] = std::move(snapshots);
  json snapshot_log = json::array();
  for (const SnapshotLogEntry& e : m.snapshot_log) {
    snapshot_log.push_back(
        {{"timestamp-ms", e.timestamp_ms}, {"snapshot-id", e.snapshot_id}});
  }
  j["snapshot-log"] = std::move(snapshot_log);
  json metadata_log = json::array();
  for (const MetadataLogEntry& e : m.metadata_log) {
    metadata_log.push_back(
        {{"timestamp-ms", e.timestamp_ms}, {"metadata-file", e.metadata_file}});
  }
  j["metadata-log"] = std::move(metadata_log);
  json orders = json::array();
  for (const SortOrder& o : m.sort_orders) orders.push_back(SortOrderToJson(o));
  j["sort-orders"] = std::move(orders);
  j["default-sort-order-id"] = m.default_sort_order_id;
  json refs = json::object();
  for (const auto& [name, ref] : m.refs) refs[name] = SnapshotRefToJson(ref);
  j["refs"] = std::move(refs);
  try {
    return j.dump();
  } catch (const json::exception& e) {
    // dump() throws on strings that are not UTF-8 (e.g. a property value).
    return arrow::Status::Invalid("table metadata cannot be written as JSON: ", e.what());
  }
}

// ---- Fresh ids -------------------------------------------------------------------

arrow::Result<Schema> AssignFreshFieldIds(const Schema& schema,
                                          std::map<int32_t, int32_t>* old_to_new) {
  std::map<int32_t, int32_t> ids;
  int32_t last_id = 0;
  TypePtr root = FreshType(schema.as_struct(), &last_id, &ids);
  std::vector<int32_t> identifiers;
  for (int32_t id : schema.identifier_field_ids()) identifiers.push_back(ids.at(id));
  if (old_to_new != nullptr) *old_to_new = std::move(ids);
  return Schema::Make(0, root->fields(), std::move(identifiers));
}

// ---- Files and ids ---------------------------------------------------------------

std::optional<int32_t> ParseMetadataFileVersion(std::string_view location) {
  const size_t slash = location.rfind('/');
  std::string_view name =
      slash == std::string_view::npos ? location : location.substr(slash + 1);
  constexpr std::string_view kSuffix = ".metadata.json";
  if (!name.ends_with(kSuffix)) return std::nullopt;
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  const std::optional<int32_t> version = ParseInt32(name.substr(0, dash));
  if (!version || *version < 0) return std::nullopt;
  return version;
}

std::string NewMetadataFileLocation(const TableMetadata& metadata,
                                    std::string_view previous_metadata_location) {
  int32_t version = 0;
  if (!previous_metadata_location.empty()) {
    if (auto previous = ParseMetadataFileVersion(previous_metadata_location)) {
      version = *previous + 1;
    }
  }
  std::string dir;
  if (auto it = metadata.properties.find(kWriteMetadataPath);
      it != metadata.properties.end() && !it->second.empty()) {
    dir = it->second;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  } else {
    dir = metadata.location + "/metadata";
  }
  char prefix[16];
  std::snprintf(prefix, sizeof(prefix), "%05d", version);
  return dir + "/" + prefix + "-" + GenerateUuidV4() + ".metadata.json";
}

std::string GenerateUuidV4() {
  thread_local std::mt19937_64 engine = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  Uuid uuid;
  const uint64_t hi = engine();
  const uint64_t lo = engine();
  for (int i = 0; i < 8; ++i) {
    uuid.bytes[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
    uuid.bytes[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
  }
  uuid.bytes[6] = static_cast<uint8_t>((uuid.bytes[6] & 0x0F) | 0x40);  // version 4
  uuid.bytes[8] = static_cast<uint8_t>((uuid.bytes[8] & 0x3F) | 0x80);  // RFC 4122
  return uuid.ToString();
}

int64_t CurrentTimeMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace floe::iceberg
