// The upserts of a merge whose increment was cut into slices: a bucket whose rows
// several slices hold gets a sorted run (a local file) from each of them, and once
// every slice is merged the runs of the bucket are merged into one sorted sequence of
// data files. A bucket so gains the files of one write per merge, not a small file per
// slice for the merge-time fold (merge_tier.cc) to rewrite.

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/util/byte_size.h>

#include "floe/iceberg/partition_split.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;

namespace {

// The rows of the runs' batches and of the merged batches written, at most.
constexpr int64_t kRunBatchRows = 8192;

}  // namespace

void OnThreads(size_t n, int workers, const std::function<void(size_t)>& each) {
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < n; i = next++) each(i);
  };
  const int threads =
      std::clamp<int>(workers, 1, static_cast<int>(std::max<size_t>(1, n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
}

arrow::Result<std::vector<ice::PartitionedBatch>> SortedPartitions(
    const ice::Table& silver, const std::shared_ptr<arrow::RecordBatch>& rows,
    const std::vector<std::string>& key_names,
    const std::optional<ice::PartitionSpec>& spec) {
  if (rows->num_rows() == 0) return std::vector<ice::PartitionedBatch>{};
  std::vector<cp::SortKey> sort_keys;
  for (const auto& k : key_names) sort_keys.emplace_back(k);
  ARROW_ASSIGN_OR_RAISE(auto indices,
                        cp::SortIndices(arrow::Datum(rows), cp::SortOptions(sort_keys)));
  ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted, cp::Take(arrow::Datum(rows), indices));
  return ice::SplitByPartition(spec ? *spec : silver.spec(), silver.schema(),
                               *sorted.record_batch());
}

arrow::Result<std::vector<ice::DataFile>> WriteSortedPartitions(
    const ice::Table& silver, std::vector<ice::PartitionedBatch> parts,
    const std::optional<ice::PartitionSpec>& spec) {
  std::vector<ice::DataFile> out;
  for (ice::PartitionedBatch& part : parts) {
    ARROW_ASSIGN_OR_RAISE(auto writer,
                          silver.NewDataFileWriter(part.partition, std::nullopt, spec));
    ARROW_RETURN_NOT_OK(writer->Write(*part.batch));
    ARROW_ASSIGN_OR_RAISE(auto files, writer->Finish());
    for (auto& f : files) out.push_back(std::move(f));
    part.batch.reset();
  }
  return out;
}

struct UpsertRuns::Partition {
  ice::PartitionTuple tuple;
  std::vector<std::unique_ptr<ice::SpilledRun>> runs;
};

UpsertRuns::UpsertRuns(const ice::Table& silver, std::vector<std::string> key,
                       std::optional<ice::RowOrder> order, std::filesystem::path dir,
                       std::function<bool(const ice::PartitionTuple&)> shared,
                       int64_t most_runs, int64_t memory, int workers, size_t max_fan_in)
    : silver_(silver),
      key_(std::move(key)),
      order_(std::move(order)),
      dir_(std::move(dir)),
      shared_(std::move(shared)),
      most_runs_(std::max<int64_t>(1, most_runs)),
      memory_(memory),
      workers_(std::max(1, workers)),
      max_fan_in_(std::max<size_t>(2, max_fan_in)) {}

UpsertRuns::~UpsertRuns() = default;

arrow::Status UpsertRuns::Add(const std::shared_ptr<arrow::RecordBatch>& upserts,
                              std::vector<ice::DataFile>* written) {
  ARROW_ASSIGN_OR_RAISE(auto parts, SortedPartitions(silver_, upserts, key_));
  for (auto& part : parts) {
    if (!order_ || !shared_(part.partition)) {
      ARROW_ASSIGN_OR_RAISE(auto files,
                            silver_.WriteDataFiles({part.batch}, part.partition));
      for (auto& f : files) written->push_back(std::move(f));
      continue;
    }
    // One batch of each of a partition's runs is held at once while they are merged,
    // in a quarter of the memory, by `workers_` partitions at once.
    ARROW_ASSIGN_OR_RAISE(const int64_t bytes,
                          arrow::util::ReferencedBufferSize(*part.batch));
    const int64_t row_bytes = std::max<int64_t>(1, bytes / part.batch->num_rows());
    int64_t widest = row_bytes_.load();
    while (widest < row_bytes && !row_bytes_.compare_exchange_weak(widest, row_bytes)) {
    }
    const int64_t batch_rows = std::clamp<int64_t>(
        memory_ / 4 / workers_ / std::min(most_runs_, static_cast<int64_t>(max_fan_in_)) /
            row_bytes,
        1, kRunBatchRows);
    auto run = ice::SpilledRun::Create(dir_, part.batch->schema());
    arrow::Status spilled = run.status();
    for (int64_t at = 0; spilled.ok() && at < part.batch->num_rows(); at += batch_rows) {
      spilled = (*run)->Write(*part.batch->Slice(at, batch_rows));
    }
    if (spilled.ok()) spilled = (*run)->Close();
    if (!spilled.ok()) {
      return spilled.WithMessage(
          "writing the merge's sorted upserts to ", dir_.string(), ": ",
          spilled.message(),
          "; give silver.spill_dir a local directory with room for the increment's "
          "spill and the upserted rows (about three times the increment's Arrow "
          "bytes), or raise silver.memory_limit");
    }
    part.batch.reset();
    const std::string where =
        ice::PartitionPath(silver_.spec(), silver_.schema(), part.partition);
    std::lock_guard lock(mu_);
    Partition& into = partitions_[where];
    into.tuple = part.partition;
    into.runs.push_back(std::move(*run));
  }
  return arrow::Status::OK();
}

arrow::Status UpsertRuns::Narrow(Partition& partition,
                                 const std::shared_ptr<arrow::Schema>& schema) {
  const int64_t batch_rows =
      std::clamp<int64_t>(memory_ / 4 / workers_ / static_cast<int64_t>(max_fan_in_) /
                              std::max<int64_t>(1, row_bytes_.load()),
                          1, kRunBatchRows);
  ARROW_ASSIGN_OR_RAISE(
      const bool sorted,
      ice::NarrowRuns(&partition.runs, dir_, schema, *order_, max_fan_in_, batch_rows));
  if (!sorted) {
    return arrow::Status::UnknownError(
        "a sorted run of the merge's upserts came back out of order");
  }
  return arrow::Status::OK();
}

arrow::Status UpsertRuns::Write(std::vector<ice::DataFile>* written) {
  std::vector<Partition*> todo;
  for (auto& [where, partition] : partitions_) todo.push_back(&partition);
  std::mutex mu;
  auto merge_one = [&](Partition& partition) -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto schema, ice::ToArrowSchema(silver_.schema()));
    ARROW_RETURN_NOT_OK(Narrow(partition, schema));
    ARROW_ASSIGN_OR_RAISE(auto writer, silver_.NewDataFileWriter(partition.tuple));
    // The merged batches in an eighth of the memory.
    const int64_t out_rows = std::clamp<int64_t>(
        memory_ / 8 / workers_ / std::max<int64_t>(1, row_bytes_.load()), 16,
        kRunBatchRows);
    auto merged = ice::MergeSortedRuns(
        ice::RunSources(partition.runs, 0, partition.runs.size()), schema, *order_,
        out_rows,
        [&](std::shared_ptr<arrow::RecordBatch> b) { return writer->Write(*b); });
    auto files = writer->Finish();
    {
      std::lock_guard lock(mu);
      if (files.ok()) written->insert(written->end(), files->begin(), files->end());
    }
    partition.runs.clear();
    if (!merged.ok()) return merged.status();
    if (!files.ok()) return files.status();
    if (!*merged) {
      // Every run was sorted by the key as it was written.
      return arrow::Status::UnknownError(
          "a sorted run of the merge's upserts in ",
          ice::PartitionPath(silver_.spec(), silver_.schema(), partition.tuple),
          " came back out of order");
    }
    return arrow::Status::OK();
  };
  std::vector<arrow::Status> statuses(todo.size());
  OnThreads(todo.size(), workers_, [&](size_t i) { statuses[i] = merge_one(*todo[i]); });
  partitions_.clear();
  for (const arrow::Status& status : statuses) ARROW_RETURN_NOT_OK(status);
  return arrow::Status::OK();
}

}  // namespace floe::silver::merge_internal
