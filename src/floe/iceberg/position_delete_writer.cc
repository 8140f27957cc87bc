#include "floe/iceberg/position_delete_writer.h"

#include <algorithm>
#include <utility>

#include <arrow/api.h>

#include "floe/iceberg/data_file_metrics.h"
#include "floe/iceberg/parquet_writer.h"

namespace floe::iceberg {
namespace {

// Sorts `list`, which is most often a few sorted runs one after the other (a bucket's
// positions deleted before, then a merge's): the runs merged in place, a sort when
// there are many.
void SortPositions(std::vector<int64_t>* list) {
  constexpr int kMostRuns = 8;
  std::vector<std::vector<int64_t>::iterator> ends;
  for (auto at = list->begin(); at != list->end();) {
    at = std::is_sorted_until(at, list->end());
    ends.push_back(at);
    if (ends.size() > kMostRuns) {
      std::sort(list->begin(), list->end());
      return;
    }
  }
  for (size_t i = 1; i < ends.size(); ++i) {
    std::inplace_merge(list->begin(), ends[i - 1], ends[i]);
  }
}

}  // namespace

arrow::Result<Schema> PositionDeleteSchema() {
  return Schema::Make(
      0, {NestedField::Required(kDeleteFilePathFieldId, "file_path", Type::String()),
          NestedField::Required(kDeletePosFieldId, "pos", Type::Long())});
}

arrow::Result<DataFile> WritePositionDeleteFile(Table& table,
                                                const PartitionTuple& partition,
                                                std::vector<PositionDelete> rows) {
  PositionsByFile positions;
  for (auto& row : rows) positions[row.file_path].push_back(row.pos);
  return WritePositionDeleteFile(table, partition, std::move(positions));
}

namespace {

// Rows of a position delete file built and written at once.
constexpr int64_t kBatchRows = 65536;

}  // namespace

arrow::Result<DataFile> WritePositionDeleteFile(Table& table,
                                                const PartitionTuple& partition,
                                                PositionsByFile positions,
                                                const PartitionSpec* spec) {
  const PartitionSpec& of = spec != nullptr ? *spec : table.spec();
  if (partition.size() != of.fields.size()) {
    return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                  " values; the spec has ", of.fields.size(), " fields");
  }
  int64_t total = 0;
  for (auto it = positions.begin(); it != positions.end();) {
    auto& list = it->second;
    for (int64_t pos : list) {
      if (pos < 0) {
        return arrow::Status::Invalid("negative position ", pos, " in ", it->first);
      }
    }
    SortPositions(&list);
    list.erase(std::unique(list.begin(), list.end()), list.end());
    total += static_cast<int64_t>(list.size());
    it = list.empty() ? positions.erase(it) : std::next(it);
  }
  if (total == 0) return arrow::Status::Invalid("a position delete file needs rows");

  ARROW_ASSIGN_OR_RAISE(Schema schema, PositionDeleteSchema());
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema));
  // file_path written from a dictionary of the paths (a bucket's file repeats a
  // handful of them over many rows: no string copied or hashed a row); a Parquet
  // string column all the same. pos is unique: no dictionary.
  const auto path_type = arrow::dictionary(arrow::int32(), arrow::utf8());
  ARROW_ASSIGN_OR_RAISE(
      arrow_schema,
      arrow_schema->SetField(0, arrow_schema->field(0)->WithType(path_type)));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, table.WriterOptions());
  options.bloom_filters.clear();  // the data columns' filters do not apply here
  options.plain_columns.push_back(arrow_schema->field(1)->name());
  std::string location = table.NewDataFileLocation(partition, spec);
  location = location.substr(0, location.size() - std::string(".parquet").size()) +
             "-deletes.parquet";
  ARROW_ASSIGN_OR_RAISE(auto sink, table.io().OpenOutput(location));
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        ParquetFileWriter::Open(sink, arrow_schema, std::move(options)));
  arrow::StringBuilder dictionary_builder;
  for (const auto& [path, list] : positions) {
    ARROW_RETURN_NOT_OK(dictionary_builder.Append(path));
  }
  std::shared_ptr<arrow::Array> dictionary;
  ARROW_RETURN_NOT_OK(dictionary_builder.Finish(&dictionary));
  // Sorted by file_path then pos, as the spec requires: the map's order, then each
  // file's sorted positions.
  arrow::Int32Builder paths;
  arrow::Int64Builder pos;
  auto flush = [&]() -> arrow::Status {
    if (pos.length() == 0) return arrow::Status::OK();
    std::shared_ptr<arrow::Array> indices;
    std::vector<std::shared_ptr<arrow::Array>> columns(2);
    ARROW_RETURN_NOT_OK(paths.Finish(&indices));
    ARROW_ASSIGN_OR_RAISE(
        columns[0], arrow::DictionaryArray::FromArrays(path_type, indices, dictionary));
    ARROW_RETURN_NOT_OK(pos.Finish(&columns[1]));
    const int64_t rows = columns[1]->length();
    return writer->Write(
        *arrow::RecordBatch::Make(arrow_schema, rows, std::move(columns)));
  };
  int32_t index = 0;
  for (const auto& [path, list] : positions) {
    for (size_t at = 0; at < list.size();) {
      const size_t n =
          std::min(list.size() - at, static_cast<size_t>(kBatchRows - pos.length()));
      ARROW_RETURN_NOT_OK(paths.Reserve(static_cast<int64_t>(n)));
      for (size_t i = 0; i < n; ++i) paths.UnsafeAppend(index);
      ARROW_RETURN_NOT_OK(pos.AppendValues(list.data() + at, static_cast<int64_t>(n)));
      at += n;
      if (pos.length() >= kBatchRows) ARROW_RETURN_NOT_OK(flush());
    }
    ++index;
  }
  ARROW_RETURN_NOT_OK(flush());
  ARROW_RETURN_NOT_OK(writer->Close());
  ARROW_RETURN_NOT_OK(table.io().Sync(location));
  ARROW_ASSIGN_OR_RAISE(const DataFileMetrics* metrics, writer->metrics());
  ARROW_ASSIGN_OR_RAISE(DataFile file,
                        DataFileFromMetrics(schema, *metrics, location, partition));
  file.content = DataFileContent::kPositionDeletes;
  // Readers match file_path bounds against whole data file paths: keep them whole.
  file.lower_bounds[kDeleteFilePathFieldId] = positions.begin()->first;
  file.upper_bounds[kDeleteFilePathFieldId] = positions.rbegin()->first;
  if (positions.size() == 1) file.referenced_data_file = positions.begin()->first;
  return file;
}

}  // namespace floe::iceberg
