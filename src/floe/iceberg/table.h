// An Iceberg table as floe uses it: created or loaded through a Catalog, its files
// written through FileIO, and changed by commits that are compare-and-swaps of the
// metadata location. A commit that loses a race reloads the table, re-applies its
// change on top and tries again; one whose outcome is unknown looks for its own
// commit id in the table before trying again, so it is never applied twice.
#pragma once

#include <cstdint>
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

struct CommitOptions {
  /// Attempts in all, the first included.
  int max_attempts = 20;
  /// Wait between attempts: doubles from min_backoff_ms up to max_backoff_ms, with
  /// jitter so that racing writers spread out.
  int min_backoff_ms = 10;
  int max_backoff_ms = 2000;
};

/// Snapshot-summary entries a caller adds to a commit (e.g. `floe.commit-lsn`).
using SummaryProperties = std::map<std::string, std::string>;

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

  /// `<warehouse>/<namespace levels>/<name>`, the default location of a new table.
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

  /// The Parquet writer settings the table's properties ask for.
  arrow::Result<ParquetWriterOptions> WriterOptions() const;

  /// A fresh location for a data file of partition `partition` (in the default
  /// spec): `<location>/data/<field>=<value>/.../<uuid>.parquet`.
  std::string NewDataFileLocation(const PartitionTuple& partition) const;

  /// Writes `batches` (the current schema's Arrow form, see ToArrowSchema) as one
  /// Parquet data file of `partition`, makes it durable, and returns its manifest
  /// entry contents. Nothing is committed.
  arrow::Result<DataFile> WriteDataFile(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      const PartitionTuple& partition = {});

  /// Commits `files` (written and durable) as one `append` snapshot on `main`,
  /// adding `summary` to the snapshot summary. The new manifest is written once and
  /// reused on retries; earlier manifests are kept as they are. Returns the
  /// committed snapshot.
  arrow::Result<Snapshot> AppendFiles(const std::vector<DataFile>& files,
                                      const SummaryProperties& summary = {},
                                      const CommitOptions& options = {});

 private:
  Table(Catalog* catalog, std::shared_ptr<FileIO> io, TableIdentifier id,
        TableMetadata metadata, std::string metadata_location);

  std::string MetadataDirectory() const;

  Catalog* catalog_;
  std::shared_ptr<FileIO> io_;
  TableIdentifier id_;
  TableMetadata metadata_;
  std::string metadata_location_;
};

/// Partition path segment values as Iceberg's `PartitionSpec.partitionToPath`
/// prints them (dates for day transforms, and so on), URL-escaped.
std::string PartitionPath(const PartitionSpec& spec, const Schema& schema,
                          const PartitionTuple& partition);

}  // namespace floe::iceberg
