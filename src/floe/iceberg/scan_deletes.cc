// Which delete files a scan task reads (scan.h, AssignDeleteFiles): the Iceberg
// spec's scan planning rules, by partition; the last position delete files read,
// kept (LastPositionDeletes).

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/table_internal.h"

namespace floe::iceberg {
namespace {

bool SamePartition(const DeleteFileEntry& d, const FileScanTask& t) {
  return d.spec_id == t.spec_id && d.file.partition == t.data_file.partition;
}

}  // namespace

void AssignDeleteFiles(const std::vector<DeleteFileEntry>& deletes,
                       std::vector<FileScanTask>* tasks) {
  // The delete files of each partition (unpartitioned ones apply to every partition):
  // a task looks at its own partition's, not at every delete file of the table.
  std::map<table_internal::PartitionKey, std::vector<const DeleteFileEntry*>>
      by_partition;
  std::vector<const DeleteFileEntry*> global;
  for (const DeleteFileEntry& d : deletes) {
    if (d.file.content == DataFileContent::kEqualityDeletes && d.file.partition.empty()) {
      global.push_back(&d);
    } else {
      by_partition[table_internal::MakePartitionKey(d.spec_id, d.file.partition)]
          .push_back(&d);
    }
  }
  const std::vector<const DeleteFileEntry*> none;
  for (FileScanTask& task : *tasks) {
    const int64_t seq = task.data_sequence_number;
    auto it = by_partition.find(
        table_internal::MakePartitionKey(task.spec_id, task.data_file.partition));
    const auto& local = it == by_partition.end() ? none : it->second;
    std::vector<const DeleteFileEntry*> candidates = local;
    candidates.insert(candidates.end(), global.begin(), global.end());
    // In the order the table lists them.
    std::sort(candidates.begin(), candidates.end());
    for (const DeleteFileEntry* entry : candidates) {
      const DeleteFileEntry& d = *entry;
      bool applies = false;
      switch (d.file.content) {
        case DataFileContent::kPositionDeletes:
          applies = d.data_sequence_number >= seq && SamePartition(d, task) &&
                    (!d.file.referenced_data_file ||
                     *d.file.referenced_data_file == task.data_file.file_path);
          break;
        case DataFileContent::kEqualityDeletes:
          applies = d.data_sequence_number > seq &&
                    (d.file.partition.empty() || SamePartition(d, task));
          break;
        case DataFileContent::kData:
          break;
      }
      if (applies) task.delete_files.push_back(d.file);
    }
  }
}

arrow::Status LastPositionDeletes::Append(FileIO& io, const DataFile& deletes,
                                          const std::string& data_path,
                                          std::vector<int64_t>* out) {
  auto it = std::find_if(files_.begin(), files_.end(),
                         [&](const auto& f) { return f.first == deletes.file_path; });
  if (it == files_.end()) {
    if (files_.size() == kKept) files_.pop_back();
    ARROW_ASSIGN_OR_RAISE(auto positions, ReadPositionDeletes(io, deletes));
    files_.emplace_front(deletes.file_path, std::move(positions));
  } else if (it != files_.begin()) {
    auto used = std::move(*it);
    files_.erase(it);
    files_.push_front(std::move(used));
  }
  const auto& positions = files_.front().second;
  if (auto found = positions.find(data_path); found != positions.end()) {
    out->insert(out->end(), found->second.begin(), found->second.end());
  }
  return arrow::Status::OK();
}

}  // namespace floe::iceberg
