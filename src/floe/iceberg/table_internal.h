// Shared by table.cc (the snapshot-producing operations), snapshot_producer.cc (the
// commit path they share), manifest_merge.cc and commit_retry.cc; not part of the
// module's interface.

#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/manifest.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::iceberg {
namespace table_internal {

/// Identifies a partition across specs: the spec id, then each value printed.
using PartitionKey = std::vector<std::string>;

PartitionKey MakePartitionKey(int32_t spec_id, const PartitionTuple& partition);

inline bool IsDeleteFile(const DataFile& file) {
  return file.content != DataFileContent::kData;
}

inline bool IsLive(const ManifestEntry& entry) {
  return entry.status != ManifestEntryStatus::kDeleted;
}

/// What the snapshots committed after the validation snapshot changed.
struct ConcurrentChanges {
  std::vector<LiveFile> added_data;
  std::vector<LiveFile> removed_data;
  std::vector<LiveFile> added_deletes;
  std::vector<LiveFile> removed_deletes;
};

/// The changes of the snapshots from the current one back to, not including, `from`
/// (every ancestor when `from` is unset). Fails validation when `from` is no longer
/// an ancestor of the current snapshot.
arrow::Result<ConcurrentChanges> ChangesSince(FileIO& io, const TableMetadata& metadata,
                                              std::optional<int64_t> from);

/// How a manifest of `spec_id` and `content` written by snapshot `snapshot_id` is
/// described in its header.
arrow::Result<ManifestWriteOptions> ManifestOptionsFor(const TableMetadata& metadata,
                                                       int32_t spec_id,
                                                       ManifestContent content,
                                                       int64_t snapshot_id);

/// What one attempt to swap a table's metadata in the catalog came to.
enum class CommitOutcome {
  kCommitted,
  /// Definitely not committed (another writer won): retry on fresh metadata.
  kConflict,
  /// The catalog may or may not have committed it: look for it before retrying.
  kUnknown,
};

/// Hooks of one commit, for RetryCommit.
struct CommitAttempts {
  /// For messages: "append on db.t", "metadata update of db.t", ...
  std::string what;
  /// Reloads the table; called before every attempt but the first.
  std::function<arrow::Status()> refresh;
  /// After a refresh that follows an unknown outcome: whether the commit is in the
  /// table after all (true ends the loop as committed).
  std::function<arrow::Result<bool>()> landed;
  /// After a refresh that did not find this commit landed: CommitOptions::validate
  /// with the refreshed table (unset: nothing to check).
  std::function<arrow::Status()> validate;
  /// One attempt; sets `*catalog_error` to the catalog's answer when it asked one.
  std::function<arrow::Result<CommitOutcome>(int attempt, arrow::Status* catalog_error)>
      attempt;
};

/// The one retry loop of every commit: runs `hooks.attempt` up to
/// `options.max_attempts` times with backoff, retrying conflicts and unknown outcomes.
/// Once an attempt's outcome was unknown, every refresh looks for it in the table:
/// its request may land later, after other attempts met a conflict. An attempt's
/// error, or `hooks.validate`'s, ends the loop. `*outcome_unknown` says, when it
/// fails, whether an attempt whose outcome is unknown may still commit (its files
/// must then stay).
arrow::Status RetryCommit(const CommitOptions& options, const CommitAttempts& hooks,
                          bool* outcome_unknown);

}  // namespace table_internal

/// What one snapshot-producing operation changes; CommitSnapshot turns it into a
/// snapshot on top of whatever the table holds when the commit is attempted.
struct Table::PendingSnapshot {
  /// `append`, `overwrite`, `delete` or `replace`.
  std::string operation;
  /// For messages: "append", "row delta", ...
  std::string what;
  /// New data and delete files, of the default spec unless `add_file_specs` names
  /// another for one (by path).
  std::vector<DataFile> add_files;
  std::map<std::string, int32_t> add_file_specs;
  /// Files to remove; each must be live in the snapshot the commit lands on.
  std::set<std::string> remove_paths;
  /// Partitions whose every live file is removed.
  std::set<table_internal::PartitionKey> remove_partitions;
  /// Concurrent commits after this snapshot (after nothing: the table was empty)
  /// are passed to `validate`, before every attempt that does not land directly on
  /// it.
  std::optional<int64_t> validate_from;
  std::function<arrow::Status(const table_internal::ConcurrentChanges&)> validate;
  /// Summary keys copied from the parent's ancestry unless the caller's summary
  /// sets them (RewriteFilesRequest::inherit_summary_keys).
  std::vector<std::string> inherit_summary_keys;
  /// A spec added and made the default by the same commit; `add_files` are of it.
  std::optional<PartitionSpec> new_spec;
};

}  // namespace floe::iceberg
