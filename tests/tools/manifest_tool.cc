// Writes and reads Iceberg manifests and manifest lists with floe's library so that
// integration tests can check them against PyIceberg (and floe against PyIceberg's
// files). `write` takes one JSON document describing a manifest and its snapshot and
// prints the ManifestFile written; `read` prints a manifest list and every manifest it
// names (sequence numbers and snapshot ids inherited) as JSON. Bounds and other byte
// values are hex; partition values are JSON typed by the partition type (decimals as
// "-12.34" strings, uuids canonical, binary / fixed hex).
#include <charconv>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/conversions.h"
#include "floe/iceberg/manifest.h"

namespace {

using namespace floe::iceberg;  // NOLINT: a small test tool
using nlohmann::json;

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kHex[static_cast<uint8_t>(c) >> 4];
    out += kHex[static_cast<uint8_t>(c) & 0xF];
  }
  return out;
}

arrow::Result<std::string> Unhex(const std::string& text) {
  if (text.size() % 2 != 0) return arrow::Status::Invalid("odd-length hex: ", text);
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + i + 2, value, 16);
    if (ec != std::errc() || end != text.data() + i + 2) {
      return arrow::Status::Invalid("bad hex: ", text);
    }
    out += static_cast<char>(value);
  }
  return out;
}

std::string DecimalToString(const Decimal& d) {
  const bool negative = d.unscaled < 0;
  std::string digits = Int128ToString(negative ? -d.unscaled : d.unscaled);
  if (d.scale > 0) {
    if (static_cast<int>(digits.size()) <= d.scale) {
      digits.insert(0, d.scale + 1 - digits.size(), '0');
    }
    digits.insert(digits.size() - d.scale, ".");
  }
  return negative ? "-" + digits : digits;
}

arrow::Result<Decimal> ParseDecimal(const std::string& text, int32_t scale) {
  std::string s = text;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.erase(0, 1);
  std::string whole = s, frac;
  if (auto dot = s.find('.'); dot != std::string::npos) {
    whole = s.substr(0, dot);
    frac = s.substr(dot + 1);
  }
  if (static_cast<int>(frac.size()) > scale) {
    return arrow::Status::Invalid("decimal ", text, " has more than ", scale, " places");
  }
  frac.append(scale - frac.size(), '0');
  __int128 unscaled = 0;
  for (char c : whole + frac) {
    if (c < '0' || c > '9') return arrow::Status::Invalid("bad decimal: ", text);
    unscaled = unscaled * 10 + (c - '0');
  }
  return Decimal{negative ? -unscaled : unscaled, scale};
}

arrow::Result<Literal> LiteralFromJson(const Type& type, const json& j) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return Literal(j.get<bool>());
    case TypeId::kInt:
    case TypeId::kDate:
      return Literal(j.get<int32_t>());
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return Literal(j.get<int64_t>());
    case TypeId::kFloat:
      return Literal(j.get<float>());
    case TypeId::kDouble:
      return Literal(j.get<double>());
    case TypeId::kDecimal: {
      ARROW_ASSIGN_OR_RAISE(Decimal d, ParseDecimal(j.get<std::string>(), type.scale()));
      return Literal(d);
    }
    case TypeId::kString:
      return Literal(j.get<std::string>());
    case TypeId::kUuid: {
      ARROW_ASSIGN_OR_RAISE(Uuid u, Uuid::Parse(j.get<std::string>()));
      return Literal(u);
    }
    case TypeId::kBinary:
    case TypeId::kFixed: {
      ARROW_ASSIGN_OR_RAISE(std::string b, Unhex(j.get<std::string>()));
      return Literal(Bytes(b.begin(), b.end()));
    }
    default:
      return arrow::Status::TypeError("no JSON form for ", type.ToString());
  }
}

json LiteralToJson(const Literal& value) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Decimal>) {
          return DecimalToString(v);
        } else if constexpr (std::is_same_v<T, Uuid>) {
          return v.ToString();
        } else if constexpr (std::is_same_v<T, Bytes>) {
          return Hex(std::string_view(reinterpret_cast<const char*>(v.data()), v.size()));
        } else {
          return v;
        }
      },
      value);
}

template <typename V>
std::map<int32_t, V> IntKeyed(const json& j) {
  std::map<int32_t, V> out;
  if (j.is_null()) return out;
  for (const auto& item : j.items()) {
    out[std::stoi(item.key())] = item.value().template get<V>();
  }
  return out;
}

template <typename V>
json IntKeyedToJson(const std::map<int32_t, V>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) {
    if constexpr (std::is_same_v<V, std::string>) {
      out[std::to_string(k)] = Hex(v);
    } else {
      out[std::to_string(k)] = v;
    }
  }
  return out;
}

template <typename T>
std::optional<T> Opt(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

arrow::Result<std::map<int32_t, std::string>> Bounds(const Schema& schema,
                                                     const json& j) {
  std::map<int32_t, std::string> out;
  if (j.is_null()) return out;
  for (const auto& [k, v] : j.items()) {
    const int32_t id = std::stoi(k);
    const NestedField* field = schema.FindField(id);
    if (field == nullptr) return arrow::Status::Invalid("no field ", id);
    ARROW_ASSIGN_OR_RAISE(Literal value, LiteralFromJson(*field->type, v));
    ARROW_ASSIGN_OR_RAISE(out[id], ToBytes(*field->type, value));
  }
  return out;
}

arrow::Status Write(const json& in) {
  auto io = MakeLocalFileIO();
  ARROW_ASSIGN_OR_RAISE(Schema schema, SchemaFromJson(in.at("schema")));
  ARROW_ASSIGN_OR_RAISE(TypePtr ptype, TypeFromJson(in.at("partition_type")));
  ManifestWriteOptions options;
  options.schema_json = in.at("schema").dump();
  options.partition_spec_json = in.value("partition_spec", json::array()).dump();
  options.partition_spec_id = in.value("spec_id", 0);
  options.partition_type = ptype;
  options.content =
      in.value("content", 0) == 1 ? ManifestContent::kDeletes : ManifestContent::kData;
  options.snapshot_id = in.at("snapshot_id").get<int64_t>();
  options.codec = in.value("codec", "deflate");
  std::vector<ManifestEntry> entries;
  for (const json& je : in.at("entries")) {
    ManifestEntry e;
    e.status = static_cast<ManifestEntryStatus>(je.value("status", 1));
    e.snapshot_id = Opt<int64_t>(je, "snapshot_id");
    e.sequence_number = Opt<int64_t>(je, "sequence_number");
    e.file_sequence_number = Opt<int64_t>(je, "file_sequence_number");
    const json& jf = je.at("data_file");
    DataFile& f = e.data_file;
    f.content = static_cast<DataFileContent>(jf.value("content", 0));
    f.file_path = jf.at("file_path");
    f.file_format = jf.value("file_format", "PARQUET");
    const json partition = jf.value("partition", json::array());
    for (size_t i = 0; i < partition.size(); ++i) {
      if (partition[i].is_null()) {
        f.partition.emplace_back();
      } else {
        ARROW_ASSIGN_OR_RAISE(Literal v,
                              LiteralFromJson(*ptype->fields().at(i).type, partition[i]));
        f.partition.emplace_back(std::move(v));
      }
    }
    f.record_count = jf.at("record_count");
    f.file_size_in_bytes = jf.at("file_size_in_bytes");
    f.column_sizes = IntKeyed<int64_t>(jf.value("column_sizes", json()));
    f.value_counts = IntKeyed<int64_t>(jf.value("value_counts", json()));
    f.null_value_counts = IntKeyed<int64_t>(jf.value("null_value_counts", json()));
    f.nan_value_counts = IntKeyed<int64_t>(jf.value("nan_value_counts", json()));
    ARROW_ASSIGN_OR_RAISE(f.lower_bounds,
                          Bounds(schema, jf.value("lower_bounds", json())));
    ARROW_ASSIGN_OR_RAISE(f.upper_bounds,
                          Bounds(schema, jf.value("upper_bounds", json())));
    if (auto km = Opt<std::string>(jf, "key_metadata")) {
      ARROW_ASSIGN_OR_RAISE(f.key_metadata, Unhex(*km));
    }
    f.split_offsets = jf.value("split_offsets", std::vector<int64_t>{});
    f.equality_ids = jf.value("equality_ids", std::vector<int32_t>{});
    f.sort_order_id = Opt<int32_t>(jf, "sort_order_id");
    f.referenced_data_file = Opt<std::string>(jf, "referenced_data_file");
    entries.push_back(std::move(e));
  }
  ARROW_ASSIGN_OR_RAISE(ManifestFile manifest,
                        WriteManifest(*io, in.at("manifest"), options, entries));
  ARROW_RETURN_NOT_OK(WriteManifestList(*io, in.at("manifest_list"), options.snapshot_id,
                                        Opt<int64_t>(in, "parent_snapshot_id"),
                                        in.at("sequence_number"), {manifest},
                                        options.codec));
  std::cout << json{{"manifest_length", manifest.manifest_length}}.dump() << "\n";
  return arrow::Status::OK();
}

json ManifestFileToJson(const ManifestFile& m) {
  json partitions = json::array();
  for (const auto& s : m.partitions) {
    partitions.push_back({
        {"contains_null", s.contains_null},
        {"contains_nan", s.contains_nan ? json(*s.contains_nan) : json()},
        {"lower_bound", s.lower_bound ? json(Hex(*s.lower_bound)) : json()},
        {"upper_bound", s.upper_bound ? json(Hex(*s.upper_bound)) : json()},
    });
  }
  return {
      {"manifest_path", m.manifest_path},
      {"manifest_length", m.manifest_length},
      {"partition_spec_id", m.partition_spec_id},
      {"content", static_cast<int>(m.content)},
      {"sequence_number", m.sequence_number},
      {"min_sequence_number", m.min_sequence_number},
      {"added_snapshot_id", m.added_snapshot_id},
      {"added_files_count", m.added_files_count},
      {"existing_files_count", m.existing_files_count},
      {"deleted_files_count", m.deleted_files_count},
      {"added_rows_count", m.added_rows_count},
      {"existing_rows_count", m.existing_rows_count},
      {"deleted_rows_count", m.deleted_rows_count},
      {"partitions", partitions},
  };
}

json EntryToJson(const ManifestEntry& e) {
  const DataFile& f = e.data_file;
  json partition = json::array();
  for (const auto& v : f.partition) partition.push_back(v ? LiteralToJson(*v) : json());
  auto opt = [](const auto& o) { return o ? json(*o) : json(); };
  return {
      {"status", static_cast<int>(e.status)},
      {"snapshot_id", opt(e.snapshot_id)},
      {"sequence_number", opt(e.sequence_number)},
      {"file_sequence_number", opt(e.file_sequence_number)},
      {"data_file",
       {
           {"content", static_cast<int>(f.content)},
           {"file_path", f.file_path},
           {"file_format", f.file_format},
           {"partition", partition},
           {"record_count", f.record_count},
           {"file_size_in_bytes", f.file_size_in_bytes},
           {"column_sizes", IntKeyedToJson(f.column_sizes)},
           {"value_counts", IntKeyedToJson(f.value_counts)},
           {"null_value_counts", IntKeyedToJson(f.null_value_counts)},
           {"nan_value_counts", IntKeyedToJson(f.nan_value_counts)},
           {"lower_bounds", IntKeyedToJson(f.lower_bounds)},
           {"upper_bounds", IntKeyedToJson(f.upper_bounds)},
           {"key_metadata", f.key_metadata ? json(Hex(*f.key_metadata)) : json()},
           {"split_offsets", f.split_offsets},
           {"equality_ids", f.equality_ids},
           {"sort_order_id", opt(f.sort_order_id)},
           {"referenced_data_file", opt(f.referenced_data_file)},
       }},
  };
}

arrow::Status Read(const std::string& list_location, const json& partition_type) {
  auto io = MakeLocalFileIO();
  ARROW_ASSIGN_OR_RAISE(TypePtr ptype, TypeFromJson(partition_type));
  ARROW_ASSIGN_OR_RAISE(auto list_meta, ReadAvroMetadata(*io, list_location));
  ARROW_ASSIGN_OR_RAISE(auto manifests, ReadManifestList(*io, list_location));
  json out = {{"metadata", json(list_meta)}, {"manifests", json::array()}};
  out["metadata"].erase("avro.schema");
  for (const ManifestFile& m : manifests) {
    json jm = ManifestFileToJson(m);
    ARROW_ASSIGN_OR_RAISE(auto meta, ReadAvroMetadata(*io, m.manifest_path));
    meta.erase("avro.schema");
    jm["metadata"] = meta;
    ARROW_ASSIGN_OR_RAISE(auto entries, ReadManifest(*io, m, *ptype));
    jm["entries"] = json::array();
    for (const auto& e : entries) jm["entries"].push_back(EntryToJson(e));
    out["manifests"].push_back(std::move(jm));
  }
  std::cout << out.dump(2) << "\n";
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe manifest test tool"};
  app.require_subcommand(1);
  std::string input, list, partition_type = R"({"type":"struct","fields":[]})";
  auto* write = app.add_subcommand("write", "write a manifest and a manifest list");
  write->add_option("input", input, "JSON file describing them")->required();
  auto* read = app.add_subcommand("read", "print a manifest list and its manifests");
  read->add_option("list", list, "manifest list location")->required();
  read->add_option("--partition-type", partition_type, "partition struct type as JSON");
  CLI11_PARSE(app, argc, argv);

  arrow::Status st;
  try {
    if (*write) {
      std::ifstream in(input);
      std::stringstream buffer;
      buffer << in.rdbuf();
      st = Write(json::parse(buffer.str()));
    } else {
      st = Read(list, json::parse(partition_type));
    }
  } catch (const std::exception& e) {
    st = arrow::Status::Invalid("bad input: ", e.what());
  }
  if (!st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 1;
  }
  return 0;
}
