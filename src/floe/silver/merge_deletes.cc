// The Silver rows a merge deletes: the live rows of the folded keys, found by
// iceberg's key scan (key_scan.h) with as little reading as the layout allows
// (bucket pruning, min/max statistics, bloom filters, key columns only), with the
// position deletes already applying to them skipped.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/expression.h"
#include "floe/iceberg/key_scan.h"
#include "floe/iceberg/partition_split.h"
#include "floe/iceberg/scan.h"
#include "floe/silver/merge_internal.h"

namespace floe::silver::merge_internal {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;

// Up to this many distinct values per key column, the Silver scan is planned with an
// IN filter (bucket and min/max pruning by Iceberg's evaluators); above it, with the
// range of the values plus our own bucket pruning, so planning stays linear.
constexpr size_t kMaxInValues = 1000;

// The increment's keys, to match the key column(s) of Silver rows against. A single
// key column stored as 32- or 64-bit integers (int, long, date, time, timestamps) is
// matched by value: a bitmap over the keys' range when that is at most 64 bits per key,
// else a sorted vector. Any other key is matched by its EncodeKey bytes.
class KeySet {
 public:
  static arrow::Result<KeySet> Make(const Changes& changes, const FoldResult& fold,
                                    const std::vector<int>& key_columns) {
    KeySet set;
    set.fold_ = &fold;
    if (key_columns.size() == 1) {
      const arrow::Array& array = *changes.columns[key_columns[0]];
      const int width = IntWidth(*array.type());
      if (width != 0) {
        set.type_ = array.type();
        set.values_.reserve(fold.keys.size());
        for (const FoldedKey& k : fold.keys) {
          if (array.IsNull(k.key_row)) {
            set.has_null_ = true;
          } else {
            set.values_.push_back(ValueAt(array, width, k.key_row));
          }
        }
        std::sort(set.values_.begin(), set.values_.end());
        set.values_.erase(std::unique(set.values_.begin(), set.values_.end()),
                          set.values_.end());
        if (!set.values_.empty()) {
          const uint64_t span = static_cast<uint64_t>(set.values_.back()) -
                                static_cast<uint64_t>(set.values_.front());
          if (span / 64 <= set.values_.size()) {
            set.bitmap_.assign(span / 64 + 1, 0);
            for (int64_t v : set.values_) {
              const uint64_t bit =
                  static_cast<uint64_t>(v) - static_cast<uint64_t>(set.values_.front());
              set.bitmap_[bit / 64] |= uint64_t{1} << (bit % 64);
            }
          }
        }
        return set;
      }
    }
    set.EnsureEncoded();
    return set;
  }

  // The rows i of `columns` (one row group's key columns, in Silver's types) whose
  // key is in the set (iceberg::KeyMatch).
  arrow::Status Match(const std::vector<const arrow::Array*>& columns, int64_t rows,
                      std::vector<int64_t>* hits) {
    if (type_ != nullptr && columns.size() == 1 && columns[0]->type()->Equals(*type_)) {
      const arrow::Array& array = *columns[0];
      const int width = IntWidth(*type_);
      // Silver's files are sorted by the key: a cursor into the sorted values moves
      // forward with the rows (and starts again where a row sorts before the last).
      size_t at = 0;
      int64_t last = std::numeric_limits<int64_t>::min();
      for (int64_t i = 0; i < rows; ++i) {
        if (array.IsNull(i)) {
          if (has_null_) hits->push_back(i);
          continue;
        }
        const int64_t v = ValueAt(array, width, i);
        bool hit = false;
        if (!bitmap_.empty()) {
          hit = Contains(v);
        } else {
          if (v < last) at = 0;
          last = v;
          at = Seek(at, v);
          hit = at < values_.size() && values_[at] == v;
        }
        if (hit) hits->push_back(i);
      }
      return arrow::Status::OK();
    }
    EnsureEncoded();
    for (int64_t i = 0; i < rows; ++i) {
      ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(columns, i));
      if (encoded_.contains(key)) hits->push_back(i);
    }
    return arrow::Status::OK();
  }

 private:
  // 32 or 64 for a type stored as int32 / int64 values, else 0.
  static int IntWidth(const arrow::DataType& type) {
    switch (type.id()) {
      case arrow::Type::INT32:
      case arrow::Type::DATE32:
        return 32;
      case arrow::Type::INT64:
      case arrow::Type::TIME64:
      case arrow::Type::TIMESTAMP:
        return 64;
      default:
        return 0;
    }
  }
  static int64_t ValueAt(const arrow::Array& array, int width, int64_t row) {
    return width == 32 ? array.data()->GetValues<int32_t>(1)[row]
                       : array.data()->GetValues<int64_t>(1)[row];
  }
  // The first of values_[from..] not below `v`: galloping from `from`.
  size_t Seek(size_t from, int64_t v) const {
    const size_t n = values_.size();
    if (from >= n || values_[from] >= v) return from;
    size_t step = 1;
    while (from + step < n && values_[from + step] < v) step *= 2;
    auto first = values_.begin() + static_cast<std::ptrdiff_t>(from + step / 2 + 1);
    auto end = values_.begin() + static_cast<std::ptrdiff_t>(std::min(n, from + step));
    return static_cast<size_t>(std::lower_bound(first, end, v) - values_.begin());
  }
  bool Contains(int64_t v) const {
    if (values_.empty() || v < values_.front() || v > values_.back()) return false;
    if (!bitmap_.empty()) {
      const uint64_t bit = static_cast<uint64_t>(v) - static_cast<uint64_t>(values_.front());
      return (bitmap_[bit / 64] >> (bit % 64)) & 1;
    }
    return std::binary_search(values_.begin(), values_.end(), v);
  }
  void EnsureEncoded() {
    if (encoded_built_) return;
    encoded_.reserve(fold_->keys.size());
    for (const FoldedKey& k : fold_->keys) encoded_.insert(k.key);
    encoded_built_ = true;
  }

  const FoldResult* fold_ = nullptr;
  std::shared_ptr<arrow::DataType> type_;  // set: matched by value
  std::vector<int64_t> values_;            // sorted, distinct
  std::vector<uint64_t> bitmap_;           // bit v - values_.front(), when dense
  bool has_null_ = false;
  bool encoded_built_ = false;
  std::unordered_set<std::string> encoded_;
};

// A filter that every Silver row of the folded keys satisfies: per key column, IN of
// its values (or their range when there are many).
arrow::Result<ice::ExpressionPtr> KeyFilter(
    const Changes& changes, const FoldResult& fold, const std::vector<int>& key_columns,
    const std::vector<const ice::NestedField*>& fields,
    std::vector<std::vector<ice::Literal>>* values) {
  ice::ExpressionPtr filter = ice::AlwaysTrue();
  values->assign(key_columns.size(), {});
  for (size_t k = 0; k < key_columns.size(); ++k) {
    const arrow::Array& array = *changes.columns[key_columns[k]];
    const ice::Type& type = *fields[k]->type;
    std::vector<ice::Literal>& lits = (*values)[k];
    // The folded keys are distinct: so are the values of a single key column.
    const bool distinct = key_columns.size() == 1;
    std::unordered_set<std::string> seen;
    if (!distinct) seen.reserve(fold.keys.size());
    lits.reserve(fold.keys.size());
    for (const FoldedKey& f : fold.keys) {
      ARROW_ASSIGN_OR_RAISE(auto lit, ice::ArrowValueToLiteral(array, f.key_row, type));
      if (!lit) continue;  // a null key value matches no Silver row by equality
      if (!distinct) {
        ARROW_ASSIGN_OR_RAISE(std::string encoded, EncodeKey({&array}, f.key_row));
        if (!seen.insert(encoded).second) continue;
      }
      lits.push_back(std::move(*lit));
    }
    if (lits.empty()) return ice::AlwaysFalse();
    // A filter cannot name NaN (its rows are matched by key all the same): no
    // pruning by this column.
    if (std::any_of(lits.begin(), lits.end(), ice::IsNaN)) continue;
    if (lits.size() <= kMaxInValues) {
      filter = ice::And(filter, ice::In(fields[k]->name, lits));
    } else {
      auto [lo, hi] = std::minmax_element(
          lits.begin(), lits.end(), [&](const ice::Literal& a, const ice::Literal& b) {
            return ice::CompareLiterals(type, a, b) < 0;
          });
      filter = ice::And(filter, ice::And(ice::GreaterThanOrEqual(fields[k]->name, *lo),
                                         ice::LessThanOrEqual(fields[k]->name, *hi)));
    }
  }
  return filter;
}

// The Silver rows of the folded keys (all row columns), for values that
// cdc_unchanged keeps.
// Rows of Silver read at once while looking for the existing rows, at most, and
// about how many bytes.
constexpr int64_t kExistingBatchRows = 8192;
constexpr int64_t kExistingBatchBytes = int64_t{1} << 20;

arrow::Result<ExistingRows> ReadExistingRows(const ice::TableMetadata& silver,
                                             ice::FileIO& io, const Changes& changes,
                                             const std::vector<int>& key_columns,
                                             const ice::ExpressionPtr& filter,
                                             const ice::KeyMatch* wanted = nullptr) {
  ice::ScanOptions scan;
  scan.filter = filter;
  scan.columns = changes.names;
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(silver, io, scan));
  // A batch at a time, only the rows of wanted keys kept: a filter that is a key range
  // (too many keys for an IN list) matches every row of the range, and Silver's rows
  // may be wide.
  std::vector<arrow::ArrayVector> chunks(changes.names.size());
  for (const ice::FileScanTask& task : plan.tasks) {
    ARROW_RETURN_NOT_OK(ice::ReadFileScanTaskInBatches(
        io, task, *plan.schema, *plan.projection, plan.filter, kExistingBatchRows,
        [&](std::shared_ptr<arrow::RecordBatch> batch) -> arrow::Status {
          std::vector<std::shared_ptr<arrow::Array>> columns;
          for (int c = 0; c < batch->num_columns(); ++c) {
            std::shared_ptr<arrow::Array> array = batch->column(c);
            const auto& want = changes.columns[c]->type();
            if (!array->type()->Equals(*want)) {
              ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, want));
              array = cast.make_array();
            }
            columns.push_back(std::move(array));
          }
          if (wanted != nullptr) {
            std::vector<const arrow::Array*> keys;
            for (int k : key_columns) keys.push_back(columns[k].get());
            std::vector<int64_t> hits;
            ARROW_RETURN_NOT_OK((*wanted)(keys, batch->num_rows(), &hits));
            if (hits.empty()) return arrow::Status::OK();
            arrow::Int64Builder indices;
            ARROW_RETURN_NOT_OK(indices.AppendValues(hits));
            ARROW_ASSIGN_OR_RAISE(auto take, indices.Finish());
            for (auto& column : columns) {
              ARROW_ASSIGN_OR_RAISE(arrow::Datum taken,
                                    cp::Take(arrow::Datum(column), arrow::Datum(take)));
              column = taken.make_array();
            }
          }
          for (size_t c = 0; c < columns.size(); ++c) chunks[c].push_back(columns[c]);
          return arrow::Status::OK();
        },
        kExistingBatchBytes));
  }
  ExistingRows out;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const auto& type = changes.columns[c]->type();
    if (chunks[c].empty()) {
      ARROW_ASSIGN_OR_RAISE(auto empty, arrow::MakeEmptyArray(type));
      out.columns.push_back(std::move(empty));
    } else {
      ARROW_ASSIGN_OR_RAISE(auto joined, arrow::Concatenate(chunks[c]));
      out.columns.push_back(std::move(joined));
    }
    chunks[c].clear();
  }
  std::vector<const arrow::Array*> keys;
  for (int k : key_columns) keys.push_back(out.columns[k].get());
  const int64_t rows = out.columns.empty() ? 0 : out.columns[0]->length();
  for (int64_t i = 0; i < rows; ++i) {
    ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, i));
    out.row_of_key.emplace(std::move(key), i);
  }
  return out;
}

// The positions of the live position delete files of each partition in `found` (of
// the current spec; not in `replaced` yet) added to its, and the files to `replaced`.
arrow::Status AddReplacedDeletes(const ice::Table& silver, const ice::ScanPlan& plan,
                                 ice::FileIO& io, ice::PositionDeleteCache& deletes,
                                 RowsByPartition* found,
                                 std::map<std::string, ice::DataFile>* replaced) {
  const ice::PartitionSpec& spec = silver.spec();
  for (const ice::DeleteFileEntry& d : plan.delete_files) {
    if (d.file.content != ice::DataFileContent::kPositionDeletes ||
        d.spec_id != spec.spec_id || replaced->contains(d.file.file_path)) {
      continue;
    }
    const std::string where = std::to_string(d.spec_id) + "/" +
                              ice::PartitionPath(spec, silver.schema(), d.file.partition);
    auto it = found->find(where);
    if (it == found->end()) continue;
    ARROW_ASSIGN_OR_RAISE(const auto* positions, deletes.Get(io, d.file));
    for (const auto& [path, list] : *positions) {
      auto& into = it->second.second[path];
      into.insert(into.end(), list.begin(), list.end());
    }
    replaced->emplace(d.file.file_path, d.file);
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<SilverDeletes> FindSilverDeletes(
    const ice::Table& silver, const ice::TableMetadata& planned, ice::FileIO& io,
    const Changes& changes, const FoldResult& fold, const std::vector<int>& key_columns,
    const std::vector<std::string>& key, MergeStats* stats,
    std::map<std::string, ice::DataFile>* replaced, bool declared_key,
    const FoldResult* existing_of, std::mutex* replaced_mu) {
  SilverDeletes out;
  std::vector<const ice::NestedField*> key_fields;
  for (const auto& k : key) key_fields.push_back(silver.schema().FindField(k));
  std::vector<std::vector<ice::Literal>> values;
  ARROW_ASSIGN_OR_RAISE(auto filter,
                        KeyFilter(changes, fold, key_columns, key_fields, &values));
  ice::ScanOptions scan;
  scan.filter = filter;
  scan.columns = key;
  ARROW_ASSIGN_OR_RAISE(ice::ScanPlan plan, ice::PlanScan(planned, io, scan));
  // Bucket pruning of our own when the IN list was too long to plan with.
  std::optional<std::set<int32_t>> buckets;
  const ice::PartitionSpec& spec = silver.spec();
  if (values[0].size() > kMaxInValues) {
    ARROW_ASSIGN_OR_RAISE(buckets, ice::BucketsOf(spec, *key_fields[0], values[0]));
  }
  ARROW_ASSIGN_OR_RAISE(KeySet keys, KeySet::Make(changes, fold, key_columns));
  std::vector<const arrow::Array*> probe_columns;
  for (int c : key_columns) probe_columns.push_back(changes.columns[c].get());
  std::vector<int64_t> probe_rows;
  probe_rows.reserve(fold.keys.size());
  for (const FoldedKey& k : fold.keys) probe_rows.push_back(k.key_row);
  ARROW_ASSIGN_OR_RAISE(ice::KeyProbe probe,
                        ice::KeyProbe::Make(probe_columns, probe_rows));
  const ice::KeyMatch match = [&keys](const std::vector<const arrow::Array*>& columns,
                                      int64_t rows, std::vector<int64_t>* hits) {
    return keys.Match(columns, rows, hits);
  };
  // Under a declared key: a key the changes insert afresh that Silver already holds a
  // row of has two rows in the source.
  std::unordered_map<std::string, int64_t> inserted;
  if (declared_key) {
    for (const FoldedKey& k : fold.keys) {
      if (k.inserted_by >= 0) inserted.emplace(k.key, k.inserted_by);
    }
  }
  ice::LiveKeyHit live;
  if (!inserted.empty()) {
    live = [&](const std::vector<const arrow::Array*>& columns,
               int64_t row) -> arrow::Status {
      ARROW_ASSIGN_OR_RAISE(std::string encoded, EncodeKey(columns, row));
      auto it = inserted.find(encoded);
      if (it == inserted.end()) return arrow::Status::OK();
      return NotUniqueKey(changes, it->second, key,
                          "it inserts a row of a key Silver already holds a row of, with "
                          "no delete of that row before it");
    };
  }
  ice::PositionDeleteCache deletes;
  ice::KeyScanStats scan_stats;
  for (const ice::FileScanTask& task : plan.tasks) {
    if (buckets && !ice::InBuckets(task, spec, *buckets)) continue;
    std::vector<ice::PositionDelete> found;
    ARROW_RETURN_NOT_OK(ice::FindKeyPositions(io, task, key_fields, probe, match, deletes,
                                              &found, &scan_stats, live));
    ++stats->files_scanned;
    if (found.empty()) continue;
    out.referenced.insert(task.data_file.file_path);
    if (replaced != nullptr)
      stats->position_deletes += static_cast<int64_t>(found.size());
    // The file's own spec names its partition (an older spec's tuple read as the
    // current spec's would let partitions of that spec share a key).
    const ice::PartitionSpec* task_spec = silver.metadata().FindSpec(task.spec_id);
    if (task_spec == nullptr) {
      return arrow::Status::UnknownError(task.data_file.file_path, " is of spec ",
                                         task.spec_id, ", which the table does not have");
    }
    const std::string where =
        std::to_string(task.spec_id) + "/" +
        ice::PartitionPath(*task_spec, silver.schema(), task.data_file.partition);
    auto& entry = out.by_partition[where];
    entry.first = task.data_file.partition;
    for (const auto& d : found) entry.second[d.file_path].push_back(d.pos);
  }
  if (replaced != nullptr) {
    std::unique_lock<std::mutex> lock;
    if (replaced_mu != nullptr) lock = std::unique_lock(*replaced_mu);
    ARROW_RETURN_NOT_OK(
        AddReplacedDeletes(silver, plan, io, deletes, &out.by_partition, replaced));
  }
  stats->row_groups_read += scan_stats.row_groups_read;
  stats->row_groups_skipped_stats += scan_stats.row_groups_skipped_stats;
  stats->row_groups_skipped_bloom += scan_stats.row_groups_skipped_bloom;
  if (fold.needs_existing) {
    if (existing_of != nullptr && existing_of != &fold) {
      // More keys than the fold's: a filter and a key set of their own.
      std::vector<std::vector<ice::Literal>> wider;
      ARROW_ASSIGN_OR_RAISE(
          auto with_imports,
          KeyFilter(changes, *existing_of, key_columns, key_fields, &wider));
      ARROW_ASSIGN_OR_RAISE(KeySet all, KeySet::Make(changes, *existing_of, key_columns));
      const ice::KeyMatch match_all =
          [&all](const std::vector<const arrow::Array*>& columns, int64_t rows,
                 std::vector<int64_t>* hits) { return all.Match(columns, rows, hits); };
      ARROW_ASSIGN_OR_RAISE(
          out.existing,
          ReadExistingRows(planned, io, changes, key_columns, with_imports, &match_all));
    } else {
      ARROW_ASSIGN_OR_RAISE(out.existing, ReadExistingRows(planned, io, changes,
                                                           key_columns, filter, &match));
    }
  }
  return out;
}

// Which of the keys at `rows` of `changes` `silver` holds (encoded as EncodeKey does).
arrow::Result<std::unordered_set<std::string>> HeldKeys(
    const ice::TableMetadata& silver, ice::FileIO& io, const ice::Schema& schema,
    const Changes& changes, const std::vector<int>& key_columns,
    const std::vector<std::string>& key, const std::vector<int64_t>& rows) {
  FoldResult asked;
  for (int64_t row : rows) {
    FoldedKey k;
    k.key_row = row;
    asked.keys.push_back(std::move(k));
  }
  std::vector<const ice::NestedField*> key_fields;
  for (const auto& name : key) key_fields.push_back(schema.FindField(name));
  std::vector<std::vector<ice::Literal>> values;
  ARROW_ASSIGN_OR_RAISE(auto filter,
                        KeyFilter(changes, asked, key_columns, key_fields, &values));
  ARROW_ASSIGN_OR_RAISE(ExistingRows found,
                        ReadExistingRows(silver, io, changes, key_columns, filter));
  std::unordered_set<std::string> out;
  for (auto& [encoded, row] : found.row_of_key) out.insert(encoded);
  return out;
}

}  // namespace floe::silver::merge_internal
