#include "floe/iceberg/partition_split.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>

#include "floe/iceberg/arrow_compute.h"
#include "floe/iceberg/conversions.h"

namespace floe::iceberg {

namespace {

namespace cp = arrow::compute;

constexpr int64_t kMicrosPerHour = 3'600'000'000LL;
constexpr int64_t kMicrosPerDay = 24 * kMicrosPerHour;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// The Arrow type id (and fixed width, when it has one) that holds `type`.
struct ArrowShape {
  arrow::Type::type id;
  int32_t byte_width = 0;
};

arrow::Result<ArrowShape> ExpectedShape(const Type& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return ArrowShape{arrow::Type::BOOL};
    case TypeId::kInt:
      return ArrowShape{arrow::Type::INT32};
    case TypeId::kDate:
      return ArrowShape{arrow::Type::DATE32};
    case TypeId::kLong:
      return ArrowShape{arrow::Type::INT64};
    case TypeId::kTime:
      return ArrowShape{arrow::Type::TIME64};
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return ArrowShape{arrow::Type::TIMESTAMP};
    case TypeId::kFloat:
      return ArrowShape{arrow::Type::FLOAT};
    case TypeId::kDouble:
      return ArrowShape{arrow::Type::DOUBLE};
    case TypeId::kDecimal:
      return ArrowShape{arrow::Type::DECIMAL128};
    case TypeId::kString:
      return ArrowShape{arrow::Type::STRING};
    case TypeId::kBinary:
      return ArrowShape{arrow::Type::BINARY};
    case TypeId::kUuid:
      return ArrowShape{arrow::Type::FIXED_SIZE_BINARY, 16};
    case TypeId::kFixed:
      return ArrowShape{arrow::Type::FIXED_SIZE_BINARY, type.length()};
    default:
      break;
  }
  return arrow::Status::Invalid("no Literal for a value of nested type ",
                                type.ToString());
}

// Where a partition source column is in the batch, as a flat array (a field nested in
// structs is null wherever one of its structs is).
arrow::Result<std::shared_ptr<arrow::Array>> SourceArray(const Schema& schema,
                                                         const arrow::RecordBatch& batch,
                                                         const PartitionField& pf,
                                                         const NestedField** source) {
  *source = schema.FindField(pf.source_id);
  if (*source == nullptr) {
    return arrow::Status::Invalid("partition field '", pf.name, "': source field id ",
                                  pf.source_id, " is not in the schema");
  }
  std::vector<int32_t> path = {pf.source_id};
  for (auto parent = schema.FindParentId(pf.source_id); parent.has_value();
       parent = schema.FindParentId(*parent)) {
    path.push_back(*parent);
  }
  std::reverse(path.begin(), path.end());

  const std::string column = schema.FindColumnName(pf.source_id).value_or("?");
  std::shared_ptr<arrow::Array> array;
  for (size_t depth = 0; depth < path.size(); ++depth) {
    const NestedField* field = schema.FindField(path[depth]);
    if (depth == 0) {
      const int index = batch.schema()->GetFieldIndex(field->name);
      if (index < 0) {
        return arrow::Status::Invalid(
            "partition field '", pf.name, "': the batch has no (single) column '",
            field->name, "'; pass the batch in iceberg::ToArrowSchema(schema) form");
      }
      array = batch.column(index);
      continue;
    }
    if (array->type_id() != arrow::Type::STRUCT) {
      return arrow::Status::Invalid("partition field '", pf.name, "': column '", column,
                                    "' is inside a ", array->type()->ToString(),
                                    " in the batch; partition sources may only be "
                                    "nested in structs");
    }
    const auto& parent = static_cast<const arrow::StructArray&>(*array);
    const int index = parent.struct_type()->GetFieldIndex(field->name);
    if (index < 0) {
      return arrow::Status::Invalid("partition field '", pf.name,
                                    "': the batch has no (single) struct field for '",
                                    column,
                                    "'; pass the batch in "
                                    "iceberg::ToArrowSchema(schema) form");
    }
    ARROW_ASSIGN_OR_RAISE(array, parent.GetFlattenedField(index));
  }

  ARROW_ASSIGN_OR_RAISE(auto expected, ToArrowType(*(*source)->type));
  if (!array->type()->Equals(*expected)) {
    return arrow::Status::TypeError(
        "partition field '", pf.name, "': column '", column, "' is ",
        array->type()->ToString(), " in the batch but its Iceberg type ",
        (*source)->type->ToString(), " is held as ", expected->ToString(),
        "; convert the batch to iceberg::ToArrowSchema(schema) first");
  }
  return array;
}

// Dense ids for values met in row order, with a one-entry cache for runs of equal
// keys (time-ordered changes mostly repeat the previous day or hour).
template <typename Key>
class DenseIds {
 public:
  // The id of `key`; `row` is remembered as the first row of a new one.
  int32_t Get(const Key& key, int64_t row) {
    if (has_last_ && key == last_key_) return last_id_;
    auto [it, inserted] = ids_.try_emplace(key, static_cast<int32_t>(first_rows_.size()));
    if (inserted) first_rows_.push_back(row);
    has_last_ = true;
    last_key_ = key;
    last_id_ = it->second;
    return last_id_;
  }
  // The first row of each id, by id.
  std::vector<int64_t>& first_rows() { return first_rows_; }

 private:
  std::unordered_map<Key, int32_t> ids_;
  std::vector<int64_t> first_rows_;
  bool has_last_ = false;
  Key last_key_{};
  int32_t last_id_ = 0;
};

// Rows of one partition field, numbered by a key that determines the partition value:
// the source value itself, or its day / hour for the time transforms.
// Empty `row_key` means every row has key 0 (the usual Bronze batch: one day).
struct KeyedRows {
  std::vector<int32_t> row_key;    // per row, or empty
  std::vector<int64_t> first_row;  // per key: the first row holding it
};

// What a row's value is keyed by, for integer-like values.
int64_t TimeKey(TransformKind kind, TypeId source, int64_t v) {
  if (source == TypeId::kDate) return v;  // already days
  switch (kind) {
    case TransformKind::kHour:
      return FloorDiv(v, kMicrosPerHour);
    case TransformKind::kDay:
    case TransformKind::kMonth:
    case TransformKind::kYear:
      return FloorDiv(v, kMicrosPerDay);
    default:
      return v;
  }
}

template <typename Key, typename KeyOf>
KeyedRows KeyRows(const arrow::Array& array, KeyOf key_of) {
  const int64_t n = array.length();
  KeyedRows out;
  const bool has_nulls = array.null_count() > 0;
  if (!has_nulls) {
    // One key for all rows is checked first, without allocating anything.
    const Key first = key_of(0);
    int64_t i = 1;
    while (i < n && key_of(i) == first) ++i;
    if (i == n) {
      out.first_row = {0};
      return out;
    }
  }
  out.row_key.resize(n);
  DenseIds<Key> ids;
  int32_t null_id = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (has_nulls && array.IsNull(i)) {
      if (null_id < 0) {
        null_id = static_cast<int32_t>(ids.first_rows().size());
        ids.first_rows().push_back(i);
      }
      out.row_key[i] = null_id;
    } else {
      out.row_key[i] = ids.Get(key_of(i), i);
    }
  }
  out.first_row = std::move(ids.first_rows());
  return out;
}

arrow::Result<KeyedRows> KeyRowsOf(const arrow::Array& array, const Type& type,
                                   const Transform& transform) {
  const int64_t n = array.length();
  if (transform.kind() == TransformKind::kVoid || array.null_count() == n) {
    // One value for every row (null for void; Apply still checks the source type).
    KeyedRows out;
    out.first_row = {0};
    return out;
  }
  const arrow::ArrayData& data = *array.data();
  const TransformKind kind = transform.kind();
  const TypeId source = type.id();
  switch (array.type_id()) {
    case arrow::Type::BOOL: {
      const auto& a = static_cast<const arrow::BooleanArray&>(array);
      return KeyRows<int64_t>(array, [&](int64_t i) -> int64_t { return a.Value(i); });
    }
    case arrow::Type::INT32:
    case arrow::Type::DATE32: {
      const int32_t* v = data.GetValues<int32_t>(1);
      return KeyRows<int64_t>(array,
                              [&](int64_t i) { return TimeKey(kind, source, v[i]); });
    }
    case arrow::Type::INT64:
    case arrow::Type::TIME64:
    case arrow::Type::TIMESTAMP: {
      const int64_t* v = data.GetValues<int64_t>(1);
      return KeyRows<int64_t>(array,
                              [&](int64_t i) { return TimeKey(kind, source, v[i]); });
    }
    case arrow::Type::FLOAT: {
      // By bits: -0 and 0 are different identity partitions, NaN equals NaN.
      const float* v = data.GetValues<float>(1);
      return KeyRows<int64_t>(array, [&](int64_t i) {
        uint32_t bits;
        std::memcpy(&bits, &v[i], sizeof bits);
        return static_cast<int64_t>(bits);
      });
    }
    case arrow::Type::DOUBLE: {
      const double* v = data.GetValues<double>(1);
      return KeyRows<int64_t>(array, [&](int64_t i) {
        int64_t bits;
        std::memcpy(&bits, &v[i], sizeof bits);
        return bits;
      });
    }
    case arrow::Type::DECIMAL128:
    case arrow::Type::FIXED_SIZE_BINARY: {
      const auto& a = static_cast<const arrow::FixedSizeBinaryArray&>(array);
      return KeyRows<std::string_view>(array, [&](int64_t i) { return a.GetView(i); });
    }
    case arrow::Type::STRING:
    case arrow::Type::BINARY: {
      const auto& a = static_cast<const arrow::BinaryArray&>(array);
      return KeyRows<std::string_view>(array, [&](int64_t i) { return a.GetView(i); });
    }
    default:
      break;
  }
  return arrow::Status::TypeError("cannot partition by a column of Arrow type ",
                                  array.type()->ToString());
}

// One partition field's value for every row: `row_value[i]` indexes `values`, and
// equal partition values have the same index. Empty `row_value`: all rows have
// values[0].
struct FieldValues {
  std::vector<int32_t> row_value;
  std::vector<std::optional<Literal>> values;

  int32_t ValueIndex(int64_t row) const { return row_value.empty() ? 0 : row_value[row]; }
};

// The identity of a partition value for deduplication: int results (bucket, year,
// month, day, hour, identity of an int) by value, others by their binary
// single-value form (so floats compare by bits: -0 is not 0, NaN is NaN).
struct ValueIndex {
  std::unordered_map<int64_t, int32_t> ints;
  std::unordered_map<std::string, int32_t> others;
  int32_t null_index = -1;
};

arrow::Result<FieldValues> ComputeFieldValues(const Schema& schema,
                                              const arrow::RecordBatch& batch,
                                              const PartitionField& pf,
                                              const TypePtr& result_type) {
  const NestedField* source = nullptr;
  ARROW_ASSIGN_OR_RAISE(auto array, SourceArray(schema, batch, pf, &source));
  ARROW_ASSIGN_OR_RAISE(KeyedRows keyed, KeyRowsOf(*array, *source->type, pf.transform));

  // Transform one representative per key; keys whose results are equal (months of
  // different days, values in one bucket) share a value index. Results are compared
  // in their binary single-value form, so floats compare by bits.
  FieldValues out;
  std::vector<int32_t> value_of_key(keyed.first_row.size());
  ValueIndex index;
  const auto next = [&] { return static_cast<int32_t>(out.values.size()); };
  for (size_t k = 0; k < keyed.first_row.size(); ++k) {
    ARROW_ASSIGN_OR_RAISE(auto literal,
                          ArrowValueToLiteral(*array, keyed.first_row[k], *source->type));
    auto result = pf.transform.Apply(*source->type, literal);
    if (!result.ok()) {
      return result.status().WithMessage("partition field '", pf.name,
                                         "': ", result.status().message());
    }
    int32_t value_index;
    bool inserted = false;
    if (!result->has_value()) {
      if (index.null_index < 0) {
        index.null_index = next();
        inserted = true;
      }
      value_index = index.null_index;
    } else if (const auto* i = std::get_if<int32_t>(&**result)) {
      auto [it, added] = index.ints.try_emplace(*i, next());
      value_index = it->second;
      inserted = added;
    } else {
      ARROW_ASSIGN_OR_RAISE(std::string bytes, ToBytes(*result_type, **result));
      auto [it, added] = index.others.try_emplace(std::move(bytes), next());
      value_index = it->second;
      inserted = added;
    }
    if (inserted) out.values.push_back(std::move(*result));
    value_of_key[k] = value_index;
  }
  if (out.values.size() == 1) return out;  // one value for all rows
  out.row_value.resize(keyed.row_key.size());
  for (size_t i = 0; i < keyed.row_key.size(); ++i) {
    out.row_value[i] = value_of_key[keyed.row_key[i]];
  }
  return out;
}

std::shared_ptr<arrow::RecordBatch> ShareBatch(const arrow::RecordBatch& batch) {
  return arrow::RecordBatch::Make(batch.schema(), batch.num_rows(), batch.columns());
}

}  // namespace

arrow::Result<std::optional<Literal>> ArrowValueToLiteral(const arrow::Array& array,
                                                          int64_t index,
                                                          const Type& type) {
  ARROW_ASSIGN_OR_RAISE(ArrowShape shape, ExpectedShape(type));
  if (array.type_id() != shape.id ||
      (shape.byte_width > 0 &&
       static_cast<const arrow::FixedSizeBinaryType&>(*array.type()).byte_width() !=
           shape.byte_width) ||
      (type.id() == TypeId::kDecimal &&
       static_cast<const arrow::Decimal128Type&>(*array.type()).scale() !=
           type.scale())) {
    return arrow::Status::TypeError("an Arrow ", array.type()->ToString(),
                                    " array does not hold Iceberg ", type.ToString(),
                                    " values (see iceberg::ToArrowType)");
  }
  if (index < 0 || index >= array.length()) {
    return arrow::Status::IndexError("row ", index, " is outside an array of ",
                                     array.length(), " rows");
  }
  if (array.IsNull(index)) return std::nullopt;
  const arrow::ArrayData& data = *array.data();
  switch (type.id()) {
    case TypeId::kBoolean:
      return Literal(static_cast<const arrow::BooleanArray&>(array).Value(index));
    case TypeId::kInt:
    case TypeId::kDate:
      return Literal(data.GetValues<int32_t>(1)[index]);
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return Literal(data.GetValues<int64_t>(1)[index]);
    case TypeId::kFloat:
      return Literal(data.GetValues<float>(1)[index]);
    case TypeId::kDouble:
      return Literal(data.GetValues<double>(1)[index]);
    case TypeId::kDecimal: {
      const arrow::Decimal128 d(
          static_cast<const arrow::Decimal128Array&>(array).GetValue(index));
      const auto unscaled = static_cast<__int128>(
          (static_cast<unsigned __int128>(static_cast<uint64_t>(d.high_bits())) << 64) |
          d.low_bits());
      return Literal(Decimal{unscaled, type.scale()});
    }
    case TypeId::kString:
      return Literal(
          std::string(static_cast<const arrow::StringArray&>(array).GetView(index)));
    case TypeId::kBinary: {
      const std::string_view v =
          static_cast<const arrow::BinaryArray&>(array).GetView(index);
      return Literal(Bytes(v.begin(), v.end()));
    }
    case TypeId::kUuid: {
      const std::string_view v =
          static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(index);
      Uuid uuid;
      std::memcpy(uuid.bytes.data(), v.data(), uuid.bytes.size());
      return Literal(uuid);
    }
    case TypeId::kFixed: {
      const std::string_view v =
          static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(index);
      return Literal(Bytes(v.begin(), v.end()));
    }
    default:
      break;
  }
  return arrow::Status::Invalid("no Literal for a value of type ", type.ToString());
}

arrow::Result<std::vector<PartitionedBatch>> SplitByPartition(
    const PartitionSpec& spec, const Schema& schema, const arrow::RecordBatch& batch) {
  std::vector<PartitionedBatch> out;
  if (spec.is_unpartitioned()) {
    out.push_back({PartitionTuple{}, ShareBatch(batch)});
    return out;
  }
  const int64_t n = batch.num_rows();
  if (n == 0) return out;
  if (n > INT32_MAX) {
    return arrow::Status::Invalid("cannot split a batch of ", n,
                                  " rows by partition (at most 2^31-1); split it first");
  }

  ARROW_ASSIGN_OR_RAISE(TypePtr partition_type, spec.PartitionType(schema));
  std::vector<FieldValues> fields;
  fields.reserve(spec.fields.size());
  for (size_t f = 0; f < spec.fields.size(); ++f) {
    ARROW_ASSIGN_OR_RAISE(FieldValues values,
                          ComputeFieldValues(schema, batch, spec.fields[f],
                                             partition_type->fields()[f].type));
    fields.push_back(std::move(values));
  }

  // Group ids by first appearance: starting from one group, refined by each field
  // whose value is not the same in every row.
  std::vector<int32_t> group;
  int32_t num_groups = 1;
  for (const FieldValues& field : fields) {
    if (field.row_value.empty()) continue;
    if (group.empty()) group.assign(n, 0);
    DenseIds<int64_t> ids;
    const std::vector<int32_t>& value = field.row_value;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t key = (static_cast<int64_t>(group[i]) << 32) | value[i];
      group[i] = ids.Get(key, i);
    }
    num_groups = static_cast<int32_t>(ids.first_rows().size());
  }

  // Each group's tuple, from its first row.
  std::vector<int64_t> first_row(num_groups, -1);
  if (num_groups == 1) {
    first_row[0] = 0;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (first_row[group[i]] < 0) first_row[group[i]] = i;
    }
  }
  auto tuple_of = [&](int32_t g) {
    PartitionTuple tuple;
    tuple.reserve(fields.size());
    for (const FieldValues& fv : fields) {
      tuple.push_back(fv.values[fv.ValueIndex(first_row[g])]);
    }
    return tuple;
  };

  if (num_groups == 1) {
    out.push_back({tuple_of(0), ShareBatch(batch)});
    return out;
  }

  // A stable counting sort of the rows by group, one Take, then a slice per group.
  std::vector<int64_t> offset(num_groups + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++offset[group[i] + 1];
  for (int32_t g = 0; g < num_groups; ++g) offset[g + 1] += offset[g];
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> indices_buffer,
                        arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(int32_t))));
  auto* indices = reinterpret_cast<int32_t*>(indices_buffer->mutable_data());
  {
    std::vector<int64_t> next(offset.begin(), offset.end() - 1);
    for (int64_t i = 0; i < n; ++i) indices[next[group[i]]++] = static_cast<int32_t>(i);
  }
  auto indices_array = std::make_shared<arrow::Int32Array>(n, std::move(indices_buffer));

  ARROW_RETURN_NOT_OK(EnsureComputeInitialized());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum taken, cp::Take(arrow::Datum(ShareBatch(batch)),
                                                     arrow::Datum(indices_array),
                                                     cp::TakeOptions::NoBoundsCheck()));
  const std::shared_ptr<arrow::RecordBatch>& reordered = taken.record_batch();
  out.reserve(num_groups);
  for (int32_t g = 0; g < num_groups; ++g) {
    out.push_back({tuple_of(g), reordered->Slice(offset[g], offset[g + 1] - offset[g])});
  }
  return out;
}

arrow::Result<std::vector<int32_t>> BucketValues(const arrow::Array& array,
                                                 const Type& type, int32_t num_buckets) {
  if (num_buckets <= 0) return arrow::Status::Invalid("bucket[", num_buckets, "]");
  std::vector<int32_t> out(static_cast<size_t>(array.length()), -1);
  auto bucket_of = [num_buckets](uint32_t hash) {
    return static_cast<int32_t>((hash & 0x7fffffffU) %
                                static_cast<uint32_t>(num_buckets));
  };
  ARROW_ASSIGN_OR_RAISE(ArrowShape shape, ExpectedShape(type));
  const TypeId id = type.id();
  const bool int32_based = id == TypeId::kInt || id == TypeId::kDate;
  const bool int64_based = id == TypeId::kLong || id == TypeId::kTime ||
                           id == TypeId::kTimestamp || id == TypeId::kTimestampTz;
  if (array.type_id() == shape.id && (int32_based || int64_based)) {
    const auto& data = *array.data();
    for (int64_t i = 0; i < array.length(); ++i) {
      if (array.IsNull(i)) continue;
      const int64_t v =
          int32_based ? data.GetValues<int32_t>(1)[i] : data.GetValues<int64_t>(1)[i];
      out[i] = bucket_of(IcebergHashLong(v));
    }
    return out;
  }
  if (id == TypeId::kString && array.type_id() == arrow::Type::STRING) {
    const auto& strings = static_cast<const arrow::StringArray&>(array);
    for (int64_t i = 0; i < array.length(); ++i) {
      if (array.IsNull(i)) continue;
      const std::string_view v = strings.GetView(i);
      out[i] =
          bucket_of(Murmur3Hash32(reinterpret_cast<const uint8_t*>(v.data()), v.size()));
    }
    return out;
  }
  for (int64_t i = 0; i < array.length(); ++i) {
    ARROW_ASSIGN_OR_RAISE(std::optional<Literal> value,
                          ArrowValueToLiteral(array, i, type));
    if (!value) continue;
    ARROW_ASSIGN_OR_RAISE(out[i], BucketValue(type, *value, num_buckets));
  }
  return out;
}

}  // namespace floe::iceberg
