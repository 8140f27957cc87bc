// Table's data file writing: the writer settings its properties ask for, data files
// of about the target size (WriteDataFiles, DataFileWriter), made durable and
// described for a commit.
#include "floe/iceberg/table.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/util/byte_size.h>

#include "floe/common/parse.h"
#include "floe/iceberg/data_file_metrics.h"
#include "floe/iceberg/table_internal.h"

namespace floe::iceberg {
namespace {

arrow::Result<arrow::Compression::type> ParseCodec(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower == "zstd") return arrow::Compression::ZSTD;
  if (lower == "snappy") return arrow::Compression::SNAPPY;
  if (lower == "gzip") return arrow::Compression::GZIP;
  if (lower == "lz4") return arrow::Compression::LZ4;
  if (lower == "brotli") return arrow::Compression::BROTLI;
  if (lower == "uncompressed" || lower == "none") return arrow::Compression::UNCOMPRESSED;
  return arrow::Status::Invalid("table property ", kCompressionCodecProperty, "='", name,
                                "' is not a codec floe writes; use zstd, snappy, gzip, "
                                "lz4, brotli or uncompressed");
}

}  // namespace

arrow::Result<ParquetWriterOptions> Table::WriterOptions() const {
  ParquetWriterOptions options;
  const auto& props = metadata_.properties;
  if (auto it = props.find(kCompressionCodecProperty); it != props.end()) {
    ARROW_ASSIGN_OR_RAISE(options.compression, ParseCodec(it->second));
  }
  if (auto it = props.find(kCompressionLevelProperty); it != props.end()) {
    std::optional<int32_t> level = ParseInt32(it->second);
    if (!level) {
      return arrow::Status::Invalid("table property ", kCompressionLevelProperty, "='",
                                    it->second, "' is not an integer");
    }
    options.compression_level = *level;
  }
  if (auto it = props.find(kRowGroupRowsProperty); it != props.end()) {
    std::optional<int64_t> rows = ParseInt64(it->second);
    if (!rows) {
      return arrow::Status::Invalid("table property ", kRowGroupRowsProperty, "='",
                                    it->second, "' is not an integer");
    }
    options.max_row_group_rows = *rows;
  }
  const std::string enabled_prefix = kBloomFilterEnabledPrefix;
  for (auto it = props.lower_bound(enabled_prefix);
       it != props.end() && it->first.starts_with(enabled_prefix); ++it) {
    if (it->second != "true") continue;
    BloomFilterColumn bloom;
    bloom.column = it->first.substr(enabled_prefix.size());
    // A column renamed or dropped since the property was set: Iceberg keys these
    // properties by name, and a rename does not carry them along.
    const NestedField* bloom_field = schema().FindField(bloom.column);
    if (bloom_field == nullptr) continue;
    // Parquet has no bloom filters for booleans (a table made before floe knew, or by
    // another engine, may ask for one): the column is written without.
    if (bloom_field->type->id() == TypeId::kBoolean) continue;
    auto fpp = props.find(kBloomFilterFppPrefix + bloom.column);
    if (fpp != props.end()) {
      try {
        bloom.fpp = std::stod(fpp->second);
      } catch (...) {
        return arrow::Status::Invalid("table property ", fpp->first, "='", fpp->second,
                                      "' is not a number");
      }
    }
    options.bloom_filters.push_back(std::move(bloom));
  }
  for (int32_t id : plain_fields_) {
    const NestedField* field = schema().FindField(id);
    // Top-level primitives, whose Parquet path is their name.
    if (field == nullptr || !field->type->is_primitive() ||
        schema().FindParentId(id).has_value()) {
      continue;
    }
    std::optional<std::string> name = schema().FindColumnName(id);
    if (name) options.plain_columns.push_back(std::move(*name));
  }
  return options;
}

std::string Table::NewDataFileLocation(const PartitionTuple& partition,
                                       const PartitionSpec* spec) const {
  const PartitionSpec& of = spec != nullptr ? *spec : this->spec();
  std::string dir = metadata_.location + "/data";
  if (!of.is_unpartitioned()) dir += "/" + PartitionPath(of, schema(), partition);
  return dir + "/" + GenerateUuidV4() + ".parquet";
}

arrow::Status Table::CheckPartitionTuple(const PartitionTuple& partition) const {
  if (partition.size() != spec().fields.size()) {
    return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                  " values; the table's spec has ", spec().fields.size(),
                                  " fields");
  }
  return arrow::Status::OK();
}

arrow::Result<Table::OpenDataFile> Table::StartDataFile(
    const PartitionTuple& partition, const std::shared_ptr<arrow::Schema>& schema,
    const ParquetWriterOptions& options, const PartitionSpec* spec) const {
  OpenDataFile file;
  if (spec == nullptr) {
    file.location = NewDataFileLocation(partition);
  } else {
    std::string dir = metadata_.location + "/data";
    if (!spec->is_unpartitioned())
      dir += "/" + PartitionPath(*spec, this->schema(), partition);
    file.location = dir + "/" + GenerateUuidV4() + ".parquet";
  }
  ARROW_ASSIGN_OR_RAISE(auto sink, io_->OpenOutput(file.location));
  ARROW_ASSIGN_OR_RAISE(file.writer, ParquetFileWriter::Open(sink, schema, options));
  return file;
}

arrow::Result<DataFile> Table::FinishDataFile(OpenDataFile file,
                                              const PartitionTuple& partition) const {
  ARROW_RETURN_NOT_OK(file.writer->Close());
  ARROW_RETURN_NOT_OK(io_->Sync(file.location));
  ARROW_ASSIGN_OR_RAISE(const DataFileMetrics* metrics, file.writer->metrics());
  return DataFileFromMetrics(schema(), *metrics, file.location, partition);
}

arrow::Result<DataFile> Table::WriteDataFile(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const PartitionTuple& partition) {
  ARROW_RETURN_NOT_OK(CheckPartitionTuple(partition));
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema()));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, WriterOptions());
  ARROW_ASSIGN_OR_RAISE(OpenDataFile file,
                        StartDataFile(partition, arrow_schema, options));
  for (const auto& batch : batches) ARROW_RETURN_NOT_OK(file.writer->Write(*batch));
  return FinishDataFile(std::move(file), partition);
}

arrow::Result<int64_t> Table::TargetFileSizeBytes() const {
  auto it = metadata_.properties.find(kTargetFileSizeProperty);
  if (it == metadata_.properties.end()) return kDefaultTargetFileSizeBytes;
  const std::string& text = it->second;
  const std::optional<int64_t> value = ParseInt64(text);
  if (!value || *value <= 0) {
    return arrow::Status::Invalid("table property ", kTargetFileSizeProperty, "='", text,
                                  "' is not a positive 64-bit integer");
  }
  return *value;
}

arrow::Result<std::vector<DataFile>> Table::WriteDataFiles(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const PartitionTuple& partition) const {
  ARROW_ASSIGN_OR_RAISE(auto writer, NewDataFileWriter(partition));
  for (const auto& batch : batches) {
    if (batch != nullptr) ARROW_RETURN_NOT_OK(writer->Write(*batch));
  }
  return writer->Finish();
}

arrow::Result<std::unique_ptr<DataFileWriter>> Table::NewDataFileWriter(
    const PartitionTuple& partition, std::optional<int64_t> target_file_bytes,
    std::optional<PartitionSpec> spec) const {
  if (!spec) {
    ARROW_RETURN_NOT_OK(CheckPartitionTuple(partition));
  } else {
    ARROW_RETURN_NOT_OK(spec->Validate(schema()));
    if (partition.size() != spec->fields.size()) {
      return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                    " values; the spec has ", spec->fields.size(),
                                    " fields");
    }
  }
  if (target_file_bytes && *target_file_bytes <= 0) {
    return arrow::Status::Invalid("a target file size must be positive, not ",
                                  *target_file_bytes);
  }
  int64_t target = 0;
  if (target_file_bytes) {
    target = *target_file_bytes;
  } else {
    ARROW_ASSIGN_OR_RAISE(target, TargetFileSizeBytes());
  }
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema()));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, WriterOptions());
  auto writer = std::unique_ptr<DataFileWriter>(new DataFileWriter(
      this, partition, std::move(spec), std::move(arrow_schema), options, target));
  writer->set_row_group_bytes(row_group_bytes_);
  return writer;
}

struct DataFileWriter::OpenFile {
  Table::OpenDataFile file;
};

DataFileWriter::DataFileWriter(const Table* table, PartitionTuple partition,
                               std::optional<PartitionSpec> spec,
                               std::shared_ptr<arrow::Schema> schema,
                               ParquetWriterOptions options, int64_t target_size)
    : table_(table),
      partition_(std::move(partition)),
      spec_(std::move(spec)),
      schema_(std::move(schema)),
      options_(std::move(options)),
      target_size_(target_size) {}

DataFileWriter::~DataFileWriter() = default;

int64_t DataFileWriter::bytes_written() const {
  return finished_bytes_ + (open_ ? open_->file.writer->bytes_written() : 0);
}

arrow::Status DataFileWriter::Write(const arrow::RecordBatch& batch) {
  if (batch.num_rows() == 0) return arrow::Status::OK();
  if (!row_group_cap_set_) {
    // Only flushed row groups count towards the target, so keep row groups at about
    // a quarter of it (in-memory bytes, which compress to less on disk), estimated
    // from the first batch. Only the bytes the batch's rows reference count: a slice
    // of a large batch (one bucket of a sorted table) shares its parent's buffers,
    // and their whole size would make row groups of a few rows.
    ARROW_ASSIGN_OR_RAISE(const int64_t batch_bytes,
                          arrow::util::ReferencedBufferSize(batch));
    const int64_t bytes_per_row = std::max<int64_t>(1, batch_bytes / batch.num_rows());
    const int64_t group_bytes = row_group_bytes_ > 0
                                    ? std::min(row_group_bytes_, target_size_ / 4)
                                    : target_size_ / 4;
    const int64_t row_cap = std::max<int64_t>(1, group_bytes / bytes_per_row);
    options_.max_row_group_rows = std::min(options_.max_row_group_rows, row_cap);
    row_group_cap_set_ = true;
  }
  if (!open_) {
    ARROW_ASSIGN_OR_RAISE(
        Table::OpenDataFile file,
        table_->StartDataFile(partition_, schema_, options_, spec_ ? &*spec_ : nullptr));
    open_ = std::make_unique<OpenFile>(OpenFile{std::move(file)});
  }
  ARROW_RETURN_NOT_OK(open_->file.writer->Write(batch));
  rows_ += batch.num_rows();
  if (open_->file.writer->bytes_written() >= target_size_) {
    std::unique_ptr<OpenFile> file = std::move(open_);
    ARROW_ASSIGN_OR_RAISE(DataFile done,
                          table_->FinishDataFile(std::move(file->file), partition_));
    finished_bytes_ += done.file_size_in_bytes;
    done_.push_back(std::move(done));
  }
  return arrow::Status::OK();
}

arrow::Result<std::vector<DataFile>> DataFileWriter::Finish() {
  if (open_) {
    std::unique_ptr<OpenFile> file = std::move(open_);
    ARROW_ASSIGN_OR_RAISE(DataFile done,
                          table_->FinishDataFile(std::move(file->file), partition_));
    finished_bytes_ += done.file_size_in_bytes;
    done_.push_back(std::move(done));
  }
  return std::move(done_);
}

}  // namespace floe::iceberg
