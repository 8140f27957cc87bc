// Iceberg v2 manifests and manifest lists: the plain structs of the spec's "Manifests"
// and "Manifest Lists" sections, and their Avro object container files with the spec's
// schemas (every field carrying its `field-id`) and header metadata, so Java, PyIceberg
// and other engines read what floe writes and floe reads what they write.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/schema.h"

namespace floe::iceberg {

enum class DataFileContent : int32_t {
  kData = 0,
  kPositionDeletes = 1,
  kEqualityDeletes = 2,
};

enum class ManifestEntryStatus : int32_t {
  kExisting = 0,
  kAdded = 1,
  kDeleted = 2,
};

/// What a manifest (and its manifest-list entry) tracks.
enum class ManifestContent : int32_t {
  kData = 0,
  kDeletes = 1,
};

/// A sequence number not known yet: a manifest written for a snapshot that is not
/// committed. WriteManifestList replaces it with the snapshot's sequence number.
inline constexpr int64_t kUnassignedSequenceNumber = -1;

/// One data or delete file (the manifest entry's `data_file` struct, field 2).
/// Empty maps and lists are written as null and null reads back as empty.
struct DataFile {
  DataFileContent content = DataFileContent::kData;
  std::string file_path;
  /// `PARQUET`, `AVRO` or `ORC` (as Java writes it: upper case).
  std::string file_format = "PARQUET";
  /// One value per partition field, in partition-spec order; nullopt is null.
  std::vector<std::optional<Literal>> partition;
  int64_t record_count = 0;
  int64_t file_size_in_bytes = 0;
  /// Keyed by field id.
  std::map<int32_t, int64_t> column_sizes;
  std::map<int32_t, int64_t> value_counts;
  std::map<int32_t, int64_t> null_value_counts;
  std::map<int32_t, int64_t> nan_value_counts;
  /// Bounds in the single-value serialization of conversions.h, keyed by field id.
  std::map<int32_t, std::string> lower_bounds;
  std::map<int32_t, std::string> upper_bounds;
  std::optional<std::string> key_metadata;
  std::vector<int64_t> split_offsets;
  /// Equality delete files only.
  std::vector<int32_t> equality_ids;
  std::optional<int32_t> sort_order_id;
  /// Position delete files whose deletes all reference one data file.
  std::optional<std::string> referenced_data_file;

  friend bool operator==(const DataFile&, const DataFile&) = default;
};

/// One row of a manifest.
struct ManifestEntry {
  ManifestEntryStatus status = ManifestEntryStatus::kAdded;
  /// Null is inherited from the manifest list's added_snapshot_id.
  std::optional<int64_t> snapshot_id;
  /// Data sequence number. Null (for added files) is inherited from the manifest's
  /// sequence number: write files added by a new snapshot with nulls.
  std::optional<int64_t> sequence_number;
  /// Sequence number of the snapshot that added the file; inherited like
  /// sequence_number.
  std::optional<int64_t> file_sequence_number;
  DataFile data_file;

  friend bool operator==(const ManifestEntry&, const ManifestEntry&) = default;
};

/// Summary of one partition field over every entry of a manifest.
struct PartitionFieldSummary {
  bool contains_null = false;
  std::optional<bool> contains_nan;
  /// Smallest / largest non-null, non-NaN value, serialized as in conversions.h.
  std::optional<std::string> lower_bound;
  std::optional<std::string> upper_bound;

  friend bool operator==(const PartitionFieldSummary&,
                         const PartitionFieldSummary&) = default;
};

/// One row of a manifest list: a manifest and what it holds.
struct ManifestFile {
  std::string manifest_path;
  int64_t manifest_length = 0;
  int32_t partition_spec_id = 0;
  ManifestContent content = ManifestContent::kData;
  /// Sequence number of the snapshot that added the manifest.
  int64_t sequence_number = kUnassignedSequenceNumber;
  /// Smallest data sequence number of the manifest's live entries.
  int64_t min_sequence_number = kUnassignedSequenceNumber;
  int64_t added_snapshot_id = 0;
  int32_t added_files_count = 0;
  int32_t existing_files_count = 0;
  int32_t deleted_files_count = 0;
  int64_t added_rows_count = 0;
  int64_t existing_rows_count = 0;
  int64_t deleted_rows_count = 0;
  /// One per partition field, in partition-spec order.
  std::vector<PartitionFieldSummary> partitions;
  std::optional<std::string> key_metadata;

  friend bool operator==(const ManifestFile&, const ManifestFile&) = default;
};

struct ManifestWriteOptions {
  /// The table schema as JSON (spec Appendix C); its `schema-id` is copied to the
  /// `schema-id` metadata key.
  std::string schema_json;
  /// The partition spec's fields as a JSON array (the `partition-spec` key).
  std::string partition_spec_json = "[]";
  int32_t partition_spec_id = 0;
  /// A struct whose fields are the partition fields: their field ids (1000, ...),
  /// names and result types, in spec order. Null means unpartitioned.
  TypePtr partition_type;
  ManifestContent content = ManifestContent::kData;
  /// The snapshot adding this manifest (the ManifestFile's added_snapshot_id).
  int64_t snapshot_id = 0;
  /// Avro block codec: "deflate" (what Java and PyIceberg write) or "null".
  std::string codec = "deflate";
};

/// Writes `entries` as a v2 manifest at `location` (a new file: fails if it exists)
/// and returns the manifest-list row describing it: its length, counts, the smallest
/// known data sequence number and per-field partition summaries. Its
/// sequence_number is kUnassignedSequenceNumber (as is min_sequence_number when every
/// entry inherits), to be filled in by WriteManifestList.
arrow::Result<ManifestFile> WriteManifest(FileIO& io, const std::string& location,
                                          const ManifestWriteOptions& options,
                                          const std::vector<ManifestEntry>& entries);

/// Reads a manifest's entries as stored (no inheritance). `partition_type` is the
/// partition struct of the manifest's spec (see ManifestWriteOptions); its fields are
/// matched to the file's by field id (by name when the file has no ids). Reads v1
/// and v2 manifests from any writer that follows the spec.
arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io,
                                                       const std::string& location,
                                                       const Type& partition_type);

/// Reads the manifest that `manifest` (a manifest-list row) names and applies the
/// spec's inheritance: a null snapshot id takes the manifest's added_snapshot_id, and
/// a null data / file sequence number of an added entry takes the manifest's
/// sequence number.
arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io,
                                                       const ManifestFile& manifest,
                                                       const Type& partition_type);

/// The inheritance ReadManifest(io, manifest, ...) applies, on entries already read.
void InheritFromManifest(const ManifestFile& manifest,
                         std::vector<ManifestEntry>* entries);

/// Writes the v2 manifest list of snapshot `snapshot_id` at `location` (a new file).
/// Manifests whose sequence_number (or min_sequence_number) is
/// kUnassignedSequenceNumber were written for this snapshot and get
/// `sequence_number`.
arrow::Status WriteManifestList(FileIO& io, const std::string& location,
                                int64_t snapshot_id,
                                std::optional<int64_t> parent_snapshot_id,
                                int64_t sequence_number,
                                const std::vector<ManifestFile>& manifests,
                                const std::string& codec = "deflate");

/// Reads a v1 or v2 manifest list. v1 lists read with sequence numbers 0 and
/// content data, as the spec says.
arrow::Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io,
                                                          const std::string& location);

/// The key-value metadata of an Avro file's header (`avro.schema`, `avro.codec` and
/// the writer's keys such as `format-version`).
arrow::Result<std::map<std::string, std::string>> ReadAvroMetadata(
    FileIO& io, const std::string& location);

}  // namespace floe::iceberg
