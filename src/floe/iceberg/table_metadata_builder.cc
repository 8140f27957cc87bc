// TableMetadataBuilder (table_metadata.h): new tables and every metadata change,
// checked as the spec requires, then Build.

#include "floe/iceberg/table_metadata.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "floe/common/parse.h"

namespace floe::iceberg {

using nlohmann::json;

namespace {

// The id after the largest in use (schemas, specs, sort orders).
int32_t NextId(int32_t largest_in_use) { return largest_in_use + 1; }

}  // namespace

void TableMetadataBuilder::Fail(std::string message) {
  errors_.push_back(std::move(message));
}

TableMetadataBuilder TableMetadataBuilder::NewTable(
    const Schema& schema, const PartitionSpec& spec, const SortOrder& sort_order,
    std::string location, std::map<std::string, std::string> properties) {
  TableMetadataBuilder b;
  b.is_new_table_ = true;
  TableMetadata& m = b.metadata_;
  m.table_uuid = GenerateUuidV4();
  while (location.size() > 1 && location.back() == '/') location.pop_back();
  m.location = std::move(location);
  if (m.location.empty()) b.Fail("a new table needs a location");
  if (auto it = properties.find("format-version"); it != properties.end()) {
    if (it->second != "2") {
      b.Fail("format-version " + it->second +
             " is not supported; floe creates format-version 2 tables only");
    }
    properties.erase(it);
  }
  m.properties = std::move(properties);

  // Every source must be a column of the caller's schema: an unknown id must not be
  // mistaken for one of the fresh ids.
  for (const PartitionField& f : spec.fields) {
    if (schema.FindField(f.source_id) == nullptr) {
      b.Fail("partition field '" + f.name + "': source field id " +
             std::to_string(f.source_id) + " is not in the schema");
    }
  }
  for (const SortField& f : sort_order.fields) {
    if (schema.FindField(f.source_id) == nullptr) {
      b.Fail("sort field source id " + std::to_string(f.source_id) +
             " is not in the schema");
    }
  }

  std::map<int32_t, int32_t> ids;
  auto fresh = AssignFreshFieldIds(schema, &ids);
  if (!fresh.ok()) {
    b.Fail(fresh.status().message());
    return b;
  }
  m.schemas.push_back(*fresh);
  m.current_schema_id = fresh->schema_id();
  m.last_column_id = fresh->highest_field_id();
  b.last_added_schema_id_ = fresh->schema_id();

  auto remap = [&ids](int32_t id) {
    auto it = ids.find(id);
    return it == ids.end() ? id : it->second;
  };
  PartitionSpec fresh_spec;
  fresh_spec.spec_id = 0;
  int32_t next_partition_id = kFirstPartitionFieldId;
  for (const PartitionField& f : spec.fields) {
    fresh_spec.fields.push_back(
        PartitionField{remap(f.source_id), next_partition_id++, f.name, f.transform});
  }
  // Checked after renumbering, since the caller's partition field ids do not matter.
  if (auto st = fresh_spec.Validate(*fresh); !st.ok()) {
    b.Fail("invalid partition spec: " + st.message());
  }
  m.partition_specs.push_back(fresh_spec);
  m.default_spec_id = 0;
  m.last_partition_id = fresh_spec.last_assigned_field_id();
  b.last_added_spec_id_ = 0;

  SortOrder fresh_order;
  fresh_order.order_id = sort_order.is_unsorted() ? kUnsortedOrderId : 1;
  for (SortField f : sort_order.fields) {
    f.source_id = remap(f.source_id);
    fresh_order.fields.push_back(f);
  }
  if (auto st = fresh_order.Validate(*fresh); !st.ok()) {
    b.Fail("invalid sort order: " + st.message());
  }
  m.sort_orders.push_back(fresh_order);
  m.default_sort_order_id = fresh_order.order_id;
  b.last_added_order_id_ = fresh_order.order_id;
  return b;
}

TableMetadataBuilder TableMetadataBuilder::From(TableMetadata base) {
  TableMetadataBuilder b;
  b.base_last_updated_ms_ = base.last_updated_ms;
  b.metadata_ = std::move(base);
  return b;
}

TableMetadataBuilder& TableMetadataBuilder::AddSchema(const Schema& schema) {
  TableMetadata& m = metadata_;
  for (const Schema& existing : m.schemas) {
    if (existing.SameSchema(schema)) {
      last_added_schema_id_ = existing.schema_id();
      return *this;
    }
  }
  int32_t largest = -1;
  for (const Schema& s : m.schemas) largest = std::max(largest, s.schema_id());
  const int32_t id = NextId(largest);
  m.schemas.push_back(schema.WithSchemaId(id));
  m.last_column_id = std::max(m.last_column_id, schema.highest_field_id());
  last_added_schema_id_ = id;
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::SetCurrentSchema(int32_t schema_id) {
  if (schema_id == kLastAdded) {
    if (!last_added_schema_id_.has_value()) {
      Fail("SetCurrentSchema(kLastAdded) without an added schema");
      return *this;
    }
    schema_id = *last_added_schema_id_;
  }
  const Schema* schema = metadata_.FindSchema(schema_id);
  if (schema == nullptr) {
    Fail("cannot make unknown schema " + std::to_string(schema_id) + " current");
    return *this;
  }
  if (const PartitionSpec* spec = metadata_.DefaultSpec(); spec != nullptr) {
    if (auto st = spec->Validate(*schema); !st.ok()) {
      Fail("schema " + std::to_string(schema_id) +
           " does not fit the default partition spec: " + st.message());
      return *this;
    }
  }
  if (const SortOrder* order = metadata_.DefaultSortOrder(); order != nullptr) {
    if (auto st = order->Validate(*schema); !st.ok()) {
      Fail("schema " + std::to_string(schema_id) +
           " does not fit the default sort order: " + st.message());
      return *this;
    }
  }
  metadata_.current_schema_id = schema_id;
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::AddPartitionSpec(const PartitionSpec& spec) {
  TableMetadata& m = metadata_;
  const Schema* schema = m.CurrentSchema();
  if (schema == nullptr) {
    Fail("cannot add a partition spec without a current schema");
    return *this;
  }
  if (auto st = spec.Validate(*schema); !st.ok()) {
    Fail("invalid partition spec: " + st.message());
    return *this;
  }
  for (const PartitionSpec& existing : m.partition_specs) {
    if (existing.SameFields(spec)) {
      last_added_spec_id_ = existing.spec_id;
      return *this;
    }
  }
  int32_t largest = -1;
  for (const PartitionSpec& s : m.partition_specs) largest = std::max(largest, s.spec_id);
  PartitionSpec added = spec;
  added.spec_id = NextId(largest);
  m.last_partition_id = std::max(m.last_partition_id, added.last_assigned_field_id());
  last_added_spec_id_ = added.spec_id;
  m.partition_specs.push_back(std::move(added));
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::SetDefaultSpec(int32_t spec_id) {
  if (spec_id == kLastAdded) {
    if (!last_added_spec_id_.has_value()) {
      Fail("SetDefaultSpec(kLastAdded) without an added partition spec");
      return *this;
    }
    spec_id = *last_added_spec_id_;
  }
  if (metadata_.FindSpec(spec_id) == nullptr) {
    Fail("cannot make unknown partition spec " + std::to_string(spec_id) +
         " the default");
    return *this;
  }
  metadata_.default_spec_id = spec_id;
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::AddSortOrder(const SortOrder& order) {
  TableMetadata& m = metadata_;
  const Schema* schema = m.CurrentSchema();
  if (schema == nullptr) {
    Fail("cannot add a sort order without a current schema");
    return *this;
  }
  SortOrder added = order;
  if (added.is_unsorted()) added.order_id = kUnsortedOrderId;
  // The id is assigned below, so validate the fields under a placeholder sorted id.
  SortOrder check = added;
  if (!check.is_unsorted()) check.order_id = 1;
  if (auto st = check.Validate(*schema); !st.ok()) {
    Fail("invalid sort order: " + st.message());
    return *this;
  }
  for (const SortOrder& existing : m.sort_orders) {
    if (existing.SameFields(added)) {
      last_added_order_id_ = existing.order_id;
      return *this;
    }
  }
  if (!added.is_unsorted()) {
    int32_t largest = kUnsortedOrderId;
    for (const SortOrder& o : m.sort_orders) largest = std::max(largest, o.order_id);
    added.order_id = NextId(largest);
  }
  last_added_order_id_ = added.order_id;
  m.sort_orders.push_back(std::move(added));
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::SetDefaultSortOrder(int32_t order_id) {
  if (order_id == kLastAdded) {
    if (!last_added_order_id_.has_value()) {
      Fail("SetDefaultSortOrder(kLastAdded) without an added sort order");
      return *this;
    }
    order_id = *last_added_order_id_;
  }
  if (metadata_.FindSortOrder(order_id) == nullptr) {
    Fail("cannot make unknown sort order " + std::to_string(order_id) + " the default");
    return *this;
  }
  metadata_.default_sort_order_id = order_id;
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::SetProperties(
    const std::map<std::string, std::string>& updates) {
  for (const auto& [k, v] : updates) metadata_.properties[k] = v;
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::RemoveProperties(
    const std::vector<std::string>& keys) {
  for (const std::string& k : keys) metadata_.properties.erase(k);
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::AddSnapshot(Snapshot snapshot) {
  TableMetadata& m = metadata_;
  const std::string id = std::to_string(snapshot.snapshot_id);
  if (snapshot.snapshot_id == -1) {
    Fail("snapshot id -1 is reserved for \"no snapshot\"");
    return *this;
  }
  if (m.FindSnapshot(snapshot.snapshot_id) != nullptr) {
    Fail("snapshot " + id + " already exists");
    return *this;
  }
  if (snapshot.sequence_number != m.last_sequence_number + 1) {
    Fail("snapshot " + id + " has sequence number " +
         std::to_string(snapshot.sequence_number) + "; the next one is " +
         std::to_string(m.last_sequence_number + 1));
    return *this;
  }
  if (snapshot.parent_snapshot_id.has_value() &&
      m.FindSnapshot(*snapshot.parent_snapshot_id) == nullptr) {
    Fail("snapshot " + id + " has unknown parent " +
         std::to_string(*snapshot.parent_snapshot_id));
    return *this;
  }
  if (!snapshot.schema_id.has_value()) {
    Fail("snapshot " + id + " has no schema id");
    return *this;
  }
  if (m.FindSchema(*snapshot.schema_id) == nullptr) {
    Fail("snapshot " + id + " has unknown schema id " +
         std::to_string(*snapshot.schema_id));
    return *this;
  }
  if (snapshot.operation.empty()) {
    Fail("snapshot " + id + " has no operation");
    return *this;
  }
  const int64_t last_update = last_updated_ms_.value_or(m.last_updated_ms);
  if (snapshot.timestamp_ms < last_update - kClockSkewToleranceMs) {
    Fail("snapshot " + id + " timestamp " + std::to_string(snapshot.timestamp_ms) +
         " is more than a minute before the table's last update at " +
         std::to_string(last_update));
    return *this;
  }
  if (!m.snapshot_log.empty() &&
      snapshot.timestamp_ms <
          m.snapshot_log.back().timestamp_ms - kClockSkewToleranceMs) {
    Fail("snapshot " + id + " timestamp " + std::to_string(snapshot.timestamp_ms) +
         " is more than a minute before the last snapshot-log entry at " +
         std::to_string(m.snapshot_log.back().timestamp_ms));
    return *this;
  }
  m.last_sequence_number = snapshot.sequence_number;
  last_updated_ms_ = snapshot.timestamp_ms;
  m.snapshots.push_back(std::move(snapshot));
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::SetBranchSnapshot(std::string_view branch,
                                                              int64_t snapshot_id) {
  TableMetadata& m = metadata_;
  if (branch.empty()) {
    Fail("branch name is empty");
    return *this;
  }
  if (m.FindSnapshot(snapshot_id) == nullptr) {
    Fail("cannot point branch '" + std::string(branch) + "' at unknown snapshot " +
         std::to_string(snapshot_id));
    return *this;
  }
  auto it = m.refs.find(std::string(branch));
  if (it != m.refs.end()) {
    if (it->second.type != SnapshotRefType::kBranch) {
      Fail("'" + std::string(branch) + "' is a tag, not a branch");
      return *this;
    }
    if (it->second.snapshot_id == snapshot_id) return *this;  // nothing to log
    it->second.snapshot_id = snapshot_id;
  } else {
    m.refs.emplace(std::string(branch), SnapshotRef{snapshot_id});
  }
  if (branch == kMainBranch) {
    m.current_snapshot_id = snapshot_id;
    // As Java: the log entry carries the added snapshot's timestamp, or now when an
    // existing snapshot becomes current (a rollback).
    if (!last_updated_ms_.has_value()) last_updated_ms_ = CurrentTimeMs();
    m.snapshot_log.push_back(SnapshotLogEntry{*last_updated_ms_, snapshot_id});
  }
  return *this;
}

TableMetadataBuilder& TableMetadataBuilder::RemoveSnapshots(
    const std::vector<int64_t>& snapshot_ids) {
  TableMetadata& m = metadata_;
  const std::set<int64_t> removed(snapshot_ids.begin(), snapshot_ids.end());
  std::erase_if(m.snapshots,
                [&](const Snapshot& s) { return removed.contains(s.snapshot_id); });
  for (auto it = m.refs.begin(); it != m.refs.end();) {
    if (removed.contains(it->second.snapshot_id)) {
      if (it->first == kMainBranch) m.current_snapshot_id.reset();
      it = m.refs.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<SnapshotLogEntry> log;
  for (const SnapshotLogEntry& e : m.snapshot_log) {
    if (m.FindSnapshot(e.snapshot_id) != nullptr) {
      log.push_back(e);
    } else {
      log.clear();
    }
  }
  m.snapshot_log = std::move(log);
  for (const char* key : {"statistics", "partition-statistics"}) {
    auto it = m.raw_json.find(key);
    if (it == m.raw_json.end()) continue;
    json stats = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!stats.is_array()) continue;
    json kept = json::array();
    for (const json& entry : stats) {
      auto id = entry.is_object() ? entry.find("snapshot-id") : entry.end();
      if (id != entry.end() && id->is_number_integer() &&
          removed.contains(id->get<int64_t>())) {
        continue;
      }
      kept.push_back(entry);
    }
    it->second = kept.dump();
  }
  return *this;
}

arrow::Result<TableMetadata> TableMetadataBuilder::Build(
    std::string_view previous_metadata_location) {
  if (is_new_table_ && !previous_metadata_location.empty()) {
    Fail("a new table has no previous metadata file");
  }
  TableMetadata m = metadata_;
  m.last_updated_ms = last_updated_ms_.value_or(CurrentTimeMs());
  if (!is_new_table_ && !previous_metadata_location.empty()) {
    m.metadata_log.push_back(
        MetadataLogEntry{base_last_updated_ms_, std::string(previous_metadata_location)});
  }
  int32_t max_entries = kMetadataPreviousVersionsMaxDefault;
  if (auto it = m.properties.find(kMetadataPreviousVersionsMax);
      it != m.properties.end()) {
    const std::string& text = it->second;
    if (std::optional<int32_t> n = ParseInt32(text)) {
      max_entries = std::max(*n, 1);
    } else {
      Fail(std::string(kMetadataPreviousVersionsMax) + " must be an integer, got '" +
           text + "'");
    }
  }
  if (m.metadata_log.size() > static_cast<size_t>(max_entries)) {
    m.metadata_log.erase(m.metadata_log.begin(),
                         m.metadata_log.end() - static_cast<ptrdiff_t>(max_entries));
  }
  if (!errors_.empty()) {
    std::string message = "invalid table metadata change";
    message += errors_.size() > 1 ? "s: " : ": ";
    for (size_t i = 0; i < errors_.size(); ++i) {
      message += (i ? "; " : "") + errors_[i];
    }
    return arrow::Status::Invalid(message);
  }
  ARROW_RETURN_NOT_OK(m.Validate());
  return m;
}

}  // namespace floe::iceberg
