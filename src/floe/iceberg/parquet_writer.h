// Writes Arrow record batches into one Parquet data file the way Iceberg expects:
// every column carries its Iceberg field id (`PARQUET:field_id`), column statistics
// are kept, pages are zstd-compressed, and chosen columns get a Parquet bloom filter.
// After Close() the writer reports the file's metrics (row count, size, per-column
// counts and bounds, split offsets) so a manifest entry can be built without
// reading the file back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>
#include <arrow/util/compression.h>
#include <parquet/arrow/writer.h>
#include <parquet/metadata.h>
#include <parquet/statistics.h>

namespace floe::iceberg {

/// Arrow field-metadata key that Parquet C++ turns into the Parquet schema's field_id.
inline constexpr std::string_view kParquetFieldIdKey = "PARQUET:field_id";

/// Returns `field` with its Iceberg field id set in the field metadata (other
/// metadata is kept).
std::shared_ptr<arrow::Field> WithFieldId(const std::shared_ptr<arrow::Field>& field,
                                          int32_t field_id);

/// A Parquet bloom filter to write for one leaf column, named by its dotted path in
/// the file schema (a top-level column is just its name).
struct BloomFilterColumn {
  std::string column;
  /// False-positive probability, in (0, 1).
  double fpp = 0.01;
  /// Expected distinct values; unset lets Parquet size it from the row group.
  std::optional<int64_t> ndv;
};

struct ParquetWriterOptions {
  arrow::Compression::type compression = arrow::Compression::ZSTD;
  /// Codec level; unset uses the codec's default.
  std::optional<int> compression_level;
  /// Upper bound on rows per row group.
  int64_t max_row_group_rows = 1024 * 1024;
  std::vector<BloomFilterColumn> bloom_filters;
  /// Leaf columns (dotted paths) written without a dictionary: columns whose values
  /// are unique (a key in a copy or in Silver, a sequence number), where Parquet
  /// would build a dictionary only to give it up once it outgrows its page, at a
  /// cost in time and bytes.
  std::vector<std::string> plain_columns;
};

/// What one leaf column of a closed file holds, summed over its row groups.
struct ColumnMetrics {
  int32_t field_id = 0;
  /// Dotted path of the leaf in the Parquet schema (e.g. `tags.list.element`).
  std::string path;
  /// Values including nulls (Iceberg `value_counts`).
  int64_t value_count = 0;
  int64_t null_count = 0;
  /// Compressed bytes on disk (Iceberg `column_sizes`).
  int64_t compressed_size = 0;
  /// Min/max over the whole file, merged from every row group. Null when any row
  /// group holding non-null values has no min/max (then no bound is known), or when
  /// the column is all nulls.
  std::shared_ptr<parquet::Statistics> bounds;
  bool has_bloom_filter = false;
};

/// Metrics of a closed data file.
struct DataFileMetrics {
  int64_t record_count = 0;
  int64_t file_size_bytes = 0;
  /// Byte offset of each row group's first page (Iceberg `split_offsets`).
  std::vector<int64_t> split_offsets;
  /// One entry per leaf column, in Parquet schema order.
  std::vector<ColumnMetrics> columns;
  /// The file footer; keeps the `bounds` statistics' column descriptors alive.
  std::shared_ptr<parquet::FileMetaData> parquet_metadata;

  /// The metrics of the leaf column with this field id, or null.
  const ColumnMetrics* FindColumn(int32_t field_id) const;
};

/// One Parquet data file. Open, Write any number of batches with the writer's
/// schema, Close once; metrics() is valid only after Close().
class ParquetFileWriter {
 public:
  /// Starts a file on `sink`. Every field of `schema`, nested ones included, must
  /// carry a field id (see WithFieldId); ids must be unique. Bloom-filter columns
  /// must name existing non-boolean leaf columns.
  static arrow::Result<std::unique_ptr<ParquetFileWriter>> Open(
      std::shared_ptr<arrow::io::OutputStream> sink,
      std::shared_ptr<arrow::Schema> schema, ParquetWriterOptions options = {});

  /// Opens (creating or truncating) a local file at `path`.
  static arrow::Result<std::unique_ptr<ParquetFileWriter>> OpenFile(
      const std::string& path, std::shared_ptr<arrow::Schema> schema,
      ParquetWriterOptions options = {});

  ~ParquetFileWriter();
  ParquetFileWriter(const ParquetFileWriter&) = delete;
  ParquetFileWriter& operator=(const ParquetFileWriter&) = delete;

  /// Appends rows. The batch's schema must equal the writer's (field metadata
  /// aside).
  arrow::Status Write(const arrow::RecordBatch& batch);

  /// Finishes the footer, closes the sink and computes the metrics.
  arrow::Status Close();

  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  int64_t rows_written() const { return rows_written_; }

  /// Bytes already flushed to the sink (its Tell() after the last Write), or the
  /// whole file size after Close(). The row group being buffered is not counted:
  /// Parquet C++'s `parquet::arrow::FileWriter` keeps its RowGroupWriter private, so
  /// no estimate of buffered bytes is available. The count therefore grows a row
  /// group at a time (the arrow writer flushes a full row group when the next batch
  /// arrives), and callers rolling files at a size do so at row-group granularity:
  /// bound the row group size with `max_row_group_rows` for that.
  int64_t bytes_written() const { return bytes_written_; }

  /// REQUIRES: Close() returned OK.
  arrow::Result<const DataFileMetrics*> metrics() const;

 private:
  ParquetFileWriter(std::shared_ptr<arrow::io::OutputStream> sink,
                    std::shared_ptr<arrow::Schema> schema,
                    std::unique_ptr<parquet::arrow::FileWriter> writer);

  std::shared_ptr<arrow::io::OutputStream> sink_;
  std::shared_ptr<arrow::Schema> schema_;
  std::unique_ptr<parquet::arrow::FileWriter> writer_;
  int64_t rows_written_ = 0;
  int64_t bytes_written_ = 0;
  bool closed_ = false;
  std::optional<DataFileMetrics> metrics_;
};

}  // namespace floe::iceberg
