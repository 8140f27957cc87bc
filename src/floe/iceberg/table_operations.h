// Table maintenance that removes files: expiring old snapshots (and deleting the
// files only they reached) and removing orphan files that no metadata references.
// Both delete a file only when no remaining snapshot or metadata file can read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <set>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/table.h"

namespace floe::iceberg {

struct ExpireSnapshotsOptions {
  /// Snapshots with a timestamp before this (ms since the epoch) may be expired.
  int64_t older_than_ms = 0;
  /// Of every branch's history, at least this many newest snapshots are kept
  /// whatever their age (at least 1: a branch's head is never expired).
  int32_t retain_last = 1;
  /// For each of these snapshot-summary keys, the newest snapshot of every branch's
  /// history that carries it is kept whatever its age (e.g. `floe.commit-lsn`, the
  /// position a restarted writer resumes from, read from the ancestry).
  std::vector<std::string> retain_summary_keys;
  /// These snapshots are kept whatever their age.
  std::set<int64_t> retain_snapshot_ids;
  /// Delete the files no remaining snapshot reaches.
  bool delete_files = true;
  CommitOptions commit;
};

struct ExpireSnapshotsResult {
  std::vector<int64_t> expired_snapshot_ids;
  std::vector<std::string> deleted_manifest_lists;
  std::vector<std::string> deleted_manifests;
  std::vector<std::string> deleted_data_files;
  std::vector<std::string> deleted_delete_files;
};

/// Removes from the table's metadata every snapshot that is older than
/// `older_than_ms`, is not the head of a branch or tag and is not among the newest
/// `retain_last` of a branch's history; commits that; then deletes the manifest
/// lists, manifests, data and delete files that only the expired snapshots
/// reached. Reachability is computed by reading every remaining snapshot's
/// manifests: a file live in any of them is never deleted.
arrow::Result<ExpireSnapshotsResult> ExpireSnapshots(
    Table& table, const ExpireSnapshotsOptions& options);

/// Orphans are kept this long by default: a writer may be between writing a file and
/// committing it.
inline constexpr int64_t kDefaultOrphanAgeMs = int64_t{3} * 24 * 3600 * 1000;

struct RemoveOrphanFilesOptions {
  /// Only files last modified before this are removed (default: 3 days ago).
  std::optional<int64_t> older_than_ms;
  /// Report without deleting.
  bool dry_run = false;
  /// Files under these locations are never removed (other tables whose location
  /// lies under this table's).
  std::vector<std::string> skip_prefixes;
  /// Files never removed whatever their location: what other tables reference
  /// (ReferencedFiles), for a table whose location lies inside another's, where
  /// that table's metadata and data directories may be this one's.
  std::set<std::string> keep;
  /// Snapshot summary properties whose value is a file of the table's (an engine's
  /// own side file): the files retained snapshots name are referenced.
  std::vector<std::string> file_summary_keys;
};

/// Every file `table`'s metadata references: its metadata files (current and in the
/// log), statistics files, every snapshot's manifest list, manifests, data and
/// delete files, and the files its snapshots' summaries name under
/// `file_summary_keys`. Locations without a `file:` scheme prefix.
arrow::Result<std::set<std::string>> ReferencedFiles(
    Table& table, const std::vector<std::string>& file_summary_keys = {});

/// Lists every file under the table's location and deletes those that are older
/// than the cutoff and referenced by nothing: not the current metadata file or one
/// in its metadata-log, not a snapshot's manifest list, manifest, data or delete
/// file, not a statistics file. Returns the locations removed.
arrow::Result<std::vector<std::string>> RemoveOrphanFiles(
    Table& table, const RemoveOrphanFilesOptions& options = {});

}  // namespace floe::iceberg
