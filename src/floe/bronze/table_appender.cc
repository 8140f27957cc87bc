#include "floe/bronze/table_appender.h"

#include <algorithm>
#include <set>
#include <utility>

#include <arrow/array/data.h>
#include <arrow/record_batch.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/byte_size.h>

#include "floe/common/parse.h"
#include "floe/iceberg/partition_split.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"

namespace floe::bronze {

namespace {

// Whether `next` holds the rows of the same buffers right after `run`'s
// `run_rows` rows: both are slices of one array.
bool Continues(const arrow::ArrayData& run, int64_t run_rows,
               const arrow::ArrayData& next) {
  if (next.offset != run.offset + run_rows) return false;
  if (run.buffers.size() != next.buffers.size() ||
      run.child_data.size() != next.child_data.size() ||
      run.dictionary != next.dictionary) {
    return false;
  }
  for (size_t i = 0; i < run.buffers.size(); ++i) {
    if (run.buffers[i] != next.buffers[i]) return false;
  }
  for (size_t i = 0; i < run.child_data.size(); ++i) {
    if (run.child_data[i] != next.child_data[i]) return false;
  }
  return true;
}

// Bytes of the buffer ranges that rows [offset, offset + length) of `data` reference,
// counted as arrow::util::ReferencedBufferSize counts them, for the types of a
// change batch (fixed width, binary / string, lists of them); nullopt for others.
// ReferencedBufferSize builds an Arrow array of ranges on every call: per
// transaction that was most of the cost of buffering single-row transactions.
std::optional<int64_t> RangeBytes(const arrow::ArrayData& data, int64_t offset,
                                  int64_t length) {
  int64_t bytes = 0;
  if (data.buffers.empty()) return std::nullopt;
  if (data.buffers[0]) bytes += arrow::bit_util::CoveringBytes(offset, length);
  const arrow::Type::type id = data.type->id();
  switch (id) {
    case arrow::Type::NA:
      return 0;
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
    case arrow::Type::LIST: {
      if (data.buffers.size() < 2 || !data.buffers[1]) return std::nullopt;
      const int32_t* offsets = data.buffers[1]->data_as<int32_t>() + offset;
      // (ReferencedBufferSize counts `length` offsets, not length + 1.)
      bytes += static_cast<int64_t>(sizeof(int32_t)) * length;
      const int64_t first = offsets[0];
      const int64_t count = offsets[length] - offsets[0];
      if (id != arrow::Type::LIST) return bytes + count;
      if (data.child_data.size() != 1) return std::nullopt;
      const arrow::ArrayData& child = *data.child_data[0];
      auto child_bytes = RangeBytes(child, child.offset + first, count);
      if (!child_bytes) return std::nullopt;
      return bytes + *child_bytes;
    }
    case arrow::Type::DICTIONARY:
    case arrow::Type::EXTENSION:
      return std::nullopt;
    default:
      break;
  }
  const int bit_width = data.type->bit_width();
  if (bit_width <= 0 || data.buffers.size() != 2 || !data.buffers[1]) return std::nullopt;
  const int64_t start_bit = offset * bit_width;
  const int64_t end_bit = start_bit + length * bit_width;
  return bytes + arrow::bit_util::RoundUp(end_bit, 8) / 8 -
         arrow::bit_util::RoundDown(start_bit, 8) / 8;
}

// ReferencedBufferSize of `batch`, cheaply for the usual types.
arrow::Result<int64_t> ReferencedBytes(const arrow::RecordBatch& batch) {
  int64_t bytes = 0;
  for (const auto& column : batch.column_data()) {
    if (auto known = RangeBytes(*column, column->offset, column->length)) {
      bytes += *known;
    } else {
      ARROW_ASSIGN_OR_RAISE(int64_t other, arrow::util::ReferencedBufferSize(*column));
      bytes += other;
    }
  }
  return bytes;
}

}  // namespace

TableAppender::TableAppender(std::unique_ptr<iceberg::Table> table)
    : table_(std::move(table)),
      committed_lsn_(lake::CommittedLsnOf(table_->metadata())) {}

TableAppender::~TableAppender() = default;

arrow::Status TableAppender::Write(const arrow::RecordBatch& batch, int lane) {
  if (batch.num_rows() == 0) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto parts, iceberg::SplitByPartition(table_->spec(),
                                                              table_->schema(), batch));
  for (auto& part : parts) {
    std::pair<int, std::string> key{
        lane, iceberg::PartitionPath(table_->spec(), table_->schema(), part.partition)};
    iceberg::DataFileWriter* writer = nullptr;
    {
      std::lock_guard lock(writers_mu_);
      auto it = writers_.find(key);
      if (it == writers_.end()) {
        ARROW_ASSIGN_OR_RAISE(auto made, table_->NewDataFileWriter(part.partition));
        it = writers_.emplace(std::move(key), std::move(made)).first;
      }
      writer = it->second.get();  // map nodes stay put while other lanes insert
    }
    ARROW_RETURN_NOT_OK(writer->Write(*part.batch));
  }
  ARROW_ASSIGN_OR_RAISE(int64_t bytes, arrow::util::ReferencedBufferSize(batch));
  std::lock_guard lock(writers_mu_);
  pending_rows_ += batch.num_rows();
  pending_bytes_ += bytes;
  return arrow::Status::OK();
}

arrow::Status TableAppender::CloseFiles() {
  for (auto& [key, writer] : writers_) {
    ARROW_ASSIGN_OR_RAISE(auto files, writer->Finish());
    for (auto& file : files) closed_files_.push_back(std::move(file));
  }
  writers_.clear();
  return arrow::Status::OK();
}

arrow::Status TableAppender::Commit(Lsn commit_lsn,
                                    const iceberg::SummaryProperties& summary,
                                    bool force) {
  ARROW_RETURN_NOT_OK(CloseFiles());
  if (closed_files_.empty() && !force) return arrow::Status::OK();
  return CommitAt(std::max(commit_lsn, committed_lsn_), summary);
}

arrow::Status TableAppender::CommitResettingLsn(
    Lsn commit_lsn, const iceberg::SummaryProperties& summary) {
  ARROW_RETURN_NOT_OK(CloseFiles());
  return CommitAt(commit_lsn, summary);
}

arrow::Status TableAppender::CommitAt(Lsn lsn,
                                      const iceberg::SummaryProperties& summary) {
  iceberg::SummaryProperties props = summary;
  props[lake::kCommitLsnSummaryKey] = std::to_string(lsn.value());
  // Applied on top of a table another commit of floe's moved on (a commit of an
  // earlier run, or of an attempt of this one given up on, whose request landed
  // late: the same changes, or the same copy), the append would hold them twice.
  // The commit fails instead; floe run reconnects, and the changes read again skip
  // what the table holds by then. floe run's commits are the appends carrying
  // floe.commit-lsn (a compaction replaces, and expiry adds no snapshot).
  iceberg::CommitOptions options;
  options.validate = [this, base = table_->metadata().current_snapshot_id](
                         const iceberg::TableMetadata& current) -> arrow::Status {
    std::set<int64_t> seen;  // guards against a (corrupt) cycle
    for (const iceberg::Snapshot* s = current.CurrentSnapshot();
         s != nullptr && s->snapshot_id != base && seen.insert(s->snapshot_id).second;
         s = s->parent_snapshot_id ? current.FindSnapshot(*s->parent_snapshot_id)
                                   : nullptr) {
      auto lsn = s->summary.find(lake::kCommitLsnSummaryKey);
      if (s->operation != "append" || lsn == s->summary.end()) continue;
      return iceberg::ValidationFailure(
          table_->identifier().ToString() + ": another commit of floe landed meanwhile " +
          "(snapshot " + std::to_string(s->snapshot_id) + ", commit LSN " +
          Lsn(ParseUint64(lsn->second).value_or(0)).ToString() +
          "; a commit of an earlier run, or one this run gave up on, that landed " +
          "late): not appending on top of it; the changes are read again and those " +
          "it holds are skipped");
    }
    return arrow::Status::OK();
  };
  ARROW_RETURN_NOT_OK(table_->AppendFiles(closed_files_, props, options).status());
  committed_lsn_ = lsn;
  last_commit_ = CommitStats{};
  for (const auto& file : closed_files_) {
    last_commit_.rows += file.record_count;
    last_commit_.bytes += file.file_size_in_bytes;
    ++last_commit_.files;
  }
  closed_files_.clear();
  pending_rows_ = 0;
  pending_bytes_ = 0;
  return arrow::Status::OK();
}

void TableAppender::Abandon() {
  writers_.clear();
  closed_files_.clear();
  pending_rows_ = 0;
  pending_bytes_ = 0;
}

arrow::Status BatchBuffer::Add(std::shared_ptr<arrow::RecordBatch> batch) {
  const int64_t n = batch->num_rows();
  if (n == 0) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(int64_t bytes, ReferencedBytes(*batch));
  if (!runs_.empty()) {
    Run& last = runs_.back();
    const arrow::RecordBatch& first = *last.first;
    bool continues = first.schema() == batch->schema() &&
                     first.num_columns() == batch->num_columns();
    const arrow::ArrayDataVector& run_columns = first.column_data();
    const arrow::ArrayDataVector& next_columns = batch->column_data();
    for (size_t c = 0; continues && c < run_columns.size(); ++c) {
      continues = Continues(*run_columns[c], last.rows, *next_columns[c]);
    }
    if (continues) {
      last.rows += n;
      rows_ += n;
      bytes_ += bytes;
      return arrow::Status::OK();
    }
  }
  runs_.push_back(Run{std::move(batch), n});
  rows_ += n;
  bytes_ += bytes;
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> BatchBuffer::Take() {
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  batches.reserve(runs_.size());
  for (Run& run : runs_) {
    const arrow::RecordBatch& first = *run.first;
    if (run.rows == first.num_rows()) {
      batches.push_back(std::move(run.first));
      continue;
    }
    // The run's rows: its first slice's arrays, lengthened over the slices after it.
    std::vector<std::shared_ptr<arrow::ArrayData>> columns;
    columns.reserve(static_cast<size_t>(first.num_columns()));
    for (const auto& column : first.column_data()) {
      auto data = std::make_shared<arrow::ArrayData>(*column);
      data->length = run.rows;
      data->null_count = arrow::kUnknownNullCount;
      columns.push_back(std::move(data));
    }
    batches.push_back(arrow::RecordBatch::Make(first.schema(), run.rows, std::move(columns)));
  }
  Clear();
  if (batches.empty()) return nullptr;
  if (batches.size() == 1) return std::move(batches.front());
  return arrow::ConcatenateRecordBatches(batches);
}

void BatchBuffer::Clear() {
  runs_.clear();
  rows_ = 0;
  bytes_ = 0;
}

}  // namespace floe::bronze
