#include "floe/iceberg/position_delete_writer.h"

#include <algorithm>
#include <utility>

#include <arrow/api.h>

#include "floe/iceberg/data_file_metrics.h"
#include "floe/iceberg/parquet_writer.h"

namespace floe::iceberg {

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
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    total += static_cast<int64_t>(list.size());
    it = list.empty() ? positions.erase(it) : std::next(it);
  }
  if (total == 0) return arrow::Status::Invalid("a position delete file needs rows");

  ARROW_ASSIGN_OR_RAISE(Schema schema, PositionDeleteSchema());
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema));
  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, table.WriterOptions());
  options.bloom_filters.clear();  // the data columns' filters do not apply here
  std::string location = table.NewDataFileLocation(partition, spec);
  location = location.substr(0, location.size() - std::string(".parquet").size()) +
             "-deletes.parquet";
  ARROW_ASSIGN_OR_RAISE(auto sink, table.io().OpenOutput(location));
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        ParquetFileWriter::Open(sink, arrow_schema, std::move(options)));
  // Sorted by file_path then pos, as the spec requires: the map's order, then each
  // file's sorted positions.
  arrow::StringBuilder paths;
  arrow::Int64Builder pos;
  auto flush = [&]() -> arrow::Status {
    if (pos.length() == 0) return arrow::Status::OK();
    std::vector<std::shared_ptr<arrow::Array>> columns(2);
    ARROW_RETURN_NOT_OK(paths.Finish(&columns[0]));
    ARROW_RETURN_NOT_OK(pos.Finish(&columns[1]));
    const int64_t rows = columns[1]->length();
    return writer->Write(
        *arrow::RecordBatch::Make(arrow_schema, rows, std::move(columns)));
  };
  for (const auto& [path, list] : positions) {
    for (int64_t p : list) {
      ARROW_RETURN_NOT_OK(paths.Append(path));
      ARROW_RETURN_NOT_OK(pos.Append(p));
      if (pos.length() >= kBatchRows) ARROW_RETURN_NOT_OK(flush());
    }
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
