#include "floe/iceberg/data_file_metrics.h"

#include <cmath>
#include <utility>

#include <parquet/exception.h>
#include <parquet/schema.h>
#include <parquet/statistics.h>

#include "floe/iceberg/conversions.h"

namespace floe::iceberg {
namespace {

// Byte length of the UTF-8 sequence starting with `lead` (1 for stray bytes, so that
// invalid input still advances).
size_t Utf8Length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

// Start offsets of the first `length` + 1 code points of `value` (fewer when it is
// shorter), so [starts[i], starts[i + 1]) is code point i.
std::vector<size_t> CodePointStarts(std::string_view value, size_t max_count) {
  std::vector<size_t> starts;
  size_t pos = 0;
  while (pos < value.size() && starts.size() < max_count) {
    starts.push_back(pos);
    pos = std::min(value.size(), pos + Utf8Length(static_cast<uint8_t>(value[pos])));
  }
  starts.push_back(pos);
  return starts;
}

uint32_t DecodeCodePoint(std::string_view bytes) {
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i]));
  };
  switch (bytes.size()) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) |
             (b(3) & 0x3F);
  }
}

std::string EncodeCodePoint(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// True when the field is a list element or map key / value, or inside one.
bool InsideListOrMap(const Schema& schema, int32_t field_id) {
  std::optional<int32_t> parent = schema.FindParentId(field_id);
  while (parent) {
    const NestedField* p = schema.FindField(*parent);
    if (p != nullptr &&
        (p->type->id() == TypeId::kList || p->type->id() == TypeId::kMap)) {
      return true;
    }
    parent = schema.FindParentId(*parent);
  }
  return false;
}

__int128 BigEndianSigned(const uint8_t* data, size_t size) {
  unsigned __int128 bits =
      (size > 0 && (data[0] & 0x80)) ? ~static_cast<unsigned __int128>(0) : 0;
  for (size_t i = 0; i < size; ++i) bits = (bits << 8) | data[i];
  return static_cast<__int128>(bits);
}

template <typename DType>
const parquet::TypedStatistics<DType>* As(const parquet::Statistics& stats) {
  return dynamic_cast<const parquet::TypedStatistics<DType>*>(&stats);
}

struct Bounds {
  std::optional<std::string> lower;
  std::optional<std::string> upper;
};

arrow::Status WrongPhysicalType(const Type& type, const parquet::Statistics& stats) {
  return arrow::Status::TypeError("column ", stats.descr()->path()->ToDotString(),
                                  " is stored as Parquet ",
                                  parquet::TypeToString(stats.physical_type()),
                                  ", which cannot hold Iceberg ", type.ToString());
}

template <typename T>
arrow::Result<Bounds> Serialize(const Type& type, T min, T max) {
  Bounds out;
  ARROW_ASSIGN_OR_RAISE(out.lower, ToBytes(type, Literal(std::move(min))));
  ARROW_ASSIGN_OR_RAISE(out.upper, ToBytes(type, Literal(std::move(max))));
  return out;
}

// The lower / upper bound bytes of one column from its merged Parquet statistics.
arrow::Result<Bounds> BoundsOf(const Type& type, const parquet::Statistics& stats,
                               int32_t truncate_length) {
  const int flba_length = stats.descr()->type_length();
  switch (type.id()) {
    case TypeId::kBoolean:
      if (auto* s = As<parquet::BooleanType>(stats))
        return Serialize(type, s->min(), s->max());
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      if (auto* s = As<parquet::Int32Type>(stats))
        return Serialize(type, s->min(), s->max());
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      if (auto* s = As<parquet::Int64Type>(stats))
        return Serialize(type, s->min(), s->max());
      break;
    case TypeId::kFloat:
      if (auto* s = As<parquet::FloatType>(stats)) {
        if (std::isnan(s->min()) || std::isnan(s->max())) return Bounds{};
        return Serialize(type, s->min(), s->max());
      }
      break;
    case TypeId::kDouble:
      if (auto* s = As<parquet::DoubleType>(stats)) {
        if (std::isnan(s->min()) || std::isnan(s->max())) return Bounds{};
        return Serialize(type, s->min(), s->max());
      }
      break;
    case TypeId::kDecimal: {
      const int32_t scale = type.scale();
      if (auto* s = As<parquet::Int32Type>(stats)) {
        return Serialize(type, Decimal{s->min(), scale}, Decimal{s->max(), scale});
      }
      if (auto* s = As<parquet::Int64Type>(stats)) {
        return Serialize(type, Decimal{s->min(), scale}, Decimal{s->max(), scale});
      }
      if (auto* s = As<parquet::FLBAType>(stats)) {
        return Serialize(type, Decimal{BigEndianSigned(s->min().ptr, flba_length), scale},
                         Decimal{BigEndianSigned(s->max().ptr, flba_length), scale});
      }
      if (auto* s = As<parquet::ByteArrayType>(stats)) {
        return Serialize(type,
                         Decimal{BigEndianSigned(s->min().ptr, s->min().len), scale},
                         Decimal{BigEndianSigned(s->max().ptr, s->max().len), scale});
      }
      break;
    }
    case TypeId::kString:
    case TypeId::kBinary:
      if (auto* s = As<parquet::ByteArrayType>(stats)) {
        const std::string_view min(reinterpret_cast<const char*>(s->min().ptr),
                                   s->min().len);
        const std::string_view max(reinterpret_cast<const char*>(s->max().ptr),
                                   s->max().len);
        Bounds out;
        if (type.id() == TypeId::kString) {
          out.lower = TruncateStringLowerBound(min, truncate_length);
          out.upper = TruncateStringUpperBound(max, truncate_length);
        } else {
          out.lower = TruncateBinaryLowerBound(min, truncate_length);
          out.upper = TruncateBinaryUpperBound(max, truncate_length);
        }
        return out;
      }
      break;
    case TypeId::kUuid:
      if (auto* s = As<parquet::FLBAType>(stats); s != nullptr && flba_length == 16) {
        Uuid min, max;
        std::copy(s->min().ptr, s->min().ptr + 16, min.bytes.begin());
        std::copy(s->max().ptr, s->max().ptr + 16, max.bytes.begin());
        return Serialize(type, min, max);
      }
      break;
    case TypeId::kFixed:
      // Not truncated: a fixed bound keeps its full length, as readers expect.
      if (auto* s = As<parquet::FLBAType>(stats);
          s != nullptr && flba_length == type.length()) {
        return Serialize(type, Bytes(s->min().ptr, s->min().ptr + flba_length),
                         Bytes(s->max().ptr, s->max().ptr + flba_length));
      }
      break;
    default:
      return Bounds{};
  }
  return WrongPhysicalType(type, stats);
}

}  // namespace

std::string TruncateStringLowerBound(std::string_view value, int32_t length) {
  const auto starts = CodePointStarts(value, static_cast<size_t>(length));
  return std::string(value.substr(0, starts.back()));
}

std::optional<std::string> TruncateStringUpperBound(std::string_view value,
                                                    int32_t length) {
  const auto starts = CodePointStarts(value, static_cast<size_t>(length));
  if (starts.back() == value.size()) return std::string(value);
  // starts has length + 1 entries: code point i spans [starts[i], starts[i + 1]).
  for (size_t i = starts.size() - 1; i-- > 0;) {
    uint32_t next =
        DecodeCodePoint(value.substr(starts[i], starts[i + 1] - starts[i])) + 1;
    if (next >= 0xD800 && next <= 0xDFFF) next = 0xE000;  // skip UTF-16 surrogates
    if (next <= 0x10FFFF) {
      return std::string(value.substr(0, starts[i])) + EncodeCodePoint(next);
    }
  }
  return std::nullopt;
}

std::string TruncateBinaryLowerBound(std::string_view value, int32_t length) {
  return std::string(value.substr(0, static_cast<size_t>(length)));
}

std::optional<std::string> TruncateBinaryUpperBound(std::string_view value,
                                                    int32_t length) {
  if (value.size() <= static_cast<size_t>(length)) return std::string(value);
  std::string out(value.substr(0, static_cast<size_t>(length)));
  while (!out.empty()) {
    auto& last = reinterpret_cast<uint8_t&>(out.back());
    if (last != 0xFF) {
      ++last;
      return out;
    }
    out.pop_back();
  }
  return std::nullopt;
}

arrow::Result<DataFile> DataFileFromMetrics(const Schema& schema,
                                            const DataFileMetrics& metrics,
                                            std::string file_path,
                                            std::vector<std::optional<Literal>> partition,
                                            const MetricsOptions& options) {
  if (options.truncate_length <= 0) {
    return arrow::Status::Invalid("truncate length must be positive");
  }
  DataFile out;
  out.content = DataFileContent::kData;
  out.file_path = std::move(file_path);
  out.file_format = "PARQUET";
  out.partition = std::move(partition);
  out.record_count = metrics.record_count;
  out.file_size_in_bytes = metrics.file_size_bytes;
  out.split_offsets = metrics.split_offsets;
  for (const ColumnMetrics& column : metrics.columns) {
    const NestedField* field = schema.FindField(column.field_id);
    if (field == nullptr) {
      return arrow::Status::Invalid("column ", column.path, " has field id ",
                                    column.field_id, ", which is not in the schema");
    }
    out.column_sizes[column.field_id] += column.compressed_size;
    out.value_counts[column.field_id] += column.value_count;
    out.null_value_counts[column.field_id] += column.null_count;
    if (column.bounds == nullptr || !field->type->is_primitive() ||
        InsideListOrMap(schema, column.field_id)) {
      continue;
    }
    arrow::Result<Bounds> bounds;
    BEGIN_PARQUET_CATCH_EXCEPTIONS
    bounds = BoundsOf(*field->type, *column.bounds, options.truncate_length);
    END_PARQUET_CATCH_EXCEPTIONS
    ARROW_RETURN_NOT_OK(bounds.status());
    if (bounds->lower) out.lower_bounds[column.field_id] = std::move(*bounds->lower);
    if (bounds->upper) out.upper_bounds[column.field_id] = std::move(*bounds->upper);
  }
  return out;
}

}  // namespace floe::iceberg
