#include "floe/maintenance/rewrite.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include <spdlog/spdlog.h>

#include "floe/common/spill_dir.h"
#include "floe/iceberg/expression.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sorted_runs.h"

namespace floe::maintenance {
namespace ice = floe::iceberg;
namespace cp = arrow::compute;

namespace {

// Rows handed to the file writer at once (so it can roll files at row groups).
constexpr int64_t kWriteSliceRows = 64 * 1024;
constexpr int64_t kMiB = int64_t{1} << 20;
// What one open Parquet file costs a merge per column read besides the stream buffer:
// a decompressed page (Parquet's default page is 1 MiB) and a decoded dictionary
// (measured with heaptrack: about 2 MiB a column in all).
constexpr int64_t kPagePerColumn = 2 * kMiB;

// The scan tasks of `data`, each with the delete files of `deletes` that apply.
std::vector<ice::FileScanTask> TasksOf(const std::vector<ice::LiveFile>& data,
                                       const std::vector<ice::LiveFile>& deletes) {
  std::vector<ice::FileScanTask> tasks;
  for (const auto& f : data) {
    ice::FileScanTask task;
    task.data_file = f.entry.data_file;
    task.spec_id = f.spec_id;
    task.data_sequence_number = f.entry.sequence_number.value_or(0);
    tasks.push_back(std::move(task));
  }
  std::vector<ice::DeleteFileEntry> delete_entries;
  for (const auto& f : deletes) {
    delete_entries.push_back(ice::DeleteFileEntry{f.entry.data_file, f.spec_id,
                                                  f.entry.sequence_number.value_or(0)});
  }
  ice::AssignDeleteFiles(delete_entries, &tasks);
  return tasks;
}

// The rows of `data` with the deletes of `deletes` applied (by the spec's rules), in
// the table's current schema.
arrow::Result<std::shared_ptr<arrow::Table>> ReadLiveRows(
    ice::Table& table, const std::vector<ice::LiveFile>& data,
    const std::vector<ice::LiveFile>& deletes) {
  const ice::Schema& schema = table.schema();
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (const auto& task : TasksOf(data, deletes)) {
    ARROW_ASSIGN_OR_RAISE(auto read, ice::ReadFileScanTask(table.io(), task, schema,
                                                           schema, ice::AlwaysTrue()));
    for (auto& b : read) {
      if (b->num_rows() > 0) batches.push_back(std::move(b));
    }
  }
  return arrow::Table::FromRecordBatches(arrow_schema, batches);
}

// `rows` sorted by `sort_keys`, as one batch.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> SortRows(
    const std::shared_ptr<arrow::Table>& rows,
    const std::vector<cp::SortKey>& sort_keys) {
  ARROW_ASSIGN_OR_RAISE(auto indices,
                        cp::SortIndices(arrow::Datum(rows), cp::SortOptions(sort_keys)));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted, cp::Take(arrow::Datum(rows), indices));
  return sorted.table()->CombineChunksToBatch();
}

// The data file writers of one rewrite: one partition's, or (split by `split`) one
// per partition of that spec. Unless finished, what they wrote is deleted.
class Writers {
 public:
  Writers(ice::Table& table, ice::PartitionTuple partition,
          std::optional<ice::PartitionSpec> split, bool new_spec, int64_t target,
          int64_t row_group_bytes)
      : table_(table),
        partition_(std::move(partition)),
        split_(std::move(split)),
        new_spec_(new_spec),
        target_(target),
        row_group_bytes_(row_group_bytes) {}
  ~Writers() { Abandon(); }

  arrow::Status Write(const std::shared_ptr<arrow::RecordBatch>& batch) {
    rows_ += batch->num_rows();
    if (!split_) return WriteTo(partition_, *batch);
    ARROW_ASSIGN_OR_RAISE(auto parts,
                          ice::SplitByPartition(*split_, table_.schema(), *batch));
    for (const auto& part : parts)
      ARROW_RETURN_NOT_OK(WriteTo(part.partition, *part.batch));
    return arrow::Status::OK();
  }

  /// Rows go to a run per partition spilled under `parent` first, and each run is
  /// written to its files in Finish, one partition at a time: for a split into more
  /// partitions than can have a data file open at once (each holds a row group, a
  /// page per column and a bloom filter).
  arrow::Status SpillUnder(const std::string& parent) {
    ARROW_ASSIGN_OR_RAISE(spill_dir_,
                          SpillDirectory::Make(parent,
                                               "a Silver re-bucketing into more "
                                               "buckets than silver.memory_limit "
                                               "holds open at once"));
    return arrow::Status::OK();
  }

  /// The files written; `partitions()` of them were written to.
  arrow::Result<std::vector<ice::DataFile>> Finish() {
    std::vector<ice::DataFile> files;
    arrow::Status failed;
    for (auto& [key, run] : runs_) {
      if (!failed.ok()) break;
      failed = [&]() -> arrow::Status {
        ARROW_RETURN_NOT_OK(run.second->Close());
        ARROW_ASSIGN_OR_RAISE(auto writer, NewWriter(run.first));
        while (true) {
          ARROW_ASSIGN_OR_RAISE(auto batch, run.second->Next());
          if (batch == nullptr) break;
          ARROW_RETURN_NOT_OK(writer->Write(*batch));
        }
        ARROW_ASSIGN_OR_RAISE(auto done, writer->Finish());
        for (auto& f : done) files.push_back(std::move(f));
        run.second.reset();
        return arrow::Status::OK();
      }();
    }
    runs_.clear();
    for (auto& [key, writer] : open_) {
      auto done = writer->Finish();
      if (!done.ok()) {
        failed = done.status();
        continue;
      }
      for (auto& f : *done) files.push_back(std::move(f));
    }
    open_.clear();
    if (!failed.ok()) {
      DeleteWritten(table_.io(), files);
      return failed;
    }
    return files;
  }

  /// Deletes everything written; the writers start again from nothing.
  void Abandon() {
    runs_.clear();  // their files go with them, never written out
    rows_ = 0;
    partitions_ = 0;
    if (open_.empty()) return;
    auto files = Finish();
    if (files.ok()) DeleteWritten(table_.io(), *files);
  }

  int64_t rows() const { return rows_; }
  int32_t partitions() const { return partitions_; }

 private:
  arrow::Result<std::unique_ptr<ice::DataFileWriter>> NewWriter(
      const ice::PartitionTuple& partition) {
    const std::optional<ice::PartitionSpec> spec =
        new_spec_ ? split_ : std::optional<ice::PartitionSpec>();
    ARROW_ASSIGN_OR_RAISE(auto writer,
                          table_.NewDataFileWriter(partition, target_, spec));
    writer->set_row_group_bytes(row_group_bytes_);
    return writer;
  }

  arrow::Status WriteTo(const ice::PartitionTuple& partition,
                        const arrow::RecordBatch& batch) {
    if (spill_dir_ != nullptr) {
      auto& run = runs_[PartitionKeyOf(partition)];
      if (run.second == nullptr) {
        run.first = partition;
        ARROW_ASSIGN_OR_RAISE(
            run.second, ice::SpilledRun::Create(spill_dir_->path(), batch.schema()));
        ++partitions_;
      }
      return run.second->Write(batch);
    }
    auto& writer = open_[PartitionKeyOf(partition)];
    if (writer == nullptr) {
      ARROW_ASSIGN_OR_RAISE(writer, NewWriter(partition));
      ++partitions_;
    }
    return writer->Write(batch);
  }

  ice::Table& table_;
  ice::PartitionTuple partition_;
  std::optional<ice::PartitionSpec> split_;
  bool new_spec_;
  int64_t target_;
  int64_t row_group_bytes_;
  std::map<std::string, std::unique_ptr<ice::DataFileWriter>> open_;
  std::unique_ptr<SpillDirectory> spill_dir_;
  std::map<std::string, std::pair<ice::PartitionTuple, std::unique_ptr<ice::SpilledRun>>>
      runs_;
  int64_t rows_ = 0;
  int32_t partitions_ = 0;
};

// Merges the live rows of `data` (deletes of `deletes` applied; every file sorted
// by `order.files_sorted_by`) in that order, handing `each` batches, within about
// `order.memory_limit`: each open file holds a batch, a page and a stream buffer per
// column, so when more files than fit would be open at once, groups of them are first
// merged into runs spilled to local disk. False when a file is not sorted.
arrow::Result<bool> MergeLiveRows(
    ice::Table& table, const std::vector<ice::LiveFile>& data,
    const std::vector<ice::LiveFile>& deletes, const RewriteOrder& order,
    const ice::RowOrder& row_order,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each) {
  const ice::Schema& schema = table.schema();
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  std::vector<ice::FileScanTask> tasks = TasksOf(data, deletes);
  const int64_t memory = std::max<int64_t>(order.memory_limit, 16 * kMiB);
  const int64_t columns = std::max<int64_t>(1, arrow_schema->num_fields());
  // A row's bytes in memory, guessed from the files' (compressed) bytes per row.
  int64_t row_bytes = 16;
  for (const auto& t : tasks) {
    const int64_t n = std::max<int64_t>(1, t.data_file.record_count);
    row_bytes = std::max(row_bytes, 4 * t.data_file.file_size_in_bytes / n);
  }
  // An open file holds a page and a stream buffer per column, and its batch about
  // three times over (decoded, deletes applied, waiting in the merge).
  const int64_t per_file = columns * (kPagePerColumn + 64 * 1024) + 3 * kMiB;
  const size_t fan_in =
      static_cast<size_t>(std::clamp<int64_t>(memory / 3 / per_file, 2, 512));
  auto batch_rows = [&](size_t runs) {
    return std::clamp<int64_t>(memory / 16 / static_cast<int64_t>(runs) / row_bytes, 64,
                               kWriteSliceRows);
  };
  ice::LastPositionDeletes last_deletes;
  // Sources over `tasks[from, to)`, each file opened when first pulled.
  auto file_sources = [&](size_t from, size_t to) {
    std::vector<ice::BatchSource> sources;
    const size_t open = to - from;
    const int64_t batch_bytes =
        std::clamp<int64_t>(memory / 12 / static_cast<int64_t>(open), 64 * 1024, kMiB);
    const int64_t buffer = std::clamp<int64_t>(
        memory / 8 / static_cast<int64_t>(open) / columns, 16 * 1024, kMiB);
    for (size_t i = from; i < to; ++i) {
      auto reader = std::make_shared<std::unique_ptr<ice::FileScanBatches>>();
      sources.push_back([&, i, reader, batch_bytes,
                         buffer]() -> arrow::Result<std::shared_ptr<arrow::RecordBatch>> {
        if (*reader == nullptr) {
          ARROW_ASSIGN_OR_RAISE(
              *reader,
              ice::FileScanBatches::Open(table.io(), tasks[i], schema, kWriteSliceRows,
                                         batch_bytes, buffer, &last_deletes));
        }
        return (*reader)->Next();
      });
    }
    return sources;
  };
  if (tasks.size() <= fan_in) {
    return ice::MergeSortedRuns(file_sources(0, tasks.size()), arrow_schema, row_order,
                                batch_rows(1), each);
  }
  // Too many files to open at once: merge them a group at a time to local disk.
  ARROW_ASSIGN_OR_RAISE(
      auto dir, SpillDirectory::Make(order.spill_dir,
                                     "the compaction of a Silver bucket of more files "
                                     "than silver.memory_limit holds open at once"));
  std::vector<std::unique_ptr<ice::SpilledRun>> spilled;
  const size_t groups = (tasks.size() + fan_in - 1) / fan_in;
  for (size_t from = 0; from < tasks.size(); from += fan_in) {
    ARROW_ASSIGN_OR_RAISE(auto run, ice::SpilledRun::Create(dir->path(), arrow_schema));
    ice::SpilledRun* writing = run.get();
    spilled.push_back(std::move(run));
    ARROW_ASSIGN_OR_RAISE(
        bool sorted,
        ice::MergeSortedRuns(
            file_sources(from, std::min(tasks.size(), from + fan_in)), arrow_schema,
            row_order, batch_rows(groups),
            [&](std::shared_ptr<arrow::RecordBatch> b) { return writing->Write(*b); }));
    ARROW_RETURN_NOT_OK(writing->Close());
    if (!sorted) return false;
  }
  std::vector<ice::BatchSource> sources;
  for (auto& run : spilled) {
    sources.push_back([r = run.get()]() { return r->Next(); });
  }
  return ice::MergeSortedRuns(std::move(sources), arrow_schema, row_order, batch_rows(1),
                              each);
}

// Writes the live rows of `data` (deletes of `deletes` applied) in `order` through
// `writers`: merged from the files when they are sorted, else read whole and sorted.
// Returns the rows written.
arrow::Result<int64_t> WriteOrdered(ice::Table& table,
                                    const std::vector<ice::LiveFile>& data,
                                    const std::vector<ice::LiveFile>& deletes,
                                    const RewriteOrder& order, Writers& writers) {
  if (!order.files_sorted_by.empty()) {
    ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(table.schema()));
    std::vector<int> columns;
    for (const auto& name : order.files_sorted_by) {
      columns.push_back(arrow_schema->GetFieldIndex(name));
    }
    auto row_order = ice::RowOrder::Make(*arrow_schema, columns);
    if (row_order.ok()) {
      ARROW_ASSIGN_OR_RAISE(bool sorted,
                            MergeLiveRows(table, data, deletes, order, *row_order,
                                          [&](std::shared_ptr<arrow::RecordBatch> b) {
                                            return writers.Write(b);
                                          }));
      if (sorted) return writers.rows();
      writers.Abandon();
      spdlog::warn(
          "{}: a data file is not sorted by the key; its partition is read whole and "
          "sorted in memory",
          table.identifier().ToString());
    } else {
      spdlog::info("{}: {}; the partition is read whole and sorted in memory",
                   table.identifier().ToString(), row_order.status().message());
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto rows, ReadLiveRows(table, data, deletes));
  if (rows->num_rows() == 0) return 0;
  ARROW_ASSIGN_OR_RAISE(auto sorted, SortRows(rows, order.sort_keys));
  rows.reset();
  for (int64_t offset = 0; offset < sorted->num_rows(); offset += kWriteSliceRows) {
    ARROW_RETURN_NOT_OK(writers.Write(sorted->Slice(offset, kWriteSliceRows)));
  }
  return writers.rows();
}

// The in-memory bytes of a row group for `writers` files open at once (a row group
// is held until it is flushed): an eighth of the memory limit in all, at least 1 MiB.
// No limit (0, the writer's default: a quarter of the target size) when the rows are
// read whole.
int64_t RowGroupBytes(const RewriteOrder& order, int32_t writers) {
  if (order.files_sorted_by.empty()) return 0;
  return std::max<int64_t>(kMiB, order.memory_limit / 8 / std::max(1, writers));
}

// How many data files a rewrite may have open at once within its memory: each holds
// a row group, a page per column and a bloom filter (about 1 MiB a column, 2 MiB
// besides, and its row group); at least 2.
int32_t OpenWritersFitting(const RewriteOrder& order, const ice::Schema& schema,
                           int64_t target) {
  if (order.files_sorted_by.empty()) return std::numeric_limits<int32_t>::max();
  const int64_t per_writer = static_cast<int64_t>(schema.fields().size()) * kMiB +
                             2 * kMiB + std::min(RowGroupBytes(order, 1), target / 4);
  return static_cast<int32_t>(
      std::clamp<int64_t>(order.memory_limit / 4 / per_writer, 2, 4096));
}

// The bucket of a file whose spec is exactly bucket(M, column `source_id`), and M.
std::optional<std::pair<int32_t, int32_t>> BucketOf(const ice::TableMetadata& metadata,
                                                    const ice::LiveFile& file,
                                                    int32_t source_id) {
  const ice::PartitionSpec* spec = metadata.FindSpec(file.spec_id);
  if (spec == nullptr || spec->fields.size() != 1) return std::nullopt;
  const ice::PartitionField& field = spec->fields[0];
  if (field.transform.kind() != ice::TransformKind::kBucket ||
      field.source_id != source_id) {
    return std::nullopt;
  }
  const ice::PartitionTuple& partition = file.entry.data_file.partition;
  if (partition.size() != 1 || !partition[0]) return std::nullopt;
  const int32_t* bucket = std::get_if<int32_t>(&*partition[0]);
  if (bucket == nullptr) return std::nullopt;
  return std::make_pair(*bucket, field.transform.param());
}

}  // namespace

std::string PartitionKeyOf(const ice::PartitionTuple& partition) {
  std::string key;
  for (const auto& v : partition)
    key += (v ? "v" + ice::LiteralToString(*v) : "n") + "\x1f";
  return key;
}

arrow::Result<std::pair<std::vector<ice::DataFile>, int64_t>> RewritePartition(
    ice::Table& table, const ice::PartitionTuple& partition,
    const std::vector<ice::LiveFile>& data, const std::vector<ice::LiveFile>& deletes,
    const RewriteOrder& order, int64_t target) {
  Writers writers(table, partition, std::nullopt, false, target, RowGroupBytes(order, 1));
  std::pair<std::vector<ice::DataFile>, int64_t> out;
  ARROW_ASSIGN_OR_RAISE(out.second, WriteOrdered(table, data, deletes, order, writers));
  ARROW_ASSIGN_OR_RAISE(out.first, writers.Finish());
  return out;
}

arrow::Result<std::pair<int64_t, int32_t>> RewriteWhole(
    ice::Table& table, const std::vector<ice::LiveFile>& live,
    const ice::PartitionSpec& into, bool new_spec, const RewriteOrder& order,
    int64_t target, std::vector<ice::DataFile>* written) {
  const int32_t source_id = into.fields[0].source_id;
  int32_t classes = into.fields[0].transform.param();
  for (const auto& f : live) {
    auto bucket = BucketOf(table.metadata(), f, source_id);
    classes = bucket ? std::gcd(classes, bucket->second) : 1;
  }
  std::map<int32_t, std::pair<std::vector<ice::LiveFile>, std::vector<ice::LiveFile>>>
      by_class;
  for (const auto& f : live) {
    auto bucket = BucketOf(table.metadata(), f, source_id);
    const int32_t c = bucket ? bucket->first % classes : 0;
    auto& entry = by_class[c];
    (f.entry.data_file.content == ice::DataFileContent::kData ? entry.first
                                                              : entry.second)
        .push_back(f);
  }
  std::pair<int64_t, int32_t> out{0, 0};
  for (const auto& [c, files] : by_class) {
    if (files.first.empty()) continue;
    // A class's rows land in N' / classes buckets, a file open in each, unless more
    // than fit: then a run spilled per bucket, written a bucket at a time.
    const int32_t fan_out = into.fields[0].transform.param() / classes;
    const bool spill = fan_out > OpenWritersFitting(order, table.schema(), target);
    Writers writers(table, {}, into, new_spec, target,
                    RowGroupBytes(order, spill ? 1 : fan_out));
    if (spill) ARROW_RETURN_NOT_OK(writers.SpillUnder(order.spill_dir));
    ARROW_ASSIGN_OR_RAISE(const int64_t rows,
                          WriteOrdered(table, files.first, files.second, order, writers));
    out.first += rows;
    out.second += writers.partitions();
    ARROW_ASSIGN_OR_RAISE(auto files_written, writers.Finish());
    for (auto& f : files_written) written->push_back(std::move(f));
  }
  return out;
}

void DeleteWritten(ice::FileIO& io, const std::vector<ice::DataFile>& files) {
  for (const auto& f : files) ARROW_UNUSED(io.Delete(f.file_path));
}

}  // namespace floe::maintenance
