// Reading a Parquet export for `floe silver backfill` (backfill.h, OpenParquetExport):
// one file or a directory of files, a batch of a few MB at a time.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include "floe/common/progress.h"
#include "floe/silver/backfill.h"

namespace floe::silver {
namespace {

namespace fs = std::filesystem;

// About how many bytes a batch of the export holds.
constexpr int64_t kExportBatchBytes = int64_t{4} << 20;

// A file of the export, read a batch at a time: column chunks streamed through a
// buffer (not a row group's read ahead whole), batches of about kExportBatchBytes
// (fewer rows for wide ones, from the row groups' uncompressed bytes per row).
arrow::Result<std::unique_ptr<parquet::arrow::FileReader>> OpenParquetFile(
    const std::string& path) {
  ARROW_ASSIGN_OR_RAISE(auto input, arrow::io::ReadableFile::Open(path));
  try {
    parquet::ReaderProperties properties;
    properties.enable_buffered_stream();
    properties.set_buffer_size(int64_t{1} << 20);
    parquet::ArrowReaderProperties arrow_properties;
    arrow_properties.set_pre_buffer(false);
    parquet::arrow::FileReaderBuilder builder;
    if (arrow::Status opened = builder.Open(input, properties); !opened.ok()) {
      return opened.WithMessage("reading ", path, ": ", opened.message());
    }
    builder.memory_pool(arrow::default_memory_pool())->properties(arrow_properties);
    std::unique_ptr<parquet::arrow::FileReader> reader;
    ARROW_ASSIGN_OR_RAISE(reader, builder.Build());
    const auto metadata = reader->parquet_reader()->metadata();
    int64_t bytes = 0;
    for (int g = 0; g < metadata->num_row_groups(); ++g) {
      bytes += metadata->RowGroup(g)->total_byte_size();
    }
    const int64_t per_row =
        std::max<int64_t>(1, bytes / std::max<int64_t>(1, metadata->num_rows()));
    reader->set_batch_size(
        std::clamp<int64_t>(kExportBatchBytes / per_row, 16, kExportBatchRows));
    return reader;
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", path, ": ", e.what());
  }
}

// The schema of an export whose files so far have `first` (the columns of
// `first_file`; each column's type from the file `type_from` names, `first_file` when
// none) and another file `other`: the same column names (in any order: rows are read
// by name); a column of Arrow's null type (what writers give a column holding only
// nulls) takes the other file's type. Any other difference is refused, naming the
// column and the files.
arrow::Result<std::shared_ptr<arrow::Schema>> UnifyExportSchemas(
    const arrow::Schema& first, const std::string& first_file, const arrow::Schema& other,
    const std::string& other_file, std::map<std::string, std::string>* type_from) {
  auto differ = [&](const std::string& what) {
    return arrow::Status::Invalid(
        "the files of the export do not share one schema: ", what,
        ". Write every file of the export from one query");
  };
  arrow::FieldVector fields = first.fields();
  for (auto& field : fields) {
    const std::shared_ptr<arrow::Field> theirs = other.GetFieldByName(field->name());
    if (theirs == nullptr) {
      return differ(other_file + " has no column `" + field->name() + "`, " + first_file +
                    " has");
    }
    if (theirs->type()->Equals(*field->type())) continue;
    if (theirs->type()->id() == arrow::Type::NA) continue;
    if (field->type()->id() == arrow::Type::NA) {
      (*type_from)[field->name()] = other_file;
      field = theirs->WithNullable(true);
      continue;
    }
    auto from = type_from->find(field->name());
    return differ("column `" + field->name() + "` is " + theirs->type()->ToString() +
                  " in " + other_file + " and " + field->type()->ToString() + " in " +
                  (from != type_from->end() ? from->second : first_file));
  }
  for (const auto& field : other.fields()) {
    if (first.GetFieldIndex(field->name()) < 0) {
      return differ(other_file + " has a column `" + field->name() + "` that " +
                    first_file + " has not");
    }
  }
  return arrow::schema(std::move(fields));
}

}  // namespace

arrow::Result<ExportReader> OpenParquetExport(const std::string& path,
                                              ProgressReporter* progress) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return arrow::Status::IOError("the export ", path, " does not exist");
  }
  auto files = std::make_shared<std::vector<std::string>>();
  if (!fs::is_directory(path, ec)) {
    files->push_back(path);
  } else {
    for (const auto& entry : fs::directory_iterator(path)) {
      // Hidden and marker entries (`.x.parquet`, `_SUCCESS`, `_temporary/`) are not
      // the export's, as Spark and Hadoop read directories.
      const std::string name = entry.path().filename().string();
      if (name.starts_with('.') || name.starts_with('_')) continue;
      if (entry.is_directory()) {
        // A partitioned or nested export (Spark's col=value/ or x.parquet/ folders):
        // reading the top level only would silently seed part of the table.
        return arrow::Status::Invalid(
            "the export directory ", path, " holds a directory (",
            entry.path().filename().string(),
            "); floe reads the *.parquet files at the top level of the directory only. "
            "Put every file of the export there");
      }
      if (entry.is_regular_file() && entry.path().extension() == ".parquet") {
        files->push_back(entry.path().string());
      }
    }
    std::sort(files->begin(), files->end());
    if (files->empty()) {
      return arrow::Status::IOError("the directory ", path, " holds no *.parquet file");
    }
  }
  // Every footer first: the row count of the whole export, and one schema.
  ExportReader out;
  std::map<std::string, std::string> type_from;
  for (const auto& f : *files) {
    ARROW_ASSIGN_OR_RAISE(auto reader, OpenParquetFile(f));
    const int64_t rows = reader->parquet_reader()->metadata()->num_rows();
    out.rows += rows;
    if (progress != nullptr) progress->AddTotal(rows);
    std::shared_ptr<arrow::Schema> schema;
    ARROW_RETURN_NOT_OK(reader->GetSchema(&schema));
    for (const auto& field : schema->fields()) {
      if (schema->GetAllFieldsByName(field->name()).size() > 1) {
        return arrow::Status::Invalid(f, " has the column `", field->name(),
                                      "` twice; export each column once");
      }
    }
    if (out.schema == nullptr) {
      out.schema = schema;
    } else {
      ARROW_ASSIGN_OR_RAISE(out.schema, UnifyExportSchemas(*out.schema, files->front(),
                                                           *schema, f, &type_from));
    }
  }
  // Then the files one after the other, a batch at a time.
  struct State {
    size_t next_file = 0;
    std::string path;
    std::unique_ptr<parquet::arrow::FileReader> file;
    std::unique_ptr<arrow::RecordBatchReader> batches;
  };
  auto state = std::make_shared<State>();
  out.next = [files, state,
              progress]() -> arrow::Result<std::shared_ptr<arrow::RecordBatch>> {
    while (true) {
      if (state->batches == nullptr) {
        if (state->next_file == files->size()) return nullptr;
        const std::string& f = state->path = (*files)[state->next_file++];
        if (progress != nullptr) {
          progress->SetDetail("reading file " + std::to_string(state->next_file) + "/" +
                              std::to_string(files->size()));
        }
        ARROW_ASSIGN_OR_RAISE(state->file, OpenParquetFile(f));
        try {
          ARROW_ASSIGN_OR_RAISE(state->batches, state->file->GetRecordBatchReader());
        } catch (const parquet::ParquetException& e) {
          return arrow::Status::IOError("reading ", f, ": ", e.what());
        }
      }
      std::shared_ptr<arrow::RecordBatch> batch;
      try {
        if (arrow::Status read = state->batches->ReadNext(&batch); !read.ok()) {
          return read.WithMessage("reading ", state->path, ": ", read.message());
        }
      } catch (const parquet::ParquetException& e) {
        return arrow::Status::IOError("reading ", state->path, ": ", e.what());
      }
      if (batch != nullptr) {
        if (progress != nullptr) progress->Add(batch->num_rows());
        return batch;
      }
      state->batches.reset();
      state->file.reset();
    }
  };
  return out;
}

}  // namespace floe::silver
