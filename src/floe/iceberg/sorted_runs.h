#pragma once

// Merging runs of rows each sorted by some columns into one sorted sequence, a batch
// at a time: what compaction needs to rewrite a bucket whose files are each sorted by
// the key without holding the bucket in memory.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include <arrow/api.h>

namespace floe::iceberg {

/// Orders rows of batches of one schema by some of their columns, ascending, nulls
/// last and NaN after every number (Arrow's sort order). Compares booleans, integers,
/// floating point, decimal128, dates, times, timestamps, durations, and strings and
/// binaries (by their bytes); Make refuses other types.
class RowOrder {
 public:
  static arrow::Result<RowOrder> Make(const arrow::Schema& schema,
                                      const std::vector<int>& columns);

  /// < 0, 0 or > 0 as row `i` of `a` sorts before, with or after row `j` of `b`.
  int Compare(const arrow::RecordBatch& a, int64_t i, const arrow::RecordBatch& b,
              int64_t j) const;

 private:
  using ColumnCompare = int (*)(const arrow::ArrayData&, int64_t, const arrow::ArrayData&,
                                int64_t);
  struct Column {
    int index;
    ColumnCompare compare;
  };
  std::vector<Column> columns_;
};

/// Pulls a run's next batch; null at its end.
using BatchSource = std::function<arrow::Result<std::shared_ptr<arrow::RecordBatch>>()>;

/// Merges `runs`, each sorted by `order`, into one sequence sorted by `order` (ties in
/// run order), handing `each` batches of `schema` of at most `out_rows` rows and
/// about 8 MiB (the first of 1024 rows at most, later ones sized from it). A
/// run's batch is released once its rows are copied out, so memory is about one
/// batch per run plus one output batch. Returns false, and stops, on meeting a row of
/// a run that sorts before the row before it (the run is not sorted): what was
/// handed on is then not the whole merge.
arrow::Result<bool> MergeSortedRuns(
    std::vector<BatchSource> runs, const std::shared_ptr<arrow::Schema>& schema,
    const RowOrder& order, int64_t out_rows,
    const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each);

/// A run written to a local Arrow IPC file (named `floe-run-<random>.arrow` in `dir`,
/// the system's temporary directory when empty) and read back a batch at a time; the
/// file is removed with the object.
class SpilledRun {
 public:
  ~SpilledRun();
  SpilledRun(const SpilledRun&) = delete;
  SpilledRun& operator=(const SpilledRun&) = delete;

  static arrow::Result<std::unique_ptr<SpilledRun>> Create(
      const std::filesystem::path& dir, const std::shared_ptr<arrow::Schema>& schema);
  arrow::Status Write(const arrow::RecordBatch& batch);
  /// Ends the writing; then Next reads the batches back in order.
  arrow::Status Close();
  /// The next batch written; null at the end.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Next();

  const std::filesystem::path& path() const { return path_; }

 private:
  SpilledRun() = default;
  struct Io;
  std::filesystem::path path_;
  std::unique_ptr<Io> io_;
  int next_ = 0;
};

/// The runs MergeSortedRuns is given from local files at once, at most (NarrowRuns):
/// an open file each.
inline constexpr size_t kMaxRunFanIn = 256;

/// Sources reading runs [first, end) of `runs` (closed) a batch at a time, for
/// MergeSortedRuns. REQUIRES: the runs outlive the sources.
std::vector<BatchSource> RunSources(const std::vector<std::unique_ptr<SpilledRun>>& runs,
                                    size_t first, size_t end);

/// Merges `runs` (each sorted by `order`, closed) `fan_in` at a time into longer runs
/// in `dir`, again until at most `fan_in` are left, so that merging them holds at most
/// `fan_in` files open (while narrowing, `fan_in` read and the one written); each
/// merged run is removed once read. `batch_rows`: the rows of the longer runs'
/// batches. False when a run is not sorted: `runs` is then part merged (some entries
/// null), only to be destroyed.
arrow::Result<bool> NarrowRuns(std::vector<std::unique_ptr<SpilledRun>>* runs,
                               const std::filesystem::path& dir,
                               const std::shared_ptr<arrow::Schema>& schema,
                               const RowOrder& order, size_t fan_in, int64_t batch_rows);

}  // namespace floe::iceberg
