#include "floe/iceberg/key_probe.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <arrow/type.h>
#include <parquet/bloom_filter.h>
#include <parquet/bloom_filter_reader.h>
#include <parquet/metadata.h>
#include <parquet/schema.h>
#include <parquet/statistics.h>
#include <parquet/types.h>

namespace floe::iceberg {
namespace {

// A row group is probed with its bloom filters only when at most this many keys fall
// within its statistics: reading a bloom filter costs about as much as reading the
// key column it covers, and a row group with more candidates almost surely holds one.
constexpr size_t kMaxBloomProbes = 1024;

using Value = KeyProbe::Value;
using Kind = Value::Kind;

// The kind of value an Arrow key column gives: integers (the physical value Parquet
// stores: days for date32, microseconds for time64/timestamp[us]), byte strings, or
// neither.
Kind KindOf(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::INT32:
    case arrow::Type::INT64:
    case arrow::Type::DATE32:
      return Kind::kInt;
    case arrow::Type::TIME64:
      return static_cast<const arrow::Time64Type&>(type).unit() == arrow::TimeUnit::MICRO
                 ? Kind::kInt
                 : Kind::kOther;
    case arrow::Type::TIMESTAMP:
      return static_cast<const arrow::TimestampType&>(type).unit() ==
                     arrow::TimeUnit::MICRO
                 ? Kind::kInt
                 : Kind::kOther;
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::FIXED_SIZE_BINARY:
      return Kind::kBytes;
    default:
      return Kind::kOther;
  }
}

Value ValueAt(const arrow::Array& array, Kind kind, int64_t row) {
  Value v;
  if (kind == Kind::kOther || array.IsNull(row)) return v;
  v.kind = kind;
  switch (array.type_id()) {
    case arrow::Type::INT8:
      v.i = static_cast<const arrow::Int8Array&>(array).Value(row);
      break;
    case arrow::Type::INT16:
      v.i = static_cast<const arrow::Int16Array&>(array).Value(row);
      break;
    case arrow::Type::INT32:
      v.i = static_cast<const arrow::Int32Array&>(array).Value(row);
      break;
    case arrow::Type::DATE32:
      v.i = static_cast<const arrow::Date32Array&>(array).Value(row);
      break;
    case arrow::Type::INT64:
      v.i = static_cast<const arrow::Int64Array&>(array).Value(row);
      break;
    case arrow::Type::TIME64:
      v.i = static_cast<const arrow::Time64Array&>(array).Value(row);
      break;
    case arrow::Type::TIMESTAMP:
      v.i = static_cast<const arrow::TimestampArray&>(array).Value(row);
      break;
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      v.bytes = static_cast<const arrow::BinaryArray&>(array).GetView(row);
      break;
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      v.bytes = static_cast<const arrow::LargeBinaryArray&>(array).GetView(row);
      break;
    case arrow::Type::FIXED_SIZE_BINARY:
      v.bytes = static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(row);
      break;
    default:
      v.kind = Kind::kOther;
  }
  return v;
}

bool Less(const Value& a, const Value& b) {
  return a.kind == Kind::kInt ? a.i < b.i : a.bytes < b.bytes;
}

// How one key column of one file can be checked.
struct ColumnCheck {
  int leaf = 0;
  parquet::Type::type physical = parquet::Type::UNDEFINED;
  int type_length = 0;
  // The file column stores the probe's values the same way (physical type and
  // meaning), so its statistics and bloom filters apply.
  bool usable = false;
};

ColumnCheck CheckOf(const parquet::ColumnDescriptor& descr, int leaf, Kind kind) {
  ColumnCheck c;
  c.leaf = leaf;
  c.physical = descr.physical_type();
  c.type_length = descr.type_length();
  const auto& logical = descr.logical_type();
  const bool none = logical == nullptr || logical->is_none();
  auto micros = [&] {
    if (logical->is_timestamp()) {
      return static_cast<const parquet::TimestampLogicalType&>(*logical).time_unit() ==
             parquet::LogicalType::TimeUnit::MICROS;
    }
    if (logical->is_time()) {
      return static_cast<const parquet::TimeLogicalType&>(*logical).time_unit() ==
             parquet::LogicalType::TimeUnit::MICROS;
    }
    return false;
  };
  auto signed_int = [&] {
    return logical->is_int() &&
           static_cast<const parquet::IntLogicalType&>(*logical).is_signed();
  };
  bool same = false;
  parquet::SortOrder::type order = parquet::SortOrder::UNKNOWN;
  switch (c.physical) {
    case parquet::Type::INT32:
      same = kind == Kind::kInt && (none || signed_int() || logical->is_date());
      order = parquet::SortOrder::SIGNED;
      break;
    case parquet::Type::INT64:
      same = kind == Kind::kInt && (none || signed_int() || micros());
      order = parquet::SortOrder::SIGNED;
      break;
    case parquet::Type::BYTE_ARRAY:
      same = kind == Kind::kBytes && (none || logical->is_string());
      order = parquet::SortOrder::UNSIGNED;
      break;
    case parquet::Type::FIXED_LEN_BYTE_ARRAY:
      same = kind == Kind::kBytes && (none || logical->is_UUID());
      order = parquet::SortOrder::UNSIGNED;
      break;
    default:
      break;
  }
  c.usable = same && descr.sort_order() == order;
  return c;
}

// A row group's min/max of one column, as probe values; nullopt when unknown.
struct Range {
  Value min;
  Value max;
  // Owns the bytes `min` and `max` view.
  std::shared_ptr<parquet::Statistics> holder;
};

std::optional<Range> RangeOf(const parquet::ColumnChunkMetaData& chunk,
                             const ColumnCheck& check) {
  if (!check.usable || !chunk.is_stats_set()) return std::nullopt;
  std::shared_ptr<parquet::Statistics> stats = chunk.statistics();
  if (stats == nullptr || !stats->HasMinMax()) return std::nullopt;
  Range r;
  r.holder = stats;
  switch (check.physical) {
    case parquet::Type::INT32: {
      const auto& s = static_cast<const parquet::Int32Statistics&>(*stats);
      r.min = {Kind::kInt, s.min(), {}};
      r.max = {Kind::kInt, s.max(), {}};
      return r;
    }
    case parquet::Type::INT64: {
      const auto& s = static_cast<const parquet::Int64Statistics&>(*stats);
      r.min = {Kind::kInt, s.min(), {}};
      r.max = {Kind::kInt, s.max(), {}};
      return r;
    }
    case parquet::Type::BYTE_ARRAY: {
      const auto& s = static_cast<const parquet::ByteArrayStatistics&>(*stats);
      r.min = {Kind::kBytes, 0,
               std::string_view(reinterpret_cast<const char*>(s.min().ptr), s.min().len)};
      r.max = {Kind::kBytes, 0,
               std::string_view(reinterpret_cast<const char*>(s.max().ptr), s.max().len)};
      return r;
    }
    case parquet::Type::FIXED_LEN_BYTE_ARRAY: {
      const auto& s = static_cast<const parquet::FLBAStatistics&>(*stats);
      const auto len = static_cast<size_t>(check.type_length);
      r.min = {Kind::kBytes, 0,
               std::string_view(reinterpret_cast<const char*>(s.min().ptr), len)};
      r.max = {Kind::kBytes, 0,
               std::string_view(reinterpret_cast<const char*>(s.max().ptr), len)};
      return r;
    }
    default:
      return std::nullopt;
  }
}

bool InRange(const Value& v, const std::optional<Range>& range) {
  if (!range || v.kind != range->min.kind) return true;
  return !Less(v, range->min) && !Less(range->max, v);
}

// Whether the bloom filter may hold `v` (true when it cannot tell).
bool MayContain(const parquet::BloomFilter& filter, const Value& v,
                const ColumnCheck& check) {
  switch (check.physical) {
    case parquet::Type::INT32:
      if (v.kind != Kind::kInt || v.i < std::numeric_limits<int32_t>::min() ||
          v.i > std::numeric_limits<int32_t>::max()) {
        return true;
      }
      return filter.FindHash(filter.Hash(static_cast<int32_t>(v.i)));
    case parquet::Type::INT64:
      if (v.kind != Kind::kInt) return true;
      return filter.FindHash(filter.Hash(static_cast<int64_t>(v.i)));
    case parquet::Type::BYTE_ARRAY: {
      if (v.kind != Kind::kBytes) return true;
      parquet::ByteArray value(v.bytes);
      return filter.FindHash(filter.Hash(&value));
    }
    case parquet::Type::FIXED_LEN_BYTE_ARRAY: {
      if (v.kind != Kind::kBytes ||
          v.bytes.size() != static_cast<size_t>(check.type_length)) {
        return true;
      }
      parquet::FLBA value(reinterpret_cast<const uint8_t*>(v.bytes.data()));
      return filter.FindHash(
          filter.Hash(&value, static_cast<uint32_t>(check.type_length)));
    }
    default:
      return true;
  }
}

}  // namespace

arrow::Result<KeyProbe> KeyProbe::Make(const std::vector<const arrow::Array*>& columns,
                                       const std::vector<int64_t>& rows) {
  KeyProbe probe;
  probe.tuples_ = rows.size();
  if (rows.size() > std::numeric_limits<uint32_t>::max()) {
    return arrow::Status::Invalid("too many keys to probe: ", rows.size());
  }
  for (const arrow::Array* array : columns) {
    const Kind kind = KindOf(*array->type());
    std::vector<Value> values;
    values.reserve(rows.size());
    for (int64_t row : rows) values.push_back(ValueAt(*array, kind, row));
    probe.values_.push_back(std::move(values));
  }
  if (probe.values_.empty()) return probe;
  const std::vector<Value>& first = probe.values_[0];
  for (uint32_t t = 0; t < rows.size(); ++t) {
    if (first[t].kind != Kind::kOther) probe.sorted_.push_back(t);
  }
  std::sort(probe.sorted_.begin(), probe.sorted_.end(),
            [&](uint32_t a, uint32_t b) { return Less(first[a], first[b]); });
  probe.comparable_ = probe.sorted_.size();
  for (uint32_t t = 0; t < rows.size(); ++t) {
    if (first[t].kind == Kind::kOther) probe.sorted_.push_back(t);
  }
  return probe;
}

RowGroupChoice KeyProbe::Choose(parquet::ParquetFileReader& file,
                                const std::vector<int>& leaves) const {
  RowGroupChoice out;
  std::shared_ptr<parquet::FileMetaData> md = file.metadata();
  const int groups = md->num_row_groups();
  if (tuples_ == 0) {
    out.skipped_by_stats = groups;
    return out;
  }
  std::vector<ColumnCheck> checks;
  for (size_t k = 0; k < leaves.size(); ++k) {
    Kind kind = Kind::kOther;
    for (const Value& v : values_[k]) {
      if (v.kind != Kind::kOther) {
        kind = v.kind;
        break;
      }
    }
    checks.push_back(CheckOf(*md->schema()->Column(leaves[k]), leaves[k], kind));
  }
  for (int rg = 0; rg < groups; ++rg) {
    std::unique_ptr<parquet::RowGroupMetaData> group = md->RowGroup(rg);
    if (group->num_rows() == 0) {
      ++out.skipped_by_stats;
      continue;
    }
    std::vector<std::optional<Range>> ranges;
    for (const ColumnCheck& c : checks) {
      ranges.push_back(RangeOf(*group->ColumnChunk(c.leaf), c));
    }
    // Tuples whose first column falls in the row group's range (binary search over
    // the sorted ones), then those whose first column cannot be compared.
    auto begin = sorted_.begin();
    auto end = sorted_.begin() + static_cast<std::ptrdiff_t>(comparable_);
    const std::vector<Value>& first = values_[0];
    if (ranges[0] && comparable_ > 0 && first[sorted_[0]].kind == ranges[0]->min.kind) {
      const Value lo = ranges[0]->min;
      const Value hi = ranges[0]->max;
      begin = std::lower_bound(
          begin, end, lo, [&](uint32_t t, const Value& v) { return Less(first[t], v); });
      end = std::upper_bound(
          begin, end, hi, [&](const Value& v, uint32_t t) { return Less(v, first[t]); });
    }
    const size_t candidates =
        static_cast<size_t>(end - begin) + (sorted_.size() - comparable_);
    const bool use_bloom = candidates <= kMaxBloomProbes;
    bool any_in_range = false;
    bool may_hold = false;
    std::shared_ptr<parquet::RowGroupBloomFilterReader> blooms;
    bool blooms_loaded = false;
    std::vector<std::unique_ptr<parquet::BloomFilter>> filters(checks.size());
    std::vector<bool> filter_loaded(checks.size(), false);
    auto visit = [&](uint32_t t) {
      for (size_t k = 0; k < checks.size(); ++k) {
        if (!InRange(values_[k][t], ranges[k])) return;
      }
      any_in_range = true;
      for (size_t k = 0; use_bloom && k < checks.size(); ++k) {
        const Value& v = values_[k][t];
        if (!checks[k].usable || v.kind == Kind::kOther) continue;
        if (!blooms_loaded) {
          blooms = file.GetBloomFilterReader().RowGroup(rg);
          blooms_loaded = true;
        }
        if (blooms == nullptr) break;
        if (!filter_loaded[k]) {
          filters[k] = blooms->GetColumnBloomFilter(checks[k].leaf);
          filter_loaded[k] = true;
        }
        if (filters[k] != nullptr && !MayContain(*filters[k], v, checks[k])) return;
      }
      may_hold = true;
    };
    for (auto it = begin; it != end && !may_hold; ++it) visit(*it);
    for (size_t i = comparable_; i < sorted_.size() && !may_hold; ++i) visit(sorted_[i]);
    if (may_hold) {
      out.read.push_back(rg);
    } else if (any_in_range) {
      ++out.skipped_by_bloom;
    } else {
      ++out.skipped_by_stats;
    }
  }
  return out;
}

}  // namespace floe::iceberg
