#include "floe/lake/metadata.h"

#include <set>

#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/lake/keys.h"

namespace floe::lake {

Lsn CommittedLsnOf(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    auto it = snapshot->summary.find(kCommitLsnSummaryKey);
    if (it != snapshot->summary.end()) {
      if (auto value = ParseUint64(it->second)) return Lsn(*value);
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return Lsn();
}

const iceberg::Snapshot* LatestBackfillRecord(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  std::set<int64_t> seen;  // guards against a (corrupt) cycle
  while (snapshot != nullptr && seen.insert(snapshot->snapshot_id).second) {
    if (snapshot->summary.contains(kBackfillSummaryKey)) return snapshot;
    if (snapshot->summary.contains(kSnapshotLsnSummaryKey)) return nullptr;
    if (!snapshot->parent_snapshot_id) return nullptr;
    const iceberg::Snapshot* parent =
        metadata.FindSnapshot(*snapshot->parent_snapshot_id);
    if (parent == nullptr) {
      // Expired: the newest snapshot older than this one.
      for (const iceberg::Snapshot& s : metadata.snapshots) {
        if (s.sequence_number < snapshot->sequence_number &&
            (parent == nullptr || s.sequence_number > parent->sequence_number)) {
          parent = &s;
        }
      }
    }
    snapshot = parent;
  }
  return nullptr;
}

bool BackfillUnfinished(const iceberg::Snapshot& snapshot) {
  auto it = snapshot.summary.find(kBackfillSummaryKey);
  if (it == snapshot.summary.end()) return false;
  auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("done") || !j["done"].is_boolean()) return true;
  return !j["done"].get<bool>();
}

std::vector<std::string> NamesProperty(const iceberg::TableMetadata& metadata,
                                       const char* key) {
  std::vector<std::string> out;
  auto it = metadata.properties.find(key);
  if (it == metadata.properties.end()) return out;
  const auto parsed =
      nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return out;
  for (const auto& v : parsed) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

uint64_t SilverWatermark(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    auto it = snapshot->summary.find(kWatermarkSummaryKey);
    if (it != snapshot->summary.end()) {
      if (auto value = ParseUint64(it->second)) return *value;
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return 0;
}

const iceberg::Snapshot* LastMergeSnapshot(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    // A compaction (replace) carries the watermark forward but merges nothing.
    if (snapshot->operation != "replace" &&
        snapshot->summary.contains(kWatermarkSummaryKey)) {
      return snapshot;
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return nullptr;
}

}  // namespace floe::lake
