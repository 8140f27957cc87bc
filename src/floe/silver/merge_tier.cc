// Merge-time tiering: a merge writes a data file per bucket it touches (per slice,
// when the increment is spilled), so without compaction a bucket would gather a file
// per merge and every later merge would open each one's footer. Before it commits, a
// merge folds the small data files of each bucket it touches (the bucket's live ones
// and its own new ones) into one sorted file, size-tiered so that a row is rewritten
// a logarithmic number of times; the commit removes the files it folded.

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/util/byte_size.h>
#include <spdlog/spdlog.h>

#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/position_delete_writer.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sorted_runs.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {
namespace {

namespace ice = floe::iceberg;

constexpr int64_t kMiB = int64_t{1} << 20;
// Rows of the batches merged and written.
constexpr int64_t kTierBatchRows = 8192;

// A small data file a merge may fold: live in the planned snapshot (its deletes, and
// the merge's new ones, applied as it is read) or written by the merge itself; or the
// merge's upserts of the bucket, held in memory (`held`; task.data_file then holds
// only an estimate of their file's size, and no path).
struct Candidate {
  ice::FileScanTask task;
  bool written = false;
  /// A live file's delete files from the planned snapshot (the plan's own are added
  /// when it is folded).
  std::vector<ice::DataFile> live_deletes;
  std::shared_ptr<arrow::RecordBatch> held;
};

// The partition key merges use ("<spec id>/<partition path>").
std::string WhereOf(const ice::Table& silver, const ice::PartitionTuple& partition) {
  return std::to_string(silver.spec().spec_id) + "/" +
         ice::PartitionPath(silver.spec(), silver.schema(), partition);
}

ice::FileScanTask TaskOf(const ice::DataFile& file, int32_t spec_id, int64_t sequence) {
  ice::FileScanTask task;
  task.data_file = file;
  task.spec_id = spec_id;
  task.data_sequence_number = sequence;
  return task;
}

// Which of `candidates` (sorted by size) to fold: a run of consecutive ones, each at
// most twice those before it in the run together, so a file is folded again only once
// the files beside it add up to half its size (it then grows by half at least: a row is
// rewritten a logarithmic number of times); files under `floor` count as `floor`, so a
// file of a few rows does not stand in the way of the rest. The run with the most
// files (at most `fan_in`): [first, first + n); n is 0 when no run has two.
std::pair<size_t, size_t> ChooseTier(const std::vector<Candidate>& candidates,
                                     size_t fan_in, int64_t floor) {
  auto size = [&](size_t i) {
    return std::max(candidates[i].task.data_file.file_size_in_bytes, floor);
  };
  std::pair<size_t, size_t> best{0, 0};
  for (size_t first = 0; first + 1 < candidates.size(); ++first) {
    int64_t sum = size(first);
    size_t n = 1;
    while (first + n < candidates.size() && n < fan_in && size(first + n) <= 2 * sum) {
      sum += size(first + n);
      ++n;
    }
    if (n >= 2 && n > best.second) best = {first, n};
  }
  return best;
}

// Merges the rows of `files` (each sorted by the key, deletes applied as they are
// read) into new data files of `partition`; false (and nothing left written) when a
// file is not sorted.
arrow::Result<bool> FoldFiles(ice::Table& silver, const ice::PartitionTuple& partition,
                              const std::vector<Candidate>& files,
                              const std::vector<std::string>& key, int64_t memory,
                              std::vector<ice::DataFile>* out) {
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(silver.schema()));
  std::vector<int> key_columns;
  for (const auto& k : key) key_columns.push_back(arrow_schema->GetFieldIndex(k));
  auto order = ice::RowOrder::Make(*arrow_schema, key_columns);
  if (!order.ok()) return false;  // a key type the merge cannot compare: not folded
  const auto open = static_cast<int64_t>(files.size());
  const int64_t columns = std::max(1, arrow_schema->num_fields());
  const int64_t batch_bytes = std::clamp<int64_t>(memory / 12 / open, 64 * 1024, kMiB);
  // Small files: no stream buffer larger than the file itself.
  const int64_t most_buffer =
      std::clamp<int64_t>(memory / 8 / open / columns, 16 * 1024, kMiB);
  ice::LastPositionDeletes last_deletes;
  std::vector<ice::BatchSource> sources;
  for (const Candidate& c : files) {
    if (c.held != nullptr) {
      auto at = std::make_shared<int64_t>(0);
      sources.push_back(
          [at, rows = c.held]() -> arrow::Result<std::shared_ptr<arrow::RecordBatch>> {
            if (*at >= rows->num_rows()) return nullptr;
            auto batch = rows->Slice(*at, kTierBatchRows);
            *at += batch->num_rows();
            return batch;
          });
      continue;
    }
    auto reader = std::make_shared<std::unique_ptr<ice::FileScanBatches>>();
    const int64_t buffer =
        std::clamp<int64_t>(c.task.data_file.file_size_in_bytes, 16 * 1024, most_buffer);
    sources.push_back(
        [&, reader, buffer,
         task = &c.task]() -> arrow::Result<std::shared_ptr<arrow::RecordBatch>> {
          if (*reader == nullptr) {
            ARROW_ASSIGN_OR_RAISE(
                *reader, ice::FileScanBatches::Open(silver.io(), *task, silver.schema(),
                                                    kTierBatchRows, batch_bytes, buffer,
                                                    &last_deletes));
          }
          return (*reader)->Next();
        });
  }
  ARROW_ASSIGN_OR_RAISE(auto writer, silver.NewDataFileWriter(partition));
  auto merged = ice::MergeSortedRuns(
      std::move(sources), arrow_schema, *order, kTierBatchRows,
      [&](std::shared_ptr<arrow::RecordBatch> b) { return writer->Write(*b); });
  auto finished = writer->Finish();
  if (!merged.ok() || !*merged || !finished.ok()) {
    if (finished.ok()) DeleteFiles(silver.io(), *finished);
    if (!merged.ok()) return merged.status();
    if (!finished.ok()) return finished.status();
    return false;
  }
  *out = std::move(*finished);
  return true;
}

// Removes the files of `paths` from `files` (and from `written`), deleting them.
void DropWritten(ice::FileIO& io, const std::set<std::string>& paths,
                 std::vector<ice::DataFile>* files, std::vector<ice::DataFile>* written) {
  std::vector<ice::DataFile> gone;
  auto drop = [&](std::vector<ice::DataFile>* v, bool keep_gone) {
    auto it = std::stable_partition(v->begin(), v->end(), [&](const ice::DataFile& f) {
      return !paths.contains(f.file_path);
    });
    if (keep_gone) gone.assign(it, v->end());
    v->erase(it, v->end());
  };
  drop(files, true);
  drop(written, false);
  DeleteFiles(io, gone);
}

// Merge-on-read: partition `where`'s deletes (the merge's, held in memory or written,
// and the live ones not yet replaced, `live_deletes`) gathered in its held deletes
// without the positions in `folded` (files the commit removes); the delete files they
// came from are replaced, so no delete file is left pointing into a removed data file.
arrow::Status HoldDeletes(ice::Table& silver, const ice::PartitionTuple& partition,
                          const std::string& where,
                          const std::vector<ice::DataFile>& live_deletes,
                          const std::set<std::string>& folded, MergeFiles* files) {
  auto& held = files->held_deletes[where];
  held.first = partition;
  ice::PositionsByFile& kept = held.second;
  for (const std::string& path : folded) kept.erase(path);
  std::set<std::string> new_paths;
  auto add = [&](const ice::DataFile& d) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto refs, ice::ReadPositionDeletes(silver.io(), d));
    for (auto& [path, positions] : refs) {
      if (folded.contains(path)) continue;
      auto& into = kept[path];
      into.insert(into.end(), positions.begin(), positions.end());
    }
    return arrow::Status::OK();
  };
  for (const ice::DataFile& d : files->deletes) {
    if (files->delete_specs.contains(d.file_path) ||
        WhereOf(silver, d.partition) != where) {
      continue;  // another spec's deletes, or another partition's
    }
    ARROW_RETURN_NOT_OK(add(d));
    new_paths.insert(d.file_path);
  }
  for (const ice::DataFile& d : live_deletes) {
    if (files->replaced_deletes.contains(d.file_path)) continue;
    ARROW_RETURN_NOT_OK(add(d));
    files->replaced_deletes.emplace(d.file_path, d);
  }
  DropWritten(silver.io(), new_paths, &files->deletes, &files->written);
  if (kept.empty()) files->held_deletes.erase(where);
  return arrow::Status::OK();
}

// Writes the upserts still held (not folded), the files of each partition.
arrow::Status WriteHeldUpserts(ice::Table& silver, MergeFiles* files) {
  std::vector<ice::PartitionedBatch> held = std::move(files->held_upserts);
  files->held_upserts.clear();
  ARROW_ASSIGN_OR_RAISE(auto written, WriteSortedPartitions(silver, std::move(held)));
  files->written.insert(files->written.end(), written.begin(), written.end());
  files->data.insert(files->data.end(), written.begin(), written.end());
  return arrow::Status::OK();
}

// Merge-on-read: writes the held deletes, a delete file per partition.
arrow::Status WriteHeldDeletes(ice::Table& silver, MergeFiles* files) {
  RowsByPartition held = std::move(files->held_deletes);
  files->held_deletes.clear();
  return WriteDeleteFiles(silver, std::move(held), files);
}

// The live small data files of snapshot `planned_snapshot` in the partitions of
// `touched` as candidates of their partition, with the delete files that apply (and
// each partition's live delete files in `live_deletes`). Copy-on-write leaves files
// with deletes to the rewrite that removes them; equality deletes (another engine's)
// are left to compaction.
arrow::Status AddLiveCandidates(
    const ice::Table& silver, std::optional<int64_t> planned_snapshot,
    const std::map<std::string, ice::PartitionTuple>& touched,
    const std::function<bool(const ice::DataFile&)>& small, bool copy_on_write,
    const MergeFiles& files, std::map<std::string, std::vector<Candidate>>* by_partition,
    std::map<std::string, std::vector<ice::DataFile>>* live_deletes) {
  if (!planned_snapshot) return arrow::Status::OK();
  const int32_t spec_id = silver.spec().spec_id;
  ARROW_ASSIGN_OR_RAISE(auto live, silver.LiveFiles(planned_snapshot));
  std::set<std::string> removed;
  for (const ice::DataFile& f : files.cow.remove) removed.insert(f.file_path);
  std::vector<ice::FileScanTask> tasks;
  std::vector<ice::DeleteFileEntry> deletes;
  for (const ice::LiveFile& f : live) {
    const ice::DataFile& file = f.entry.data_file;
    if (f.spec_id != spec_id) continue;
    const std::string where = WhereOf(silver, file.partition);
    if (!touched.contains(where)) continue;
    if (file.content != ice::DataFileContent::kData) {
      deletes.push_back(
          ice::DeleteFileEntry{file, f.spec_id, f.entry.sequence_number.value_or(0)});
      (*live_deletes)[where].push_back(file);
    } else if (small(file) && !removed.contains(file.file_path)) {
      tasks.push_back(TaskOf(file, f.spec_id, f.entry.sequence_number.value_or(0)));
    }
  }
  ice::AssignDeleteFiles(deletes, &tasks);
  for (ice::FileScanTask& task : tasks) {
    const bool position_only = std::all_of(
        task.delete_files.begin(), task.delete_files.end(), [](const ice::DataFile& d) {
          return d.content == ice::DataFileContent::kPositionDeletes;
        });
    // Copy-on-write leaves files with deletes to the rewrite that removes them;
    // equality deletes (another engine's) are left to compaction.
    if (!position_only || (copy_on_write && !task.delete_files.empty())) continue;
    const std::string where = WhereOf(silver, task.data_file.partition);
    std::vector<ice::DataFile> deletes_of = task.delete_files;
    (*by_partition)[where].push_back(
        Candidate{std::move(task), false, std::move(deletes_of)});
  }
  return arrow::Status::OK();
}

// One partition's folds: its candidates, and its part of the plan's files
// (MoveIntoParts), which the folds change and PutBack returns.
struct PartitionFold {
  std::string where;
  ice::PartitionTuple partition;
  std::vector<Candidate> candidates;
  std::vector<ice::DataFile> live_deletes;
  /// The small files the first pass needs (FoldsAt); later passes kTierFiles.
  size_t first_at = kTierFiles;
  MergeFiles files;
  int32_t tiered_files = 0;
  int32_t tier_files_added = 0;
  arrow::Status status;
};

// Moves the plan's files of the partitions in `parts` (by WhereOf) out of `files` into
// their part, each file's partition worked out once. A part also gets the replaced
// delete files among its partition's live ones (`live_deletes`), which HoldDeletes
// reads.
void MoveIntoParts(const ice::Table& silver,
                   const std::map<std::string, PartitionFold*>& parts,
                   MergeFiles* files) {
  auto split = [&](std::vector<ice::DataFile>* from, auto list_of) {
    std::vector<ice::DataFile> kept;
    for (ice::DataFile& f : *from) {
      // A delete file of an older spec belongs to no part (its tuple may read alike).
      auto it = files->delete_specs.contains(f.file_path)
                    ? parts.end()
                    : parts.find(WhereOf(silver, f.partition));
      if (it == parts.end()) {
        kept.push_back(std::move(f));
      } else {
        list_of(it->second->files).push_back(std::move(f));
      }
    }
    *from = std::move(kept);
  };
  split(&files->data, [](MergeFiles& m) -> auto& { return m.data; });
  split(&files->deletes, [](MergeFiles& m) -> auto& { return m.deletes; });
  split(&files->cow.add, [](MergeFiles& m) -> auto& { return m.cow.add; });
  split(&files->written, [](MergeFiles& m) -> auto& { return m.written; });
  std::vector<ice::PartitionedBatch> kept_upserts;
  for (ice::PartitionedBatch& held : files->held_upserts) {
    auto it = parts.find(WhereOf(silver, held.partition));
    if (it == parts.end()) {
      kept_upserts.push_back(std::move(held));
    } else {
      it->second->files.held_upserts.push_back(std::move(held));
    }
  }
  files->held_upserts = std::move(kept_upserts);
  for (const auto& [where, fold] : parts) {
    if (auto held = files->held_deletes.extract(where)) {
      fold->files.held_deletes.insert(std::move(held));
    }
    for (const ice::DataFile& d : fold->live_deletes) {
      auto it = files->replaced_deletes.find(d.file_path);
      if (it != files->replaced_deletes.end()) fold->files.replaced_deletes.insert(*it);
    }
  }
}

// Puts a part (MoveIntoParts, as the folds left it) back into `files`.
void PutBack(MergeFiles part, MergeFiles* files) {
  auto append = [](auto* into, auto& from) {
    into->insert(into->end(), std::make_move_iterator(from.begin()),
                 std::make_move_iterator(from.end()));
  };
  append(&files->data, part.data);
  append(&files->deletes, part.deletes);
  append(&files->cow.add, part.cow.add);
  append(&files->written, part.written);
  append(&files->cow.remove, part.cow.remove);
  append(&files->tiered, part.tiered);
  files->delete_specs.merge(part.delete_specs);
  files->replaced_deletes.merge(part.replaced_deletes);
  files->held_deletes.merge(part.held_deletes);
  append(&files->held_upserts, part.held_upserts);
}

// The folds of one partition: a pass folds at most the fan-in `memory` allows; passes
// go on while the bucket holds kTierFiles small files (a merge of many slices writes
// several), at most kTierPasses of them.
arrow::Status FoldPartition(ice::Table& silver, const std::vector<std::string>& key,
                            int64_t memory, bool copy_on_write, PartitionFold* fold) {
  ARROW_ASSIGN_OR_RAISE(const int64_t target, silver.TargetFileSizeBytes());
  auto small = [&](const ice::DataFile& f) {
    return f.file_size_in_bytes < target / 4 * 3;
  };
  const int32_t spec_id = silver.spec().spec_id;
  const int64_t columns = static_cast<int64_t>(silver.schema().fields().size());
  const int64_t per_file = columns * (2 * kMiB + 64 * 1024) + 3 * kMiB;
  const size_t fan_in =
      static_cast<size_t>(std::clamp<int64_t>(memory / 3 / per_file, 2, 64));
  // Files under this size fold with any others (ChooseTier).
  const int64_t floor = std::max<int64_t>(4096, target / 64);
  std::vector<Candidate>& candidates = fold->candidates;
  MergeFiles* files = &fold->files;
  const std::string& where = fold->where;
  for (int pass = 0; pass < kTierPasses; ++pass) {
    const size_t at =
        pass == 0 ? fold->first_at : std::min<size_t>(fold->first_at, kTierFiles);
    if (candidates.size() < at) break;
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.task.data_file.file_size_in_bytes <
                              b.task.data_file.file_size_in_bytes;
                     });
    const auto [first, n] = ChooseTier(candidates, fan_in, floor);
    if (n == 0) break;
    std::vector<Candidate> folding(candidates.begin() + first,
                                   candidates.begin() + first + n);
    // Merge-on-read: the live files with the plan's delete files of the partition as
    // they are now (an earlier pass may have written them again).
    auto held = files->held_deletes.find(where);
    for (Candidate& c : folding) {
      if (c.written) continue;
      c.task.delete_files = c.live_deletes;
      for (const ice::DataFile& d : files->deletes) c.task.delete_files.push_back(d);
      c.task.deleted_positions.clear();
      if (held != files->held_deletes.end()) {
        auto positions = held->second.second.find(c.task.data_file.file_path);
        if (positions != held->second.second.end()) {
          c.task.deleted_positions = positions->second;
        }
      }
    }
    std::vector<ice::DataFile> folded_into;
    ARROW_ASSIGN_OR_RAISE(const bool sorted, FoldFiles(silver, fold->partition, folding,
                                                       key, memory, &folded_into));
    if (!sorted) {
      spdlog::warn(
          "{}: a data file of partition {} is not sorted by the key; its small files "
          "are left for `floe compact`",
          silver.identifier().ToString(), where);
      break;
    }
    std::set<std::string> written, live;
    int32_t folded_files = 0;
    for (const Candidate& c : folding) {
      if (c.held != nullptr) {
        // The upserts folded in: not written on their own.
        std::erase_if(files->held_upserts,
                      [&](const ice::PartitionedBatch& b) { return b.batch == c.held; });
        continue;
      }
      ++folded_files;
      (c.written ? written : live).insert(c.task.data_file.file_path);
      if (!c.written) {
        (copy_on_write ? files->cow.remove : files->tiered).push_back(c.task.data_file);
      }
    }
    DropWritten(silver.io(), written, &files->data, &files->written);
    DropWritten(silver.io(), written, &files->cow.add, &files->written);
    files->written.insert(files->written.end(), folded_into.begin(), folded_into.end());
    files->data.insert(files->data.end(), folded_into.begin(), folded_into.end());
    if (!copy_on_write && !live.empty()) {
      ARROW_RETURN_NOT_OK(
          HoldDeletes(silver, fold->partition, where, fold->live_deletes, live, files));
    }
    fold->tiered_files += folded_files;
    fold->tier_files_added += static_cast<int32_t>(folded_into.size());
    // The folded files leave the candidates; the small ones made join them.
    candidates.erase(candidates.begin() + first, candidates.begin() + first + n);
    for (const ice::DataFile& f : folded_into) {
      if (small(f)) candidates.push_back(Candidate{TaskOf(f, spec_id, 0), true, {}});
    }
  }
  return arrow::Status::OK();
}

// How many small files partition `where` needs to fold in the merge after
// `sequence`: kTierFiles on its turn, which comes every kTierFiles - 1 merges, and
// kTierFiles + 2 off it. The partitions' turns are spread over the merges (by a hash
// of `where`), so that where every bucket gets a file a merge, each merge folds a third
// of them, not every one every third merge (what merge 10 of a series cost against
// merge 1); a bucket still holds at most kTierFiles - 1 small files between its folds
// once it is in step with its turns.
size_t FoldsAt(const std::string& where, int64_t sequence) {
  constexpr uint64_t kPeriod = kTierFiles - 1;
  // FNV-1a: the same turn on every machine and build.
  uint64_t hash = 14695981039346656037ULL;
  for (const char c : where)
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  const bool turn = (hash + static_cast<uint64_t>(sequence)) % kPeriod == 0;
  return turn ? kTierFiles : kTierFiles + 2;
}

// The folds of TierSmallFiles, `workers` partitions at a time.
arrow::Status FoldPartitions(ice::Table& silver, std::optional<int64_t> planned_snapshot,
                             const std::vector<std::string>& key, int64_t memory,
                             int workers, bool copy_on_write, MergeFiles* files,
                             MergeStats* stats) {
  ARROW_ASSIGN_OR_RAISE(const int64_t target, silver.TargetFileSizeBytes());
  auto small = [&](const ice::DataFile& f) {
    return f.file_size_in_bytes < target / 4 * 3;
  };
  const int32_t spec_id = silver.spec().spec_id;
  // The partitions the merge writes in, and its own small new files of each.
  std::map<std::string, ice::PartitionTuple> touched;
  std::map<std::string, std::vector<Candidate>> by_partition;
  const std::string current = std::to_string(spec_id) + "/";
  for (const auto* list : {&files->data, &files->cow.add, &files->deletes}) {
    for (const ice::DataFile& f : *list) {
      // An older spec's delete files are in no partition the merge folds.
      if (files->delete_specs.contains(f.file_path)) continue;
      touched[WhereOf(silver, f.partition)] = f.partition;
    }
  }
  for (const auto& [where, held] : files->held_deletes) {
    if (where.starts_with(current)) touched[where] = held.first;
  }
  for (const ice::PartitionedBatch& held : files->held_upserts) {
    touched[WhereOf(silver, held.partition)] = held.partition;
  }
  for (const auto* list : {&files->data, &files->cow.add}) {
    for (const ice::DataFile& f : *list) {
      if (small(f)) {
        by_partition[WhereOf(silver, f.partition)].push_back(
            Candidate{TaskOf(f, spec_id, 0), /*written=*/true, {}});
      }
    }
  }
  if (touched.empty()) return arrow::Status::OK();
  // The live small files of those partitions, and their delete files.
  std::map<std::string, std::vector<ice::DataFile>> live_deletes;
  ARROW_RETURN_NOT_OK(AddLiveCandidates(silver, planned_snapshot, touched, small,
                                        copy_on_write, *files, &by_partition,
                                        &live_deletes));
  // The merge's upserts held in memory, sized as the file they would make at the
  // bytes per row of the partition's small files (a quarter of their Arrow bytes when
  // it has none).
  for (const ice::PartitionedBatch& held : files->held_upserts) {
    std::vector<Candidate>& of = by_partition[WhereOf(silver, held.partition)];
    int64_t bytes = 0;
    int64_t rows = 0;
    for (const Candidate& c : of) {
      bytes += c.task.data_file.file_size_in_bytes;
      rows += c.task.data_file.record_count;
    }
    ARROW_ASSIGN_OR_RAISE(const int64_t arrow_bytes,
                          arrow::util::ReferencedBufferSize(*held.batch));
    ice::DataFile file;
    file.partition = held.partition;
    file.record_count = held.batch->num_rows();
    file.file_size_in_bytes = std::max<int64_t>(
        1, rows > 0 ? file.record_count * bytes / rows : arrow_bytes / 4);
    if (!small(file)) continue;  // written as it is
    of.push_back(Candidate{TaskOf(file, spec_id, 0), false, {}, held.batch});
  }
  // Partitions with enough small files to fold, folded `workers` at a time, each
  // within its part of the memory, on its own part of `files`.
  std::vector<std::string> folding;
  const int64_t sequence = silver.metadata().last_sequence_number;
  for (const auto& [where, candidates] : by_partition) {
    if (candidates.size() >= FoldsAt(where, sequence)) folding.push_back(where);
  }
  if (folding.empty()) return arrow::Status::OK();
  const int threads = std::clamp<int>(workers, 1, static_cast<int>(folding.size()));
  const int64_t part_memory = memory / threads;
  std::vector<PartitionFold> folds(folding.size());
  std::map<std::string, PartitionFold*> parts;
  for (size_t i = 0; i < folding.size(); ++i) {
    folds[i].where = folding[i];
    folds[i].partition = touched.at(folding[i]);
    folds[i].candidates = std::move(by_partition[folding[i]]);
    folds[i].live_deletes = std::move(live_deletes[folding[i]]);
    folds[i].first_at = FoldsAt(folding[i], sequence);
    parts.emplace(folding[i], &folds[i]);
  }
  MoveIntoParts(silver, parts, files);
  OnThreads(folds.size(), threads, [&](size_t i) {
    folds[i].status = FoldPartition(silver, key, part_memory, copy_on_write, &folds[i]);
    // Its deletes are final: written now, not held while other partitions fold.
    if (folds[i].status.ok()) folds[i].status = WriteHeldDeletes(silver, &folds[i].files);
  });
  arrow::Status status;
  for (PartitionFold& f : folds) {
    // Every partition's files go back, written ones too, so that an error deletes
    // them all.
    PutBack(std::move(f.files), files);
    stats->tiered_files += f.tiered_files;
    stats->tier_files_added += f.tier_files_added;
    if (status.ok() && !f.status.ok()) status = f.status;
  }
  return status;
}

}  // namespace

arrow::Status TierSmallFiles(ice::Table& silver, std::optional<int64_t> planned_snapshot,
                             bool truncated, const std::vector<std::string>& key,
                             int64_t memory, int workers, bool copy_on_write,
                             MergeFiles* files, MergeStats* stats) {
  arrow::Status folded = truncated ? arrow::Status::OK()
                                   : FoldPartitions(silver, planned_snapshot, key, memory,
                                                    workers, copy_on_write, files, stats);
  if (folded.ok()) folded = WriteHeldUpserts(silver, files);
  // After a truncate the commit replaces every file: no delete file is committed.
  if (truncated) files->held_deletes.clear();
  if (folded.ok()) folded = WriteHeldDeletes(silver, files);
  if (!folded.ok()) {
    DeleteFiles(silver.io(), files->written);
    return folded;
  }
  stats->data_files = static_cast<int32_t>(files->data.size());
  stats->delete_files = static_cast<int32_t>(files->deletes.size());
  if (!copy_on_write) {
    stats->delete_files_removed = static_cast<int32_t>(files->replaced_deletes.size());
  }
  return arrow::Status::OK();
}

}  // namespace floe::silver::merge_internal
