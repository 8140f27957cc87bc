// Reading manifests and manifest lists (manifest.h): Avro values by field id, as
// Java, PyIceberg and floe write them. Writing them is manifest_write.cc.

#include "floe/iceberg/manifest.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "floe/iceberg/avro_file_internal.h"
#include "floe/iceberg/conversions.h"
#include "floe/iceberg/manifest_internal.h"

namespace floe::iceberg {
namespace {

using avro_internal::ContainerReader;
using manifest_internal::CheckPartitionType;

// ---- Reading Avro values by field id ---------------------------------------------

// The record type inside `type` (itself, the non-null branch of a union, or an
// array's items), or null.
const nlohmann::json* RecordOf(const nlohmann::json& type) {
  if (type.is_array()) {
    for (const auto& branch : type) {
      if (!(branch.is_string() && branch == "null")) return RecordOf(branch);
    }
    return nullptr;
  }
  if (!type.is_object()) return nullptr;
  const auto kind = type.value("type", nlohmann::json());
  if (kind == "record") return &type;
  if (kind == "array" && type.contains("items")) return RecordOf(type["items"]);
  return nullptr;
}

// Finds the fields of one record of the file's schema by field id, falling back to
// the spec's name for files written without ids.
class RecordLayout {
 public:
  explicit RecordLayout(const nlohmann::json* record) : record_(record) {}

  // Index of the field, or -1 when the file's schema does not have it.
  int Find(int32_t id, std::string_view name) const {
    if (record_ == nullptr) return -1;
    const auto& fields = (*record_)["fields"];
    int by_name = -1;
    for (size_t i = 0; i < fields.size(); ++i) {
      const auto& f = fields[i];
      auto fid = f.find("field-id");
      if (fid != f.end() && fid->is_number_integer() && fid->get<int32_t>() == id) {
        return static_cast<int>(i);
      }
      if (f.value("name", "") == name) by_name = static_cast<int>(i);
    }
    return by_name;
  }

  const nlohmann::json* SubRecord(int32_t id, std::string_view name) const {
    const int i = Find(id, name);
    return i < 0 ? nullptr : RecordOf((*record_)["fields"][i]["type"]);
  }

 private:
  const nlohmann::json* record_;
};

// Points `out` at field (id, name) of `record`, unwrapping an optional union. False
// when the file has no such field or the value is null.
arrow::Result<bool> Get(avro_value_t* record, const RecordLayout& layout, int32_t id,
                        std::string_view name, avro_value_t* out) {
  const int index = layout.Find(id, name);
  if (index < 0) return false;
  avro_value_t v;
  FLOE_AVRO_OK(avro_value_get_by_index(record, index, &v, nullptr));
  if (avro_value_get_type(&v) == AVRO_UNION) {
    avro_value_t branch;
    FLOE_AVRO_OK(avro_value_get_current_branch(&v, &branch));
    v = branch;
  }
  if (avro_value_get_type(&v) == AVRO_NULL) return false;
  *out = v;
  return true;
}

arrow::Result<int64_t> AsLong(avro_value_t* v) {
  switch (avro_value_get_type(v)) {
    case AVRO_INT32: {
      int32_t x = 0;
      FLOE_AVRO_OK(avro_value_get_int(v, &x));
      return x;
    }
    case AVRO_INT64: {
      int64_t x = 0;
      FLOE_AVRO_OK(avro_value_get_long(v, &x));
      return x;
    }
    default:
      return arrow::Status::TypeError("expected an Avro int or long");
  }
}

arrow::Result<int32_t> AsInt(avro_value_t* v) {
  ARROW_ASSIGN_OR_RAISE(int64_t x, AsLong(v));
  if (x < std::numeric_limits<int32_t>::min() ||
      x > std::numeric_limits<int32_t>::max()) {
    return arrow::Status::Invalid("value ", x, " does not fit in an int");
  }
  return static_cast<int32_t>(x);
}

arrow::Result<bool> AsBool(avro_value_t* v) {
  if (avro_value_get_type(v) != AVRO_BOOLEAN) {
    return arrow::Status::TypeError("expected an Avro boolean");
  }
  int x = 0;
  FLOE_AVRO_OK(avro_value_get_boolean(v, &x));
  return x != 0;
}

// Strings, bytes and fixed all read as their bytes.
arrow::Result<std::string> AsBytes(avro_value_t* v) {
  const void* data = nullptr;
  size_t size = 0;
  switch (avro_value_get_type(v)) {
    case AVRO_STRING: {
      const char* s = nullptr;
      FLOE_AVRO_OK(avro_value_get_string(v, &s, &size));
      return std::string(s, size > 0 ? size - 1 : 0);
    }
    case AVRO_BYTES:
      FLOE_AVRO_OK(avro_value_get_bytes(v, &data, &size));
      break;
    case AVRO_FIXED:
      FLOE_AVRO_OK(avro_value_get_fixed(v, &data, &size));
      break;
    default:
      return arrow::Status::TypeError("expected an Avro string, bytes or fixed");
  }
  return std::string(static_cast<const char*>(data), size);
}

template <typename T>
arrow::Result<T> Required(avro_value_t* record, const RecordLayout& layout, int32_t id,
                          std::string_view name,
                          arrow::Result<T> (*convert)(avro_value_t*)) {
  avro_value_t v;
  ARROW_ASSIGN_OR_RAISE(bool present, Get(record, layout, id, name, &v));
  if (!present) {
    return arrow::Status::Invalid("required field ", name, " (", id, ") is missing");
  }
  return convert(&v);
}

template <typename T>
arrow::Result<std::optional<T>> Optional(avro_value_t* record, const RecordLayout& layout,
                                         int32_t id, std::string_view name,
                                         arrow::Result<T> (*convert)(avro_value_t*)) {
  avro_value_t v;
  ARROW_ASSIGN_OR_RAISE(bool present, Get(record, layout, id, name, &v));
  if (!present) return std::optional<T>();
  ARROW_ASSIGN_OR_RAISE(T value, convert(&v));
  return std::optional<T>(std::move(value));
}

template <typename V>
arrow::Status ReadIntKeyMap(avro_value_t* record, const RecordLayout& layout, int32_t id,
                            std::string_view name, std::map<int32_t, V>* out) {
  avro_value_t array;
  ARROW_ASSIGN_OR_RAISE(bool present, Get(record, layout, id, name, &array));
  if (!present) return arrow::Status::OK();
  if (avro_value_get_type(&array) != AVRO_ARRAY) {
    return arrow::Status::TypeError(name, " is not an array of key/value records");
  }
  size_t n = 0;
  FLOE_AVRO_OK(avro_value_get_size(&array, &n));
  for (size_t i = 0; i < n; ++i) {
    avro_value_t element, k, v;
    FLOE_AVRO_OK(avro_value_get_by_index(&array, i, &element, nullptr));
    FLOE_AVRO_OK(avro_value_get_by_index(&element, 0, &k, nullptr));
    FLOE_AVRO_OK(avro_value_get_by_index(&element, 1, &v, nullptr));
    ARROW_ASSIGN_OR_RAISE(int32_t key, AsInt(&k));
    if constexpr (std::is_same_v<V, int64_t>) {
      ARROW_ASSIGN_OR_RAISE((*out)[key], AsLong(&v));
    } else {
      ARROW_ASSIGN_OR_RAISE((*out)[key], AsBytes(&v));
    }
  }
  return arrow::Status::OK();
}

template <typename T>
arrow::Status ReadList(avro_value_t* record, const RecordLayout& layout, int32_t id,
                       std::string_view name, std::vector<T>* out) {
  avro_value_t array;
  ARROW_ASSIGN_OR_RAISE(bool present, Get(record, layout, id, name, &array));
  if (!present) return arrow::Status::OK();
  if (avro_value_get_type(&array) != AVRO_ARRAY) {
    return arrow::Status::TypeError(name, " is not an array");
  }
  size_t n = 0;
  FLOE_AVRO_OK(avro_value_get_size(&array, &n));
  for (size_t i = 0; i < n; ++i) {
    avro_value_t element;
    FLOE_AVRO_OK(avro_value_get_by_index(&array, i, &element, nullptr));
    ARROW_ASSIGN_OR_RAISE(int64_t x, AsLong(&element));
    out->push_back(static_cast<T>(x));
  }
  return arrow::Status::OK();
}

arrow::Result<Literal> ReadPartitionValue(avro_value_t* v, const Type& type) {
  switch (type.id()) {
    case TypeId::kBoolean: {
      ARROW_ASSIGN_OR_RAISE(bool b, AsBool(v));
      return Literal(b);
    }
    case TypeId::kInt:
    case TypeId::kDate: {
      ARROW_ASSIGN_OR_RAISE(int32_t x, AsInt(v));
      return Literal(x);
    }
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz: {
      ARROW_ASSIGN_OR_RAISE(int64_t x, AsLong(v));
      return Literal(x);
    }
    case TypeId::kFloat:
      if (avro_value_get_type(v) == AVRO_FLOAT) {
        float x = 0;
        FLOE_AVRO_OK(avro_value_get_float(v, &x));
        return Literal(x);
      }
      break;
    case TypeId::kDouble:
      if (avro_value_get_type(v) == AVRO_DOUBLE) {
        double x = 0;
        FLOE_AVRO_OK(avro_value_get_double(v, &x));
        return Literal(x);
      }
      if (avro_value_get_type(v) == AVRO_FLOAT) {
        float x = 0;
        FLOE_AVRO_OK(avro_value_get_float(v, &x));
        return Literal(static_cast<double>(x));
      }
      break;
    case TypeId::kString: {
      ARROW_ASSIGN_OR_RAISE(std::string s, AsBytes(v));
      return Literal(std::move(s));
    }
    case TypeId::kBinary: {
      ARROW_ASSIGN_OR_RAISE(std::string s, AsBytes(v));
      return Literal(Bytes(s.begin(), s.end()));
    }
    case TypeId::kFixed: {
      ARROW_ASSIGN_OR_RAISE(std::string s, AsBytes(v));
      if (s.size() != static_cast<size_t>(type.length())) {
        return arrow::Status::Invalid("a ", type.ToString(), " partition value has ",
                                      s.size(), " bytes");
      }
      return Literal(Bytes(s.begin(), s.end()));
    }
    case TypeId::kUuid: {
      ARROW_ASSIGN_OR_RAISE(std::string s, AsBytes(v));
      if (avro_value_get_type(v) == AVRO_STRING) {
        ARROW_ASSIGN_OR_RAISE(Uuid u, Uuid::Parse(s));
        return Literal(u);
      }
      if (s.size() != 16) return arrow::Status::Invalid("a uuid needs 16 bytes");
      Uuid u;
      std::copy(s.begin(), s.end(), u.bytes.begin());
      return Literal(u);
    }
    case TypeId::kDecimal: {
      ARROW_ASSIGN_OR_RAISE(std::string s, AsBytes(v));
      if (s.empty() || s.size() > 16) {
        return arrow::Status::Invalid("a decimal needs 1 to 16 bytes, got ", s.size());
      }
      unsigned __int128 bits =
          (static_cast<uint8_t>(s[0]) & 0x80) ? ~static_cast<unsigned __int128>(0) : 0;
      for (char c : s) bits = (bits << 8) | static_cast<uint8_t>(c);
      return Literal(Decimal{static_cast<__int128>(bits), type.scale()});
    }
    default:
      break;
  }
  return arrow::Status::TypeError("cannot read a ", type.ToString(),
                                  " partition value from this Avro value");
}

arrow::Result<nlohmann::json> ParseSchemaJson(const ContainerReader& reader) {
  auto parsed = nlohmann::json::parse(reader.schema_json(), nullptr, false);
  if (parsed.is_discarded() || RecordOf(parsed) == nullptr) {
    return arrow::Status::Invalid("the Avro schema in the file header is not a record");
  }
  return parsed;
}

arrow::Result<std::unique_ptr<ContainerReader>> OpenContainer(
    FileIO& io, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(std::string bytes, io.ReadAll(location));
  auto reader = ContainerReader::Open(std::move(bytes));
  if (!reader.ok()) {
    return reader.status().WithMessage(location, ": ", reader.status().message());
  }
  return std::move(reader).MoveValueUnsafe();
}

}  // namespace

namespace manifest_internal {

arrow::Status CheckPartitionType(const Type& partition_type) {
  if (partition_type.id() != TypeId::kStruct) {
    return arrow::Status::Invalid("the partition type must be a struct, got ",
                                  partition_type.ToString());
  }
  return arrow::Status::OK();
}

}  // namespace manifest_internal

arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io,
                                                       const std::string& location,
                                                       const Type& partition_type) {
  ARROW_RETURN_NOT_OK(CheckPartitionType(partition_type));
  ARROW_ASSIGN_OR_RAISE(auto reader, OpenContainer(io, location));
  ARROW_ASSIGN_OR_RAISE(nlohmann::json schema, ParseSchemaJson(*reader));
  const RecordLayout entry_layout(RecordOf(schema));
  const RecordLayout file_layout(entry_layout.SubRecord(2, "data_file"));
  const nlohmann::json* partition_record = file_layout.SubRecord(102, "partition");
  const RecordLayout partition_layout(partition_record);
  std::vector<int> partition_index;
  for (const NestedField& f : partition_type.fields()) {
    const int i = partition_layout.Find(f.id, f.name);
    if (i < 0) {
      return arrow::Status::Invalid(location, ": the manifest has no partition field ",
                                    f.id, " (", f.name, ")");
    }
    partition_index.push_back(i);
  }

  std::vector<ManifestEntry> entries;
  avro_value_t* record = nullptr;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(bool more, reader->Next(&record));
    if (!more) break;
    ManifestEntry e;
    ARROW_ASSIGN_OR_RAISE(int32_t status,
                          Required<int32_t>(record, entry_layout, 0, "status", AsInt));
    if (status < 0 || status > 2) {
      return arrow::Status::Invalid(location, ": unknown entry status ", status);
    }
    e.status = static_cast<ManifestEntryStatus>(status);
    ARROW_ASSIGN_OR_RAISE(
        e.snapshot_id, Optional<int64_t>(record, entry_layout, 1, "snapshot_id", AsLong));
    ARROW_ASSIGN_OR_RAISE(
        e.sequence_number,
        Optional<int64_t>(record, entry_layout, 3, "sequence_number", AsLong));
    ARROW_ASSIGN_OR_RAISE(
        e.file_sequence_number,
        Optional<int64_t>(record, entry_layout, 4, "file_sequence_number", AsLong));

    avro_value_t df;
    ARROW_ASSIGN_OR_RAISE(bool has_file, Get(record, entry_layout, 2, "data_file", &df));
    if (!has_file) return arrow::Status::Invalid(location, ": entry without data_file");
    DataFile& f = e.data_file;
    ARROW_ASSIGN_OR_RAISE(auto content,
                          Optional<int32_t>(&df, file_layout, 134, "content", AsInt));
    if (content.value_or(0) < 0 || content.value_or(0) > 2) {
      return arrow::Status::Invalid(location, ": unknown data file content ", *content);
    }
    f.content = static_cast<DataFileContent>(content.value_or(0));
    ARROW_ASSIGN_OR_RAISE(
        f.file_path, Required<std::string>(&df, file_layout, 100, "file_path", AsBytes));
    ARROW_ASSIGN_OR_RAISE(f.file_format, Required<std::string>(&df, file_layout, 101,
                                                               "file_format", AsBytes));
    avro_value_t partition;
    ARROW_ASSIGN_OR_RAISE(bool has_partition,
                          Get(&df, file_layout, 102, "partition", &partition));
    const auto& fields = partition_type.fields();
    if (!has_partition && !fields.empty()) {
      return arrow::Status::Invalid(location, ": data file without a partition tuple");
    }
    for (size_t i = 0; i < fields.size(); ++i) {
      avro_value_t v;
      FLOE_AVRO_OK(avro_value_get_by_index(&partition, partition_index[i], &v, nullptr));
      if (avro_value_get_type(&v) == AVRO_UNION) {
        avro_value_t branch;
        FLOE_AVRO_OK(avro_value_get_current_branch(&v, &branch));
        v = branch;
      }
      if (avro_value_get_type(&v) == AVRO_NULL) {
        f.partition.emplace_back();
        continue;
      }
      auto value = ReadPartitionValue(&v, *fields[i].type);
      if (!value.ok()) {
        return value.status().WithMessage(location, ": partition field '", fields[i].name,
                                          "': ", value.status().message());
      }
      f.partition.emplace_back(std::move(value).MoveValueUnsafe());
    }
    ARROW_ASSIGN_OR_RAISE(
        f.record_count, Required<int64_t>(&df, file_layout, 103, "record_count", AsLong));
    ARROW_ASSIGN_OR_RAISE(
        f.file_size_in_bytes,
        Required<int64_t>(&df, file_layout, 104, "file_size_in_bytes", AsLong));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 108, "column_sizes", &f.column_sizes));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 109, "value_counts", &f.value_counts));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 110, "null_value_counts", &f.null_value_counts));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 137, "nan_value_counts", &f.nan_value_counts));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 125, "lower_bounds", &f.lower_bounds));
    ARROW_RETURN_NOT_OK(
        ReadIntKeyMap(&df, file_layout, 128, "upper_bounds", &f.upper_bounds));
    ARROW_ASSIGN_OR_RAISE(f.key_metadata, Optional<std::string>(&df, file_layout, 131,
                                                                "key_metadata", AsBytes));
    ARROW_RETURN_NOT_OK(
        ReadList(&df, file_layout, 132, "split_offsets", &f.split_offsets));
    ARROW_RETURN_NOT_OK(ReadList(&df, file_layout, 135, "equality_ids", &f.equality_ids));
    ARROW_ASSIGN_OR_RAISE(f.sort_order_id, Optional<int32_t>(&df, file_layout, 140,
                                                             "sort_order_id", AsInt));
    ARROW_ASSIGN_OR_RAISE(
        f.referenced_data_file,
        Optional<std::string>(&df, file_layout, 143, "referenced_data_file", AsBytes));
    entries.push_back(std::move(e));
  }
  return entries;
}

void InheritFromManifest(const ManifestFile& manifest,
                         std::vector<ManifestEntry>* entries) {
  for (ManifestEntry& e : *entries) {
    if (!e.snapshot_id) e.snapshot_id = manifest.added_snapshot_id;
    // v1 manifests (sequence number 0) inherit 0 for every entry.
    const bool inherits =
        e.status == ManifestEntryStatus::kAdded || manifest.sequence_number == 0;
    if (inherits && !e.sequence_number) e.sequence_number = manifest.sequence_number;
    if (inherits && !e.file_sequence_number) {
      e.file_sequence_number = manifest.sequence_number;
    }
  }
}

arrow::Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io,
                                                       const ManifestFile& manifest,
                                                       const Type& partition_type) {
  ARROW_ASSIGN_OR_RAISE(auto entries,
                        ReadManifest(io, manifest.manifest_path, partition_type));
  InheritFromManifest(manifest, &entries);
  return entries;
}

arrow::Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io,
                                                          const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto reader, OpenContainer(io, location));
  ARROW_ASSIGN_OR_RAISE(nlohmann::json schema, ParseSchemaJson(*reader));
  const RecordLayout layout(RecordOf(schema));
  const RecordLayout summary_layout(layout.SubRecord(507, "partitions"));

  std::vector<ManifestFile> out;
  avro_value_t* r = nullptr;
  while (true) {
    ARROW_ASSIGN_OR_RAISE(bool more, reader->Next(&r));
    if (!more) break;
    ManifestFile m;
    ARROW_ASSIGN_OR_RAISE(
        m.manifest_path, Required<std::string>(r, layout, 500, "manifest_path", AsBytes));
    ARROW_ASSIGN_OR_RAISE(m.manifest_length,
                          Required<int64_t>(r, layout, 501, "manifest_length", AsLong));
    ARROW_ASSIGN_OR_RAISE(m.partition_spec_id,
                          Required<int32_t>(r, layout, 502, "partition_spec_id", AsInt));
    ARROW_ASSIGN_OR_RAISE(auto content,
                          Optional<int32_t>(r, layout, 517, "content", AsInt));
    if (content.value_or(0) < 0 || content.value_or(0) > 1) {
      return arrow::Status::Invalid(location, ": unknown manifest content ", *content);
    }
    m.content = static_cast<ManifestContent>(content.value_or(0));
    // v1 lists have no sequence numbers: they read as 0.
    ARROW_ASSIGN_OR_RAISE(auto seq,
                          Optional<int64_t>(r, layout, 515, "sequence_number", AsLong));
    m.sequence_number = seq.value_or(0);
    ARROW_ASSIGN_OR_RAISE(
        auto min_seq, Optional<int64_t>(r, layout, 516, "min_sequence_number", AsLong));
    m.min_sequence_number = min_seq.value_or(0);
    ARROW_ASSIGN_OR_RAISE(m.added_snapshot_id,
                          Required<int64_t>(r, layout, 503, "added_snapshot_id", AsLong));
    ARROW_ASSIGN_OR_RAISE(auto added_files,
                          Optional<int32_t>(r, layout, 504, "added_files_count", AsInt));
    ARROW_ASSIGN_OR_RAISE(
        auto existing_files,
        Optional<int32_t>(r, layout, 505, "existing_files_count", AsInt));
    ARROW_ASSIGN_OR_RAISE(
        auto deleted_files,
        Optional<int32_t>(r, layout, 506, "deleted_files_count", AsInt));
    ARROW_ASSIGN_OR_RAISE(auto added_rows,
                          Optional<int64_t>(r, layout, 512, "added_rows_count", AsLong));
    ARROW_ASSIGN_OR_RAISE(
        auto existing_rows,
        Optional<int64_t>(r, layout, 513, "existing_rows_count", AsLong));
    ARROW_ASSIGN_OR_RAISE(
        auto deleted_rows,
        Optional<int64_t>(r, layout, 514, "deleted_rows_count", AsLong));
    m.added_files_count = added_files.value_or(0);
    m.existing_files_count = existing_files.value_or(0);
    m.deleted_files_count = deleted_files.value_or(0);
    m.added_rows_count = added_rows.value_or(0);
    m.existing_rows_count = existing_rows.value_or(0);
    m.deleted_rows_count = deleted_rows.value_or(0);

    avro_value_t list;
    ARROW_ASSIGN_OR_RAISE(bool has_partitions, Get(r, layout, 507, "partitions", &list));
    if (has_partitions) {
      size_t n = 0;
      FLOE_AVRO_OK(avro_value_get_size(&list, &n));
      for (size_t i = 0; i < n; ++i) {
        avro_value_t s;
        FLOE_AVRO_OK(avro_value_get_by_index(&list, i, &s, nullptr));
        PartitionFieldSummary summary;
        ARROW_ASSIGN_OR_RAISE(
            summary.contains_null,
            Required<bool>(&s, summary_layout, 509, "contains_null", AsBool));
        ARROW_ASSIGN_OR_RAISE(
            summary.contains_nan,
            Optional<bool>(&s, summary_layout, 518, "contains_nan", AsBool));
        ARROW_ASSIGN_OR_RAISE(
            summary.lower_bound,
            Optional<std::string>(&s, summary_layout, 510, "lower_bound", AsBytes));
        ARROW_ASSIGN_OR_RAISE(
            summary.upper_bound,
            Optional<std::string>(&s, summary_layout, 511, "upper_bound", AsBytes));
        m.partitions.push_back(std::move(summary));
      }
    }
    ARROW_ASSIGN_OR_RAISE(m.key_metadata,
                          Optional<std::string>(r, layout, 519, "key_metadata", AsBytes));
    out.push_back(std::move(m));
  }
  return out;
}

arrow::Result<std::map<std::string, std::string>> ReadAvroMetadata(
    FileIO& io, const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto reader, OpenContainer(io, location));
  return reader->metadata();
}

}  // namespace floe::iceberg
