// Writing manifests and manifest lists (manifest.h): the Avro schemas of the spec,
// the values filled by field, and the partition summaries. Reading them is
// manifest.cc.

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

using avro_internal::ContainerWriter;
using Json = nlohmann::ordered_json;
using manifest_internal::CheckPartitionType;

// ---- Avro schemas (spec "Manifests" / "Manifest Lists", Appendix A for types) -----

Json Field(std::string_view name, int32_t id, Json type, bool required) {
  Json field = Json::object();
  field["name"] = name;
  if (required) {
    field["type"] = std::move(type);
  } else {
    field["type"] = Json::array({"null", std::move(type)});
    field["default"] = nullptr;
  }
  field["field-id"] = id;
  return field;
}

// `name` as a valid Avro name ([A-Za-z_][A-Za-z0-9_]*), as Iceberg's Java
// AvroSchemaUtil.makeCompatibleName does it: each other character becomes `_x` and
// its code in hex (bytes here), a leading digit gets a `_`. Partition field names
// come from source columns ("Kéy_bucket"); readers match fields by field id.
std::string AvroName(std::string_view name) {
  static const char kHex[] = "0123456789ABCDEF";
  auto plain = [](unsigned char c, bool first) {
    return std::isalpha(c) || c == '_' || (!first && std::isdigit(c));
  };
  bool valid = !name.empty();
  for (size_t i = 0; i < name.size() && valid; ++i) {
    valid = plain(static_cast<unsigned char>(name[i]), i == 0);
  }
  if (valid) return std::string(name);
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (plain(c, i == 0)) {
      out += static_cast<char>(c);
    } else if (i == 0 && std::isdigit(c)) {
      out += '_';
      out += static_cast<char>(c);
    } else {
      out += "_x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out.empty() ? "_" : out;
}

// Iceberg maps with non-string keys are Avro arrays of key/value records.
Json IntKeyMap(int32_t key_id, int32_t value_id, Json value_type) {
  Json record = Json::object();
  record["type"] = "record";
  record["name"] = "k" + std::to_string(key_id) + "_v" + std::to_string(value_id);
  record["fields"] = Json::array({Field("key", key_id, "int", true),
                                  Field("value", value_id, std::move(value_type), true)});
  Json map = Json::object();
  map["type"] = "array";
  map["logicalType"] = "map";
  map["items"] = std::move(record);
  return map;
}

Json List(int32_t element_id, Json element_type) {
  Json list = Json::object();
  list["type"] = "array";
  list["items"] = std::move(element_type);
  list["element-id"] = element_id;
  return list;
}

// Bytes of the smallest fixed that holds every decimal of `precision` digits.
int DecimalFixedSize(int32_t precision) {
  unsigned __int128 max = 1;
  for (int i = 0; i < precision; ++i) max *= 10;
  max -= 1;
  for (int n = 1; n < 16; ++n) {
    const unsigned __int128 limit =
        (static_cast<unsigned __int128>(1) << (8 * n - 1)) - 1;
    if (max <= limit) return n;
  }
  return 16;
}

arrow::Result<Json> AvroType(const Type& type, int32_t field_id) {
  auto logical = [](const char* base, const char* logical_type) {
    Json t = Json::object();
    t["type"] = base;
    t["logicalType"] = logical_type;
    return t;
  };
  switch (type.id()) {
    case TypeId::kBoolean:
      return Json("boolean");
    case TypeId::kInt:
      return Json("int");
    case TypeId::kLong:
      return Json("long");
    case TypeId::kFloat:
      return Json("float");
    case TypeId::kDouble:
      return Json("double");
    case TypeId::kDate:
      return logical("int", "date");
    case TypeId::kTime:
      return logical("long", "time-micros");
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz: {
      Json t = logical("long", "timestamp-micros");
      t["adjust-to-utc"] = type.id() == TypeId::kTimestampTz;
      return t;
    }
    case TypeId::kString:
      return Json("string");
    case TypeId::kBinary:
      return Json("bytes");
    case TypeId::kUuid: {
      Json t = Json::object();
      t["type"] = "fixed";
      t["name"] = "uuid_fixed_" + std::to_string(field_id);
      t["size"] = 16;
      t["logicalType"] = "uuid";
      return t;
    }
    case TypeId::kFixed: {
      Json t = Json::object();
      t["type"] = "fixed";
      t["name"] = "fixed_" + std::to_string(field_id);
      t["size"] = type.length();
      return t;
    }
    case TypeId::kDecimal: {
      Json t = Json::object();
      t["type"] = "fixed";
      t["name"] = "decimal_" + std::to_string(type.precision()) + "_" +
                  std::to_string(type.scale()) + "_" + std::to_string(field_id);
      t["size"] = DecimalFixedSize(type.precision());
      t["logicalType"] = "decimal";
      t["precision"] = type.precision();
      t["scale"] = type.scale();
      return t;
    }
    default:
      break;
  }
  return arrow::Status::TypeError("partition field ", field_id, " has type ",
                                  type.ToString(), "; partition values are primitives");
}

arrow::Result<std::string> ManifestSchemaJson(const Type& partition_type) {
  Json partition_fields = Json::array();
  for (const NestedField& f : partition_type.fields()) {
    ARROW_ASSIGN_OR_RAISE(Json t, AvroType(*f.type, f.id));
    partition_fields.push_back(Field(AvroName(f.name), f.id, std::move(t), false));
  }
  Json partition = Json::object();
  partition["type"] = "record";
  partition["name"] = "r102";
  partition["fields"] = std::move(partition_fields);

  Json data_file_fields = Json::array({
      Field("content", 134, "int", true),
      Field("file_path", 100, "string", true),
      Field("file_format", 101, "string", true),
      Field("partition", 102, std::move(partition), true),
      Field("record_count", 103, "long", true),
      Field("file_size_in_bytes", 104, "long", true),
      Field("column_sizes", 108, IntKeyMap(117, 118, "long"), false),
      Field("value_counts", 109, IntKeyMap(119, 120, "long"), false),
      Field("null_value_counts", 110, IntKeyMap(121, 122, "long"), false),
      Field("nan_value_counts", 137, IntKeyMap(138, 139, "long"), false),
      Field("lower_bounds", 125, IntKeyMap(126, 127, "bytes"), false),
      Field("upper_bounds", 128, IntKeyMap(129, 130, "bytes"), false),
      Field("key_metadata", 131, "bytes", false),
      Field("split_offsets", 132, List(133, "long"), false),
      Field("equality_ids", 135, List(136, "int"), false),
      Field("sort_order_id", 140, "int", false),
      Field("referenced_data_file", 143, "string", false),
  });
  Json data_file = Json::object();
  data_file["type"] = "record";
  data_file["name"] = "r2";
  data_file["fields"] = std::move(data_file_fields);

  Json entry = Json::object();
  entry["type"] = "record";
  entry["name"] = "manifest_entry";
  entry["fields"] = Json::array({
      Field("status", 0, "int", true),
      Field("snapshot_id", 1, "long", false),
      Field("sequence_number", 3, "long", false),
      Field("file_sequence_number", 4, "long", false),
      Field("data_file", 2, std::move(data_file), true),
  });
  return entry.dump();
}

std::string ManifestListSchemaJson() {
  Json summary = Json::object();
  summary["type"] = "record";
  summary["name"] = "r508";
  summary["fields"] = Json::array({
      Field("contains_null", 509, "boolean", true),
      Field("contains_nan", 518, "boolean", false),
      Field("lower_bound", 510, "bytes", false),
      Field("upper_bound", 511, "bytes", false),
  });
  Json file = Json::object();
  file["type"] = "record";
  file["name"] = "manifest_file";
  file["fields"] = Json::array({
      Field("manifest_path", 500, "string", true),
      Field("manifest_length", 501, "long", true),
      Field("partition_spec_id", 502, "int", true),
      Field("content", 517, "int", true),
      Field("sequence_number", 515, "long", true),
      Field("min_sequence_number", 516, "long", true),
      Field("added_snapshot_id", 503, "long", true),
      Field("added_files_count", 504, "int", true),
      Field("existing_files_count", 505, "int", true),
      Field("deleted_files_count", 506, "int", true),
      Field("added_rows_count", 512, "long", true),
      Field("existing_rows_count", 513, "long", true),
      Field("deleted_rows_count", 514, "long", true),
      Field("partitions", 507, List(508, std::move(summary)), false),
      Field("key_metadata", 519, "bytes", false),
  });
  return file.dump();
}

// ---- Filling Avro values ---------------------------------------------------------

arrow::Status Child(avro_value_t* record, const char* name, avro_value_t* out) {
  FLOE_AVRO_OK(avro_value_get_by_name(record, name, out, nullptr));
  return arrow::Status::OK();
}

// Selects the null branch (present = false) or the value branch of an optional field
// and points `out` at the value.
arrow::Status SetOptional(avro_value_t* field, bool present, avro_value_t* out) {
  avro_value_t branch;
  FLOE_AVRO_OK(avro_value_set_branch(field, present ? 1 : 0, &branch));
  if (!present) {
    FLOE_AVRO_OK(avro_value_set_null(&branch));
  } else {
    *out = branch;
  }
  return arrow::Status::OK();
}

arrow::Status SetString(avro_value_t* v, const std::string& s) {
  // Avro C string lengths count the terminating NUL.
  FLOE_AVRO_OK(avro_value_set_string_len(v, s.c_str(), s.size() + 1));
  return arrow::Status::OK();
}

arrow::Status SetBytes(avro_value_t* v, std::string_view s) {
  // Avro C refuses a null pointer even for zero bytes (an empty vector's data()).
  static char empty = 0;
  char* data = s.empty() ? &empty : const_cast<char*>(s.data());
  FLOE_AVRO_OK(avro_value_set_bytes(v, data, s.size()));
  return arrow::Status::OK();
}

arrow::Status SetOptionalLong(avro_value_t* record, const char* name,
                              std::optional<int64_t> value) {
  avro_value_t field, v;
  ARROW_RETURN_NOT_OK(Child(record, name, &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, value.has_value(), &v));
  if (value) FLOE_AVRO_OK(avro_value_set_long(&v, *value));
  return arrow::Status::OK();
}

arrow::Status SetOptionalBytes(avro_value_t* record, const char* name,
                               const std::optional<std::string>& value) {
  avro_value_t field, v;
  ARROW_RETURN_NOT_OK(Child(record, name, &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, value.has_value(), &v));
  if (value) ARROW_RETURN_NOT_OK(SetBytes(&v, *value));
  return arrow::Status::OK();
}

template <typename V>
arrow::Status SetIntKeyMap(avro_value_t* record, const char* name,
                           const std::map<int32_t, V>& map) {
  avro_value_t field, array;
  ARROW_RETURN_NOT_OK(Child(record, name, &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, !map.empty(), &array));
  for (const auto& [key, value] : map) {
    avro_value_t element, k, v;
    FLOE_AVRO_OK(avro_value_append(&array, &element, nullptr));
    FLOE_AVRO_OK(avro_value_get_by_index(&element, 0, &k, nullptr));
    FLOE_AVRO_OK(avro_value_get_by_index(&element, 1, &v, nullptr));
    FLOE_AVRO_OK(avro_value_set_int(&k, key));
    if constexpr (std::is_same_v<V, int64_t>) {
      FLOE_AVRO_OK(avro_value_set_long(&v, value));
    } else {
      ARROW_RETURN_NOT_OK(SetBytes(&v, value));
    }
  }
  return arrow::Status::OK();
}

// Big-endian two's complement of `unscaled` in exactly `size` bytes.
std::string SignExtendedBigEndian(__int128 unscaled, int size) {
  std::string out(size, '\0');
  const auto bits = static_cast<unsigned __int128>(unscaled);
  for (int i = 0; i < size; ++i) {
    out[size - 1 - i] = static_cast<char>(i < 16 ? static_cast<uint8_t>(bits >> (8 * i))
                                                 : (unscaled < 0 ? 0xFF : 0x00));
  }
  return out;
}

arrow::Status SetPartitionValue(avro_value_t* v, const Type& type, const Literal& value) {
  ARROW_RETURN_NOT_OK(CheckLiteralType(type, value));
  switch (type.id()) {
    case TypeId::kBoolean:
      FLOE_AVRO_OK(avro_value_set_boolean(v, std::get<bool>(value) ? 1 : 0));
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      FLOE_AVRO_OK(avro_value_set_int(v, std::get<int32_t>(value)));
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      FLOE_AVRO_OK(avro_value_set_long(v, std::get<int64_t>(value)));
      break;
    case TypeId::kFloat:
      FLOE_AVRO_OK(avro_value_set_float(v, std::get<float>(value)));
      break;
    case TypeId::kDouble:
      FLOE_AVRO_OK(avro_value_set_double(v, std::get<double>(value)));
      break;
    case TypeId::kString:
      return SetString(v, std::get<std::string>(value));
    case TypeId::kBinary: {
      const Bytes& b = std::get<Bytes>(value);
      return SetBytes(
          v, std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
    }
    case TypeId::kFixed: {
      const Bytes& b = std::get<Bytes>(value);
      FLOE_AVRO_OK(avro_value_set_fixed(v, const_cast<uint8_t*>(b.data()), b.size()));
      break;
    }
    case TypeId::kUuid: {
      const Uuid& u = std::get<Uuid>(value);
      FLOE_AVRO_OK(
          avro_value_set_fixed(v, const_cast<uint8_t*>(u.bytes.data()), u.bytes.size()));
      break;
    }
    case TypeId::kDecimal: {
      // ToBytes refuses values with more digits than the precision.
      ARROW_RETURN_NOT_OK(ToBytes(type, value).status());
      std::string b = SignExtendedBigEndian(std::get<Decimal>(value).unscaled,
                                            DecimalFixedSize(type.precision()));
      FLOE_AVRO_OK(avro_value_set_fixed(v, b.data(), b.size()));
      break;
    }
    default:
      return arrow::Status::TypeError("cannot write a ", type.ToString(),
                                      " partition value");
  }
  return arrow::Status::OK();
}

arrow::Status FillEntry(avro_value_t* record, const Type& partition_type,
                        const ManifestEntry& entry) {
  avro_value_t v;
  ARROW_RETURN_NOT_OK(Child(record, "status", &v));
  FLOE_AVRO_OK(avro_value_set_int(&v, static_cast<int32_t>(entry.status)));
  ARROW_RETURN_NOT_OK(SetOptionalLong(record, "snapshot_id", entry.snapshot_id));
  ARROW_RETURN_NOT_OK(SetOptionalLong(record, "sequence_number", entry.sequence_number));
  ARROW_RETURN_NOT_OK(
      SetOptionalLong(record, "file_sequence_number", entry.file_sequence_number));

  const DataFile& f = entry.data_file;
  avro_value_t df;
  ARROW_RETURN_NOT_OK(Child(record, "data_file", &df));
  ARROW_RETURN_NOT_OK(Child(&df, "content", &v));
  FLOE_AVRO_OK(avro_value_set_int(&v, static_cast<int32_t>(f.content)));
  ARROW_RETURN_NOT_OK(Child(&df, "file_path", &v));
  ARROW_RETURN_NOT_OK(SetString(&v, f.file_path));
  ARROW_RETURN_NOT_OK(Child(&df, "file_format", &v));
  ARROW_RETURN_NOT_OK(SetString(&v, f.file_format));

  const auto& fields = partition_type.fields();
  if (f.partition.size() != fields.size()) {
    return arrow::Status::Invalid("data file ", f.file_path, " has ", f.partition.size(),
                                  " partition values; the partition spec has ",
                                  fields.size(), " fields");
  }
  avro_value_t partition;
  ARROW_RETURN_NOT_OK(Child(&df, "partition", &partition));
  for (size_t i = 0; i < fields.size(); ++i) {
    avro_value_t field, value;
    FLOE_AVRO_OK(avro_value_get_by_index(&partition, i, &field, nullptr));
    ARROW_RETURN_NOT_OK(SetOptional(&field, f.partition[i].has_value(), &value));
    if (f.partition[i]) {
      auto st = SetPartitionValue(&value, *fields[i].type, *f.partition[i]);
      if (!st.ok()) {
        return st.WithMessage("partition field '", fields[i].name, "' of ", f.file_path,
                              ": ", st.message());
      }
    }
  }

  ARROW_RETURN_NOT_OK(Child(&df, "record_count", &v));
  FLOE_AVRO_OK(avro_value_set_long(&v, f.record_count));
  ARROW_RETURN_NOT_OK(Child(&df, "file_size_in_bytes", &v));
  FLOE_AVRO_OK(avro_value_set_long(&v, f.file_size_in_bytes));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "column_sizes", f.column_sizes));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "value_counts", f.value_counts));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "null_value_counts", f.null_value_counts));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "nan_value_counts", f.nan_value_counts));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "lower_bounds", f.lower_bounds));
  ARROW_RETURN_NOT_OK(SetIntKeyMap(&df, "upper_bounds", f.upper_bounds));
  ARROW_RETURN_NOT_OK(SetOptionalBytes(&df, "key_metadata", f.key_metadata));

  avro_value_t field, list;
  ARROW_RETURN_NOT_OK(Child(&df, "split_offsets", &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, !f.split_offsets.empty(), &list));
  for (int64_t offset : f.split_offsets) {
    avro_value_t element;
    FLOE_AVRO_OK(avro_value_append(&list, &element, nullptr));
    FLOE_AVRO_OK(avro_value_set_long(&element, offset));
  }
  ARROW_RETURN_NOT_OK(Child(&df, "equality_ids", &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, !f.equality_ids.empty(), &list));
  for (int32_t id : f.equality_ids) {
    avro_value_t element;
    FLOE_AVRO_OK(avro_value_append(&list, &element, nullptr));
    FLOE_AVRO_OK(avro_value_set_int(&element, id));
  }
  ARROW_RETURN_NOT_OK(Child(&df, "sort_order_id", &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, f.sort_order_id.has_value(), &v));
  if (f.sort_order_id) FLOE_AVRO_OK(avro_value_set_int(&v, *f.sort_order_id));
  ARROW_RETURN_NOT_OK(Child(&df, "referenced_data_file", &field));
  ARROW_RETURN_NOT_OK(SetOptional(&field, f.referenced_data_file.has_value(), &v));
  if (f.referenced_data_file) ARROW_RETURN_NOT_OK(SetString(&v, *f.referenced_data_file));
  return arrow::Status::OK();
}

// ---- Partition summaries ---------------------------------------------------------

// Orders two values of the same primitive type (NaNs excluded by the caller).
bool Less(const Literal& a, const Literal& b) {
  if (std::holds_alternative<Decimal>(a)) {
    return std::get<Decimal>(a).unscaled < std::get<Decimal>(b).unscaled;
  }
  return std::visit(
      [&b](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Decimal>) {
          return false;
        } else if constexpr (std::is_same_v<T, Uuid>) {
          return x.bytes < std::get<Uuid>(b).bytes;
        } else {
          return x < std::get<T>(b);
        }
      },
      a);
}

arrow::Result<std::vector<PartitionFieldSummary>> Summarize(
    const Type& partition_type, const std::vector<ManifestEntry>& entries) {
  std::vector<PartitionFieldSummary> out;
  const auto& fields = partition_type.fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    PartitionFieldSummary summary;
    summary.contains_nan = false;
    std::optional<Literal> min, max;
    for (const ManifestEntry& e : entries) {
      const auto& value = e.data_file.partition[i];
      if (!value) {
        summary.contains_null = true;
      } else if (IsNaN(*value)) {
        summary.contains_nan = true;
      } else {
        if (!min || Less(*value, *min)) min = value;
        if (!max || Less(*max, *value)) max = value;
      }
    }
    if (min) {
      ARROW_ASSIGN_OR_RAISE(summary.lower_bound, ToBytes(*fields[i].type, *min));
      ARROW_ASSIGN_OR_RAISE(summary.upper_bound, ToBytes(*fields[i].type, *max));
    }
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace

// ---- Manifests -------------------------------------------------------------------

arrow::Result<ManifestFile> WriteManifest(FileIO& io, const std::string& location,
                                          const ManifestWriteOptions& options,
                                          const std::vector<ManifestEntry>& entries) {
  const TypePtr partition_type =
      options.partition_type ? options.partition_type : Type::Struct({});
  ARROW_RETURN_NOT_OK(CheckPartitionType(*partition_type));

  ManifestFile manifest;
  manifest.manifest_path = location;
  manifest.partition_spec_id = options.partition_spec_id;
  manifest.content = options.content;
  manifest.added_snapshot_id = options.snapshot_id;
  std::optional<int64_t> min_sequence_number;
  for (const ManifestEntry& e : entries) {
    const bool is_data = e.data_file.content == DataFileContent::kData;
    if (is_data != (options.content == ManifestContent::kData)) {
      return arrow::Status::Invalid(
          "data file ", e.data_file.file_path, " has content ",
          static_cast<int>(e.data_file.content), ", which does not belong in a ",
          options.content == ManifestContent::kData ? "data" : "delete", " manifest");
    }
    switch (e.status) {
      case ManifestEntryStatus::kAdded:
        ++manifest.added_files_count;
        manifest.added_rows_count += e.data_file.record_count;
        break;
      case ManifestEntryStatus::kExisting:
        ++manifest.existing_files_count;
        manifest.existing_rows_count += e.data_file.record_count;
        break;
      case ManifestEntryStatus::kDeleted:
        ++manifest.deleted_files_count;
        manifest.deleted_rows_count += e.data_file.record_count;
        break;
    }
    if (e.status != ManifestEntryStatus::kDeleted && e.sequence_number &&
        (!min_sequence_number || *e.sequence_number < *min_sequence_number)) {
      min_sequence_number = e.sequence_number;
    }
  }
  manifest.min_sequence_number = min_sequence_number.value_or(kUnassignedSequenceNumber);

  std::vector<std::pair<std::string, std::string>> metadata;
  metadata.emplace_back("schema", options.schema_json);
  auto schema = nlohmann::json::parse(options.schema_json, nullptr, false);
  if (schema.is_discarded() || !schema.is_object()) {
    return arrow::Status::Invalid(
        "ManifestWriteOptions.schema_json is not a JSON object");
  }
  if (schema.contains("schema-id")) {
    metadata.emplace_back("schema-id", schema["schema-id"].dump());
  }
  metadata.emplace_back("partition-spec", options.partition_spec_json);
  metadata.emplace_back("partition-spec-id", std::to_string(options.partition_spec_id));
  metadata.emplace_back("format-version", "2");
  metadata.emplace_back("content",
                        options.content == ManifestContent::kData ? "data" : "deletes");

  ARROW_ASSIGN_OR_RAISE(std::string schema_json, ManifestSchemaJson(*partition_type));
  ARROW_ASSIGN_OR_RAISE(
      auto writer,
      ContainerWriter::Make(std::move(schema_json), std::move(metadata), options.codec));
  for (const ManifestEntry& e : entries) {
    ARROW_RETURN_NOT_OK(FillEntry(writer->record(), *partition_type, e));
    ARROW_RETURN_NOT_OK(writer->Append());
  }
  ARROW_ASSIGN_OR_RAISE(manifest.partitions, Summarize(*partition_type, entries));
  ARROW_ASSIGN_OR_RAISE(std::string bytes, writer->Finish());
  manifest.manifest_length = static_cast<int64_t>(bytes.size());
  ARROW_RETURN_NOT_OK(io.WriteAtomically(location, bytes, /*exclusive=*/true));
  return manifest;
}

// ---- Manifest lists --------------------------------------------------------------

arrow::Status WriteManifestList(FileIO& io, const std::string& location,
                                int64_t snapshot_id,
                                std::optional<int64_t> parent_snapshot_id,
                                int64_t sequence_number,
                                const std::vector<ManifestFile>& manifests,
                                const std::string& codec) {
  std::vector<std::pair<std::string, std::string>> metadata = {
      {"snapshot-id", std::to_string(snapshot_id)},
      {"parent-snapshot-id",
       parent_snapshot_id ? std::to_string(*parent_snapshot_id) : "null"},
      {"sequence-number", std::to_string(sequence_number)},
      {"format-version", "2"},
  };
  ARROW_ASSIGN_OR_RAISE(auto writer, ContainerWriter::Make(ManifestListSchemaJson(),
                                                           std::move(metadata), codec));
  for (const ManifestFile& m : manifests) {
    avro_value_t* r = writer->record();
    const bool unassigned = m.sequence_number == kUnassignedSequenceNumber;
    if (unassigned && m.added_snapshot_id != snapshot_id) {
      return arrow::Status::Invalid("manifest ", m.manifest_path,
                                    " has no sequence number but was added by snapshot ",
                                    m.added_snapshot_id, ", not ", snapshot_id);
    }
    const int64_t seq = unassigned ? sequence_number : m.sequence_number;
    const int64_t min_seq = m.min_sequence_number == kUnassignedSequenceNumber
                                ? sequence_number
                                : m.min_sequence_number;
    avro_value_t v;
    ARROW_RETURN_NOT_OK(Child(r, "manifest_path", &v));
    ARROW_RETURN_NOT_OK(SetString(&v, m.manifest_path));
    ARROW_RETURN_NOT_OK(Child(r, "manifest_length", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, m.manifest_length));
    ARROW_RETURN_NOT_OK(Child(r, "partition_spec_id", &v));
    FLOE_AVRO_OK(avro_value_set_int(&v, m.partition_spec_id));
    ARROW_RETURN_NOT_OK(Child(r, "content", &v));
    FLOE_AVRO_OK(avro_value_set_int(&v, static_cast<int32_t>(m.content)));
    ARROW_RETURN_NOT_OK(Child(r, "sequence_number", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, seq));
    ARROW_RETURN_NOT_OK(Child(r, "min_sequence_number", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, min_seq));
    ARROW_RETURN_NOT_OK(Child(r, "added_snapshot_id", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, m.added_snapshot_id));
    ARROW_RETURN_NOT_OK(Child(r, "added_files_count", &v));
    FLOE_AVRO_OK(avro_value_set_int(&v, m.added_files_count));
    ARROW_RETURN_NOT_OK(Child(r, "existing_files_count", &v));
    FLOE_AVRO_OK(avro_value_set_int(&v, m.existing_files_count));
    ARROW_RETURN_NOT_OK(Child(r, "deleted_files_count", &v));
    FLOE_AVRO_OK(avro_value_set_int(&v, m.deleted_files_count));
    ARROW_RETURN_NOT_OK(Child(r, "added_rows_count", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, m.added_rows_count));
    ARROW_RETURN_NOT_OK(Child(r, "existing_rows_count", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, m.existing_rows_count));
    ARROW_RETURN_NOT_OK(Child(r, "deleted_rows_count", &v));
    FLOE_AVRO_OK(avro_value_set_long(&v, m.deleted_rows_count));

    avro_value_t field, list;
    ARROW_RETURN_NOT_OK(Child(r, "partitions", &field));
    // An unpartitioned manifest still gets an (empty) list, as Java writes it.
    ARROW_RETURN_NOT_OK(SetOptional(&field, true, &list));
    for (const PartitionFieldSummary& s : m.partitions) {
      avro_value_t summary;
      FLOE_AVRO_OK(avro_value_append(&list, &summary, nullptr));
      ARROW_RETURN_NOT_OK(Child(&summary, "contains_null", &v));
      FLOE_AVRO_OK(avro_value_set_boolean(&v, s.contains_null ? 1 : 0));
      avro_value_t nan_field;
      ARROW_RETURN_NOT_OK(Child(&summary, "contains_nan", &nan_field));
      ARROW_RETURN_NOT_OK(SetOptional(&nan_field, s.contains_nan.has_value(), &v));
      if (s.contains_nan)
        FLOE_AVRO_OK(avro_value_set_boolean(&v, *s.contains_nan ? 1 : 0));
      ARROW_RETURN_NOT_OK(SetOptionalBytes(&summary, "lower_bound", s.lower_bound));
      ARROW_RETURN_NOT_OK(SetOptionalBytes(&summary, "upper_bound", s.upper_bound));
    }
    ARROW_RETURN_NOT_OK(SetOptionalBytes(r, "key_metadata", m.key_metadata));
    ARROW_RETURN_NOT_OK(writer->Append());
  }
  ARROW_ASSIGN_OR_RAISE(std::string bytes, writer->Finish());
  return io.WriteAtomically(location, bytes, /*exclusive=*/true);
}

}  // namespace floe::iceberg
