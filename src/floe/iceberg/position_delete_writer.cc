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
  if (rows.empty()) return arrow::Status::Invalid("a position delete file needs rows");
  if (partition.size() != table.spec().fields.size()) {
    return arrow::Status::Invalid("partition tuple has ", partition.size(),
                                  " values; the table's spec has ",
                                  table.spec().fields.size(), " fields");
  }
  for (const auto& row : rows) {
    if (row.pos < 0) {
      return arrow::Status::Invalid("negative position ", row.pos, " in ", row.file_path);
    }
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());

  ARROW_ASSIGN_OR_RAISE(Schema schema, PositionDeleteSchema());
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ToArrowSchema(schema));
  arrow::StringBuilder paths;
  arrow::Int64Builder positions;
  ARROW_RETURN_NOT_OK(paths.Reserve(static_cast<int64_t>(rows.size())));
  ARROW_RETURN_NOT_OK(positions.Reserve(static_cast<int64_t>(rows.size())));
  for (const auto& row : rows) {
    ARROW_RETURN_NOT_OK(paths.Append(row.file_path));
    ARROW_RETURN_NOT_OK(positions.Append(row.pos));
  }
  std::vector<std::shared_ptr<arrow::Array>> columns(2);
  ARROW_RETURN_NOT_OK(paths.Finish(&columns[0]));
  ARROW_RETURN_NOT_OK(positions.Finish(&columns[1]));
  auto batch = arrow::RecordBatch::Make(arrow_schema, static_cast<int64_t>(rows.size()),
                                        std::move(columns));

  ARROW_ASSIGN_OR_RAISE(ParquetWriterOptions options, table.WriterOptions());
  options.bloom_filters.clear();  // the data columns' filters do not apply here
  std::string location = table.NewDataFileLocation(partition);
  location = location.substr(0, location.size() - std::string(".parquet").size()) +
             "-deletes.parquet";
  ARROW_ASSIGN_OR_RAISE(auto sink, table.io().OpenOutput(location));
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        ParquetFileWriter::Open(sink, arrow_schema, std::move(options)));
  ARROW_RETURN_NOT_OK(writer->Write(*batch));
  ARROW_RETURN_NOT_OK(writer->Close());
  ARROW_RETURN_NOT_OK(table.io().Sync(location));
  ARROW_ASSIGN_OR_RAISE(const DataFileMetrics* metrics, writer->metrics());
  ARROW_ASSIGN_OR_RAISE(DataFile file,
                        DataFileFromMetrics(schema, *metrics, location, partition));
  file.content = DataFileContent::kPositionDeletes;
  // Readers match file_path bounds against whole data file paths: keep them whole.
  file.lower_bounds[kDeleteFilePathFieldId] = rows.front().file_path;
  file.upper_bounds[kDeleteFilePathFieldId] = rows.back().file_path;
  if (rows.front().file_path == rows.back().file_path) {
    file.referenced_data_file = rows.front().file_path;
  }
  return file;
}

}  // namespace floe::iceberg
