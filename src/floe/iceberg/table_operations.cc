#include "floe/iceberg/table_operations.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace floe::iceberg {
namespace {

// Locations compared across writers: `file:///p`, `file:/p` and `/p` are one file.
std::string Normalize(std::string_view location) {
  if (location.starts_with("file://"))
    location.remove_prefix(7);
  else if (location.starts_with("file:"))
    location.remove_prefix(5);
  return std::string(location);
}

// Every file the manifests of `snapshots` reach.
struct Reachable {
  std::set<std::string> manifest_lists;
  std::set<std::string> manifests;
  /// Files with a live (added or existing) entry.
  std::set<std::string> live_files;
  /// Files with any entry, deleted ones included.
  std::set<std::string> all_files;
};

arrow::Status CollectReachable(FileIO& io, const TableMetadata& metadata,
                               const std::vector<Snapshot>& snapshots, Reachable* out) {
  for (const Snapshot& snap : snapshots) {
    if (!out->manifest_lists.insert(Normalize(snap.manifest_list)).second) continue;
    ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(io, snap.manifest_list));
    for (const ManifestFile& manifest : manifests) {
      if (!out->manifests.insert(Normalize(manifest.manifest_path)).second) continue;
      ARROW_ASSIGN_OR_RAISE(TypePtr type,
                            PartitionTypeOf(metadata, manifest.partition_spec_id));
      ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(io, manifest, *type));
      for (const auto& entry : entries) {
        const std::string path = Normalize(entry.data_file.file_path);
        out->all_files.insert(path);
        if (entry.status != ManifestEntryStatus::kDeleted) out->live_files.insert(path);
      }
    }
  }
  return arrow::Status::OK();
}

std::vector<int64_t> SnapshotsToExpire(const TableMetadata& metadata,
                                       const ExpireSnapshotsOptions& options) {
  std::set<int64_t> keep = options.retain_snapshot_ids;
  const size_t retain = static_cast<size_t>(std::max<int32_t>(1, options.retain_last));
  for (const auto& [name, ref] : metadata.refs) {
    keep.insert(ref.snapshot_id);
    if (ref.type != SnapshotRefType::kBranch) continue;
    auto ancestry = metadata.SnapshotsAncestryOf(ref.snapshot_id);
    for (size_t i = 0; i < ancestry.size() && i < retain; ++i) {
      keep.insert(ancestry[i]->snapshot_id);
    }
    for (const auto& key : options.retain_summary_keys) {
      for (const Snapshot* snap : ancestry) {
        if (snap->summary.contains(key)) {
          keep.insert(snap->snapshot_id);
          break;
        }
      }
    }
  }
  std::vector<int64_t> expired;
  for (const Snapshot& snap : metadata.snapshots) {
    if (keep.contains(snap.snapshot_id)) continue;
    if (snap.timestamp_ms >= options.older_than_ms) continue;
    expired.push_back(snap.snapshot_id);
  }
  return expired;
}

}  // namespace

arrow::Result<ExpireSnapshotsResult> ExpireSnapshots(
    Table& table, const ExpireSnapshotsOptions& options) {
  ExpireSnapshotsResult result;
  ARROW_RETURN_NOT_OK(table.Refresh());
  if (SnapshotsToExpire(table.metadata(), options).empty()) return result;

  std::vector<Snapshot> expired;
  ARROW_RETURN_NOT_OK(table.UpdateMetadata(
      [&](const TableMetadata& base, TableMetadataBuilder* builder) {
        std::vector<int64_t> ids = SnapshotsToExpire(base, options);
        expired.clear();
        for (int64_t id : ids) expired.push_back(*base.FindSnapshot(id));
        builder->RemoveSnapshots(ids);
        return arrow::Status::OK();
      },
      options.commit));
  for (const auto& snap : expired)
    result.expired_snapshot_ids.push_back(snap.snapshot_id);
  if (!options.delete_files || expired.empty()) return result;

  // What the remaining snapshots reach is kept; of what the expired ones reached,
  // the rest goes.
  FileIO& io = table.io();
  const TableMetadata& metadata = table.metadata();
  Reachable kept, gone;
  ARROW_RETURN_NOT_OK(CollectReachable(io, metadata, metadata.snapshots, &kept));
  for (const Snapshot& snap : expired) {
    const std::string list = Normalize(snap.manifest_list);
    if (kept.manifest_lists.contains(list) || gone.manifest_lists.contains(list))
      continue;
    gone.manifest_lists.insert(list);
    ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(io, snap.manifest_list));
    for (const ManifestFile& manifest : manifests) {
      const std::string path = Normalize(manifest.manifest_path);
      if (kept.manifests.contains(path) || !gone.manifests.insert(path).second) continue;
      ARROW_ASSIGN_OR_RAISE(TypePtr type,
                            PartitionTypeOf(metadata, manifest.partition_spec_id));
      ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(io, manifest, *type));
      for (const auto& entry : entries) {
        const std::string file = Normalize(entry.data_file.file_path);
        if (kept.live_files.contains(file) || !gone.all_files.insert(file).second) {
          continue;
        }
        ARROW_RETURN_NOT_OK(io.Delete(entry.data_file.file_path));
        (entry.data_file.content == DataFileContent::kData ? result.deleted_data_files
                                                           : result.deleted_delete_files)
            .push_back(entry.data_file.file_path);
      }
      ARROW_RETURN_NOT_OK(io.Delete(manifest.manifest_path));
      result.deleted_manifests.push_back(manifest.manifest_path);
    }
    ARROW_RETURN_NOT_OK(io.Delete(snap.manifest_list));
    result.deleted_manifest_lists.push_back(snap.manifest_list);
  }
  return result;
}

arrow::Result<std::set<std::string>> ReferencedFiles(
    Table& table, const std::vector<std::string>& file_summary_keys) {
  FileIO& io = table.io();
  const TableMetadata& metadata = table.metadata();

  std::set<std::string> referenced{Normalize(table.metadata_location())};
  for (const auto& entry : metadata.metadata_log) {
    referenced.insert(Normalize(entry.metadata_file));
  }
  for (const char* key : {"statistics", "partition-statistics"}) {
    auto it = metadata.raw_json.find(key);
    if (it == metadata.raw_json.end()) continue;
    auto stats = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!stats.is_array()) continue;
    for (const auto& s : stats) {
      if (s.is_object() && s.contains("statistics-path") &&
          s["statistics-path"].is_string()) {
        referenced.insert(Normalize(s["statistics-path"].get<std::string>()));
      }
    }
  }
  for (const Snapshot& snapshot : metadata.snapshots) {
    for (const std::string& key : file_summary_keys) {
      auto it = snapshot.summary.find(key);
      if (it != snapshot.summary.end()) referenced.insert(Normalize(it->second));
    }
  }
  Reachable reachable;
  ARROW_RETURN_NOT_OK(CollectReachable(io, metadata, metadata.snapshots, &reachable));
  referenced.insert(reachable.manifest_lists.begin(), reachable.manifest_lists.end());
  referenced.insert(reachable.manifests.begin(), reachable.manifests.end());
  referenced.insert(reachable.all_files.begin(), reachable.all_files.end());

  return referenced;
}

arrow::Result<std::vector<std::string>> RemoveOrphanFiles(
    Table& table, const RemoveOrphanFilesOptions& options) {
  const int64_t cutoff =
      options.older_than_ms.value_or(CurrentTimeMs() - kDefaultOrphanAgeMs);
  // Listed before the metadata is read: a file written after the listing is not
  // considered, and one listed before is referenced by metadata read after it if it
  // was committed.
  FileIO& io = table.io();
  // A location with a `.` or `..` segment aliases another directory (a table named
  // `.` once got its schema's directory): its listing holds other tables' files.
  {
    const std::string location = Normalize(table.metadata().location);
    size_t start = location.find("://");
    start = start == std::string::npos ? 0 : start + 3;
    std::string_view rest(location);
    rest.remove_prefix(start);
    while (!rest.empty()) {
      const size_t slash = rest.find('/');
      const std::string_view segment = rest.substr(0, slash);
      if (segment == "." || segment == "..") {
        return arrow::Status::Invalid(
            "table ", table.identifier().ToString(), " has the location ", location,
            ", whose `", segment,
            "` segment names another directory than the table's own; floe removes "
            "no orphan files there, as they may belong to other tables. Files the "
            "table references are safe; remove others by hand");
      }
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto listing, io.List(table.metadata().location));
  ARROW_RETURN_NOT_OK(table.Refresh());
  ARROW_ASSIGN_OR_RAISE(std::set<std::string> referenced,
                        ReferencedFiles(table, options.file_summary_keys));
  for (const auto& f : options.keep) referenced.insert(Normalize(f));

  std::vector<std::string> skip;
  for (const auto& prefix : options.skip_prefixes) {
    std::string p = Normalize(prefix);
    while (!p.empty() && p.back() == '/') p.pop_back();
    skip.push_back(p + "/");
  }
  std::vector<std::string> removed;
  for (const FileEntry& file : listing) {
    const std::string path = Normalize(file.location);
    if (referenced.contains(path) || file.modified_ms >= cutoff) continue;
    if (std::any_of(skip.begin(), skip.end(),
                    [&](const std::string& p) { return path.starts_with(p); })) {
      continue;
    }
    if (path.ends_with("/version-hint.text")) continue;  // Hadoop-table pointer
    if (!options.dry_run) ARROW_RETURN_NOT_OK(io.Delete(file.location));
    removed.push_back(file.location);
  }
  return removed;
}

}  // namespace floe::iceberg
