// The end of one merge plan: its new rows and its delete files (merge-on-read) or
// rewritten data files (copy-on-write) written, and the one commit that lands it on
// the Silver snapshot it was planned from.

#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "floe/common/error.h"
#include "floe/common/parse.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/schema.h"
#include "floe/lake/keys.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {

namespace ice = floe::iceberg;

arrow::Status WriteMergeDeletes(ice::Table& silver,
                                std::optional<int64_t> planned_snapshot,
                                const RowsByPartition& deletes, bool copy_on_write,
                                MergeFiles* files, MergeStats* stats, bool hold) {
  if (copy_on_write) {
    ARROW_ASSIGN_OR_RAISE(
        CowRewrite rewrite,
        RewriteForCopyOnWrite(silver, planned_snapshot, deletes, stats));
    files->written.insert(files->written.end(), rewrite.add.begin(), rewrite.add.end());
    files->cow.add.insert(files->cow.add.end(), rewrite.add.begin(), rewrite.add.end());
    files->cow.remove.insert(files->cow.remove.end(), rewrite.remove.begin(),
                             rewrite.remove.end());
    return arrow::Status::OK();
  }
  if (hold) {
    AddDeletes(deletes, &files->held_deletes);
    return arrow::Status::OK();
  }
  return WriteDeleteFiles(silver, deletes, files);
}

arrow::Status WriteDeleteFiles(ice::Table& silver, RowsByPartition deletes,
                               MergeFiles* files) {
  for (auto& [where, entry] : deletes) {
    // `where` is "<spec id>/<partition path>": the deletes of an older spec's data
    // files are of that spec, or no reader applies them.
    const std::optional<int32_t> spec_id = ParseInt32(where.substr(0, where.find('/')));
    const ice::PartitionSpec* spec =
        spec_id ? silver.metadata().FindSpec(*spec_id) : nullptr;
    if (spec == nullptr) {
      return arrow::Status::UnknownError("deletes of partition ", where,
                                         " name no spec of the table");
    }
    const bool other_spec = spec->spec_id != silver.spec().spec_id;
    ARROW_ASSIGN_OR_RAISE(
        ice::DataFile file,
        ice::WritePositionDeleteFile(silver, entry.first, std::move(entry.second),
                                     other_spec ? spec : nullptr));
    if (other_spec) files->delete_specs[file.file_path] = spec->spec_id;
    files->written.push_back(file);
    files->deletes.push_back(std::move(file));
  }
  return arrow::Status::OK();
}

int64_t AddDeletes(RowsByPartition from, RowsByPartition* into) {
  int64_t added = 0;
  for (auto& [where, entry] : from) {
    auto& to = (*into)[where];
    to.first = std::move(entry.first);
    for (auto& [path, positions] : entry.second) {
      auto& list = to.second[path];
      list.insert(list.end(), positions.begin(), positions.end());
      added += static_cast<int64_t>(positions.size());
    }
  }
  return added;
}

arrow::Result<SilverDeletes> WritePlan(ice::Table& silver,
                                       const ice::TableMetadata& planned, ice::FileIO& io,
                                       const Changes& changes, const FoldResult& fold,
                                       const MergeColumns& columns,
                                       const std::vector<std::string>& key,
                                       bool silver_has_rows, bool copy_on_write,
                                       MergeFiles* files, MergeStats* stats) {
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver.schema()));
  // Rows of Silver to delete (not needed after a truncate: every file goes).
  SilverDeletes found;
  if (silver_has_rows && !fold.truncated && !fold.keys.empty()) {
    ARROW_ASSIGN_OR_RAISE(
        found,
        FindSilverDeletes(silver, planned, io, changes, fold, columns.key_columns, key,
                          stats, copy_on_write ? nullptr : &files->replaced_deletes,
                          columns.declared_key));
  }

  ARROW_ASSIGN_OR_RAISE(
      auto upserts,
      BuildUpserts(changes, fold, fold.needs_existing ? &found.existing : nullptr,
                   silver_arrow));
  // Written by TierSmallFiles, or folded there with the bucket's small files.
  ARROW_ASSIGN_OR_RAISE(files->held_upserts, SortedPartitions(silver, upserts, key));
  upserts.reset();
  if (arrow::Status wrote =
          WriteMergeDeletes(silver, planned.current_snapshot_id, found.by_partition,
                            copy_on_write, files, stats, /*hold=*/true);
      !wrote.ok()) {
    DeleteFiles(io, files->written);
    return wrote;
  }
  return found;
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
  if (files.data.empty() && files.deletes.empty() && files.tiered.empty()) {
    // Nothing changed (or only keys that never reached Silver were deleted): an
    // empty snapshot still moves the watermark.
    return silver.AppendFiles({}, summary, once).status();
  }
  if (!silver_has_rows && files.deletes.empty() && files.tiered.empty()) {
    return silver.AppendFiles(files.data, summary, once).status();
  }
  ice::RowDeltaRequest request;
  request.add_data_files = files.data;
  request.add_delete_files = files.deletes;
  for (const auto& d : files.deletes) {
    if (auto spec = files.delete_specs.find(d.file_path);
        spec != files.delete_specs.end()) {
      request.delete_file_specs.insert(*spec);
    }
  }
  request.remove_data_files = files.tiered;
  for (const auto& [path, file] : files.replaced_deletes) {
    request.remove_delete_files.push_back(file);
  }
  request.referenced_data_files.assign(referenced.begin(), referenced.end());
  request.validate_from_snapshot_id = planned_snapshot;
  request.validate_no_conflicting_data_files = true;
  return silver.RowDelta(request, summary, once).status();
}

arrow::Status CommitPlan(ice::Table& silver, ice::FileIO& io,
                         std::optional<int64_t> planned_snapshot, bool truncated,
                         bool silver_has_rows, const MergeFiles& files,
                         const std::set<std::string>& referenced, uint64_t bronze_lsn,
                         int attempt, const MergeOptions& options, MergeStats* stats) {
  ice::SummaryProperties summary = {
      {lake::kWatermarkSummaryKey, std::to_string(bronze_lsn)}};
  AddMergeCounters(*stats, &summary);
  if (options.before_commit) options.before_commit(attempt);
  const arrow::Status committed = CommitMerge(
      silver, planned_snapshot, truncated, silver_has_rows, files, referenced, summary);
  if (!committed.ok()) {
    if (floe::IsRetryable(committed)) {
      // Definitely or possibly not ours: plan again from whatever Silver holds now
      // (an unknown outcome that did land shows up as the new watermark).
      const floe::ErrorKind kind = floe::ErrorKindOf(committed);
      if (kind != floe::ErrorKind::kCommitStateUnknown) DeleteFiles(io, files.written);
      if (kind == floe::ErrorKind::kCommitConflict) {
        spdlog::info("{}: Silver changed while merging ({}); planning again",
                     silver.identifier().ToString(), committed.message());
      } else {
        spdlog::warn("{}: the commit failed ({}); planning again",
                     silver.identifier().ToString(), committed.ToString());
        if (attempt < options.max_attempts) floe::SleepBeforeRetry(attempt);
      }
      stats->position_deletes = 0;
      stats->files_scanned = 0;
      stats->rewritten_data_files = stats->rewrite_files_added = 0;
      stats->rewrite_rows_dropped = stats->rewrite_rows_copied = 0;
      stats->delete_files_removed = 0;
      stats->tiered_files = stats->tier_files_added = 0;
      return committed;
    }
    DeleteFiles(io, files.written);
  }
  return committed;
}

}  // namespace floe::silver::merge_internal
