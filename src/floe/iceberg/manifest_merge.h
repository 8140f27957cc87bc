// Manifest merging on commit, as Java's MergingSnapshotProducer does it
// (`commit.manifest-merge.enabled`, `commit.manifest.min-count-to-merge`,
// `commit.manifest.target-size-bytes`). Internal to the iceberg module: used by the
// commit path in snapshot_producer.cc.

#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::iceberg::table_internal {

struct ManifestMergeSettings {
  bool enabled = true;
  int64_t min_count = kDefaultManifestMinMergeCount;
  int64_t target_size_bytes = kDefaultManifestTargetSizeBytes;
};

/// The table's merge settings (defaults where unset); an error names a bad property.
arrow::Result<ManifestMergeSettings> MergeSettingsOf(const TableMetadata& metadata);

/// Splits `group` (manifests in manifest-list order, newest first) into bins of
/// consecutive manifests of at most `target` bytes, filled from the oldest end, so
/// that the newest manifests share the last, possibly partial, bin. A manifest larger
/// than the target gets a bin of its own. Bins come back in list order.
std::vector<std::vector<const ManifestFile*>> PackFromOldest(
    const std::vector<const ManifestFile*>& group, int64_t target);

/// Merges the manifest list of one commit's attempts. Merged manifests are cached by
/// their inputs, so an attempt on an unchanged base reuses what an earlier one wrote.
class ManifestMerger {
 public:
  /// `new_location` names each manifest the merger writes, and is told when it was
  /// written (for clean-up when the commit does not land).
  ManifestMerger(FileIO& io, int64_t snapshot_id,
                 std::function<std::string()> new_location,
                 std::function<void(const std::string&)> wrote);

  /// The manifest list after merging. Groups are by content and spec; a merged
  /// manifest takes the place of its bin's newest manifest, and everything else keeps
  /// its position. Partition types are looked up in `lookup`.
  arrow::Result<std::vector<ManifestFile>> Merge(
      const ManifestMergeSettings& settings, const TableMetadata& lookup,
      const std::vector<ManifestFile>& manifests);

 private:
  arrow::Result<std::optional<ManifestFile>> MergeBin(
      const TableMetadata& lookup, const std::vector<const ManifestFile*>& bin);

  FileIO& io_;
  int64_t snapshot_id_;
  std::function<std::string()> new_location_;
  std::function<void(const std::string&)> wrote_;
  std::map<std::vector<std::string>, std::optional<ManifestFile>> merged_;
};

}  // namespace floe::iceberg::table_internal
