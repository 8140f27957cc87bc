// Writes a deterministic sample data file with floe's ParquetFileWriter and prints
// the metrics floe computed for it as JSON, so the integration tests can check the
// file and those metrics with independent readers (DuckDB, pyarrow).
//
// Rows i = 0..rows-1:  id long (field id 1, required) = 2*i, so odd ids are absent;
//                      name string (2) = "name-<i>", null when i % 7 == 0;
//                      amount double (3) = i / 4.0;
//                      tags list<string> (4, element 5) = ["t<i%3>"].
#include <iostream>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/parquet_writer.h"

namespace {

using floe::iceberg::WithFieldId;

arrow::Result<std::shared_ptr<arrow::RecordBatch>> MakeBatch(
    const std::shared_ptr<arrow::Schema>& schema, int64_t first, int64_t n) {
  arrow::Int64Builder ids;
  arrow::StringBuilder names;
  arrow::DoubleBuilder amounts;
  auto elements = std::make_shared<arrow::StringBuilder>();
  arrow::ListBuilder tags(arrow::default_memory_pool(), elements,
                          schema->field(3)->type());
  for (int64_t i = first; i < first + n; ++i) {
    ARROW_RETURN_NOT_OK(ids.Append(2 * i));
    if (i % 7 == 0) {
      ARROW_RETURN_NOT_OK(names.AppendNull());
    } else {
      ARROW_RETURN_NOT_OK(names.Append("name-" + std::to_string(i)));
    }
    ARROW_RETURN_NOT_OK(amounts.Append(static_cast<double>(i) / 4.0));
    ARROW_RETURN_NOT_OK(tags.Append());
    ARROW_RETURN_NOT_OK(elements->Append("t" + std::to_string(i % 3)));
  }
  std::vector<std::shared_ptr<arrow::Array>> columns(4);
  ARROW_RETURN_NOT_OK(ids.Finish(&columns[0]));
  ARROW_RETURN_NOT_OK(names.Finish(&columns[1]));
  ARROW_RETURN_NOT_OK(amounts.Finish(&columns[2]));
  ARROW_RETURN_NOT_OK(tags.Finish(&columns[3]));
  return arrow::RecordBatch::Make(schema, n, columns);
}

arrow::Result<nlohmann::json> Run(const std::string& out, int64_t rows,
                                  int64_t batch_rows,
                                  floe::iceberg::ParquetWriterOptions options) {
  auto schema = arrow::schema({
      WithFieldId(arrow::field("id", arrow::int64(), /*nullable=*/false), 1),
      WithFieldId(arrow::field("name", arrow::utf8()), 2),
      WithFieldId(arrow::field("amount", arrow::float64()), 3),
      WithFieldId(arrow::field("tags", arrow::list(WithFieldId(
                                           arrow::field("element", arrow::utf8()), 5))),
                  4),
  });
  ARROW_ASSIGN_OR_RAISE(auto writer, floe::iceberg::ParquetFileWriter::OpenFile(
                                         out, schema, std::move(options)));
  for (int64_t first = 0; first < rows; first += batch_rows) {
    ARROW_ASSIGN_OR_RAISE(auto batch,
                          MakeBatch(schema, first, std::min(batch_rows, rows - first)));
    ARROW_RETURN_NOT_OK(writer->Write(*batch));
  }
  ARROW_RETURN_NOT_OK(writer->Close());
  ARROW_ASSIGN_OR_RAISE(const floe::iceberg::DataFileMetrics* m, writer->metrics());

  nlohmann::json j;
  j["record_count"] = m->record_count;
  j["file_size_bytes"] = m->file_size_bytes;
  j["split_offsets"] = m->split_offsets;
  j["columns"] = nlohmann::json::array();
  for (const auto& col : m->columns) {
    nlohmann::json c;
    c["field_id"] = col.field_id;
    c["path"] = col.path;
    c["value_count"] = col.value_count;
    c["null_count"] = col.null_count;
    c["compressed_size"] = col.compressed_size;
    c["has_bloom_filter"] = col.has_bloom_filter;
    c["has_bounds"] = col.bounds != nullptr;
    j["columns"].push_back(std::move(c));
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write floe's sample Parquet data file and print its metrics as JSON"};
  std::string out;
  int64_t rows = 1000;
  int64_t batch_rows = 256;
  int64_t row_group_rows = 1024 * 1024;
  std::vector<std::string> bloom_columns;
  double fpp = 0.01;
  app.add_option("--out", out, "file to write")->required();
  app.add_option("--rows", rows, "rows to write")->check(CLI::NonNegativeNumber);
  app.add_option("--batch-rows", batch_rows, "rows per record batch")
      ->check(CLI::PositiveNumber);
  app.add_option("--row-group-rows", row_group_rows, "max rows per row group")
      ->check(CLI::PositiveNumber);
  app.add_option("--bloom", bloom_columns, "column to give a bloom filter (repeatable)");
  app.add_option("--fpp", fpp, "bloom filter false-positive probability");
  CLI11_PARSE(app, argc, argv);

  floe::iceberg::ParquetWriterOptions options;
  options.max_row_group_rows = row_group_rows;
  for (const auto& col : bloom_columns) options.bloom_filters.push_back({col, fpp, {}});
  auto result = Run(out, rows, batch_rows, std::move(options));
  if (!result.ok()) {
    std::cerr << "write_parquet_sample: " << result.status().ToString() << "\n";
    return 1;
  }
  std::cout << result->dump(2) << "\n";
  return 0;
}
