#include "floe/iceberg/position_delete_reader.h"

#include <memory>

#include <arrow/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/properties.h>

#include "floe/iceberg/position_delete.h"
#include "floe/iceberg/scan.h"

namespace floe::iceberg {
namespace {

constexpr int64_t kBatchRows = 65536;

}  // namespace

arrow::Result<int64_t> AddPositionRows(const arrow::Array& paths,
                                       const arrow::Array& positions,
                                       const std::string* only_path,
                                       std::map<std::string, std::vector<int64_t>>* out) {
  if (positions.type_id() != arrow::Type::INT64) {
    return arrow::Status::Invalid("pos is ", positions.type()->ToString(),
                                  ", not a long");
  }
  const auto& pos = static_cast<const arrow::Int64Array&>(positions);
  int64_t with_path = 0;
  if (paths.type_id() == arrow::Type::DICTIONARY) {
    const auto& dict = static_cast<const arrow::DictionaryArray&>(paths);
    if (dict.dictionary()->type_id() != arrow::Type::STRING ||
        dict.indices()->type_id() != arrow::Type::INT32) {
      return arrow::Status::Invalid("file_path is ", paths.type()->ToString());
    }
    const auto& values = static_cast<const arrow::StringArray&>(*dict.dictionary());
    const auto& indices = static_cast<const arrow::Int32Array&>(*dict.indices());
    // Each dictionary entry's list, looked up once (null: not wanted).
    std::vector<std::vector<int64_t>*> lists(values.length(), nullptr);
    std::vector<bool> looked(values.length(), false);
    for (int64_t i = 0; i < dict.length(); ++i) {
      if (dict.IsNull(i) || pos.IsNull(i)) continue;
      ++with_path;
      const int32_t at = indices.Value(i);
      if (at < 0 || at >= values.length()) {
        return arrow::Status::Invalid("file_path index ", at, " out of its dictionary");
      }
      if (!looked[at]) {
        looked[at] = true;
        const std::string_view path = values.GetView(at);
        if (only_path == nullptr || path == *only_path) {
          lists[at] = &(*out)[std::string(path)];
        }
      }
      if (lists[at] != nullptr) lists[at]->push_back(pos.Value(i));
    }
    return with_path;
  }
  if (paths.type_id() != arrow::Type::STRING) {
    return arrow::Status::Invalid("file_path is ", paths.type()->ToString(),
                                  ", not a string");
  }
  const auto& p = static_cast<const arrow::StringArray&>(paths);
  // Rows come sorted by path: look the path up only when it changes.
  bool have = false;
  std::string_view current_path;
  std::vector<int64_t>* current = nullptr;
  for (int64_t i = 0; i < p.length(); ++i) {
    if (p.IsNull(i) || pos.IsNull(i)) continue;
    ++with_path;
    const std::string_view path = p.GetView(i);
    if (!have || path != current_path) {
      have = true;
      current_path = path;
      current = only_path == nullptr || path == *only_path ? &(*out)[std::string(path)]
                                                           : nullptr;
    }
    if (current != nullptr) current->push_back(pos.Value(i));
  }
  return with_path;
}

arrow::Result<bool> StreamPositionDeletes(
    FileIO& io, const DataFile& deletes, const std::string* only_path,
    std::map<std::string, std::vector<int64_t>>* out) {
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(deletes.file_path));
  int64_t rows = 0;
  int64_t with_path = 0;
  try {
    parquet::ReaderProperties properties;
    properties.enable_buffered_stream();
    properties.set_buffer_size(int64_t{1} << 20);
    parquet::arrow::FileReaderBuilder builder;
    ARROW_RETURN_NOT_OK(builder.Open(input, properties));
    const parquet::SchemaDescriptor* schema = builder.raw_reader()->metadata()->schema();
    int path_column = -1;
    int pos_column = -1;
    for (int c = 0; c < schema->num_columns(); ++c) {
      const int32_t id = schema->Column(c)->schema_node()->field_id();
      if (id == kDeleteFilePathFieldId) path_column = c;
      if (id == kDeletePosFieldId) pos_column = c;
    }
    if (path_column < 0 || pos_column < 0) return false;
    parquet::ArrowReaderProperties arrow_properties;
    arrow_properties.set_batch_size(kBatchRows);
    arrow_properties.set_pre_buffer(false);
    // The paths as indices into the row group's dictionary, not a string a row.
    arrow_properties.set_read_dictionary(path_column, true);
    builder.memory_pool(arrow::default_memory_pool())->properties(arrow_properties);
    ARROW_ASSIGN_OR_RAISE(auto reader, builder.Build());
    std::vector<int> row_groups(reader->num_row_groups());
    for (int g = 0; g < reader->num_row_groups(); ++g) row_groups[g] = g;
    ARROW_ASSIGN_OR_RAISE(auto batches, reader->GetRecordBatchReader(
                                            row_groups, {path_column, pos_column}));
    // The batch's columns come in the file's order.
    const int path_at = path_column < pos_column ? 0 : 1;
    while (true) {
      ARROW_ASSIGN_OR_RAISE(auto batch, batches->Next());
      if (batch == nullptr) break;
      rows += batch->num_rows();
      auto added = AddPositionRows(*batch->column(path_at), *batch->column(1 - path_at),
                                   only_path, out);
      if (!added.ok()) {
        return arrow::Status::Invalid("position delete file ", deletes.file_path, ": ",
                                      added.status().message());
      }
      with_path += *added;
    }
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", deletes.file_path, ": ", e.what());
  }
  return rows == 0 || with_path > 0;
}

}  // namespace floe::iceberg
