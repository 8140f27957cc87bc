// The end of one merge plan: its delete files (merge-on-read) or rewritten data files
// (copy-on-write) written, and the one commit that lands it on the Silver snapshot
// it was planned from.

#include <string>
#include <vector>

#include "floe/iceberg/position_delete_writer.h"
#include "floe/lake/keys.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {

namespace ice = floe::iceberg;

arrow::Status WriteMergeDeletes(ice::Table& silver, std::optional<int64_t> planned_snapshot,
                                const RowsByPartition& deletes, bool copy_on_write,
                                MergeFiles* files, MergeStats* stats) {
  if (copy_on_write) {
    ARROW_ASSIGN_OR_RAISE(files->cow,
                          RewriteForCopyOnWrite(silver, planned_snapshot, deletes, stats));
    files->written.insert(files->written.end(), files->cow.add.begin(),
                          files->cow.add.end());
    return arrow::Status::OK();
  }
  for (const auto& [where, entry] : deletes) {
    stats->position_deletes += static_cast<int64_t>(entry.second.size());
    ARROW_ASSIGN_OR_RAISE(ice::DataFile file, ice::WritePositionDeleteFile(
                                                  silver, entry.first, entry.second));
    files->written.push_back(file);
    files->deletes.push_back(std::move(file));
  }
  return arrow::Status::OK();
}

void AddMergeCounters(const MergeStats& stats, ice::SummaryProperties* summary) {
  (*summary)[lake::kFilesReadSummaryKey] = std::to_string(stats.files_scanned);
  (*summary)[lake::kRowGroupsReadSummaryKey] = std::to_string(stats.row_groups_read);
  (*summary)[lake::kRowGroupsSkippedStatsSummaryKey] =
      std::to_string(stats.row_groups_skipped_stats);
  (*summary)[lake::kRowGroupsSkippedBloomSummaryKey] =
      std::to_string(stats.row_groups_skipped_bloom);
  (*summary)[lake::kSilverBytesReadSummaryKey] = std::to_string(stats.silver_bytes_read);
  (*summary)[lake::kBronzeBytesReadSummaryKey] = std::to_string(stats.bronze_bytes_read);
  (*summary)[lake::kBytesWrittenSummaryKey] = std::to_string(stats.bytes_written);
}

arrow::Status CommitMerge(ice::Table& silver, std::optional<int64_t> planned_snapshot,
                          bool truncated, bool silver_has_rows, const MergeFiles& files,
                          const std::set<std::string>& referenced,
                          const ice::SummaryProperties& summary) {
  ice::CommitOptions once;
  once.max_attempts = 1;
  if (truncated && silver_has_rows) {
    ARROW_ASSIGN_OR_RAISE(auto live, silver.LiveFiles(planned_snapshot));
    ice::OverwriteRequest request;
    for (const auto& f : live) request.delete_files.push_back(f.entry.data_file);
    request.add_files = files.data;
    request.validate_from_snapshot_id = planned_snapshot;
    request.validate_no_conflicting_data_files = true;
    if (request.delete_files.empty() && request.add_files.empty()) {
      return silver.AppendFiles({}, summary, once).status();
    }
    if (request.delete_files.empty()) {
      return silver.AppendFiles(files.data, summary, once).status();
    }
    return silver.Overwrite(request, summary, once).status();
  }
  if (!files.cow.remove.empty()) {
    // Copy-on-write: the rewritten files replace theirs, next to the new rows.
    ice::OverwriteRequest request;
    request.delete_files = files.cow.remove;
    request.add_files = files.cow.add;
    request.add_files.insert(request.add_files.end(), files.data.begin(),
                             files.data.end());
    request.validate_from_snapshot_id = planned_snapshot;
    request.validate_no_conflicting_data_files = true;
    return silver.Overwrite(request, summary, once).status();
  }
  if (files.data.empty() && files.deletes.empty()) {
    // Nothing changed (or only keys that never reached Silver were deleted): an
    // empty snapshot still moves the watermark.
    return silver.AppendFiles({}, summary, once).status();
  }
  if (!silver_has_rows && files.deletes.empty()) {
    return silver.AppendFiles(files.data, summary, once).status();
  }
  ice::RowDeltaRequest request;
  request.add_data_files = files.data;
  request.add_delete_files = files.deletes;
  request.referenced_data_files.assign(referenced.begin(), referenced.end());
  request.validate_from_snapshot_id = planned_snapshot;
  request.validate_no_conflicting_data_files = true;
  return silver.RowDelta(request, summary, once).status();
}

}  // namespace floe::silver::merge_internal
