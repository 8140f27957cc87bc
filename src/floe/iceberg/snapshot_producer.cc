// The commit path every snapshot-producing operation of Table shares: new manifests
// written once, base manifests rewritten where files are removed, manifests merged,
// the summary Java's SnapshotSummary keeps, and the attempt retried on fresh
// metadata (validated against what was committed concurrently) until it lands.

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "floe/common/parse.h"
#include "floe/iceberg/manifest_merge.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_internal.h"

namespace floe::iceberg {

using table_internal::CommitOutcome;
using table_internal::IsDeleteFile;
using table_internal::IsLive;
using table_internal::MakePartitionKey;
using table_internal::PartitionKey;

namespace table_internal {

arrow::Result<ConcurrentChanges> ChangesSince(FileIO& io, const TableMetadata& metadata,
                                              std::optional<int64_t> from) {
  ConcurrentChanges changes;
  if (!metadata.current_snapshot_id) {
    if (from) {
      return ValidationFailure("snapshot " + std::to_string(*from) +
                               " is no longer the table's history (main was reset)");
    }
    return changes;
  }
  bool found = !from.has_value();
  for (const Snapshot* snap :
       metadata.SnapshotsAncestryOf(*metadata.current_snapshot_id)) {
    if (from && snap->snapshot_id == *from) {
      found = true;
      break;
    }
    ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(io, snap->manifest_list));
    for (const ManifestFile& manifest : manifests) {
      if (manifest.added_snapshot_id != snap->snapshot_id) continue;
      ARROW_ASSIGN_OR_RAISE(TypePtr type,
                            PartitionTypeOf(metadata, manifest.partition_spec_id));
      ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(io, manifest, *type));
      for (auto& entry : entries) {
        if (entry.snapshot_id != snap->snapshot_id) continue;
        if (entry.status == ManifestEntryStatus::kExisting) continue;
        const bool deletes = IsDeleteFile(entry.data_file);
        const bool added = entry.status == ManifestEntryStatus::kAdded;
        auto& into = deletes ? (added ? changes.added_deletes : changes.removed_deletes)
                             : (added ? changes.added_data : changes.removed_data);
        into.push_back(LiveFile{std::move(entry), manifest.partition_spec_id});
      }
    }
  }
  if (!found) {
    return ValidationFailure("snapshot " + std::to_string(*from) +
                             " is not an ancestor of the current snapshot " +
                             std::to_string(*metadata.current_snapshot_id) +
                             " (expired, or main was rolled back)");
  }
  return changes;
}

arrow::Result<ManifestWriteOptions> ManifestOptionsFor(const TableMetadata& metadata,
                                                       int32_t spec_id,
                                                       ManifestContent content,
                                                       int64_t snapshot_id) {
  const PartitionSpec* spec = metadata.FindSpec(spec_id);
  if (spec == nullptr) return arrow::Status::Invalid("unknown partition spec ", spec_id);
  ManifestWriteOptions options;
  options.schema_json = SchemaToJson(*metadata.CurrentSchema()).dump();
  options.partition_spec_json = PartitionSpecToJson(*spec)["fields"].dump();
  options.partition_spec_id = spec_id;
  ARROW_ASSIGN_OR_RAISE(options.partition_type, PartitionTypeOf(metadata, spec_id));
  options.content = content;
  options.snapshot_id = snapshot_id;
  return options;
}

}  // namespace table_internal

namespace {

int64_t NewSnapshotId(const TableMetadata& metadata) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  while (true) {
    const int64_t id = static_cast<int64_t>(rng() & 0x7fffffffffffffffULL);
    if (id != 0 && metadata.FindSnapshot(id) == nullptr) return id;
  }
}

int64_t SummaryNumber(const Snapshot* snapshot, const std::string& key) {
  if (snapshot == nullptr) return 0;
  auto it = snapshot->summary.find(key);
  if (it == snapshot->summary.end()) return 0;
  return ParseInt64(it->second).value_or(0);
}

// Running totals for the snapshot summary, kept as Java's SnapshotSummary does.
struct SummaryCounts {
  int64_t data_files = 0, delete_files = 0, position_delete_files = 0,
          equality_delete_files = 0, records = 0, files_size = 0, position_deletes = 0,
          equality_deletes = 0;

  void Add(const DataFile& file) {
    files_size += file.file_size_in_bytes;
    switch (file.content) {
      case DataFileContent::kData:
        ++data_files;
        records += file.record_count;
        break;
      case DataFileContent::kPositionDeletes:
        ++delete_files;
        ++position_delete_files;
        position_deletes += file.record_count;
        break;
      case DataFileContent::kEqualityDeletes:
        ++delete_files;
        ++equality_delete_files;
        equality_deletes += file.record_count;
        break;
    }
  }
};

// A manifest of the base snapshot as this commit needs it: kept as it is, or
// rewritten with the removed entries DELETED.
struct ManifestRewrite {
  std::optional<ManifestFile> rewritten;
  std::vector<LiveFile> removed;
};

// What one attempt's manifest list holds besides the new manifests.
struct BaseManifests {
  std::vector<ManifestFile> manifests;
  SummaryCounts removed;
  std::set<PartitionKey> partitions;
  std::set<std::string> removed_paths;
};

}  // namespace

class Table::SnapshotProducer {
 public:
  SnapshotProducer(Table& table, const PendingSnapshot& pending,
                   const SummaryProperties& summary);

  // Commits the pending snapshot, retrying as `options` allow; deletes every
  // manifest it wrote that the table does not end up listing.
  arrow::Result<Snapshot> Commit(const CommitOptions& options);

 private:
  // The table's metadata as the new files' spec is looked up in: the table's own, or
  // with the re-partitioning spec added and made the default (rebuilt on every
  // attempt; the spec id must come out the same, as the new manifests carry it).
  arrow::Status StageNewSpec();

  std::string NextManifestLocation();

  // Deletes the manifests this commit wrote that `committed` (the committed
  // snapshot's list; empty when nothing was committed) does not list.
  void Cleanup(const std::vector<ManifestFile>& committed);

  // New files go into new manifests written once: their entries inherit snapshot id
  // and sequence number from the manifest list, so they fit any attempt.
  arrow::Status WriteNewManifests();

  // After an unknown outcome, on refreshed metadata: whether a snapshot of ours is in
  // the table.
  arrow::Result<bool> FindOurCommit();

  bool IsRemoved(const ManifestEntry& entry, int32_t entry_spec_id) const;

  // How base manifest `manifest` is rewritten; base manifests are immutable, so this
  // holds for every attempt and is worked out once.
  arrow::Result<const ManifestRewrite*> RewriteOf(const ManifestFile& manifest);

  // The parent's manifests as this commit carries them, and what they remove.
  arrow::Result<BaseManifests> CarryBase(const Snapshot& parent);

  // The summary: the caller's, inherited keys, floe's commit id, and the counts and
  // totals Java's SnapshotSummary keeps.
  SummaryProperties Summary(const Snapshot* parent, const SummaryCounts& added,
                            const SummaryCounts& removed, size_t partitions) const;

  // One attempt on the table's current metadata.
  arrow::Result<CommitOutcome> Attempt(int attempt, arrow::Status* catalog_error);

  Table& table_;
  const PendingSnapshot& pending_;
  const SummaryProperties& summary_;
  const std::string commit_id_;
  const std::string meta_dir_;
  const int64_t snapshot_id_;
  TableMetadata staged_;
  const TableMetadata* lookup_ = nullptr;
  int32_t spec_id_ = 0;
  int manifest_counter_ = 0;
  // Manifests this commit wrote; those the committed snapshot does not list (or all
  // of them, when nothing was committed) are deleted before returning.
  std::vector<std::string> written_;
  std::vector<ManifestFile> new_manifests_;
  std::map<std::string, ManifestRewrite> rewrites_;
  table_internal::ManifestMerger merger_;
  std::vector<ManifestFile> committed_;
  std::optional<Snapshot> result_;
};

Table::SnapshotProducer::SnapshotProducer(Table& table, const PendingSnapshot& pending,
                                          const SummaryProperties& summary)
    : table_(table),
      pending_(pending),
      summary_(summary),
      commit_id_(GenerateUuidV4()),
      meta_dir_(table.MetadataDirectory()),
      snapshot_id_(NewSnapshotId(table.metadata_)),
      merger_(
          *table.io_, snapshot_id_, [this] { return NextManifestLocation(); },
          [this](const std::string& path) { written_.push_back(path); }) {}

arrow::Result<Snapshot> Table::SnapshotProducer::Commit(const CommitOptions& options) {
  ARROW_RETURN_NOT_OK(StageNewSpec());
  spec_id_ = lookup_->default_spec_id;
  if (auto status = WriteNewManifests(); !status.ok()) {
    Cleanup({});
    return status;
  }
  table_internal::CommitAttempts hooks;
  hooks.what = pending_.what + " on " + table_.id_.ToString();
  hooks.refresh = [this] { return table_.Refresh(); };
  hooks.landed = [this] { return FindOurCommit(); };
  if (options.validate) {
    hooks.validate = [this, &options] { return options.validate(table_.metadata_); };
  }
  hooks.attempt = [this](int attempt, arrow::Status* catalog_error) {
    return Attempt(attempt, catalog_error);
  };
  bool outcome_unknown = false;
  const arrow::Status status = RetryCommit(options, hooks, &outcome_unknown);
  if (!status.ok()) {
    // Nothing of ours can be in the table unless an unknown outcome is unresolved.
    if (!outcome_unknown) Cleanup({});
    return status;
  }
  Cleanup(committed_);
  return *result_;
}

arrow::Status Table::SnapshotProducer::StageNewSpec() {
  lookup_ = &table_.metadata_;
  if (!pending_.new_spec) return arrow::Status::OK();
  TableMetadataBuilder builder = TableMetadataBuilder::From(table_.metadata_);
  builder.AddPartitionSpec(*pending_.new_spec).SetDefaultSpec(kLastAdded);
  ARROW_ASSIGN_OR_RAISE(staged_, builder.Build(table_.metadata_location_));
  lookup_ = &staged_;
  return arrow::Status::OK();
}

std::string Table::SnapshotProducer::NextManifestLocation() {
  return meta_dir_ + "/" + commit_id_ + "-m" + std::to_string(manifest_counter_++) +
         ".avro";
}

void Table::SnapshotProducer::Cleanup(const std::vector<ManifestFile>& committed) {
  std::set<std::string> keep;
  for (const auto& m : committed) keep.insert(m.manifest_path);
  for (const auto& path : written_) {
    if (!keep.contains(path)) ARROW_UNUSED(table_.io_->Delete(path));
  }
}

arrow::Status Table::SnapshotProducer::WriteNewManifests() {
  std::vector<ManifestEntry> data, deletes;
  // Files of another spec (deletes of an older spec's data files) get manifests of
  // their own: a manifest is of one spec.
  std::map<int32_t, std::pair<std::vector<ManifestEntry>, std::vector<ManifestEntry>>>
      other_specs;
  for (const auto& file : pending_.add_files) {
    ManifestEntry entry;
    entry.status = ManifestEntryStatus::kAdded;
    entry.data_file = file;
    auto spec = pending_.add_file_specs.find(file.file_path);
    if (spec != pending_.add_file_specs.end() && spec->second != spec_id_) {
      auto& groups = other_specs[spec->second];
      (IsDeleteFile(file) ? groups.second : groups.first).push_back(std::move(entry));
      continue;
    }
    (IsDeleteFile(file) ? deletes : data).push_back(std::move(entry));
  }
  auto write = [&](int32_t spec_id, const std::vector<ManifestEntry>& group,
                   ManifestContent content) -> arrow::Status {
    if (group.empty()) return arrow::Status::OK();
    ARROW_ASSIGN_OR_RAISE(
        auto manifest_options,
        table_internal::ManifestOptionsFor(*lookup_, spec_id, content, snapshot_id_));
    const std::string location = NextManifestLocation();
    ARROW_ASSIGN_OR_RAISE(auto manifest,
                          WriteManifest(*table_.io_, location, manifest_options, group));
    written_.push_back(location);
    new_manifests_.push_back(std::move(manifest));
    return arrow::Status::OK();
  };
  ARROW_RETURN_NOT_OK(write(spec_id_, data, ManifestContent::kData));
  ARROW_RETURN_NOT_OK(write(spec_id_, deletes, ManifestContent::kDeletes));
  for (const auto& [spec_id, groups] : other_specs) {
    ARROW_RETURN_NOT_OK(write(spec_id, groups.first, ManifestContent::kData));
    ARROW_RETURN_NOT_OK(write(spec_id, groups.second, ManifestContent::kDeletes));
  }
  return arrow::Status::OK();
}

arrow::Result<bool> Table::SnapshotProducer::FindOurCommit() {
  for (const auto& snap : table_.metadata_.snapshots) {
    auto it = snap.summary.find(kCommitIdSummaryKey);
    if (it != snap.summary.end() && it->second == commit_id_) {
      ARROW_ASSIGN_OR_RAISE(committed_,
                            ReadManifestList(*table_.io_, snap.manifest_list));
      result_ = snap;
      return true;
    }
  }
  return false;
}

bool Table::SnapshotProducer::IsRemoved(const ManifestEntry& entry,
                                        int32_t entry_spec_id) const {
  return pending_.remove_paths.contains(entry.data_file.file_path) ||
         (!pending_.remove_partitions.empty() &&
          pending_.remove_partitions.contains(
              MakePartitionKey(entry_spec_id, entry.data_file.partition)));
}

arrow::Result<const ManifestRewrite*> Table::SnapshotProducer::RewriteOf(
    const ManifestFile& manifest) {
  if (auto it = rewrites_.find(manifest.manifest_path); it != rewrites_.end()) {
    return &it->second;
  }
  const TableMetadata& metadata = table_.metadata_;
  ARROW_ASSIGN_OR_RAISE(TypePtr type,
                        PartitionTypeOf(metadata, manifest.partition_spec_id));
  ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(*table_.io_, manifest, *type));
  ManifestRewrite rewrite;
  std::vector<ManifestEntry> kept;
  for (auto& entry : entries) {
    if (!IsLive(entry)) continue;  // earlier deletions are not carried over
    if (IsRemoved(entry, manifest.partition_spec_id)) {
      rewrite.removed.push_back(LiveFile{entry, manifest.partition_spec_id});
      entry.status = ManifestEntryStatus::kDeleted;
      entry.snapshot_id = snapshot_id_;
    } else {
      entry.status = ManifestEntryStatus::kExisting;
    }
    kept.push_back(std::move(entry));
  }
  if (!rewrite.removed.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto manifest_options, table_internal::ManifestOptionsFor(
                                                     metadata, manifest.partition_spec_id,
                                                     manifest.content, snapshot_id_));
    const std::string location = NextManifestLocation();
    ARROW_ASSIGN_OR_RAISE(rewrite.rewritten,
                          WriteManifest(*table_.io_, location, manifest_options, kept));
    written_.push_back(location);
  }
  return &rewrites_.emplace(manifest.manifest_path, std::move(rewrite)).first->second;
}

arrow::Result<BaseManifests> Table::SnapshotProducer::CarryBase(const Snapshot& parent) {
  BaseManifests base;
  const bool removing =
      !pending_.remove_paths.empty() || !pending_.remove_partitions.empty();
  ARROW_ASSIGN_OR_RAISE(auto manifests,
                        ReadManifestList(*table_.io_, parent.manifest_list));
  for (const ManifestFile& manifest : manifests) {
    if (!removing) {
      base.manifests.push_back(manifest);
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(const ManifestRewrite* rewrite, RewriteOf(manifest));
    if (!rewrite->rewritten) {
      base.manifests.push_back(manifest);
      continue;
    }
    base.manifests.push_back(*rewrite->rewritten);
    for (const LiveFile& gone : rewrite->removed) {
      base.removed.Add(gone.entry.data_file);
      base.partitions.insert(
          MakePartitionKey(gone.spec_id, gone.entry.data_file.partition));
      base.removed_paths.insert(gone.entry.data_file.file_path);
    }
  }
  return base;
}

SummaryProperties Table::SnapshotProducer::Summary(const Snapshot* parent,
                                                   const SummaryCounts& added,
                                                   const SummaryCounts& removed,
                                                   size_t partitions) const {
  SummaryProperties sm = summary_;
  for (const auto& key : pending_.inherit_summary_keys) {
    if (sm.contains(key) || parent == nullptr) continue;
    for (const Snapshot* snap :
         table_.metadata_.SnapshotsAncestryOf(parent->snapshot_id)) {
      auto it = snap->summary.find(key);
      if (it != snap->summary.end()) {
        sm[key] = it->second;
        break;
      }
    }
  }
  sm[kCommitIdSummaryKey] = commit_id_;
  auto put = [&](const char* key, int64_t value) {
    if (value != 0) sm[key] = std::to_string(value);
  };
  put("added-data-files", added.data_files);
  put("deleted-data-files", removed.data_files);
  put("added-delete-files", added.delete_files);
  put("removed-delete-files", removed.delete_files);
  put("added-position-delete-files", added.position_delete_files);
  put("removed-position-delete-files", removed.position_delete_files);
  put("added-equality-delete-files", added.equality_delete_files);
  put("removed-equality-delete-files", removed.equality_delete_files);
  put("added-records", added.records);
  put("deleted-records", removed.records);
  put("added-files-size", added.files_size);
  put("removed-files-size", removed.files_size);
  put("added-position-deletes", added.position_deletes);
  put("removed-position-deletes", removed.position_deletes);
  put("added-equality-deletes", added.equality_deletes);
  put("removed-equality-deletes", removed.equality_deletes);
  sm["changed-partition-count"] = std::to_string(partitions);
  auto total = [&](const char* key, int64_t plus, int64_t minus) {
    sm[key] =
        std::to_string(std::max<int64_t>(0, SummaryNumber(parent, key) + plus - minus));
  };
  total("total-records", added.records, removed.records);
  total("total-files-size", added.files_size, removed.files_size);
  total("total-data-files", added.data_files, removed.data_files);
  total("total-delete-files", added.delete_files, removed.delete_files);
  total("total-position-deletes", added.position_deletes, removed.position_deletes);
  total("total-equality-deletes", added.equality_deletes, removed.equality_deletes);
  return sm;
}

arrow::Result<CommitOutcome> Table::SnapshotProducer::Attempt(
    int attempt, arrow::Status* catalog_error) {
  const TableMetadata& metadata = table_.metadata_;
  ARROW_RETURN_NOT_OK(StageNewSpec());
  if (lookup_->default_spec_id != spec_id_) {
    return ValidationFailure(pending_.what + " on " + table_.id_.ToString() +
                             ": the table's partition specs changed concurrently; "
                             "re-plan the rewrite on the current table");
  }
  const Snapshot* parent = metadata.CurrentSnapshot();
  std::optional<int64_t> parent_id;
  if (parent != nullptr) parent_id = parent->snapshot_id;
  if (pending_.validate && parent_id != pending_.validate_from) {
    ARROW_ASSIGN_OR_RAISE(
        auto changes,
        table_internal::ChangesSince(*table_.io_, metadata, pending_.validate_from));
    ARROW_RETURN_NOT_OK(pending_.validate(changes));
  }

  BaseManifests base;
  if (parent != nullptr) {
    ARROW_ASSIGN_OR_RAISE(base, CarryBase(*parent));
  }
  for (const auto& path : pending_.remove_paths) {
    if (!base.removed_paths.contains(path)) {
      return ValidationFailure(pending_.what + " on " + table_.id_.ToString() +
                               ": file " + path +
                               " is not live in the table (a concurrent commit removed "
                               "it, or it was never committed)");
    }
  }
  std::vector<ManifestFile> manifests = new_manifests_;
  manifests.insert(manifests.end(), base.manifests.begin(), base.manifests.end());
  SummaryCounts added;
  for (const auto& file : pending_.add_files) {
    added.Add(file);
    auto spec = pending_.add_file_specs.find(file.file_path);
    base.partitions.insert(MakePartitionKey(
        spec != pending_.add_file_specs.end() ? spec->second : spec_id_, file.partition));
  }
  ARROW_ASSIGN_OR_RAISE(auto settings, table_internal::MergeSettingsOf(metadata));
  ARROW_ASSIGN_OR_RAISE(manifests, merger_.Merge(settings, *lookup_, manifests));

  Snapshot snapshot;
  snapshot.snapshot_id = snapshot_id_;
  snapshot.parent_snapshot_id = parent_id;
  snapshot.sequence_number = metadata.last_sequence_number + 1;
  snapshot.timestamp_ms = std::max(CurrentTimeMs(), metadata.last_updated_ms);
  snapshot.schema_id = metadata.current_schema_id;
  snapshot.operation = pending_.operation;
  snapshot.summary = Summary(parent, added, base.removed, base.partitions.size());
  snapshot.manifest_list = meta_dir_ + "/snap-" + std::to_string(snapshot_id_) + "-" +
                           std::to_string(attempt) + "-" + commit_id_ + ".avro";
  ARROW_RETURN_NOT_OK(WriteManifestList(*table_.io_, snapshot.manifest_list, snapshot_id_,
                                        snapshot.parent_snapshot_id,
                                        snapshot.sequence_number, manifests));
  TableMetadataBuilder builder = TableMetadataBuilder::From(metadata);
  if (pending_.new_spec) {
    builder.AddPartitionSpec(*pending_.new_spec).SetDefaultSpec(kLastAdded);
  }
  builder.AddSnapshot(snapshot).SetBranchSnapshot(kMainBranch, snapshot_id_);
  ARROW_ASSIGN_OR_RAISE(TableMetadata next, builder.Build(table_.metadata_location_));
  std::string next_location;
  ARROW_ASSIGN_OR_RAISE(
      const CommitOutcome outcome,
      table_.SwapMetadata(std::move(next), &next_location, catalog_error));
  if (outcome == CommitOutcome::kCommitted) {
    committed_ = std::move(manifests);
    result_ = *table_.metadata_.CurrentSnapshot();
  } else if (outcome == CommitOutcome::kConflict) {
    // Definitely not committed: the manifest list is garbage too.
    ARROW_UNUSED(table_.io_->Delete(snapshot.manifest_list));
  }
  return outcome;
}

arrow::Result<Snapshot> Table::CommitSnapshot(const PendingSnapshot& pending,
                                              const SummaryProperties& summary,
                                              const CommitOptions& options) {
  SnapshotProducer producer(*this, pending, summary);
  return producer.Commit(options);
}

}  // namespace floe::iceberg
