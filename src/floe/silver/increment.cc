#include "floe/silver/increment.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/util/byte_size.h>
#include <spdlog/spdlog.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/transform.h"
#include "floe/silver/fold.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;
namespace fs = std::filesystem;

constexpr int32_t kMaxPartitions = 1024;

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

using BatchSink = std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>;

// Runs `produce` on a thread of its own, handing its batches to `consume` on this one
// in order, at most kReadAhead of them waiting; the first failure of either stops both.
arrow::Status ReadAhead(const std::function<arrow::Status(const BatchSink&)>& produce,
                        const BatchSink& consume) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<arrow::RecordBatch>> queue;
  bool done = false;
  bool stopped = false;  // the consumer failed
  arrow::Status produced;
  std::thread producer([&] {
    arrow::Status status = produce([&](std::shared_ptr<arrow::RecordBatch> batch) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return queue.size() < kReadAhead || stopped; });
      if (stopped) return arrow::Status::Cancelled("the increment's read stopped");
      queue.push_back(std::move(batch));
      cv.notify_all();
      return arrow::Status::OK();
    });
    std::lock_guard lock(mu);
    produced = std::move(status);
    done = true;
    cv.notify_all();
  });
  arrow::Status consumed;
  while (consumed.ok()) {
    std::shared_ptr<arrow::RecordBatch> batch;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return !queue.empty() || done; });
      if (queue.empty()) break;
      batch = std::move(queue.front());
      queue.pop_front();
      cv.notify_all();
    }
    consumed = consume(std::move(batch));
  }
  if (!consumed.ok()) {
    std::lock_guard lock(mu);
    stopped = true;
    queue.clear();
    cv.notify_all();
  }
  producer.join();
  if (!consumed.ok()) return consumed;
  return produced;
}

int64_t BytesOf(const arrow::RecordBatch& batch) {
  auto size = arrow::util::ReferencedBufferSize(batch);
  return size.ok() ? *size : 0;
}

// Rows per batch read from a Bronze file: about an eighth of a slice, from the
// file's bytes per row (times 4: Parquet's encoding and compression undone).
int64_t BatchRows(const ice::DataFile& file, int64_t slice_bytes) {
  const int64_t per_row = std::max<int64_t>(
      1, 4 * file.file_size_in_bytes / std::max<int64_t>(1, file.record_count));
  return std::clamp<int64_t>(slice_bytes / 8 / per_row, 1024, 65536);
}

// A position in Bronze's total order.
using Position = std::pair<int64_t, int32_t>;

// The ops of a batch as one string array (cdc_op is utf8).
const arrow::StringArray* OpsOf(const arrow::RecordBatch& batch) {
  auto ops = batch.GetColumnByName(kCdcOp);
  return ops == nullptr ? nullptr : static_cast<const arrow::StringArray*>(ops.get());
}

// Whether row `i` of a cdc_unchanged list column lists a column.
bool ListsUnchanged(const arrow::Array* unchanged, int64_t i) {
  if (unchanged == nullptr || unchanged->type_id() != arrow::Type::LIST) return false;
  const auto& list = static_cast<const arrow::ListArray&>(*unchanged);
  return !list.IsNull(i) && list.value_length(i) > 0;
}

// `batch`'s columns `names` (the key columns), looked up once for its rows.
arrow::Result<std::vector<const arrow::Array*>> ColumnsOf(
    const arrow::RecordBatch& batch, const std::vector<std::string>& names) {
  std::vector<const arrow::Array*> columns;
  for (const std::string& name : names) {
    const auto* column = batch.GetColumnByName(name).get();
    if (column == nullptr) {
      return arrow::Status::Invalid("the changes have no column `", name, "`");
    }
    columns.push_back(column);
  }
  return columns;
}

}  // namespace

namespace {

// Reads an increment: batches in memory until they pass the slice size, then every
// batch partitioned by the bucket of its first key column into the spill.
class IncrementReader {
 public:
  IncrementReader(const IncrementOptions& options, std::string key_column,
                  std::shared_ptr<const ice::Type> key_type, int64_t planned_rows)
      : options_(options),
        key_column_(std::move(key_column)),
        key_type_(std::move(key_type)),
        planned_rows_(planned_rows) {}

  arrow::Status Add(std::shared_ptr<arrow::RecordBatch> batch) {
    rows_ += batch->num_rows();
    ARROW_ASSIGN_OR_RAISE(batch, SetTruncatesApart(std::move(batch)));
    if (batch->num_rows() == 0) return arrow::Status::OK();
    bytes_ += BytesOf(*batch);
    const int64_t bytes = WeightOf(*batch);
    weight_ += bytes;
    if (spill_ == nullptr) {
      in_memory_.push_back(std::move(batch));
      in_memory_bytes_ += bytes;
      if (in_memory_bytes_ <= options_.slice_bytes) return arrow::Status::OK();
      return StartSpill();
    }
    // Batches are gathered into chunks of half a slice before they are partitioned:
    // each partition's share of a chunk is one write.
    in_memory_.push_back(std::move(batch));
    in_memory_bytes_ += bytes;
    if (in_memory_bytes_ < options_.slice_bytes / 2) return arrow::Status::OK();
    return SpillHeld();
  }

  // The rows' partition numbers in the spill.
  arrow::Result<std::vector<int32_t>> PartitionsOf(
      const arrow::RecordBatch& batch) const {
    auto keys = batch.GetColumnByName(key_column_);
    if (keys == nullptr) {
      return arrow::Status::Invalid("the changes have no column `", key_column_, "`");
    }
    const bool by_partitions = pow2_;
    const int32_t modulus = by_partitions ? partitions_ : options_.silver_buckets;
    ARROW_ASSIGN_OR_RAISE(std::vector<int32_t> out,
                          ice::BucketValues(*keys, *key_type_, modulus));
    for (int32_t& p : out) {
      if (p < 0) p = 0;  // a null key: any partition holds it
      if (!by_partitions) p %= partitions_;
    }
    return out;
  }

  // Records a KeyMove for each new row of a key-changing update that keeps an
  // unchanged value and its old key's `d` (at the previous cdc_seq), when that is in
  // this batch; the others are looked up later
  // (Unresolved()).
  arrow::Status LinkKeyChanges(const arrow::RecordBatch& batch,
                               const std::vector<int32_t>& parts) {
    const arrow::StringArray* ops = OpsOf(batch);
    auto unchanged = batch.GetColumnByName(kCdcUnchanged);
    if (ops == nullptr || unchanged == nullptr) return arrow::Status::OK();
    const auto& lsn =
        static_cast<const arrow::Int64Array&>(*batch.GetColumnByName(kCdcCommitLsn));
    const auto& seq =
        static_cast<const arrow::Int32Array&>(*batch.GetColumnByName(kCdcSeq));
    std::map<Position, MovedTo> wanted;
    std::vector<const arrow::Array*> keys;
    for (int64_t i = 0; i < batch.num_rows(); ++i) {
      if (ops->IsNull(i) || ops->GetView(i) != "c" ||
          !ListsUnchanged(unchanged.get(), i) || lsn.IsNull(i) || seq.IsNull(i)) {
        continue;
      }
      if (keys.empty()) {
        ARROW_ASSIGN_OR_RAISE(keys, ColumnsOf(batch, key_columns_));
      }
      ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, i));
      wanted[{lsn.Value(i), seq.Value(i) - 1}] = MovedTo{parts[i], std::move(key)};
    }
    if (wanted.empty()) return arrow::Status::OK();
    for (int64_t i = 0; i < batch.num_rows(); ++i) {
      if (ops->IsNull(i) || ops->GetView(i) != "d" || lsn.IsNull(i) || seq.IsNull(i)) {
        continue;
      }
      auto it = wanted.find({lsn.Value(i), seq.Value(i)});
      if (it == wanted.end()) continue;
      ARROW_RETURN_NOT_OK(AddMove(batch, i, parts[i], std::move(it->second)));
      wanted.erase(it);
    }
    for (auto& [position, to] : wanted) unresolved_.emplace(position, std::move(to));
    return arrow::Status::OK();
  }

  // The `d` rows the spill pass did not find beside their key-changing `c`: `batch`
  // holds cdc_op, cdc_commit_lsn, cdc_seq and the key column.
  arrow::Status ResolveFrom(const arrow::RecordBatch& batch) {
    const arrow::StringArray* ops = OpsOf(batch);
    const auto& lsn =
        static_cast<const arrow::Int64Array&>(*batch.GetColumnByName(kCdcCommitLsn));
    const auto& seq =
        static_cast<const arrow::Int32Array&>(*batch.GetColumnByName(kCdcSeq));
    std::optional<std::vector<int32_t>> parts;
    for (int64_t i = 0; i < batch.num_rows(); ++i) {
      if (ops->IsNull(i) || ops->GetView(i) != "d" || lsn.IsNull(i) || seq.IsNull(i)) {
        continue;
      }
      auto it = unresolved_.find({lsn.Value(i), seq.Value(i)});
      if (it == unresolved_.end()) continue;
      if (!parts) {
        ARROW_ASSIGN_OR_RAISE(parts, PartitionsOf(batch));
      }
      ARROW_RETURN_NOT_OK(AddMove(batch, i, (*parts)[i], std::move(it->second)));
      unresolved_.erase(it);
    }
    return arrow::Status::OK();
  }

  arrow::Status Finish() {
    if (spill_ == nullptr) return arrow::Status::OK();
    return SpillHeld();
  }

  // Where the new row of a key-changing update went: its partition and key.
  struct MovedTo {
    int32_t partition = 0;
    std::string key;
  };

  const std::map<Position, MovedTo>& unresolved() const { return unresolved_; }

  // The move from the old key's `d` at `row` (in partition `from`) to `to` (in the
  // same partition too: a chain of moves may lead from another partition to it).
  arrow::Status AddMove(const arrow::RecordBatch& batch, int64_t row, int32_t from,
                        MovedTo to) {
    ARROW_ASSIGN_OR_RAISE(auto keys, ColumnsOf(batch, key_columns_));
    ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, row));
    moves_.push_back(KeyMove{from, std::move(key), to.partition, std::move(to.key)});
    return arrow::Status::OK();
  }

  IncrementOptions options_;
  std::string key_column_;
  /// Every key column (options.key_columns, or the first alone).
  std::vector<std::string> key_columns_;
  std::shared_ptr<const ice::Type> key_type_;
  int64_t planned_rows_ = 0;
  std::shared_ptr<arrow::Schema> schema_;

  int64_t rows_ = 0;
  int64_t bytes_ = 0;
  int64_t live_ = 0;
  std::vector<std::shared_ptr<arrow::RecordBatch>> in_memory_;
  int64_t in_memory_bytes_ = 0;
  /// What the rows weigh in a slice (WeightOf).
  int64_t weight_ = 0;
  std::vector<std::shared_ptr<arrow::RecordBatch>> truncates_;
  std::unique_ptr<PartitionSpill> spill_;
  int32_t partitions_ = 1;
  bool pow2_ = true;
  std::vector<int64_t> partition_bytes_;
  std::vector<KeyMove> moves_;
  std::map<Position, MovedTo> unresolved_;

 private:
  // Counts the batch's operations for the live estimate and moves its `t` rows to
  // truncates_; returns the other rows.
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> SetTruncatesApart(
      std::shared_ptr<arrow::RecordBatch> batch) {
    const arrow::StringArray* ops = OpsOf(*batch);
    if (ops == nullptr) return arrow::Status::Invalid("the changes have no cdc_op");
    bool any_truncate = false;
    for (int64_t i = 0; i < ops->length(); ++i) {
      if (ops->IsNull(i)) continue;
      const std::string_view op = ops->GetView(i);
      if (op == "c" || op == "r") ++live_;
      if (op == "d") --live_;
      if (op == "t") any_truncate = true;
    }
    if (!any_truncate) return batch;
    ARROW_ASSIGN_OR_RAISE(
        arrow::Datum is_truncate,
        cp::CallFunction("equal", {arrow::Datum(batch->GetColumnByName(kCdcOp)),
                                   arrow::Datum(std::string("t"))}));
    ARROW_ASSIGN_OR_RAISE(arrow::Datum truncates,
                          cp::Filter(arrow::Datum(batch), is_truncate));
    truncates_.push_back(truncates.record_batch());
    ARROW_ASSIGN_OR_RAISE(arrow::Datum others, cp::CallFunction("invert", {is_truncate}));
    ARROW_ASSIGN_OR_RAISE(arrow::Datum rest, cp::Filter(arrow::Datum(batch), others));
    return rest.record_batch();
  }

  // What rows weigh in a slice: their bytes, or, when more, the Silver rows they may
  // become or need (a change that leaves a TOAST value unchanged is small, the row it
  // reads from Silver and writes back is not).
  int64_t WeightOf(const arrow::RecordBatch& batch) const {
    return std::max(BytesOf(batch), batch.num_rows() * options_.row_bytes);
  }

  // Chooses the partition count from the rows planned and the bytes per row so far,
  // and moves the batches held in memory to the spill.
  arrow::Status StartSpill() {
    const double per_row =
        static_cast<double>(weight_) / static_cast<double>(std::max<int64_t>(1, rows_));
    const double total = per_row * static_cast<double>(std::max(planned_rows_, rows_));
    // Partitions of about half a slice, so slices can be packed evenly.
    const double wanted = 2.0 * total / static_cast<double>(options_.slice_bytes);
    partitions_ = 2;
    while (partitions_ < kMaxPartitions && partitions_ < wanted) partitions_ *= 2;
    pow2_ = options_.silver_buckets == 0 || IsPowerOfTwo(options_.silver_buckets);
    partition_bytes_.assign(partitions_, 0);
    schema_ = in_memory_.front()->schema();
    ARROW_ASSIGN_OR_RAISE(spill_, PartitionSpill::Make(options_.spill_parent, partitions_,
                                                       schema_, kMergeSpill));
    spdlog::debug("spilling a Silver increment of about {} bytes into {} partitions",
                  static_cast<int64_t>(total), partitions_);
    return SpillHeld();
  }

  // The batches held, as one chunk, to the spill.
  arrow::Status SpillHeld() {
    if (in_memory_.empty()) return arrow::Status::OK();
    std::vector<std::shared_ptr<arrow::RecordBatch>> held;
    held.swap(in_memory_);
    in_memory_bytes_ = 0;
    ARROW_ASSIGN_OR_RAISE(auto chunk, arrow::ConcatenateRecordBatches(held));
    held.clear();
    return SpillBatch(chunk);
  }

  // One reordering of the batch by partition, then each partition's rows (a
  // zero-copy slice) to its file.
  arrow::Status SpillBatch(const std::shared_ptr<arrow::RecordBatch>& batch) {
    ARROW_ASSIGN_OR_RAISE(std::vector<int32_t> parts, PartitionsOf(*batch));
    ARROW_RETURN_NOT_OK(LinkKeyChanges(*batch, parts));
    std::vector<int64_t> starts(partitions_ + 1, 0);
    for (int32_t p : parts) ++starts[p + 1];
    std::partial_sum(starts.begin(), starts.end(), starts.begin());
    arrow::Int64Builder order;
    ARROW_RETURN_NOT_OK(order.Resize(batch->num_rows()));
    std::vector<int64_t> next(starts.begin(), starts.end() - 1);
    std::vector<int64_t> at(batch->num_rows());
    for (int64_t i = 0; i < batch->num_rows(); ++i) at[next[parts[i]]++] = i;
    ARROW_RETURN_NOT_OK(order.AppendValues(at));
    ARROW_ASSIGN_OR_RAISE(auto indices, order.Finish());
    ARROW_ASSIGN_OR_RAISE(arrow::Datum sorted,
                          cp::Take(arrow::Datum(batch), arrow::Datum(indices)));
    const auto& rows = sorted.record_batch();
    for (int32_t p = 0; p < partitions_; ++p) {
      const int64_t n = starts[p + 1] - starts[p];
      if (n == 0) continue;
      auto part = rows->Slice(starts[p], n);
      partition_bytes_[p] += WeightOf(*part);
      ARROW_RETURN_NOT_OK(spill_->Write(p, part));
    }
    return arrow::Status::OK();
  }
};

}  // namespace

iceberg::ExpressionPtr CommitLsnRange(uint64_t lower, uint64_t upper) {
  ice::ExpressionPtr filter =
      ice::LessThanOrEqual(kCdcCommitLsn, static_cast<int64_t>(upper));
  if (lower == 0) return filter;
  return ice::And(ice::GreaterThan(kCdcCommitLsn, static_cast<int64_t>(lower)), filter);
}

Increment::~Increment() = default;

std::filesystem::path Increment::spill_dir() const {
  return spill_ != nullptr ? spill_->dir() : std::filesystem::path();
}

arrow::Result<std::unique_ptr<Increment>> Increment::Read(
    const ice::TableMetadata& bronze, ice::FileIO& io, uint64_t lower, uint64_t upper,
    const std::vector<std::string>& columns, const std::string& key_column,
    const IncrementOptions& options) {
  ice::ScanOptions scan;
  scan.filter = CommitLsnRange(lower, upper);
  scan.columns = columns;
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(bronze, io, scan));
  const ice::NestedField* key_field = plan.projection->FindField(key_column);
  if (key_field == nullptr) {
    return arrow::Status::Invalid("the Bronze scan has no key column `", key_column, "`");
  }
  int64_t planned_rows = 0;
  for (const auto& task : plan.tasks) planned_rows += task.data_file.record_count;
  IncrementReader reader(options, key_column, key_field->type, planned_rows);
  reader.key_columns_ = options.key_columns.empty() ? std::vector<std::string>{key_column}
                                                    : options.key_columns;
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(*plan.projection));
  auto read_all =
      [&](const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each)
      -> arrow::Status {
    for (const ice::FileScanTask& task : plan.tasks) {
      ARROW_RETURN_NOT_OK(ice::ReadFileScanTaskInBatches(
          io, task, *plan.schema, *plan.projection, plan.filter,
          BatchRows(task.data_file, options.slice_bytes), each, options.slice_bytes / 8));
      arrow::default_memory_pool()->ReleaseUnused();
    }
    return arrow::Status::OK();
  };
  if (options.read_ahead && plan.tasks.size() > 1) {
    ARROW_RETURN_NOT_OK(ReadAhead(read_all, [&](std::shared_ptr<arrow::RecordBatch> b) {
      return reader.Add(std::move(b));
    }));
  } else {
    ARROW_RETURN_NOT_OK(read_all([&](std::shared_ptr<arrow::RecordBatch> batch) {
      return reader.Add(std::move(batch));
    }));
  }
  ARROW_RETURN_NOT_OK(reader.Finish());
  if (reader.spill_ != nullptr && !reader.unresolved().empty()) {
    // A key-changing update whose two rows the spill pass met in different batches:
    // find the old keys' `d` rows (ops, positions and the key columns only).
    scan.columns = std::vector<std::string>{kCdcOp, kCdcCommitLsn, kCdcSeq};
    for (const std::string& k : reader.key_columns_) {
      if (std::find(scan.columns->begin(), scan.columns->end(), k) ==
          scan.columns->end()) {
        scan.columns->push_back(k);
      }
    }
    ARROW_ASSIGN_OR_RAISE(ice::ScanPlan pass, ice::PlanScan(bronze, io, scan));
    ARROW_ASSIGN_OR_RAISE(auto batches, ice::ScanPlanBatches(io, std::move(pass)));
    while (true) {
      ARROW_ASSIGN_OR_RAISE(auto batch, batches->Next());
      if (batch == nullptr) break;
      ARROW_RETURN_NOT_OK(reader.ResolveFrom(*batch));
    }
  }

  auto out = std::unique_ptr<Increment>(new Increment());
  out->options_ = options;
  out->rows_ = reader.rows_;
  out->bytes_ = reader.bytes_;
  out->live_estimate_ = std::max<int64_t>(0, reader.live_);
  out->truncates_ = std::move(reader.truncates_);
  if (reader.spill_ == nullptr) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> all = std::move(reader.in_memory_);
    for (auto& t : out->truncates_) all.push_back(t);
    ARROW_ASSIGN_OR_RAISE(out->all_, arrow::Table::FromRecordBatches(arrow_schema, all));
    out->truncates_.clear();
    return out;
  }
  out->spill_ = std::move(reader.spill_);
  out->partitions_ = reader.partitions_;
  out->spilled_for_buckets_ = reader.pow2_ ? 0 : options.silver_buckets;
  out->partition_bytes_ = std::move(reader.partition_bytes_);
  out->moves_ = std::move(reader.moves_);
  out->key_columns_ = std::move(reader.key_columns_);
  return out;
}

std::vector<int32_t> Increment::PartitionsOfBucket(int32_t bucket,
                                                   int32_t buckets) const {
  if (!spilled()) return {0};
  std::vector<int32_t> out;
  const bool pow2 = spilled_for_buckets_ == 0;
  if (pow2 && IsPowerOfTwo(buckets) && buckets <= partitions_) {
    for (int32_t p = bucket; p < partitions_; p += buckets) out.push_back(p);
  } else if ((pow2 && IsPowerOfTwo(buckets)) ||
             (!pow2 && buckets == spilled_for_buckets_)) {
    out.push_back(bucket % partitions_);
  } else {
    out.resize(partitions_);
    std::iota(out.begin(), out.end(), 0);
  }
  return out;
}

std::vector<Slice> Increment::PlanSlices(int32_t buckets) const {
  if (!spilled()) return {Slice{{0}, bytes_}};
  // The order partitions are packed in: a bucket's partitions one after the other.
  std::vector<std::vector<int32_t>> groups;
  const bool pow2 = spilled_for_buckets_ == 0;
  if (pow2 && IsPowerOfTwo(buckets) && buckets < partitions_) {
    for (int32_t b = 0; b < buckets; ++b)
      groups.push_back(PartitionsOfBucket(b, buckets));
  } else {
    for (int32_t p = 0; p < partitions_; ++p) groups.push_back({p});
  }
  std::vector<Slice> out;
  Slice current;
  const int64_t cap = options_.slice_bytes;
  for (const auto& group : groups) {
    int64_t group_bytes = 0;
    for (int32_t p : group) group_bytes += partition_bytes_[p];
    // A group that fits a slice of its own is not split over two.
    if (!current.partitions.empty() && current.bytes + group_bytes > cap &&
        group_bytes <= cap) {
      out.push_back(std::move(current));
      current = Slice{};
    }
    for (int32_t p : group) {
      if (!current.partitions.empty() && current.bytes + partition_bytes_[p] > cap) {
        out.push_back(std::move(current));
        current = Slice{};
      }
      current.partitions.push_back(p);
      current.bytes += partition_bytes_[p];
    }
  }
  if (!current.partitions.empty()) out.push_back(std::move(current));
  for (auto& slice : out) std::sort(slice.partitions.begin(), slice.partitions.end());
  return out;
}

std::map<int32_t, std::set<std::string>> Increment::ImportsOf(const Slice& slice) const {
  std::map<int32_t, std::set<std::string>> out;
  if (moves_.empty()) return out;
  const std::set<int32_t> own(slice.partitions.begin(), slice.partitions.end());
  // The moves into each (partition, key), followed back from the slice's own keys.
  std::multimap<std::pair<int32_t, std::string_view>, const KeyMove*> into;
  std::vector<const KeyMove*> pending;
  for (const KeyMove& m : moves_) {
    if (own.contains(m.to_partition)) {
      pending.push_back(&m);
    } else {
      into.emplace(std::pair<int32_t, std::string_view>(m.to_partition, m.to_key), &m);
    }
  }
  while (!pending.empty()) {
    const KeyMove* m = pending.back();
    pending.pop_back();
    if (own.contains(m->from_partition) ||
        !out[m->from_partition].insert(m->from_key).second) {
      continue;
    }
    auto [first, last] = into.equal_range({m->from_partition, m->from_key});
    for (auto it = first; it != last; ++it) pending.push_back(it->second);
  }
  return out;
}

arrow::Result<std::shared_ptr<arrow::Table>> Increment::Load(const Slice& slice,
                                                             int64_t* own_rows) const {
  if (!spilled()) {
    if (own_rows != nullptr) *own_rows = all_->num_rows();
    return all_;
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (int32_t p : slice.partitions) ARROW_RETURN_NOT_OK(spill_->ReadInto(p, &batches));
  for (const auto& t : truncates_) batches.push_back(t);
  int64_t own = 0;
  for (const auto& b : batches) own += b->num_rows();
  if (own_rows != nullptr) *own_rows = own;
  // Then the rows of the keys the slice's key-changing updates carry values over from,
  // a partition at a time, a batch at a time (only those keys' rows kept).
  for (const auto& [partition, keys] : ImportsOf(slice)) {
    ARROW_RETURN_NOT_OK(spill_->ForEach(
        partition, [&](std::shared_ptr<arrow::RecordBatch> batch) -> arrow::Status {
          ARROW_ASSIGN_OR_RAISE(auto columns, ColumnsOf(*batch, key_columns_));
          arrow::Int64Builder take;
          for (int64_t i = 0; i < batch->num_rows(); ++i) {
            ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(columns, i));
            if (keys.contains(key)) ARROW_RETURN_NOT_OK(take.Append(i));
          }
          if (take.length() == 0) return arrow::Status::OK();
          ARROW_ASSIGN_OR_RAISE(auto indices, take.Finish());
          ARROW_ASSIGN_OR_RAISE(arrow::Datum kept,
                                cp::Take(arrow::Datum(batch), arrow::Datum(indices)));
          batches.push_back(kept.record_batch());
          return arrow::Status::OK();
        }));
  }
  return arrow::Table::FromRecordBatches(spill_->schema(), batches);
}

}  // namespace floe::silver
