#include "floe/iceberg/manifest_merge.h"

#include <algorithm>
#include <set>
#include <utility>

#include "floe/common/parse.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_internal.h"

namespace floe::iceberg::table_internal {
namespace {

arrow::Result<int64_t> IntegerProperty(const TableMetadata& metadata, const char* key,
                                       int64_t fallback, int64_t min_value) {
  auto it = metadata.properties.find(key);
  if (it == metadata.properties.end()) return fallback;
  const std::string& text = it->second;
  const std::optional<int64_t> value = ParseInt64(text);
  if (!value || *value < min_value) {
    return arrow::Status::Invalid("table property ", key, "='", text,
                                  "' is not an integer >= ", min_value);
  }
  return *value;
}

}  // namespace

arrow::Result<ManifestMergeSettings> MergeSettingsOf(const TableMetadata& metadata) {
  ManifestMergeSettings settings;
  if (auto it = metadata.properties.find(kManifestMergeEnabledProperty);
      it != metadata.properties.end()) {
    // As Java's Boolean.parseBoolean: "true" in any case, anything else is false.
    std::string lower = it->second;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    settings.enabled = lower == "true";
  }
  ARROW_ASSIGN_OR_RAISE(settings.min_count,
                        IntegerProperty(metadata, kManifestMinMergeCountProperty,
                                        kDefaultManifestMinMergeCount, 0));
  ARROW_ASSIGN_OR_RAISE(settings.target_size_bytes,
                        IntegerProperty(metadata, kManifestTargetSizeProperty,
                                        kDefaultManifestTargetSizeBytes, 1));
  return settings;
}

std::vector<std::vector<const ManifestFile*>> PackFromOldest(
    const std::vector<const ManifestFile*>& group, int64_t target) {
  std::vector<std::vector<const ManifestFile*>> bins;
  int64_t weight = 0;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    const int64_t length = (*it)->manifest_length;
    if (bins.empty() || weight + length > target) {
      bins.emplace_back();
      weight = 0;
    }
    bins.back().push_back(*it);
    weight += length;
  }
  for (auto& bin : bins) std::reverse(bin.begin(), bin.end());
  std::reverse(bins.begin(), bins.end());
  return bins;
}

ManifestMerger::ManifestMerger(FileIO& io, int64_t snapshot_id,
                               std::function<std::string()> new_location,
                               std::function<void(const std::string&)> wrote)
    : io_(io),
      snapshot_id_(snapshot_id),
      new_location_(std::move(new_location)),
      wrote_(std::move(wrote)) {}

arrow::Result<std::optional<ManifestFile>> ManifestMerger::MergeBin(
    const TableMetadata& lookup, const std::vector<const ManifestFile*>& bin) {
  std::vector<std::string> key;
  for (const ManifestFile* manifest : bin) key.push_back(manifest->manifest_path);
  if (auto it = merged_.find(key); it != merged_.end()) return it->second;
  const ManifestFile& first = *bin.front();
  ARROW_ASSIGN_OR_RAISE(TypePtr type, PartitionTypeOf(lookup, first.partition_spec_id));
  std::vector<ManifestEntry> entries;
  for (const ManifestFile* manifest : bin) {
    std::vector<ManifestEntry> read;
    if (manifest->added_snapshot_id == snapshot_id_) {
      // Written by this commit: its added entries keep inheriting, now from the
      // merged manifest, which belongs to the same snapshot.
      ARROW_ASSIGN_OR_RAISE(read, ReadManifest(io_, manifest->manifest_path, *type));
    } else {
      // Inheritance applied: the merged manifest states every entry's snapshot id
      // and sequence numbers explicitly.
      ARROW_ASSIGN_OR_RAISE(read, ReadManifest(io_, *manifest, *type));
    }
    for (auto& entry : read) {
      const bool ours = !entry.snapshot_id || *entry.snapshot_id == snapshot_id_;
      if (entry.status == ManifestEntryStatus::kDeleted) {
        if (!ours) continue;  // deletions of earlier snapshots are not carried over
      } else if (entry.status != ManifestEntryStatus::kAdded || !ours) {
        entry.status = ManifestEntryStatus::kExisting;
      }
      entries.push_back(std::move(entry));
    }
  }
  std::optional<ManifestFile> result;
  if (!entries.empty()) {
    ARROW_ASSIGN_OR_RAISE(
        auto manifest_options,
        ManifestOptionsFor(lookup, first.partition_spec_id, first.content, snapshot_id_));
    const std::string location = new_location_();
    ARROW_ASSIGN_OR_RAISE(result,
                          WriteManifest(io_, location, manifest_options, entries));
    wrote_(location);
  }
  merged_.emplace(std::move(key), result);
  return result;
}

arrow::Result<std::vector<ManifestFile>> ManifestMerger::Merge(
    const ManifestMergeSettings& settings, const TableMetadata& lookup,
    const std::vector<ManifestFile>& manifests) {
  if (!settings.enabled) return manifests;
  std::map<std::pair<ManifestContent, int32_t>, std::vector<const ManifestFile*>> groups;
  for (const ManifestFile& manifest : manifests) {
    groups[{manifest.content, manifest.partition_spec_id}].push_back(&manifest);
  }
  // Merge results by the position of their bin's newest manifest; the bins' other
  // manifests are dropped.
  std::map<const ManifestFile*, std::optional<ManifestFile>> replaced;
  std::set<const ManifestFile*> dropped;
  for (const auto& [key, group] : groups) {
    for (const auto& bin : PackFromOldest(group, settings.target_size_bytes)) {
      // The bin of the newest manifest waits for min-count-to-merge manifests, so
      // that small commits do not rewrite it every time.
      const bool newest = bin.front() == group.front();
      if (bin.size() == 1 ||
          (newest && static_cast<int64_t>(bin.size()) < settings.min_count)) {
        continue;
      }
      ARROW_ASSIGN_OR_RAISE(replaced[bin.front()], MergeBin(lookup, bin));
      dropped.insert(bin.begin() + 1, bin.end());
    }
  }
  std::vector<ManifestFile> out;
  for (const ManifestFile& manifest : manifests) {
    if (auto it = replaced.find(&manifest); it != replaced.end()) {
      if (it->second) out.push_back(*it->second);
    } else if (!dropped.contains(&manifest)) {
      out.push_back(manifest);
    }
  }
  return out;
}

}  // namespace floe::iceberg::table_internal
