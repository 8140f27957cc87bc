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

// Rows of a data file read and written at once by a rewrite, at most, and about how
// many bytes.
constexpr int64_t kRewriteBatchRows = 65536;
constexpr int64_t kRewriteBatchBytes = int64_t{4} << 20;

// Copies the rows of `file` (Silver's current schema, file order) without those at the
// positions `drop` (sorted) into new data files of Silver's current spec: a batch at a
// time, so that the memory a rewrite takes does not grow with the file. Counts the
// rows copied and dropped in `stats`.
arrow::Result<std::vector<ice::DataFile>> CopyWithout(ice::Table& silver,
                                                      const ice::LiveFile& file,
                                                      const std::vector<int64_t>& drop,
                                                      MergeStats* stats) {
  ice::FileScanTask task;
  task.data_file = file.entry.data_file;
  task.spec_id = file.spec_id;
  task.data_sequence_number = file.entry.sequence_number.value_or(0);
  const ice::Schema& schema = silver.schema();
  const ice::PartitionSpec& spec = silver.spec();
  const bool same_spec = file.spec_id == spec.spec_id;
  // A file of an older spec: its rows go to the partitions of the current one.
  std::map<std::string, std::unique_ptr<ice::DataFileWriter>> writers;
  auto writer_of =
      [&](const ice::PartitionTuple& partition) -> arrow::Result<ice::DataFileWriter*> {
    const std::string where = ice::PartitionPath(spec, schema, partition);
    auto& writer = writers[where];
    if (writer == nullptr) {
      ARROW_ASSIGN_OR_RAISE(writer, silver.NewDataFileWriter(partition));
    }
    return writer.get();
  };
  int64_t position = 0;  // of the batch's first row in the file
  auto next = drop.begin();
  // No deletes and no filter: every row comes back, in file order, so a row's
  // ordinal among the batches is its position in the file.
  ARROW_RETURN_NOT_OK(ice::ReadFileScanTaskInBatches(
      silver.io(), task, schema, schema, ice::AlwaysTrue(), kRewriteBatchRows,
      [&](std::shared_ptr<arrow::RecordBatch> batch) -> arrow::Status {
        arrow::BooleanBuilder keep;
        ARROW_RETURN_NOT_OK(keep.Reserve(batch->num_rows()));
        for (int64_t i = 0; i < batch->num_rows(); ++i) {
          const int64_t pos = position + i;
          while (next != drop.end() && *next < pos) ++next;
          keep.UnsafeAppend(next == drop.end() || *next != pos);
        }
        position += batch->num_rows();
        ARROW_ASSIGN_OR_RAISE(auto mask, keep.Finish());
        ARROW_ASSIGN_OR_RAISE(arrow::Datum kept, cp::Filter(arrow::Datum(batch), mask));
        const auto& rows = kept.record_batch();
        stats->rewrite_rows_copied += rows->num_rows();
        stats->rewrite_rows_dropped += batch->num_rows() - rows->num_rows();
        if (rows->num_rows() == 0) return arrow::Status::OK();
        if (same_spec) {
          ARROW_ASSIGN_OR_RAISE(auto* writer, writer_of(file.entry.data_file.partition));
          return writer->Write(*rows);
        }
        ARROW_ASSIGN_OR_RAISE(auto parts, ice::SplitByPartition(spec, schema, *rows));
        for (const auto& part : parts) {
          ARROW_ASSIGN_OR_RAISE(auto* writer, writer_of(part.partition));
          ARROW_RETURN_NOT_OK(writer->Write(*part.batch));
        }
        return arrow::Status::OK();
      },
      kRewriteBatchBytes));
  std::vector<ice::DataFile> out;
  for (auto& [where, writer] : writers) {
    ARROW_ASSIGN_OR_RAISE(auto files, writer->Finish());
    for (auto& f : files) out.push_back(std::move(f));
  }
  return out;
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
    auto written = CopyWithout(silver, file, positions, stats);
    if (!written.ok()) {
      DeleteFiles(silver.io(), out.add);
      return written.status();
    }
    for (auto& f : *written) out.add.push_back(std::move(f));
    out.remove.push_back(file.entry.data_file);
  }
  // Added up: a merge cut into slices rewrites each bucket's files in a call of its own.
  stats->rewritten_data_files += static_cast<int32_t>(out.remove.size());
  stats->rewrite_files_added += static_cast<int32_t>(out.add.size());
  stats->delete_files_removed += static_cast<int32_t>(obsolete_deletes.size());
  for (auto& [path, d] : obsolete_deletes) out.remove.push_back(std::move(d));
  return out;
}

}  // namespace floe::silver::merge_internal
