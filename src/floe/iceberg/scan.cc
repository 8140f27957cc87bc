#include "floe/iceberg/scan.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include "floe/common/parse.h"
#include "floe/iceberg/arrow_compute.h"
#include "floe/iceberg/position_delete_reader.h"
#include "floe/iceberg/scan_filter.h"

namespace floe::iceberg {

namespace {

namespace cp = arrow::compute;
using scan_internal::ColumnMap;
using scan_internal::EvalMask;

// ---- planning --------------------------------------------------------------------

// The partition struct type of `spec`, from `schema` or, when a source column is no
// longer there, from the newest schema that still has them all.
arrow::Result<TypePtr> PartitionTypeFor(const TableMetadata& metadata,
                                        const PartitionSpec& spec, const Schema& schema) {
  auto type = spec.PartitionType(schema);
  if (type.ok()) return type;
  for (auto it = metadata.schemas.rbegin(); it != metadata.schemas.rend(); ++it) {
    auto other = spec.PartitionType(*it);
    if (other.ok()) return other;
  }
  return type.status();
}

struct SpecContext {
  const PartitionSpec* spec = nullptr;
  TypePtr partition_type;
  ExpressionPtr projected;
};

template <typename T>
arrow::Result<std::vector<T>> RunBounded(
    std::vector<std::function<arrow::Result<T>()>> jobs, int parallelism) {
  std::vector<T> out;
  out.reserve(jobs.size());
  const size_t step = static_cast<size_t>(std::max(1, parallelism));
  for (size_t start = 0; start < jobs.size(); start += step) {
    std::vector<std::future<arrow::Result<T>>> running;
    for (size_t i = start; i < std::min(jobs.size(), start + step); ++i) {
      running.push_back(std::async(std::launch::async, jobs[i]));
    }
    arrow::Status first;
    for (auto& f : running) {
      auto r = f.get();
      if (!r.ok()) {
        if (first.ok()) first = r.status();
      } else {
        out.push_back(std::move(*r));
      }
    }
    ARROW_RETURN_NOT_OK(first);
  }
  return out;
}

// ---- reading ---------------------------------------------------------------------

void CollectLeaves(const parquet::arrow::SchemaField& field, std::vector<int>* out) {
  if (field.column_index >= 0) out->push_back(field.column_index);
  for (const auto& child : field.children) CollectLeaves(child, out);
}

// The top-level columns of a Parquet file whose field ids are in `ids` (or, for a
// file without field ids, whose names are in `fallback_names` at the same index).
struct FileColumns {
  int64_t num_rows = 0;
  std::map<int32_t, std::shared_ptr<arrow::ChunkedArray>> by_id;
};

arrow::Result<FileColumns> ReadColumnsById(
    FileIO& io, const std::string& location, const std::vector<int32_t>& ids,
    const std::vector<std::string>& fallback_names = {}) {
  ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(location));
  try {
    ARROW_ASSIGN_OR_RAISE(auto reader,
                          parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
    FileColumns out;
    out.num_rows = reader->parquet_reader()->metadata()->num_rows();
    const auto& fields = reader->manifest().schema_fields;
    std::vector<int> leaves;
    std::vector<int32_t> order;
    for (const auto& f : fields) {
      std::optional<int32_t> id = FieldIdOf(*f.field);
      if (!id) {
        for (size_t i = 0; i < fallback_names.size() && i < ids.size(); ++i) {
          if (f.field->name() == fallback_names[i]) id = ids[i];
        }
      }
      if (!id || std::find(ids.begin(), ids.end(), *id) == ids.end()) continue;
      CollectLeaves(f, &leaves);
      order.push_back(*id);
    }
    if (order.empty()) return out;
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> table, reader->ReadTable(leaves));
    if (table->num_columns() != static_cast<int>(order.size())) {
      return arrow::Status::Invalid("unexpected column count reading ", location);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      out.by_id[order[i]] = table->column(static_cast<int>(i));
    }
    return out;
  } catch (const parquet::ParquetException& e) {
    return arrow::Status::IOError("reading ", location, ": ", e.what());
  }
}

// One array of `expected` type from a column as read: chunks joined, then cast when
// the file holds a narrower (promoted) or differently encoded type.
arrow::Result<std::shared_ptr<arrow::Array>> Conform(
    const std::shared_ptr<arrow::ChunkedArray>& column,
    const std::shared_ptr<arrow::DataType>& expected) {
  std::shared_ptr<arrow::Array> array;
  if (column->num_chunks() == 1) {
    array = column->chunk(0);
  } else if (column->num_chunks() == 0) {
    ARROW_ASSIGN_OR_RAISE(array, arrow::MakeEmptyArray(column->type()));
  } else {
    ARROW_ASSIGN_OR_RAISE(array, arrow::Concatenate(column->chunks()));
  }
  if (array->type()->Equals(*expected)) return array;
  ARROW_RETURN_NOT_OK(EnsureComputeInitialized());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum cast, cp::Cast(array, expected));
  return cast.make_array();
}

// Appends a self-delimiting encoding of row `i` of `array` to `key`: equal values
// (and two nulls) give equal bytes.
void AppendKey(const arrow::Array& array, int64_t i, std::string* key) {
  if (array.IsNull(i)) {
    key->push_back('\0');
    return;
  }
  key->push_back('\1');
  const auto& type = *array.type();
  if (type.id() == arrow::Type::BOOL) {
    key->push_back(static_cast<const arrow::BooleanArray&>(array).Value(i) ? '\1' : '\0');
    return;
  }
  if (arrow::is_base_binary_like(type.id())) {
    std::string_view v;
    if (type.id() == arrow::Type::LARGE_STRING ||
        type.id() == arrow::Type::LARGE_BINARY) {
      v = static_cast<const arrow::LargeBinaryArray&>(array).GetView(i);
    } else {
      v = static_cast<const arrow::BinaryArray&>(array).GetView(i);
    }
    const uint64_t n = v.size();
    key->append(reinterpret_cast<const char*>(&n), sizeof(n));
    key->append(v);
    return;
  }
  if (const auto* fw = dynamic_cast<const arrow::FixedWidthType*>(&type)) {
    const int width = fw->bit_width() / 8;
    const auto& data = array.data();
    const uint8_t* base = data->buffers[1]->data() + (data->offset + i) * width;
    key->append(reinterpret_cast<const char*>(base), width);
    return;
  }
  auto scalar = array.GetScalar(i);
  std::string text = scalar.ok() ? (*scalar)->ToString() : "?";
  const uint64_t n = text.size();
  key->append(reinterpret_cast<const char*>(&n), sizeof(n));
  key->append(text);
}

// The rows of `data_path` that a position delete file deletes, appended to `out`.
arrow::Status ReadDeletedPositions(FileIO& io, const DataFile& deletes,
                                   const std::string& data_path,
                                   std::vector<int64_t>* out) {
  std::map<std::string, std::vector<int64_t>> by_path;
  ARROW_ASSIGN_OR_RAISE(bool streamed,
                        StreamPositionDeletes(io, deletes, &data_path, &by_path));
  if (!streamed) {
    ARROW_ASSIGN_OR_RAISE(by_path, ReadPositionDeletes(io, deletes));
  }
  if (auto it = by_path.find(data_path); it != by_path.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
  }
  return arrow::Status::OK();
}

// The rows of one equality delete file: its equality field ids and the key of each
// row (see AppendKey), the values read in `schema`'s types.
struct EqualityDeleteSet {
  std::vector<int32_t> ids;
  std::unordered_set<std::string> keys;
};

arrow::Result<EqualityDeleteSet> ReadEqualityDeletes(FileIO& io, const DataFile& deletes,
                                                     const Schema& schema) {
  EqualityDeleteSet out;
  out.ids = deletes.equality_ids;
  if (out.ids.empty()) {
    return arrow::Status::Invalid("equality delete file ", deletes.file_path,
                                  " has no equality ids");
  }
  ARROW_ASSIGN_OR_RAISE(FileColumns cols,
                        ReadColumnsById(io, deletes.file_path, out.ids));
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (int32_t id : out.ids) {
    const NestedField* field = schema.FindField(id);
    auto it = cols.by_id.find(id);
    if (field == nullptr || it == cols.by_id.end()) {
      return arrow::Status::NotImplemented("equality delete file ", deletes.file_path,
                                           " on field id ", id,
                                           " missing from the schema or file");
    }
    ARROW_ASSIGN_OR_RAISE(auto type, ToArrowType(*field->type));
    ARROW_ASSIGN_OR_RAISE(auto array, Conform(it->second, type));
    columns.push_back(std::move(array));
  }
  for (int64_t r = 0; r < cols.num_rows; ++r) {
    std::string key;
    for (const auto& c : columns) AppendKey(*c, r, &key);
    out.keys.insert(std::move(key));
  }
  return out;
}

// Reads one data file a row group at a time: columns by field id in the read
// schema's types, deletes and the row filter applied.
class TaskReader {
 public:
  static arrow::Result<std::unique_ptr<TaskReader>> Open(
      FileIO& io, const FileScanTask& task, const Schema& schema,
      const Schema& projection, const ExpressionPtr& filter, int64_t batch_rows = 0,
      int64_t batch_bytes = 0, LastPositionDeletes* last_deletes = nullptr,
      int64_t stream_buffer_bytes = int64_t{1} << 20) {
    ARROW_RETURN_NOT_OK(EnsureComputeInitialized());
    const std::string& format = task.data_file.file_format;
    if (format != "PARQUET" && format != "parquet") {
      return arrow::Status::NotImplemented("data file format ", format);
    }
    auto r = std::unique_ptr<TaskReader>(new TaskReader());
    r->path_ = task.data_file.file_path;
    r->filter_ = filter ? filter : AlwaysTrue();
    for (const NestedField& f : projection.fields()) r->projection_ids_.push_back(f.id);
    ARROW_ASSIGN_OR_RAISE(r->output_schema_, ToArrowSchema(projection));

    // Every column to read, with the type it is read in.
    std::map<int32_t, const NestedField*> wanted;
    for (const NestedField& f : projection.fields()) wanted[f.id] = &f;
    for (int32_t id : ReferencedFieldIds(r->filter_)) {
      if (const NestedField* f = schema.FindField(id)) wanted.emplace(id, f);
    }
    for (const DataFile& d : task.delete_files) {
      if (d.content == DataFileContent::kPositionDeletes) {
        if (last_deletes != nullptr) {
          ARROW_RETURN_NOT_OK(last_deletes->Append(io, d, r->path_, &r->deleted_));
        } else {
          ARROW_RETURN_NOT_OK(ReadDeletedPositions(io, d, r->path_, &r->deleted_));
        }
      } else if (d.content == DataFileContent::kEqualityDeletes) {
        ARROW_ASSIGN_OR_RAISE(auto set, ReadEqualityDeletes(io, d, schema));
        for (int32_t id : set.ids) wanted.emplace(id, schema.FindField(id));
        r->equality_.push_back(std::move(set));
      }
    }
    r->deleted_.insert(r->deleted_.end(), task.deleted_positions.begin(),
                       task.deleted_positions.end());
    std::sort(r->deleted_.begin(), r->deleted_.end());
    for (const auto& [id, field] : wanted) {
      ARROW_ASSIGN_OR_RAISE(auto type, ToArrowType(*field->type));
      r->types_[id] = type;
    }

    ARROW_ASSIGN_OR_RAISE(auto input, io.OpenInput(r->path_));
    r->batch_rows_ = batch_rows;
    r->batch_bytes_ = batch_bytes;
    try {
      if (batch_rows > 0) {
        // Bounded: column chunks streamed through a buffer, rows decoded a batch at a
        // time.
        parquet::ReaderProperties properties;
        properties.enable_buffered_stream();
        properties.set_buffer_size(stream_buffer_bytes);
        parquet::ArrowReaderProperties arrow_properties;
        arrow_properties.set_batch_size(batch_rows);
        // Not the row group's column chunks read ahead whole (Arrow's default).
        arrow_properties.set_pre_buffer(false);
        parquet::arrow::FileReaderBuilder builder;
        ARROW_RETURN_NOT_OK(builder.Open(input, properties));
        builder.memory_pool(arrow::default_memory_pool())->properties(arrow_properties);
        ARROW_ASSIGN_OR_RAISE(r->reader_, builder.Build());
      } else {
        ARROW_ASSIGN_OR_RAISE(
            r->reader_, parquet::arrow::OpenFile(input, arrow::default_memory_pool()));
      }
      for (const auto& f : r->reader_->manifest().schema_fields) {
        std::optional<int32_t> id = FieldIdOf(*f.field);
        if (!id || wanted.count(*id) == 0) continue;
        CollectLeaves(f, &r->leaves_);
        r->file_ids_.push_back(*id);
      }
      r->num_row_groups_ = r->reader_->num_row_groups();
    } catch (const parquet::ParquetException& e) {
      return arrow::Status::IOError("reading ", r->path_, ": ", e.what());
    }
    return r;
  }

  /// The next row group's rows (or, reading in batches, the next batch of them) that
  /// survive deletes and the filter, or null at the end.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Next() {
    int64_t rows = 0;
    std::shared_ptr<arrow::Table> table;
    try {
      if (batch_rows_ > 0 && !file_ids_.empty()) {
        std::shared_ptr<arrow::RecordBatch> batch;
        while (batch == nullptr) {
          if (row_group_reader_ == nullptr) {
            if (row_group_ >= num_row_groups_) return nullptr;
            if (batch_bytes_ > 0) {
              // Wide rows: fewer of them a batch (the row group's uncompressed bytes
              // per row; compression says nothing of a value's size in memory).
              const auto group =
                  reader_->parquet_reader()->metadata()->RowGroup(row_group_);
              const int64_t per_row = std::max<int64_t>(
                  1, group->total_byte_size() / std::max<int64_t>(1, group->num_rows()));
              reader_->set_batch_size(
                  std::clamp<int64_t>(batch_bytes_ / per_row, 64, batch_rows_));
            }
            ARROW_ASSIGN_OR_RAISE(row_group_reader_,
                                  reader_->GetRecordBatchReader({row_group_++}, leaves_));
          }
          ARROW_RETURN_NOT_OK(row_group_reader_->ReadNext(&batch));
          if (batch == nullptr) row_group_reader_.reset();
        }
        rows = batch->num_rows();
        ARROW_ASSIGN_OR_RAISE(table, arrow::Table::FromRecordBatches({batch}));
      } else {
        if (row_group_ >= num_row_groups_) return nullptr;
        const int rg = row_group_++;
        rows = reader_->parquet_reader()->metadata()->RowGroup(rg)->num_rows();
        if (!file_ids_.empty()) {
          ARROW_ASSIGN_OR_RAISE(table, reader_->ReadRowGroup(rg, leaves_));
        }
      }
    } catch (const parquet::ParquetException& e) {
      return arrow::Status::IOError("reading ", path_, ": ", e.what());
    }
    if (table != nullptr && table->num_columns() != static_cast<int>(file_ids_.size())) {
      return arrow::Status::Invalid("unexpected column count reading ", path_);
    }
    ColumnMap cols;
    for (const auto& [id, type] : types_) {
      auto at = std::find(file_ids_.begin(), file_ids_.end(), id);
      if (at == file_ids_.end()) {
        // Added after this file was written: null in every row.
        ARROW_ASSIGN_OR_RAISE(cols[id], arrow::MakeArrayOfNull(type, rows));
        continue;
      }
      ARROW_ASSIGN_OR_RAISE(
          cols[id],
          Conform(table->column(static_cast<int>(at - file_ids_.begin())), type));
      if (cols[id]->length() != rows) {
        return arrow::Status::Invalid("column ", id, " of ", path_, " has ",
                                      cols[id]->length(), " rows, expected ", rows);
      }
    }
    const int64_t first = position_;
    position_ += rows;

    std::vector<uint8_t> keep(static_cast<size_t>(rows), 1);
    bool any_deleted = false;
    for (auto it = std::lower_bound(deleted_.begin(), deleted_.end(), first);
         it != deleted_.end() && *it < first + rows; ++it) {
      keep[*it - first] = 0;
      any_deleted = true;
    }
    for (const EqualityDeleteSet& set : equality_) {
      std::vector<const arrow::Array*> data;
      for (int32_t id : set.ids) data.push_back(cols.at(id).get());
      for (int64_t r = 0; r < rows; ++r) {
        if (!keep[r]) continue;
        std::string key;
        for (const arrow::Array* c : data) AppendKey(*c, r, &key);
        if (set.keys.count(key) > 0) {
          keep[r] = 0;
          any_deleted = true;
        }
      }
    }

    std::vector<std::shared_ptr<arrow::Array>> out_cols;
    for (int32_t id : projection_ids_) out_cols.push_back(cols.at(id));
    auto batch = arrow::RecordBatch::Make(output_schema_, rows, std::move(out_cols));
    std::optional<arrow::Datum> mask;
    if (filter_->op() != ExpressionOp::kTrue) {
      ARROW_ASSIGN_OR_RAISE(mask, EvalMask(filter_, cols, rows));
    }
    if (any_deleted) {
      arrow::BooleanBuilder builder;
      ARROW_RETURN_NOT_OK(builder.Reserve(rows));
      for (uint8_t k : keep) builder.UnsafeAppend(k != 0);
      ARROW_ASSIGN_OR_RAISE(auto keep_array, builder.Finish());
      if (mask) {
        ARROW_ASSIGN_OR_RAISE(mask, cp::CallFunction("and_kleene", {*mask, keep_array}));
      } else {
        mask = arrow::Datum(keep_array);
      }
    }
    if (mask) {
      ARROW_ASSIGN_OR_RAISE(arrow::Datum filtered, cp::Filter(batch, *mask));
      batch = filtered.record_batch();
    }
    return batch;
  }

 private:
  TaskReader() = default;

  std::string path_;
  ExpressionPtr filter_;
  std::vector<int32_t> projection_ids_;
  std::shared_ptr<arrow::Schema> output_schema_;
  std::map<int32_t, std::shared_ptr<arrow::DataType>> types_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  /// Rows per batch (0: a row group per batch), and the reader of the row group
  /// being read in batches.
  int64_t batch_rows_ = 0;
  /// When set, fewer rows a batch for wide rows: about this many bytes.
  int64_t batch_bytes_ = 0;
  std::unique_ptr<arrow::RecordBatchReader> row_group_reader_;
  std::vector<int> leaves_;
  /// Field ids of the top-level file columns read, in file order.
  std::vector<int32_t> file_ids_;
  int num_row_groups_ = 0;
  int row_group_ = 0;
  /// Position in the file of the next batch's first row.
  int64_t position_ = 0;
  /// Sorted positions deleted by the position delete files.
  std::vector<int64_t> deleted_;
  std::vector<EqualityDeleteSet> equality_;
};

arrow::Result<std::shared_ptr<const Schema>> ProjectSchema(
    const Schema& schema, const std::optional<std::vector<std::string>>& columns) {
  if (!columns) return std::make_shared<const Schema>(schema);
  std::vector<NestedField> fields;
  for (const std::string& name : *columns) {
    const NestedField* f = schema.as_struct()->FindChild(name);
    if (f == nullptr) {
      return arrow::Status::Invalid("unknown column '", name, "' in the projection");
    }
    fields.push_back(*f);
  }
  ARROW_ASSIGN_OR_RAISE(Schema projected, Schema::Make(schema.schema_id(), fields));
  return std::make_shared<const Schema>(std::move(projected));
}

class PlanReader : public arrow::RecordBatchReader {
 public:
  PlanReader(FileIO& io, ScanPlan plan, std::shared_ptr<arrow::Schema> schema)
      : io_(io), plan_(std::move(plan)), schema_(std::move(schema)) {}

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }

  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    while (true) {
      if (current_ == nullptr) {
        if (next_task_ >= plan_.tasks.size()) {
          *out = nullptr;
          return arrow::Status::OK();
        }
        ARROW_ASSIGN_OR_RAISE(
            current_, TaskReader::Open(io_, plan_.tasks[next_task_++], *plan_.schema,
                                       *plan_.projection, plan_.filter));
      }
      ARROW_ASSIGN_OR_RAISE(auto batch, current_->Next());
      if (batch == nullptr) {
        current_.reset();
      } else if (batch->num_rows() > 0) {
        *out = std::move(batch);
        return arrow::Status::OK();
      }
    }
  }

 private:
  FileIO& io_;
  ScanPlan plan_;
  std::shared_ptr<arrow::Schema> schema_;
  size_t next_task_ = 0;
  std::unique_ptr<TaskReader> current_;
};

}  // namespace

arrow::Result<std::map<std::string, std::vector<int64_t>>> ReadPositionDeletes(
    FileIO& io, const DataFile& deletes) {
  std::map<std::string, std::vector<int64_t>> out;
  ARROW_ASSIGN_OR_RAISE(bool streamed, StreamPositionDeletes(io, deletes, nullptr, &out));
  if (streamed) return out;
  // Columns without field ids: found by name, the whole file at once.
  ARROW_ASSIGN_OR_RAISE(
      FileColumns cols,
      ReadColumnsById(io, deletes.file_path, {kDeleteFilePathFieldId, kDeletePosFieldId},
                      {"file_path", "pos"}));
  auto path_it = cols.by_id.find(kDeleteFilePathFieldId);
  auto pos_it = cols.by_id.find(kDeletePosFieldId);
  if (path_it == cols.by_id.end() || pos_it == cols.by_id.end()) {
    return arrow::Status::Invalid("position delete file ", deletes.file_path,
                                  " lacks file_path / pos");
  }
  ARROW_ASSIGN_OR_RAISE(auto paths, Conform(path_it->second, arrow::utf8()));
  ARROW_ASSIGN_OR_RAISE(auto positions, Conform(pos_it->second, arrow::int64()));
  ARROW_RETURN_NOT_OK(AddPositionRows(*paths, *positions, nullptr, &out).status());
  return out;
}

std::optional<int32_t> FieldIdOf(const arrow::Field& field) {
  const auto& md = field.metadata();
  if (md == nullptr) return std::nullopt;
  const int i = md->FindKey("PARQUET:field_id");
  if (i < 0) return std::nullopt;
  return ParseInt32(md->value(i));
}

arrow::Result<ScanPlan> PlanScan(const TableMetadata& metadata, FileIO& io,
                                 const ScanOptions& options) {
  ScanPlan plan;
  const Snapshot* snapshot = nullptr;
  const Schema* schema = metadata.CurrentSchema();
  if (options.snapshot_id) {
    snapshot = metadata.FindSnapshot(*options.snapshot_id);
    if (snapshot == nullptr) {
      return arrow::Status::KeyError("no snapshot ", *options.snapshot_id);
    }
    if (snapshot->schema_id && metadata.FindSchema(*snapshot->schema_id) != nullptr) {
      schema = metadata.FindSchema(*snapshot->schema_id);
    }
  } else {
    snapshot = metadata.CurrentSnapshot();
  }
  if (schema == nullptr) return arrow::Status::Invalid("table metadata has no schema");
  plan.schema = std::make_shared<const Schema>(*schema);
  ARROW_ASSIGN_OR_RAISE(plan.projection, ProjectSchema(*schema, options.columns));
  ARROW_ASSIGN_OR_RAISE(plan.filter, Bind(options.filter, *schema));
  if (snapshot == nullptr) return plan;
  plan.snapshot_id = snapshot->snapshot_id;

  ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(io, snapshot->manifest_list));
  plan.stats.manifests = static_cast<int32_t>(manifests.size());
  std::map<int32_t, SpecContext> specs;
  std::vector<const ManifestFile*> kept;
  for (const ManifestFile& m : manifests) {
    auto it = specs.find(m.partition_spec_id);
    if (it == specs.end()) {
      const PartitionSpec* spec = metadata.FindSpec(m.partition_spec_id);
      if (spec == nullptr) {
        return arrow::Status::Invalid("manifest ", m.manifest_path, " has unknown spec ",
                                      m.partition_spec_id);
      }
      SpecContext ctx;
      ctx.spec = spec;
      ARROW_ASSIGN_OR_RAISE(ctx.partition_type,
                            PartitionTypeFor(metadata, *spec, *schema));
      ARROW_ASSIGN_OR_RAISE(ctx.projected, ProjectInclusive(plan.filter, *spec, *schema));
      it = specs.emplace(m.partition_spec_id, std::move(ctx)).first;
    }
    ARROW_ASSIGN_OR_RAISE(
        bool might, ManifestMightMatch(it->second.projected, *it->second.partition_type,
                                       m.partitions));
    if (might) {
      kept.push_back(&m);
    } else {
      ++plan.stats.manifests_skipped;
    }
  }

  std::vector<std::function<arrow::Result<std::vector<ManifestEntry>>()>> jobs;
  for (const ManifestFile* m : kept) {
    const Type* ptype = specs.at(m->partition_spec_id).partition_type.get();
    jobs.push_back([&io, m, ptype]() { return ReadManifest(io, *m, *ptype); });
  }
  ARROW_ASSIGN_OR_RAISE(auto entries_per_manifest,
                        RunBounded(std::move(jobs), options.parallelism));

  std::vector<DeleteFileEntry> deletes;
  for (size_t i = 0; i < kept.size(); ++i) {
    const ManifestFile& m = *kept[i];
    const SpecContext& ctx = specs.at(m.partition_spec_id);
    for (ManifestEntry& e : entries_per_manifest[i]) {
      if (e.status == ManifestEntryStatus::kDeleted) continue;
      const int64_t seq = e.sequence_number.value_or(0);
      ARROW_ASSIGN_OR_RAISE(
          bool in_partition,
          PartitionMatches(ctx.projected, *ctx.partition_type, e.data_file.partition));
      if (e.data_file.content == DataFileContent::kData) {
        ++plan.stats.data_files;
        if (!in_partition) {
          ++plan.stats.files_skipped_by_partition;
          continue;
        }
        ARROW_ASSIGN_OR_RAISE(bool might,
                              MetricsMightMatch(plan.filter, *schema, e.data_file));
        if (!might) {
          ++plan.stats.files_skipped_by_metrics;
          continue;
        }
        plan.tasks.push_back(
            FileScanTask{std::move(e.data_file), m.partition_spec_id, seq, {}});
      } else {
        if (!in_partition) continue;
        ++plan.stats.delete_files;
        deletes.push_back(
            DeleteFileEntry{std::move(e.data_file), m.partition_spec_id, seq});
      }
    }
  }
  AssignDeleteFiles(deletes, &plan.tasks);
  plan.delete_files = std::move(deletes);
  return plan;
}

arrow::Result<ScanPlan> PlanScan(const Table& table, const ScanOptions& options) {
  return PlanScan(table.metadata(), table.io(), options);
}

arrow::Status ReadFileScanTaskInBatches(
    FileIO& io, const FileScanTask& task, const Schema& schema, const Schema& projection,
    const ExpressionPtr& filter, int64_t batch_rows,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each,
    int64_t batch_bytes, LastPositionDeletes* last_deletes) {
  ARROW_ASSIGN_OR_RAISE(auto reader,
                        TaskReader::Open(io, task, schema, projection, filter, batch_rows,
                                         batch_bytes, last_deletes));
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->Next());
    if (batch == nullptr) return arrow::Status::OK();
    if (batch->num_rows() > 0) ARROW_RETURN_NOT_OK(each(std::move(batch)));
  }
}

struct FileScanBatches::Impl {
  std::unique_ptr<TaskReader> reader;
};

FileScanBatches::FileScanBatches() = default;
FileScanBatches::~FileScanBatches() = default;

arrow::Result<std::unique_ptr<FileScanBatches>> FileScanBatches::Open(
    FileIO& io, const FileScanTask& task, const Schema& schema, int64_t batch_rows,
    int64_t batch_bytes, int64_t stream_buffer_bytes, LastPositionDeletes* last_deletes) {
  auto out = std::unique_ptr<FileScanBatches>(new FileScanBatches());
  out->impl_ = std::make_unique<Impl>();
  ARROW_ASSIGN_OR_RAISE(out->impl_->reader,
                        TaskReader::Open(io, task, schema, schema, AlwaysTrue(),
                                         std::max<int64_t>(1, batch_rows), batch_bytes,
                                         last_deletes, stream_buffer_bytes));
  return out;
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> FileScanBatches::Next() {
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto batch, impl_->reader->Next());
    if (batch == nullptr || batch->num_rows() > 0) return batch;
  }
}

arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadFileScanTask(
    FileIO& io, const FileScanTask& task, const Schema& schema, const Schema& projection,
    const ExpressionPtr& filter) {
  ARROW_ASSIGN_OR_RAISE(auto reader,
                        TaskReader::Open(io, task, schema, projection, filter));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->Next());
    if (batch == nullptr) break;
    if (batch->num_rows() > 0) batches.push_back(std::move(batch));
  }
  return batches;
}

arrow::Result<std::shared_ptr<arrow::RecordBatchReader>> ScanPlanBatches(FileIO& io,
                                                                         ScanPlan plan) {
  ARROW_ASSIGN_OR_RAISE(auto schema, ToArrowSchema(*plan.projection));
  return std::make_shared<PlanReader>(io, std::move(plan), std::move(schema));
}

arrow::Result<std::shared_ptr<arrow::RecordBatchReader>> ScanBatches(
    const Table& table, const ScanOptions& options) {
  ARROW_ASSIGN_OR_RAISE(ScanPlan plan, PlanScan(table, options));
  return ScanPlanBatches(table.io(), std::move(plan));
}

arrow::Result<std::shared_ptr<arrow::Table>> ScanToArrow(const TableMetadata& metadata,
                                                         FileIO& io,
                                                         const ScanOptions& options) {
  ARROW_ASSIGN_OR_RAISE(ScanPlan plan, PlanScan(metadata, io, options));
  ARROW_ASSIGN_OR_RAISE(auto schema, ToArrowSchema(*plan.projection));
  using Batches = std::vector<std::shared_ptr<arrow::RecordBatch>>;
  std::vector<std::function<arrow::Result<Batches>()>> jobs;
  for (const FileScanTask& task : plan.tasks) {
    jobs.push_back([&io, &task, &plan]() {
      return ReadFileScanTask(io, task, *plan.schema, *plan.projection, plan.filter);
    });
  }
  ARROW_ASSIGN_OR_RAISE(auto per_task, RunBounded(std::move(jobs), options.parallelism));
  Batches all;
  for (auto& batches : per_task) {
    for (auto& b : batches) all.push_back(std::move(b));
  }
  return arrow::Table::FromRecordBatches(schema, all);
}

arrow::Result<std::shared_ptr<arrow::Table>> ScanToArrow(const Table& table,
                                                         const ScanOptions& options) {
  return ScanToArrow(table.metadata(), table.io(), options);
}

}  // namespace floe::iceberg
