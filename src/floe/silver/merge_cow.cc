// Copy-on-write: the commit replaces each Silver data file holding a row to delete
// with a copy without it (and without the rows earlier position deletes removed).

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;

// The rows of `file` in Silver's current schema and file order, without the rows at
// the positions `drop` (sorted).
arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadWithout(
    ice::Table& silver, const ice::LiveFile& file, const std::vector<int64_t>& drop) {
  ice::FileScanTask task;
  task.data_file = file.entry.data_file;
  task.spec_id = file.spec_id;
  task.data_sequence_number = file.entry.sequence_number.value_or(0);
  const ice::Schema& schema = silver.schema();
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  // No deletes and no filter: every row comes back, one batch per row group, so a
  // row's ordinal among them is its position in the file.
  ARROW_ASSIGN_OR_RAISE(
      auto batches,
      ice::ReadFileScanTask(silver.io(), task, schema, schema, ice::AlwaysTrue()));
  ARROW_ASSIGN_OR_RAISE(auto rows, arrow::Table::FromRecordBatches(arrow_schema, batches));
  ARROW_ASSIGN_OR_RAISE(auto batch, rows->CombineChunksToBatch());
  arrow::BooleanBuilder keep;
  ARROW_RETURN_NOT_OK(keep.Reserve(batch->num_rows()));
  auto next = drop.begin();
  for (int64_t pos = 0; pos < batch->num_rows(); ++pos) {
    while (next != drop.end() && *next < pos) ++next;
    keep.UnsafeAppend(next == drop.end() || *next != pos);
  }
  ARROW_ASSIGN_OR_RAISE(auto mask, keep.Finish());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum kept, cp::Filter(arrow::Datum(batch), mask));
  return kept.record_batch();
}

}  // namespace

// Plans and writes the rewrite of a copy-on-write merge from `deletes` (the rows to
// delete that FindRowsToDelete found, grouped by partition) on snapshot
// `snapshot_id`. The files rewritten are those holding a row to delete, plus every
// data file a position delete file applying to one of them points into (a file left
// from when the table was merge-on-read may cover several data files of a bucket),
// so that every such delete file can be removed: after a copy-on-write merge no
// delete file refers to a live row the merge did not rewrite.
arrow::Result<CowRewrite> RewriteForCopyOnWrite(ice::Table& silver,
                                                std::optional<int64_t> snapshot_id,
                                                const RowsByPartition& deletes,
                                                MergeStats* stats) {
  CowRewrite out;
  std::map<std::string, std::vector<int64_t>> drop;
  for (const auto& [where, entry] : deletes) {
    for (const auto& [path, positions] : entry.second) {
      auto& into = drop[path];
      into.insert(into.end(), positions.begin(), positions.end());
    }
  }
  if (drop.empty()) return out;
  ARROW_ASSIGN_OR_RAISE(auto live, silver.LiveFiles(snapshot_id));
  std::map<std::string, const ice::LiveFile*> data_files;
  std::vector<ice::FileScanTask> tasks;
  std::vector<ice::DeleteFileEntry> delete_entries;
  for (const auto& f : live) {
    if (f.entry.data_file.content == ice::DataFileContent::kData) {
      data_files[f.entry.data_file.file_path] = &f;
      ice::FileScanTask task;
      task.data_file = f.entry.data_file;
      task.spec_id = f.spec_id;
      task.data_sequence_number = f.entry.sequence_number.value_or(0);
      tasks.push_back(std::move(task));
    } else {
      delete_entries.push_back(ice::DeleteFileEntry{
          f.entry.data_file, f.spec_id, f.entry.sequence_number.value_or(0)});
    }
  }
  // The delete files that may apply to each data file (partition and sequence
  // number); which rows they delete is read from them below.
  ice::AssignDeleteFiles(delete_entries, &tasks);
  std::map<std::string, const std::vector<ice::DataFile>*> may_apply;
  for (const auto& t : tasks) may_apply[t.data_file.file_path] = &t.delete_files;

  std::map<std::string, std::map<std::string, std::vector<int64_t>>> delete_refs;
  std::map<std::string, ice::DataFile> obsolete_deletes;
  std::set<std::string> rewrite;
  std::vector<std::string> queue;
  for (const auto& [path, positions] : drop) {
    if (!data_files.contains(path)) {
      return arrow::Status::Invalid("Silver data file ", path, " is not live in snapshot ",
                                    snapshot_id.value_or(-1));
    }
    if (rewrite.insert(path).second) queue.push_back(path);
  }
  while (!queue.empty()) {
    const std::string path = queue.back();
    queue.pop_back();
    for (const ice::DataFile& d : *may_apply.at(path)) {
      if (d.content != ice::DataFileContent::kPositionDeletes) {
        return arrow::Status::NotImplemented(
            "Silver data file ", path, " has equality delete file ", d.file_path,
            " (written by another engine); a copy-on-write merge cannot rewrite around "
            "it: run `floe compact` on the table first, or set its silver.write_modes "
            "entry to merge-on-read");
      }
      if (delete_refs.contains(d.file_path)) continue;
      ARROW_ASSIGN_OR_RAISE(auto refs, ice::ReadPositionDeletes(silver.io(), d));
      for (const auto& [ref, positions] : refs) {
        // Paths of data files no longer live are left to go with the delete file.
        if (data_files.contains(ref) && rewrite.insert(ref).second) queue.push_back(ref);
      }
      delete_refs[d.file_path] = std::move(refs);
      obsolete_deletes[d.file_path] = d;
    }
  }

  const ice::PartitionSpec& spec = silver.spec();
  for (const std::string& path : rewrite) {
    const ice::LiveFile& file = *data_files.at(path);
    std::vector<int64_t> positions = drop[path];
    for (const ice::DataFile& d : *may_apply.at(path)) {
      const auto& refs = delete_refs.at(d.file_path);
      if (auto it = refs.find(path); it != refs.end()) {
        positions.insert(positions.end(), it->second.begin(), it->second.end());
      }
    }
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
    auto written = [&]() -> arrow::Result<std::vector<ice::DataFile>> {
      ARROW_ASSIGN_OR_RAISE(auto kept, ReadWithout(silver, file, positions));
      stats->rewrite_rows_dropped += file.entry.data_file.record_count - kept->num_rows();
      stats->rewrite_rows_copied += kept->num_rows();
      std::vector<ice::DataFile> files;
      if (kept->num_rows() == 0) return files;
      if (file.spec_id == spec.spec_id) {
        return silver.WriteDataFiles({kept}, file.entry.data_file.partition);
      }
      // A file of an older spec: its rows go to the partitions of the current one.
      ARROW_ASSIGN_OR_RAISE(auto parts,
                            ice::SplitByPartition(spec, silver.schema(), *kept));
      for (const auto& part : parts) {
        ARROW_ASSIGN_OR_RAISE(auto part_files,
                              silver.WriteDataFiles({part.batch}, part.partition));
        for (auto& f : part_files) files.push_back(std::move(f));
      }
      return files;
    }();
    if (!written.ok()) {
      DeleteFiles(silver.io(), out.add);
      return written.status();
    }
    for (auto& f : *written) out.add.push_back(std::move(f));
    out.remove.push_back(file.entry.data_file);
  }
  stats->rewritten_data_files = static_cast<int32_t>(out.remove.size());
  stats->rewrite_files_added = static_cast<int32_t>(out.add.size());
  stats->delete_files_removed = static_cast<int32_t>(obsolete_deletes.size());
  for (auto& [path, d] : obsolete_deletes) out.remove.push_back(std::move(d));
  return out;
}

}  // namespace floe::silver::merge_internal
