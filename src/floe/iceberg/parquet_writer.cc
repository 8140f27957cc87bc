#include "floe/iceberg/parquet_writer.h"
#include "floe/common/parse.h"

#include <set>
#include <unordered_map>
#include <utility>

#include <arrow/io/file.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/properties.h>
#include <parquet/schema.h>

namespace floe::iceberg {
namespace {

// Checks that `field` and every field nested in it carry a unique, positive
// field id. `path` names the field in error messages.
arrow::Status CheckFieldIds(const arrow::Field& field, const std::string& path,
                            std::set<int32_t>* seen) {
  const auto& md = field.metadata();
  int index = md ? md->FindKey(std::string(kParquetFieldIdKey)) : -1;
  if (index < 0) {
    return arrow::Status::Invalid(
        "field '", path, "' has no ", kParquetFieldIdKey,
        " metadata; every Iceberg column, nested ones included, "
        "needs a field id (see WithFieldId)");
  }
  const std::string& text = md->value(index);
  const int32_t id = ParseInt32(text).value_or(0);
  if (id <= 0) {
    return arrow::Status::Invalid("field '", path, "' has field id '", text,
                                  "'; it must be a positive 32-bit integer");
  }
  if (!seen->insert(id).second) {
    return arrow::Status::Invalid("field id ", id, " is used twice (again at '", path,
                                  "'); field ids must be unique in a schema");
  }
  if (field.type()->id() == arrow::Type::MAP) {
    // The map's "entries" struct is Parquet's repeated group; Iceberg ids go on
    // its key and value only.
    const auto& map = static_cast<const arrow::MapType&>(*field.type());
    ARROW_RETURN_NOT_OK(CheckFieldIds(*map.key_field(), path + ".key", seen));
    return CheckFieldIds(*map.item_field(), path + ".value", seen);
  }
  for (const auto& child : field.type()->fields()) {
    ARROW_RETURN_NOT_OK(CheckFieldIds(*child, path + "." + child->name(), seen));
  }
  return arrow::Status::OK();
}

// Merges per-row-group statistics of one column into file-level bounds. Returns
// null when some row group holding non-null values has no min/max.
template <typename DType>
std::shared_ptr<parquet::Statistics> MergeTyped(
    const std::vector<std::shared_ptr<parquet::Statistics>>& parts,
    const parquet::ColumnDescriptor* descr) {
  auto merged = parquet::MakeStatistics<DType>(descr);
  for (const auto& part : parts) {
    merged->Merge(static_cast<const parquet::TypedStatistics<DType>&>(*part));
  }
  if (!merged->HasMinMax()) return nullptr;
  return merged;
}

std::shared_ptr<parquet::Statistics> MergeBounds(
    const std::vector<std::shared_ptr<parquet::Statistics>>& parts,
    const parquet::ColumnDescriptor* descr) {
  switch (descr->physical_type()) {
    case parquet::Type::BOOLEAN:
      return MergeTyped<parquet::BooleanType>(parts, descr);
    case parquet::Type::INT32:
      return MergeTyped<parquet::Int32Type>(parts, descr);
    case parquet::Type::INT64:
      return MergeTyped<parquet::Int64Type>(parts, descr);
    case parquet::Type::INT96:
      return MergeTyped<parquet::Int96Type>(parts, descr);
    case parquet::Type::FLOAT:
      return MergeTyped<parquet::FloatType>(parts, descr);
    case parquet::Type::DOUBLE:
      return MergeTyped<parquet::DoubleType>(parts, descr);
    case parquet::Type::BYTE_ARRAY:
      return MergeTyped<parquet::ByteArrayType>(parts, descr);
    case parquet::Type::FIXED_LEN_BYTE_ARRAY:
      return MergeTyped<parquet::FLBAType>(parts, descr);
    default:
      return nullptr;
  }
}

int64_t FirstPageOffset(const parquet::ColumnChunkMetaData& chunk) {
  if (chunk.has_dictionary_page() && chunk.dictionary_page_offset() > 0) {
    return chunk.dictionary_page_offset();
  }
  return chunk.data_page_offset();
}

arrow::Result<DataFileMetrics> ComputeMetrics(std::shared_ptr<parquet::FileMetaData> md,
                                              int64_t file_size) {
  DataFileMetrics out;
  BEGIN_PARQUET_CATCH_EXCEPTIONS
  out.record_count = md->num_rows();
  out.file_size_bytes = file_size;
  const parquet::SchemaDescriptor* schema = md->schema();
  const int num_columns = md->num_columns();
  out.columns.resize(num_columns);
  std::vector<std::vector<std::shared_ptr<parquet::Statistics>>> parts(num_columns);
  std::vector<bool> bounds_known(num_columns, true);
  for (int c = 0; c < num_columns; ++c) {
    const parquet::ColumnDescriptor* descr = schema->Column(c);
    out.columns[c].field_id = descr->schema_node()->field_id();
    out.columns[c].path = descr->path()->ToDotString();
  }
  for (int rg = 0; rg < md->num_row_groups(); ++rg) {
    auto row_group = md->RowGroup(rg);
    for (int c = 0; c < num_columns; ++c) {
      auto chunk = row_group->ColumnChunk(c);
      ColumnMetrics& col = out.columns[c];
      if (c == 0) out.split_offsets.push_back(FirstPageOffset(*chunk));
      col.value_count += chunk->num_values();
      col.compressed_size += chunk->total_compressed_size();
      col.has_bloom_filter =
          col.has_bloom_filter || chunk->bloom_filter_offset().has_value();
      std::shared_ptr<parquet::Statistics> stats =
          chunk->is_stats_set() ? chunk->statistics() : nullptr;
      if (stats == nullptr || !stats->HasNullCount()) {
        return arrow::Status::Invalid("column '", col.path, "' of row group ", rg,
                                      " has no null count; statistics must be enabled");
      }
      col.null_count += stats->null_count();
      if (stats->num_values() > 0) {
        if (stats->HasMinMax()) {
          parts[c].push_back(std::move(stats));
        } else {
          bounds_known[c] = false;
        }
      }
    }
  }
  for (int c = 0; c < num_columns; ++c) {
    if (bounds_known[c] && !parts[c].empty()) {
      out.columns[c].bounds = MergeBounds(parts[c], schema->Column(c));
    }
  }
  END_PARQUET_CATCH_EXCEPTIONS
  out.parquet_metadata = std::move(md);
  return out;
}

}  // namespace

std::shared_ptr<arrow::Field> WithFieldId(const std::shared_ptr<arrow::Field>& field,
                                          int32_t field_id) {
  auto md = field->metadata() ? field->metadata()->Copy()
                              : std::make_shared<arrow::KeyValueMetadata>();
  ARROW_UNUSED(md->Set(std::string(kParquetFieldIdKey), std::to_string(field_id)));
  return field->WithMetadata(std::move(md));
}

const ColumnMetrics* DataFileMetrics::FindColumn(int32_t field_id) const {
  for (const auto& col : columns) {
    if (col.field_id == field_id) return &col;
  }
  return nullptr;
}

ParquetFileWriter::ParquetFileWriter(std::shared_ptr<arrow::io::OutputStream> sink,
                                     std::shared_ptr<arrow::Schema> schema,
                                     std::unique_ptr<parquet::arrow::FileWriter> writer)
    : sink_(std::move(sink)), schema_(std::move(schema)), writer_(std::move(writer)) {}

ParquetFileWriter::~ParquetFileWriter() = default;

arrow::Result<std::unique_ptr<ParquetFileWriter>> ParquetFileWriter::Open(
    std::shared_ptr<arrow::io::OutputStream> sink, std::shared_ptr<arrow::Schema> schema,
    ParquetWriterOptions options) {
  if (sink == nullptr || schema == nullptr) {
    return arrow::Status::Invalid("ParquetFileWriter::Open needs a sink and a schema");
  }
  if (options.max_row_group_rows <= 0) {
    return arrow::Status::Invalid("max_row_group_rows must be positive, got ",
                                  options.max_row_group_rows);
  }
  std::set<int32_t> seen_ids;
  for (const auto& field : schema->fields()) {
    ARROW_RETURN_NOT_OK(CheckFieldIds(*field, field->name(), &seen_ids));
  }

  parquet::WriterProperties::Builder builder;
  builder.compression(options.compression)
      ->max_row_group_length(options.max_row_group_rows)
      ->enable_statistics();
  if (options.compression_level) builder.compression_level(*options.compression_level);
  for (const std::string& column : options.plain_columns)
    builder.disable_dictionary(column);

  // Resolve bloom-filter columns against the Parquet schema the file will have.
  std::shared_ptr<parquet::SchemaDescriptor> parquet_schema;
  ARROW_RETURN_NOT_OK(
      parquet::arrow::ToParquetSchema(schema.get(), *builder.build(), &parquet_schema));
  std::unordered_map<std::string, const parquet::ColumnDescriptor*> leaves;
  for (int c = 0; c < parquet_schema->num_columns(); ++c) {
    const parquet::ColumnDescriptor* descr = parquet_schema->Column(c);
    leaves.emplace(descr->path()->ToDotString(), descr);
  }
  for (const auto& bloom : options.bloom_filters) {
    auto it = leaves.find(bloom.column);
    if (it == leaves.end()) {
      std::string known;
      for (int c = 0; c < parquet_schema->num_columns(); ++c) {
        if (!known.empty()) known += ", ";
        known += parquet_schema->Column(c)->path()->ToDotString();
      }
      return arrow::Status::Invalid("bloom filter requested on column '", bloom.column,
                                    "', which is not a leaf column of the file; leaf "
                                    "columns are: ",
                                    known);
    }
    if (it->second->physical_type() == parquet::Type::BOOLEAN) {
      return arrow::Status::Invalid("bloom filter requested on boolean column '",
                                    bloom.column,
                                    "'; Parquet bloom filters do not cover booleans");
    }
    if (!(bloom.fpp > 0.0 && bloom.fpp < 1.0)) {
      return arrow::Status::Invalid("bloom filter fpp for column '", bloom.column,
                                    "' must be in (0, 1), got ", bloom.fpp);
    }
    parquet::BloomFilterOptions bloom_options;
    bloom_options.fpp = bloom.fpp;
    if (bloom.ndv) bloom_options.ndv = *bloom.ndv;
    builder.enable_bloom_filter(bloom.column, bloom_options);
  }

  std::shared_ptr<parquet::WriterProperties> props;
  BEGIN_PARQUET_CATCH_EXCEPTIONS
  props = builder.build();
  END_PARQUET_CATCH_EXCEPTIONS
  ARROW_ASSIGN_OR_RAISE(
      auto writer, parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(),
                                                    sink, std::move(props)));
  return std::unique_ptr<ParquetFileWriter>(
      new ParquetFileWriter(std::move(sink), std::move(schema), std::move(writer)));
}

arrow::Result<std::unique_ptr<ParquetFileWriter>> ParquetFileWriter::OpenFile(
    const std::string& path, std::shared_ptr<arrow::Schema> schema,
    ParquetWriterOptions options) {
  ARROW_ASSIGN_OR_RAISE(auto sink, arrow::io::FileOutputStream::Open(path));
  return Open(std::move(sink), std::move(schema), std::move(options));
}

arrow::Status ParquetFileWriter::Write(const arrow::RecordBatch& batch) {
  if (closed_) return arrow::Status::Invalid("ParquetFileWriter::Write after Close");
  if (!batch.schema()->Equals(*schema_, /*check_metadata=*/false)) {
    return arrow::Status::Invalid("batch schema does not match the file's schema:\n",
                                  batch.schema()->ToString(), "\nexpected:\n",
                                  schema_->ToString());
  }
  ARROW_RETURN_NOT_OK(writer_->WriteRecordBatch(batch));
  rows_written_ += batch.num_rows();
  ARROW_ASSIGN_OR_RAISE(bytes_written_, sink_->Tell());
  return arrow::Status::OK();
}

arrow::Status ParquetFileWriter::Close() {
  if (closed_) return arrow::Status::Invalid("ParquetFileWriter::Close called twice");
  closed_ = true;
  ARROW_RETURN_NOT_OK(writer_->Close());
  ARROW_ASSIGN_OR_RAISE(int64_t file_size, sink_->Tell());
  bytes_written_ = file_size;
  if (!sink_->closed()) ARROW_RETURN_NOT_OK(sink_->Close());
  ARROW_ASSIGN_OR_RAISE(metrics_, ComputeMetrics(writer_->metadata(), file_size));
  return arrow::Status::OK();
}

arrow::Result<const DataFileMetrics*> ParquetFileWriter::metrics() const {
  if (!metrics_) {
    return arrow::Status::Invalid(
        "ParquetFileWriter metrics are available only after a successful Close()");
  }
  return &*metrics_;
}

}  // namespace floe::iceberg
