// Iceberg table metadata (format-version 2): the plain struct a `*.metadata.json`
// file holds (schemas, partition specs, sort orders, snapshots, refs, logs,
// properties), its JSON form as Java Iceberg and PyIceberg read and write it, a
// builder that applies validated changes to it (new table, schema / spec / sort
// order evolution, snapshots and expiry) and collects errors, and the naming of
// metadata files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/sort_order.h"

namespace floe::iceberg {

/// How far a timestamp may go back from the one before it (snapshots, the snapshot
/// and metadata logs) before it counts as out of order: Java tolerates this much
/// clock skew between commits.
inline constexpr int64_t kClockSkewToleranceMs = 60 * 1000;

/// The only table format version floe reads and writes.
inline constexpr int32_t kFormatVersion = 2;
inline constexpr char kMainBranch[] = "main";
/// Passed to SetCurrentSchema / SetDefaultSpec / SetDefaultSortOrder: the schema,
/// spec or order added last in this builder.
inline constexpr int32_t kLastAdded = -1;
/// Table property bounding the metadata-log (default 100 entries).
inline constexpr char kMetadataPreviousVersionsMax[] =
    "write.metadata.previous-versions-max";
inline constexpr int32_t kMetadataPreviousVersionsMaxDefault = 100;
/// Table property overriding where metadata files go (default `<location>/metadata`).
inline constexpr char kWriteMetadataPath[] = "write.metadata.path";

struct Snapshot {
  int64_t snapshot_id = 0;
  std::optional<int64_t> parent_snapshot_id;
  int64_t sequence_number = 0;
  int64_t timestamp_ms = 0;
  /// Location of the manifest list (an Avro file).
  std::string manifest_list;
  /// The summary's `operation`: append, replace, overwrite or delete.
  std::string operation;
  /// Every other summary entry (`added-data-files`, `floe.commit-lsn`, ...).
  std::map<std::string, std::string> summary;
  /// The current schema when the snapshot was written.
  std::optional<int32_t> schema_id;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

enum class SnapshotRefType { kBranch, kTag };

/// A named reference to a snapshot: a branch (which commits advance) or a tag, with
/// optional retention settings for snapshot expiry.
struct SnapshotRef {
  int64_t snapshot_id = 0;
  SnapshotRefType type = SnapshotRefType::kBranch;
  /// Branches only.
  std::optional<int32_t> min_snapshots_to_keep;
  /// Branches only.
  std::optional<int64_t> max_snapshot_age_ms;
  std::optional<int64_t> max_ref_age_ms;

  friend bool operator==(const SnapshotRef&, const SnapshotRef&) = default;
};

/// One entry of the snapshot-log: when `snapshot_id` became the current snapshot.
struct SnapshotLogEntry {
  int64_t timestamp_ms = 0;
  int64_t snapshot_id = 0;

  friend bool operator==(const SnapshotLogEntry&, const SnapshotLogEntry&) = default;
};

/// One entry of the metadata-log: a previous metadata file and its last-updated-ms.
struct MetadataLogEntry {
  int64_t timestamp_ms = 0;
  std::string metadata_file;

  friend bool operator==(const MetadataLogEntry&, const MetadataLogEntry&) = default;
};

struct TableMetadata {
  int32_t format_version = kFormatVersion;
  /// Canonical 8-4-4-4-12 form.
  std::string table_uuid;
  /// The table's base location, without a trailing `/`.
  std::string location;
  int64_t last_sequence_number = 0;
  int64_t last_updated_ms = 0;
  /// The highest column id ever assigned in the table.
  int32_t last_column_id = 0;
  std::vector<Schema> schemas;
  int32_t current_schema_id = 0;
  std::vector<PartitionSpec> partition_specs;
  int32_t default_spec_id = 0;
  /// The highest partition field id ever assigned (999 if none).
  int32_t last_partition_id = kUnpartitionedLastPartitionId;
  std::map<std::string, std::string> properties;
  /// None when the table has no current snapshot (written as -1, as Java does for
  /// v2; read from a missing key, null or -1).
  std::optional<int64_t> current_snapshot_id;
  std::vector<Snapshot> snapshots;
  std::vector<SnapshotLogEntry> snapshot_log;
  std::vector<MetadataLogEntry> metadata_log;
  std::vector<SortOrder> sort_orders;
  int32_t default_sort_order_id = 0;
  /// Branches and tags by name; `main` always points at current_snapshot_id.
  std::map<std::string, SnapshotRef> refs;
  /// Top-level members floe does not model, by key, as JSON text, written back
  /// unchanged: `statistics` and `partition-statistics` (entries for expired
  /// snapshots are dropped by RemoveSnapshots) and anything a newer writer added.
  std::map<std::string, std::string> raw_json;

  /// Lookups; null when absent. For metadata that passed Validate() the current
  /// schema, default spec and default sort order are never null.
  const Schema* CurrentSchema() const { return FindSchema(current_schema_id); }
  const Schema* FindSchema(int32_t schema_id) const;
  const PartitionSpec* DefaultSpec() const { return FindSpec(default_spec_id); }
  const PartitionSpec* FindSpec(int32_t spec_id) const;
  const SortOrder* DefaultSortOrder() const {
    return FindSortOrder(default_sort_order_id);
  }
  const SortOrder* FindSortOrder(int32_t order_id) const;
  const Snapshot* CurrentSnapshot() const;
  const Snapshot* FindSnapshot(int64_t snapshot_id) const;
  /// The snapshot `snapshot_id`, its parent, the parent's parent, ... as far as
  /// they are still in the metadata (expired ancestors end the chain). Empty if
  /// `snapshot_id` is unknown.
  std::vector<const Snapshot*> SnapshotsAncestryOf(int64_t snapshot_id) const;

  /// Checks what must hold of any v2 metadata: format version 2, a valid uuid, a
  /// location, unique schema / spec / order / snapshot ids with the current and
  /// default ones present, last-column-id and last-partition-id not below any id in
  /// use, snapshot sequence numbers not above last-sequence-number and their schema
  /// ids known, refs pointing at known snapshots (tags without branch retention),
  /// `main` matching current-snapshot-id, and the logs not going back in time by
  /// more than a minute.
  arrow::Status Validate() const;

 private:
  // Validate's steps, in its order.
  // Schema ids unique and within last-column-id, the current schema among them.
  arrow::Status ValidateSchemas() const;
  // Spec ids unique and within last-partition-id, the default spec among them.
  arrow::Status ValidatePartitionSpecs() const;
  // Sort order ids unique, only order 0 unsorted, the default order among them.
  arrow::Status ValidateSortOrders() const;
  // The snapshots, the current one and the refs (`main` the current snapshot).
  arrow::Status ValidateSnapshots() const;
  // The logs and last-updated-ms not going back in time.
  arrow::Status ValidateLogs() const;
};

/// Parses a `*.metadata.json` document. Accepts what Java Iceberg and PyIceberg
/// write for format-version 2 (current-snapshot-id missing, null or -1; refs
/// missing, then `main` follows current-snapshot-id); format versions 1 and 3 fail
/// with NotImplemented. The result passed Validate().
arrow::Result<TableMetadata> TableMetadataFromJson(std::string_view json_text);

/// The JSON document for `metadata` (compact). Validates first.
arrow::Result<std::string> TableMetadataToJson(const TableMetadata& metadata);

/// A copy of `schema` with fresh field ids assigned from 1 in the order Java and
/// PyIceberg use for a new table: a struct's own fields first, then the fields
/// nested in each of them; a list's element, a map's key then value. Identifier
/// field ids follow their fields. Schema id 0. `old_to_new` (optional) receives the
/// id mapping.
arrow::Result<Schema> AssignFreshFieldIds(
    const Schema& schema, std::map<int32_t, int32_t>* old_to_new = nullptr);

/// Applies changes to table metadata. Each change is checked when it is made; the
/// first failure does not stop later calls, and Build reports every error.
///
///   ARROW_ASSIGN_OR_RAISE(auto next,
///       TableMetadataBuilder::From(current)
///           .AddSnapshot(snapshot)
///           .SetBranchSnapshot(kMainBranch, snapshot.snapshot_id)
///           .Build(current_metadata_location));
class TableMetadataBuilder {
 public:
  /// Metadata for a new table (a fresh uuid, no snapshots). `schema`, `spec` and
  /// `sort_order` refer to the ids of `schema`; the table gets fresh ids from 1
  /// (AssignFreshFieldIds), schema id 0, spec id 0 with partition field ids from
  /// 1000, and sort order id 1 (0 when unsorted). A trailing `/` of `location` is
  /// dropped. `properties` may carry `format-version` only as "2".
  static TableMetadataBuilder NewTable(
      const Schema& schema, const PartitionSpec& spec, const SortOrder& sort_order,
      std::string location, std::map<std::string, std::string> properties = {});
  /// Changes to `base`.
  static TableMetadataBuilder From(TableMetadata base);

  /// Adds a schema (ids of its fields as given; last-column-id grows to cover them).
  /// An identical existing schema is reused; otherwise the id is the largest in use
  /// plus one. Does not make it current.
  TableMetadataBuilder& AddSchema(const Schema& schema);
  /// `schema_id` or kLastAdded. The default spec and sort order must still apply.
  TableMetadataBuilder& SetCurrentSchema(int32_t schema_id);
  /// Adds a spec valid for the current schema, reusing an existing spec with the
  /// same fields; otherwise the spec id is the largest in use plus one.
  /// last-partition-id grows to cover its field ids.
  TableMetadataBuilder& AddPartitionSpec(const PartitionSpec& spec);
  TableMetadataBuilder& SetDefaultSpec(int32_t spec_id);
  /// Adds a sort order valid for the current schema, reusing an existing order with
  /// the same fields; otherwise the id is the largest in use plus one (an unsorted
  /// order is always 0).
  TableMetadataBuilder& AddSortOrder(const SortOrder& order);
  TableMetadataBuilder& SetDefaultSortOrder(int32_t order_id);
  TableMetadataBuilder& SetProperties(const std::map<std::string, std::string>& updates);
  TableMetadataBuilder& RemoveProperties(const std::vector<std::string>& keys);

  /// Adds a snapshot. Its sequence number must be last-sequence-number + 1 (which
  /// it becomes), its id new, its parent (if any) a known snapshot, its schema id a
  /// known schema, and its timestamp not more than a minute before the table's last
  /// update or last snapshot-log entry. The table's last-updated-ms becomes the
  /// snapshot's timestamp.
  TableMetadataBuilder& AddSnapshot(Snapshot snapshot);
  /// Points branch `branch` (created if absent, retention kept if present) at a known
  /// snapshot. For `main` this also sets current-snapshot-id and appends to the
  /// snapshot-log. A no-op when the branch already points there.
  TableMetadataBuilder& SetBranchSnapshot(std::string_view branch, int64_t snapshot_id);
  /// Removes snapshots (unknown ids are ignored), the refs pointing at them (a
  /// removed `main` leaves no current snapshot), their statistics entries, and their
  /// snapshot-log entries; as Java does, the log before a removed entry goes too, so
  /// the log never claims a history that can no longer be read.
  TableMetadataBuilder& RemoveSnapshots(const std::vector<int64_t>& snapshot_ids);

  /// The id AddSchema / AddPartitionSpec / AddSortOrder gave (or reused) last.
  std::optional<int32_t> last_added_schema_id() const { return last_added_schema_id_; }
  std::optional<int32_t> last_added_spec_id() const { return last_added_spec_id_; }
  std::optional<int32_t> last_added_sort_order_id() const { return last_added_order_id_; }

  /// The new metadata, or Invalid listing every error. last-updated-ms becomes the
  /// added snapshot's timestamp, or now. For a table built From() a base,
  /// `previous_metadata_location` (the file the base was read from) is appended to
  /// the metadata-log with the base's last-updated-ms, and the log is trimmed to the
  /// newest `write.metadata.previous-versions-max` entries (default 100, at least 1).
  arrow::Result<TableMetadata> Build(std::string_view previous_metadata_location = {});

 private:
  TableMetadataBuilder() = default;

  void Fail(std::string message);

  TableMetadata metadata_;
  bool is_new_table_ = false;
  int64_t base_last_updated_ms_ = 0;
  std::optional<int64_t> last_updated_ms_;
  std::optional<int32_t> last_added_schema_id_;
  std::optional<int32_t> last_added_spec_id_;
  std::optional<int32_t> last_added_order_id_;
  std::vector<std::string> errors_;
};

/// The version number in a metadata file name `<version>-<anything>.metadata.json`
/// (as `00003-<uuid>.metadata.json`), or nullopt when the name has another form.
std::optional<int32_t> ParseMetadataFileVersion(std::string_view metadata_location);

/// Where the next metadata file of `metadata` goes:
/// `<location>/metadata/<5-digit version>-<uuid>.metadata.json` (or under the
/// `write.metadata.path` property), the version one above that of
/// `previous_metadata_location` (0 without one or when its version cannot be read),
/// as Java and PyIceberg name them.
std::string NewMetadataFileLocation(const TableMetadata& metadata,
                                    std::string_view previous_metadata_location);

/// A random (version 4) UUID in canonical lower-case form.
std::string GenerateUuidV4();

/// Milliseconds since the Unix epoch, from the system clock.
int64_t CurrentTimeMs();

}  // namespace floe::iceberg
