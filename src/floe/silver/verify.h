// `floe silver verify`: checks that each Silver table holds what it must (docs/
// silver.md, "Verification"):
//
//  1. Silver == fold(Bronze rows with cdc_commit_lsn <= Silver's watermark), the
//     invariant of docs/design.md §3: same row count, same order-independent checksum,
//     and on a difference the first differing keys. A difference is a bug or a damaged
//     table.
//  2. Silver vs the live source table (counts, checksums, differing keys). The source
//     keeps moving after the watermark, so a difference is reported as "source moved
//     on since watermark X" when Bronze already holds changes above the watermark,
//     and as an error when it does not.
//
// Values are compared by a canonical text per value (CanonicalValueHashes), so the
// same value in two Arrow types (int32 / int64 after a promotion) compares equal; the
// debugging column cdc_commit_lsn is not compared (a Silver table seeded by
// `floe silver backfill` carries the export's LSN there).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/table.h>

#include "floe/config/pipeline_config.h"
#include "floe/iceberg/catalog.h"
#include "floe/iceberg/file_io.h"
#include "floe/silver/merge.h"
#include "floe/silver/spill.h"

namespace floe::silver {

// ---------------------------------------------------------------------------
// Order-independent digests of rows (pure, unit-tested)

/// Row count and checksum: the sum (mod 2^64) of one 64-bit hash per row, so the
/// order of rows does not matter and a duplicated row changes it.
struct RowDigest {
  int64_t rows = 0;
  uint64_t checksum = 0;
  bool operator==(const RowDigest&) const = default;
};

/// Rows of a table reduced for comparison: per key (its display text, `a=1, b=x`)
/// the hashes of the rows that have it, and the digest of all rows.
struct RowSet {
  std::map<std::string, std::vector<uint64_t>> by_key;
  RowDigest digest;
};

/// One 64-bit hash per row of `column`, of the value's canonical text (null has a
/// hash of its own): strings as they are, binary as lowercase hex, numbers, decimals,
/// dates, times and timestamps as Arrow's cast to utf8 renders them, anything else as
/// Arrow's scalar ToString. `texts`, when not null, receives the canonical text of
/// each value ("null" for null).
arrow::Result<std::vector<uint64_t>> CanonicalValueHashes(
    const arrow::Array& column, std::vector<std::string>* texts = nullptr);

/// The RowSet of `table` over `columns` (by name, in this order) keyed by `key`
/// (by name). A column missing from `table` is an error.
arrow::Result<RowSet> DigestRows(const arrow::Table& table,
                                 const std::vector<std::string>& key,
                                 const std::vector<std::string>& columns);

/// A key whose rows differ between two RowSets.
struct KeyDifference {
  std::string key;
  /// e.g. "missing from Silver", "not in the fold of Bronze", "values differ",
  /// "2 rows in Silver".
  std::string what;
};

/// The keys whose rows differ between `actual` and `expected`, in key order, at most
/// `limit`; *total gets the number of differing keys. `actual_name` and
/// `expected_name` name the sides in the descriptions ("Silver", "the source").
std::vector<KeyDifference> CompareRowSets(const RowSet& actual, const RowSet& expected,
                                          const std::string& actual_name,
                                          const std::string& expected_name, size_t limit,
                                          int64_t* total);

/// The rows of one side of a comparison reduced to (key text, row hash) and spread
/// over partitions by key: in memory while they fit, spilled to local disk after
/// (spill.h), so that tables of any size are compared a partition at a time
/// (CompareDigests) within silver.memory_limit.
class RowDigests {
 public:
  struct Options {
    /// A power of two; the sides of a comparison must have the same.
    int32_t partitions = 1;
    /// The bytes of (key, hash) pairs held before they are spilled.
    int64_t memory_bytes = int64_t{64} << 20;
    /// Where the spill goes (empty: the system's temporary directory).
    std::filesystem::path spill_dir;
  };
  /// Rows keyed by `key` (column names), hashed over `columns`, as DigestRows does.
  RowDigests(std::vector<std::string> key, std::vector<std::string> columns,
             Options options);
  ~RowDigests();
  RowDigests(const RowDigests&) = delete;
  RowDigests& operator=(const RowDigests&) = delete;

  /// Adds rows; a column of `columns` or `key` missing from `rows` is an error.
  arrow::Status Add(const arrow::RecordBatch& rows);
  /// The digest of every row added.
  const RowDigest& digest() const { return digest_; }
  /// Per column: the digest of its values, each paired with its row's key (values
  /// swapped between rows change it; DifferingColumns).
  const std::vector<RowDigest>& column_digests() const { return column_digests_; }
  const std::vector<std::string>& columns() const { return columns_; }
  int32_t partitions() const { return options_.partitions; }
  bool spilled() const { return spill_ != nullptr; }
  /// The rows of partition `p` as a RowSet (its by_key only).
  arrow::Result<RowSet> Partition(int32_t p) const;

 private:
  arrow::Status SpillHeld();

  std::vector<std::string> key_;
  std::vector<std::string> columns_;
  Options options_;
  RowDigest digest_;
  std::vector<RowDigest> column_digests_;
  /// Per partition: the keys and hashes held in memory.
  std::vector<std::vector<std::string>> keys_;
  std::vector<std::vector<uint64_t>> hashes_;
  int64_t held_bytes_ = 0;
  std::unique_ptr<PartitionSpill> spill_;
};

/// CompareRowSets of every partition of two RowDigests of the same partition count:
/// the first `limit` differing keys in key order, all of them counted in *total.
arrow::Result<std::vector<KeyDifference>> CompareDigests(const RowDigests& actual,
                                                         const RowDigests& expected,
                                                         const std::string& actual_name,
                                                         const std::string& expected_name,
                                                         size_t limit, int64_t* total);

/// The columns whose digests (all rows, one column) differ between two RowDigests
/// over the same columns.
std::vector<std::string> DifferingColumns(const RowDigests& a, const RowDigests& b);

/// The partitions of a comparison of tables of about `rows` rows in `memory` bytes
/// (two partitions' RowSets must fit): a power of two.
int32_t DigestPartitions(int64_t rows, int64_t memory);

// ---------------------------------------------------------------------------
// Verifying tables

/// Where a SourceReader hands the live source table it reads.
class SourceSink {
 public:
  virtual ~SourceSink() = default;
  /// Before any rows: their schema (every column, named as in the source) and the
  /// WAL position (pg_current_wal_lsn) of the snapshot they are read in.
  virtual arrow::Status Begin(const std::shared_ptr<arrow::Schema>& schema,
                              uint64_t lsn) = 0;
  /// The next rows (in Begin's schema).
  virtual arrow::Status Add(const std::shared_ptr<arrow::RecordBatch>& rows) = 0;
};

/// Reads a live source table in one REPEATABLE READ transaction, batch by batch,
/// each value converted from Postgres' text form as `floe run` converts it.
using SourceReader =
    std::function<arrow::Status(const config::QualifiedName& table, SourceSink* sink)>;

/// Reads source tables over `conninfo` (a connection per call): what `publication`
/// publishes of them (its column list and row filter; every row and column when
/// empty).
SourceReader PostgresSourceReader(std::string conninfo, std::string publication = "");

enum class SourceCheck {
  /// No source reader, or the table was not compared (see source_note).
  kNotCompared,
  kMatches,
  /// Differs, but Bronze holds changes above Silver's watermark: expected.
  kMovedOn,
  /// Differs although Bronze has nothing above the watermark: an error.
  kDiffers,
};

struct TableVerification {
  /// The source table, `schema.table`.
  std::string table;
  std::string bronze;
  std::string silver;
  /// Not verified (no key, no Silver table yet, no committed snapshot): why.
  std::string skipped;
  /// Could not be verified: the error.
  std::string error;
  uint64_t watermark = 0;
  /// Bronze's floe.commit-lsn when it was read.
  uint64_t bronze_lsn = 0;
  std::vector<std::string> key;
  /// The columns compared (Silver's row columns).
  std::vector<std::string> columns;

  RowDigest silver_digest;
  RowDigest fold_digest;
  int64_t fold_differences_total = 0;
  std::vector<KeyDifference> fold_differences;
  /// Columns whose values (as a whole) differ, when the rows differ but their count
  /// does not.
  std::vector<std::string> fold_differing_columns;

  SourceCheck source = SourceCheck::kNotCompared;
  std::string source_note;
  uint64_t source_lsn = 0;
  /// Silver's digest over the columns the source still has (`source_columns`).
  RowDigest silver_source_digest;
  RowDigest source_digest;
  std::vector<std::string> source_columns;
  int64_t source_differences_total = 0;
  std::vector<KeyDifference> source_differences;
  std::vector<std::string> source_differing_columns;

  /// Silver == fold(Bronze) and the source does not differ unexplained.
  bool consistent() const {
    return error.empty() && fold_differences_total == 0 && silver_digest == fold_digest &&
           source != SourceCheck::kDiffers;
  }
  /// Silver != fold(Bronze up to the watermark).
  bool silver_differs_from_bronze() const {
    return error.empty() && skipped.empty() &&
           (fold_differences_total != 0 || !(silver_digest == fold_digest));
  }
};

struct VerifyTableOptions {
  /// The merge key declared in the pipeline file (silver.keys), else Bronze's.
  std::optional<std::vector<std::string>> key;
  /// Differing keys reported per comparison.
  size_t max_keys = 10;
  /// The memory the verification may use (MergeShare of silver.memory_limit): tables
  /// larger than fits are folded a slice and compared a partition of keys at a time,
  /// spilled to `spill_dir`.
  int64_t memory_limit = MergeShare(kDefaultMemoryLimit, 1);
  std::filesystem::path spill_dir;
  /// The bytes of Bronze changes folded at once; 0: from memory_limit (tests set it).
  int64_t slice_bytes = 0;
  /// The partitions of the comparison; 0: from memory_limit and the table's size.
  int32_t partitions = 0;
};

/// Verifies one Silver table against its Bronze changelog and, when `source` is set,
/// the live source table `source_name`. Problems with the data are reported in the
/// result; an error status means the check itself failed (catalog, files).
arrow::Result<TableVerification> VerifyTable(iceberg::Catalog* catalog,
                                             std::shared_ptr<iceberg::FileIO> io,
                                             const iceberg::TableIdentifier& bronze_id,
                                             const iceberg::TableIdentifier& silver_id,
                                             const config::QualifiedName& source_name,
                                             const SourceReader* source,
                                             const VerifyTableOptions& options = {});

/// A human-readable report of one table (several lines, no trailing newline).
std::string FormatVerification(const TableVerification& v);

struct VerifyOptions {
  /// Only this source table; every Bronze changelog of the service when unset.
  std::optional<config::QualifiedName> table;
  /// Compare with the live source tables too.
  bool compare_source = true;
  size_t max_keys = 10;
};

/// Verifies the Silver tables of the pipeline's service (or one table). A table that
/// could not be verified carries its error; the status is an error only when the
/// catalog cannot be opened or listed, or `options.table` has no Bronze table.
arrow::Result<std::vector<TableVerification>> VerifySilver(
    const config::PipelineConfig& config, const VerifyOptions& options);


/// The Bronze and Silver identifiers of source table `table`, and its silver.keys
/// override.
struct TableNames {
  iceberg::TableIdentifier bronze;
  iceberg::TableIdentifier silver;
  std::optional<std::vector<std::string>> key;
};
TableNames NamesOf(const config::PipelineConfig& config,
                   const config::QualifiedName& table);

}  // namespace floe::silver
