// An Iceberg table as floe uses it: created or loaded through a Catalog, its files
// written through FileIO, and changed by commits that are compare-and-swaps of the
// metadata location. A commit that loses a race reloads the table, re-applies its
// change on top and tries again; one whose outcome is unknown looks for its own
// commit id in the table before trying again, so it is never applied twice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/parquet_writer.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/sort_order.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::iceberg {

/// RFC 3986 percent-encoding of every byte but the unreserved characters
/// (`A-Z a-z 0-9 - . _ ~`) and those in `also_keep`: a path segment, a query value,
/// a partition directory.
std::string UrlEscape(std::string_view text, std::string_view also_keep = "");

/// Snapshot-summary key holding the id that makes a commit recognisable after an
/// unknown outcome.
inline constexpr char kCommitIdSummaryKey[] = "floe.commit-id";

/// Table properties floe reads (Java Iceberg's names and meanings).
inline constexpr char kCompressionCodecProperty[] = "write.parquet.compression-codec";
inline constexpr char kCompressionLevelProperty[] = "write.parquet.compression-level";
inline constexpr char kBloomFilterEnabledPrefix[] =
    "write.parquet.bloom-filter-enabled.column.";
inline constexpr char kBloomFilterFppPrefix[] = "write.parquet.bloom-filter-fpp.column.";
inline constexpr char kRowGroupRowsProperty[] = "write.parquet.row-group-limit";
inline constexpr char kTargetFileSizeProperty[] = "write.target-file-size-bytes";
inline constexpr int64_t kDefaultTargetFileSizeBytes = int64_t{512} << 20;
/// Manifest merging on commit: when a commit would leave at least
/// `min-count-to-merge` manifests of one content and partition spec (in the bin
/// holding the newest), small manifests are merged into ones of about
/// `target-size-bytes`.
inline constexpr char kManifestMergeEnabledProperty[] = "commit.manifest-merge.enabled";
inline constexpr char kManifestMinMergeCountProperty[] =
    "commit.manifest.min-count-to-merge";
inline constexpr char kManifestTargetSizeProperty[] = "commit.manifest.target-size-bytes";
inline constexpr int kDefaultManifestMinMergeCount = 100;
inline constexpr int64_t kDefaultManifestTargetSizeBytes = int64_t{8} << 20;

struct CommitOptions {
  /// Attempts in all, the first included.
  int max_attempts = 20;
  /// Wait between attempts: doubles from min_backoff_ms up to max_backoff_ms, with
  /// jitter so that racing writers spread out.
  int min_backoff_ms = 10;
  int max_backoff_ms = 2000;
  /// Asked with the table as it is before every attempt but the first (reloaded, and
  /// not holding this commit): an error ends the commit with it. A writer whose
  /// commit must not be applied on top of what landed meanwhile (Bronze: a commit of
  /// floe's that landed late, holding the same changes) says so with a
  /// ValidationFailure.
  std::function<arrow::Status(const TableMetadata& current)> validate;
};

/// Snapshot-summary entries a caller adds to a commit (e.g. `floe.commit-lsn`).
using SummaryProperties = std::map<std::string, std::string>;

/// A commit refused because the table changed under it in a way that makes the
/// change wrong (e.g. deletes against a data file a concurrent compaction removed).
/// Retrying the same change cannot succeed: the caller must re-plan it. The status
/// code is Invalid; IsValidationFailure tells it apart from other errors.
arrow::Status ValidationFailure(std::string message);
bool IsValidationFailure(const arrow::Status& status);

/// A live file of a snapshot: its manifest entry (snapshot id and sequence numbers
/// inherited) and the partition spec it was written with.
struct LiveFile {
  ManifestEntry entry;
  int32_t spec_id = 0;
};

/// Data files and position delete files committed as one snapshot (merge-on-read
/// updates and deletes). Position deletes apply to data files whose data sequence
/// number is not above theirs, so they also delete rows of data files added in the
/// same RowDelta.
struct RowDeltaRequest {
  std::vector<DataFile> add_data_files;
  /// Position (or equality) delete files.
  std::vector<DataFile> add_delete_files;
  /// The spec of each added delete file (by path) that is not of the default spec:
  /// deletes of an older spec's data files must be of that spec (a delete file
  /// applies only to data files of its own spec and partition). Each an existing spec.
  std::map<std::string, int32_t> delete_file_specs;
  /// Delete files the added ones replace (their positions among the new ones'); each
  /// must still be live when the delta lands.
  std::vector<DataFile> remove_delete_files;
  /// Data files whose live rows the added data files hold again (a merge folding a
  /// partition's small files into one as it goes); each must still be live when the
  /// delta lands, and no delete file added meanwhile may apply to their partitions.
  std::vector<DataFile> remove_data_files;
  /// Data files the new position deletes point into. Each delete file's
  /// referenced_data_file is added automatically. If a concurrent commit removed one
  /// of them, the RowDelta fails with a validation failure.
  std::vector<std::string> referenced_data_files;
  /// Concurrent commits are checked from this snapshot on (default: the current
  /// snapshot when RowDelta is called). Set it to the snapshot the change was
  /// planned from.
  std::optional<int64_t> validate_from_snapshot_id;
  /// Also fail if data files were added since the validation snapshot in a partition
  /// this delta writes to (serializable isolation for the partitions touched).
  bool validate_no_conflicting_data_files = false;
};

/// Replaces files, or whole partitions, with new data files.
struct OverwriteRequest {
  /// Files (data or delete) to remove; each must still be live.
  std::vector<DataFile> delete_files;
  /// Partitions (of the default spec) whose every live data and delete file is
  /// removed, as found in the snapshot the commit lands on.
  std::vector<PartitionTuple> overwrite_partitions;
  std::vector<DataFile> add_files;
  std::optional<int64_t> validate_from_snapshot_id;
  /// Fail if data files, or delete files, were added since the validation snapshot in
  /// a partition this overwrite touches (deletes of rows a rewrite copied would be
  /// lost with the file they point into).
  bool validate_no_conflicting_data_files = false;
  /// Re-partitioning (every live file replaced): `add_files` were written for this
  /// spec, which the same commit adds and makes the default, as
  /// RewriteFilesRequest::new_spec. With validate_no_conflicting_data_files, any file
  /// added since the validation snapshot fails the overwrite.
  std::optional<PartitionSpec> new_spec;
};

/// Compaction: files replaced by new files holding the same rows (see
/// Table::RewriteFiles).
struct RewriteFilesRequest {
  /// Data and / or delete files to remove; each must still be live.
  std::vector<DataFile> files_to_delete;
  /// Data files holding the rows of the removed data files, their deletes applied.
  std::vector<DataFile> files_to_add;
  /// The snapshot the rewrite was planned from (read its files at): concurrent
  /// commits after it are validated. Default: the table's current snapshot when
  /// RewriteFiles is called.
  std::optional<int64_t> validate_from_snapshot_id;
  /// Summary keys copied into the new snapshot from the newest snapshot on its
  /// parent's ancestry that has them (read again on every attempt, so a retry over a
  /// concurrent commit copies that commit's value), unless `summary` sets them. For
  /// positions such as `floe.commit-lsn` that a replace snapshot must not hide.
  std::vector<std::string> inherit_summary_keys;
  /// Re-partitioning: `files_to_add` were written for this spec (NewDataFileWriter
  /// with `spec`), which the same commit adds to the table and makes the default, so
  /// the new spec and the snapshot land together or not at all. Its field ids must
  /// be new (above the table's last-partition-id, PartitionSpecBuilder with it) or
  /// those of an existing spec with the same fields, whose id is then reused; its
  /// spec id is assigned by the commit. A concurrent commit that changed the specs
  /// fails the rewrite with a validation failure.
  std::optional<PartitionSpec> new_spec;
  /// Also fail (validation failure) if a concurrent commit since the validation
  /// snapshot added any data or delete file: for a rewrite of the whole table, whose
  /// result must hold every row (files added meanwhile would stay in an older spec).
  bool validate_no_new_files = false;
};

/// FNV-1a, 64 bits: a hash that stays the same across builds and machines (unlike
/// std::hash), for names that must not change (directory and slot names).
uint64_t Fnv1a64(std::string_view text);

/// `name` as one path segment: URL-escaped (RFC 3986 unreserved characters stay),
/// and a name of dots only (`.`, `..`) or an empty one escaped whole, so that the
/// segment never means "this directory" or "the parent".
std::string LocationSegment(const std::string& name);

class Table;

namespace table_internal {
enum class CommitOutcome;
}  // namespace table_internal

/// Writes the rows of one partition, batch by batch as they arrive, as data files of
/// about the table's target size (the rules of Table::WriteDataFiles), so a caller
/// can stream an unbounded number of rows to disk and commit them later. The table's
/// schema, spec and properties are read when the writer is made; the table must
/// outlive the writer and its schema must not change before Finish.
class DataFileWriter {
 public:
  ~DataFileWriter();
  DataFileWriter(const DataFileWriter&) = delete;
  DataFileWriter& operator=(const DataFileWriter&) = delete;

  /// Appends a batch of the table's Arrow schema (ToArrowSchema). Empty batches are
  /// skipped.
  arrow::Status Write(const arrow::RecordBatch& batch);
  /// Closes the open file, makes it durable and returns every file written, in
  /// order (none when no rows were written). The writer is then spent.
  arrow::Result<std::vector<DataFile>> Finish();

  /// Row groups of at most about this many in-memory bytes (default a quarter of the
  /// target size): a row group is held in memory until it is flushed. Before the
  /// first Write.
  void set_row_group_bytes(int64_t bytes) { row_group_bytes_ = bytes; }

  int64_t rows() const { return rows_; }
  /// Bytes flushed to finished and open files (row groups still in memory excluded).
  int64_t bytes_written() const;

 private:
  friend class Table;
  struct OpenFile;
  DataFileWriter(const Table* table, PartitionTuple partition,
                 std::optional<PartitionSpec> spec, std::shared_ptr<arrow::Schema> schema,
                 ParquetWriterOptions options, int64_t target_size);

  const Table* table_;
  PartitionTuple partition_;
  std::optional<PartitionSpec> spec_;
  std::shared_ptr<arrow::Schema> schema_;
  ParquetWriterOptions options_;
  int64_t target_size_;
  bool row_group_cap_set_ = false;
  int64_t row_group_bytes_ = 0;
  std::unique_ptr<OpenFile> open_;
  std::vector<DataFile> done_;
  int64_t finished_bytes_ = 0;
  int64_t rows_ = 0;
};

class Table {
 public:
  /// Creates a table: fresh field ids as Java assigns them, its first metadata file
  /// under `location`, registered in the catalog (kAlreadyExists if it exists).
  static arrow::Result<std::unique_ptr<Table>> Create(
      Catalog* catalog, std::shared_ptr<FileIO> io, const TableIdentifier& id,
      const Schema& schema, const PartitionSpec& spec, const SortOrder& sort_order,
      std::string location, std::map<std::string, std::string> properties = {});

  /// Loads the table's current metadata (kNoSuchTable if the catalog lacks it).
  static arrow::Result<std::unique_ptr<Table>> Load(Catalog* catalog,
                                                    std::shared_ptr<FileIO> io,
                                                    const TableIdentifier& id);

  /// `<warehouse>/<namespace levels>/<name>`, the default location of a new table;
  /// each level is a LocationSegment, so no two identifiers share a directory and
  /// none names a parent's.
  static std::string DefaultLocation(const std::string& warehouse,
                                     const TableIdentifier& id);

  const TableIdentifier& identifier() const { return id_; }
  const TableMetadata& metadata() const { return metadata_; }
  const std::string& metadata_location() const { return metadata_location_; }
  const Schema& schema() const { return *metadata_.CurrentSchema(); }
  const PartitionSpec& spec() const { return *metadata_.DefaultSpec(); }
  FileIO& io() const { return *io_; }
  Catalog& catalog() const { return *catalog_; }

  /// Re-reads the current metadata from the catalog.
  arrow::Status Refresh();

  /// The Parquet writer settings the table's properties ask for, and the writer's
  /// own plain fields (set_plain_fields).
  arrow::Result<ParquetWriterOptions> WriterOptions() const;

  /// The fields (by id) whose values the writer knows to be unique, written without
  /// a dictionary (ParquetWriterOptions::plain_columns) by the data files of this
  /// Table object; fields not in the current schema, or not primitive, are ignored.
  /// Not a table property: another writer of the table decides for itself.
  void set_plain_fields(std::vector<int32_t> field_ids) {
    plain_fields_ = std::move(field_ids);
  }
  /// Row groups of the data files this Table object writes of at most about this
  /// many in-memory bytes (DataFileWriter::set_row_group_bytes; 0: a quarter of the
  /// target size). Not a table property: a writer's memory budget.
  void set_row_group_bytes(int64_t bytes) { row_group_bytes_ = bytes; }
  /// Reads and writes of this Table object go through `io` from now on: a wrapper of
  /// the same storage (a read cache, read_cache.h).
  void set_io(std::shared_ptr<FileIO> io) { io_ = std::move(io); }

  /// A fresh location for a data file of partition `partition` (in the default
  /// spec): `<location>/data/<field>=<value>/.../<uuid>.parquet`.
  std::string NewDataFileLocation(const PartitionTuple& partition,
                                  const PartitionSpec* spec = nullptr) const;

  /// Writes `batches` (the current schema's Arrow form, see ToArrowSchema) as one
  /// Parquet data file of `partition`, makes it durable, and returns its manifest
  /// entry contents. Nothing is committed.
  arrow::Result<DataFile> WriteDataFile(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      const PartitionTuple& partition = {});

  /// The table's `write.target-file-size-bytes` (default 512 MiB). Invalid, naming
  /// the property, unless it is a positive integer.
  arrow::Result<int64_t> TargetFileSizeBytes() const;

  /// Writes `batches` as data files of `partition` of about the table's target file
  /// size (TargetFileSizeBytes), makes each durable and returns their manifest entry
  /// contents in write order. Batches go to a file in order, whole; once the bytes
  /// the file has flushed reach the target, it is closed and the next batch starts a
  /// new one. A batch is never split: a batch larger than the target makes a file of
  /// its own (with whatever preceded it in that file). Rolling happens at row-group
  /// granularity (see ParquetFileWriter::bytes_written), so the row-group row limit
  /// is lowered to about a quarter of the target's worth of rows, estimated from the
  /// first non-empty batch's in-memory bytes per row, when that is below the table's
  /// limit; a file then ends at most about one row group plus one batch past the
  /// target. Empty batches are skipped; no rows give no files. Nothing is committed;
  /// on error, files already written are left for RemoveOrphanFiles.
  arrow::Result<std::vector<DataFile>> WriteDataFiles(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      const PartitionTuple& partition = {}) const;

  /// A writer of `partition` that takes one batch at a time (see DataFileWriter);
  /// WriteDataFiles in increments.
  /// `target_file_bytes` overrides the table's target file size when set. `spec`,
  /// when set, is the spec `partition` belongs to instead of the default (files for
  /// a RewriteFilesRequest::new_spec, a spec the table does not have yet): it names
  /// the files' partition directories.
  arrow::Result<std::unique_ptr<DataFileWriter>> NewDataFileWriter(
      const PartitionTuple& partition = {},
      std::optional<int64_t> target_file_bytes = std::nullopt,
      std::optional<PartitionSpec> spec = std::nullopt) const;

  /// Commits `files` (written and durable; none is fine: an empty snapshot that
  /// carries `summary`, as Java allows) as one `append` snapshot on `main`,
  /// adding `summary` to the snapshot summary. The new manifest is written once and
  /// reused on retries; earlier manifests are kept as they are unless manifest
  /// merging applies (see below). Returns the committed snapshot.
  ///
  /// Manifest merging (every snapshot-producing operation, as Java's
  /// MergingSnapshotProducer): with `commit.manifest-merge.enabled` (default true),
  /// the manifests of the new snapshot are grouped by content (data / deletes) and
  /// partition spec and, newest first, packed from the oldest end into bins of about
  /// `commit.manifest.target-size-bytes` (default 8 MiB). A bin of two or more
  /// manifests is merged into one new manifest, except the bin holding the group's
  /// newest manifest, which is merged only once it holds
  /// `commit.manifest.min-count-to-merge` (default 100) manifests. Merged entries
  /// keep their snapshot id and sequence numbers (written explicitly); entries added
  /// by this snapshot stay ADDED, files removed by it stay DELETED, older DELETED
  /// entries are dropped and everything else is EXISTING. A merged manifest is
  /// written once per set of input manifests and reused by later attempts.
  arrow::Result<Snapshot> AppendFiles(const std::vector<DataFile>& files,
                                      const SummaryProperties& summary = {},
                                      const CommitOptions& options = {});

  /// Commits data and delete files as one snapshot: operation `overwrite`, or
  /// `delete` when it adds delete files only. See RowDeltaRequest for the checks
  /// made against concurrent commits.
  arrow::Result<Snapshot> RowDelta(const RowDeltaRequest& request,
                                   const SummaryProperties& summary = {},
                                   const CommitOptions& options = {});

  /// Compaction: removes `files_to_delete` (data and / or delete files) and adds
  /// `files_to_add` holding the same rows, as one `replace` snapshot (with
  /// RewriteFilesRequest::new_spec, in the same commit as a new default spec). Manifests
  /// holding removed files are rewritten (removed entries DELETED, the others
  /// EXISTING); the others are reused. Fails with a validation failure if a file to
  /// remove is no longer live (a concurrent rewrite), or if a concurrent commit since
  /// the call added delete files that may apply to a removed data file (those
  /// deletes would be lost).
  arrow::Result<Snapshot> RewriteFiles(const std::vector<DataFile>& files_to_delete,
                                       const std::vector<DataFile>& files_to_add,
                                       const SummaryProperties& summary = {},
                                       const CommitOptions& options = {});
  /// The same with the validation snapshot and inherited summary keys of
  /// `request`: deletes added by any commit after `validate_from_snapshot_id` that
  /// may apply to a removed data file fail the rewrite.
  arrow::Result<Snapshot> RewriteFiles(const RewriteFilesRequest& request,
                                       const SummaryProperties& summary = {},
                                       const CommitOptions& options = {});

  /// One `overwrite` snapshot (`delete` when nothing is added) removing files and /
  /// or whole partitions and adding new data files.
  arrow::Result<Snapshot> Overwrite(const OverwriteRequest& request,
                                    const SummaryProperties& summary = {},
                                    const CommitOptions& options = {});

  /// Commits a metadata change without a snapshot (schema evolution, properties,
  /// snapshot expiry, ...). `change` is applied to the current metadata and applied
  /// again, on fresh metadata, after a lost race.
  using MetadataChange =
      std::function<arrow::Status(const TableMetadata& base, TableMetadataBuilder*)>;
  arrow::Status UpdateMetadata(const MetadataChange& change,
                               const CommitOptions& options = {});

  /// The live data and delete files of snapshot `snapshot_id` (default: current;
  /// empty without one).
  arrow::Result<std::vector<LiveFile>> LiveFiles(
      std::optional<int64_t> snapshot_id = std::nullopt) const;
  /// The same, of only the manifests `keep` takes (from the snapshot's manifest list).
  arrow::Result<std::vector<LiveFile>> LiveFiles(
      std::optional<int64_t> snapshot_id,
      const std::function<bool(const std::vector<ManifestFile>& all,
                               const ManifestFile& manifest)>& keep) const;

 private:
  friend class DataFileWriter;
  struct PendingSnapshot;
  class SnapshotProducer;

  Table(Catalog* catalog, std::shared_ptr<FileIO> io, TableIdentifier id,
        TableMetadata metadata, std::string metadata_location);

  // The commit path every snapshot-producing operation shares.
  arrow::Result<Snapshot> CommitSnapshot(const PendingSnapshot& pending,
                                         const SummaryProperties& summary,
                                         const CommitOptions& options);

  // Writes `next` as a new metadata file (its location in `*next_location`) and asks
  // the catalog to swap it in for the current one, with the catalog's answer in
  // `*catalog_error`. Committed: the table holds `next`. Conflict: the file is
  // deleted. An error the catalog gives that is not a race is returned.
  arrow::Result<table_internal::CommitOutcome> SwapMetadata(TableMetadata next,
                                                            std::string* next_location,
                                                            arrow::Status* catalog_error);
  // SwapMetadata for a catalog that writes the metadata itself (REST): sends the
  // changes from the current metadata to `next`; committed, the table holds what
  // the catalog answered (its file in `*next_location`).
  arrow::Result<table_internal::CommitOutcome> CommitChanges(
      TableMetadata next, std::string* next_location, arrow::Status* catalog_error);

  std::string MetadataDirectory() const;

  // Opens a writer on a fresh data file location of `partition`.
  struct OpenDataFile {
    std::string location;
    std::unique_ptr<ParquetFileWriter> writer;
  };
  arrow::Result<OpenDataFile> StartDataFile(const PartitionTuple& partition,
                                            const std::shared_ptr<arrow::Schema>& schema,
                                            const ParquetWriterOptions& options,
                                            const PartitionSpec* spec = nullptr) const;
  // Closes `file`, makes it durable and builds its DataFile.
  arrow::Result<DataFile> FinishDataFile(OpenDataFile file,
                                         const PartitionTuple& partition) const;
  arrow::Status CheckPartitionTuple(const PartitionTuple& partition) const;

  Catalog* catalog_;
  std::shared_ptr<FileIO> io_;
  TableIdentifier id_;
  TableMetadata metadata_;
  std::string metadata_location_;
  std::vector<int32_t> plain_fields_;
  int64_t row_group_bytes_ = 0;
};

/// The longest directory name PartitionPath writes for one partition field.
inline constexpr size_t kMaxPartitionSegmentBytes = 200;

/// Partition path segment values as Iceberg's `PartitionSpec.partitionToPath`
/// prints them (dates for day transforms, and so on), URL-escaped. A field whose
/// segment would pass kMaxPartitionSegmentBytes keeps a prefix of its value and a
/// hash of the whole value instead.
std::string PartitionPath(const PartitionSpec& spec, const Schema& schema,
                          const PartitionTuple& partition);

/// The partition struct of spec `spec_id` of `metadata` (for reading its
/// manifests), resolved against the current schema or, failing that, older ones.
arrow::Result<TypePtr> PartitionTypeOf(const TableMetadata& metadata, int32_t spec_id);

}  // namespace floe::iceberg
