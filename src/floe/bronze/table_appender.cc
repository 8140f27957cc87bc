#include "floe/bronze/table_appender.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include <arrow/util/byte_size.h>

#include "floe/iceberg/partition_split.h"

namespace floe::bronze {

namespace {

std::optional<uint64_t> ParseU64(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

Lsn CommittedLsnOf(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    auto it = snapshot->summary.find(kCommitLsnSummaryKey);
    if (it != snapshot->summary.end()) {
      if (auto value = ParseU64(it->second)) return Lsn(*value);
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return Lsn();
}

TableAppender::TableAppender(std::unique_ptr<iceberg::Table> table)
    : table_(std::move(table)), committed_lsn_(CommittedLsnOf(table_->metadata())) {}

TableAppender::~TableAppender() = default;

arrow::Status TableAppender::Write(const arrow::RecordBatch& batch) {
  if (batch.num_rows() == 0) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto parts, iceberg::SplitByPartition(table_->spec(),
                                                              table_->schema(), batch));
  for (auto& part : parts) {
    std::string key =
        iceberg::PartitionPath(table_->spec(), table_->schema(), part.partition);
    auto& writer = writers_[key];
    if (!writer) {
      ARROW_ASSIGN_OR_RAISE(writer, table_->NewDataFileWriter(part.partition));
    }
    ARROW_RETURN_NOT_OK(writer->Write(*part.batch));
  }
  pending_rows_ += batch.num_rows();
  ARROW_ASSIGN_OR_RAISE(int64_t bytes, arrow::util::ReferencedBufferSize(batch));
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
  props[kCommitLsnSummaryKey] = std::to_string(lsn.value());
  ARROW_RETURN_NOT_OK(table_->AppendFiles(closed_files_, props).status());
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

}  // namespace floe::bronze
