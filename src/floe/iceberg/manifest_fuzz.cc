// libFuzzer target for reading Avro manifests and manifest lists back (ReadManifest,
// ReadManifestList, ReadAvroMetadata): the files a table's metadata points at, which
// any engine sharing the catalog may have written. They are read through an in-memory
// FileIO holding the input.
//
// Input: byte 0 picks what the rest is read as (bits 0-1: 0 and 3 a manifest, 1 a
// manifest list, 2 only the header metadata) and, for a manifest, the partition type
// of its spec (bits 2-7, from kPartitionTypes); the rest is the file.
//
// Asserted (std::abort, besides ASan/UBSan): a read gives entries or an error status
// (no exception, no abort inside Avro C); every partition value read is of its
// field's type (CheckLiteralType); what was read, written again with floe's writer
// (WriteManifest / WriteManifestList, when it accepts it), reads back equal.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/literal.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/schema.h"

namespace {

namespace ice = floe::iceberg;
using ice::NestedField;
using ice::Type;

// A FileIO over a map of in-memory files.
class MemoryFileIO : public ice::FileIO {
 public:
  std::map<std::string, std::string> files;

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override {
    ARROW_ASSIGN_OR_RAISE(std::string bytes, ReadAll(location));
    return std::make_shared<arrow::io::BufferReader>(
        arrow::Buffer::FromString(std::move(bytes)));
  }
  arrow::Result<std::string> ReadAll(const std::string& location) override {
    auto it = files.find(location);
    if (it == files.end()) return arrow::Status::IOError("no file ", location);
    return it->second;
  }
  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override {
    return arrow::Status::NotImplemented("MemoryFileIO::OpenOutput");
  }
  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override {
    if (exclusive && files.contains(location)) {
      return arrow::Status::AlreadyExists(location);
    }
    files[location] = std::string(data);
    return arrow::Status::OK();
  }
  arrow::Status Sync(const std::string& location) override { return arrow::Status::OK(); }
  arrow::Result<bool> Exists(const std::string& location) override {
    return files.contains(location);
  }
  arrow::Status Delete(const std::string& location) override {
    files.erase(location);
    return arrow::Status::OK();
  }
  arrow::Result<std::vector<ice::FileEntry>> List(const std::string& prefix) override {
    return std::vector<ice::FileEntry>{};
  }
};

std::vector<ice::TypePtr> MakePartitionTypes() {
  std::vector<ice::TypePtr> t;
  // 0: unpartitioned.
  t.push_back(Type::Struct({}));
  // 1: Bronze's pg_logical_messages spec: day(cdc_ts), identity(source_table).
  t.push_back(
      Type::Struct({NestedField::Optional(1000, "cdc_ts_day", Type::Date()),
                    NestedField::Optional(1001, "source_table", Type::String())}));
  // 2: bucket[16](id).
  t.push_back(Type::Struct({NestedField::Optional(1000, "id_bucket", Type::Int())}));
  // 3: one field of every primitive type.
  t.push_back(Type::Struct({
      NestedField::Optional(1000, "b", Type::Boolean()),
      NestedField::Optional(1001, "i", Type::Int()),
      NestedField::Optional(1002, "l", Type::Long()),
      NestedField::Optional(1003, "f", Type::Float()),
      NestedField::Optional(1004, "d", Type::Double()),
      NestedField::Optional(1005, "dec", Type::Decimal(9, 2)),
      NestedField::Optional(1006, "dt", Type::Date()),
      NestedField::Optional(1007, "t", Type::Time()),
      NestedField::Optional(1008, "ts", Type::Timestamp()),
      NestedField::Optional(1009, "tstz", Type::TimestampTz()),
      NestedField::Optional(1010, "s", Type::String()),
      NestedField::Optional(1011, "u", Type::Uuid()),
      NestedField::Optional(1012, "fx", Type::Fixed(4)),
      NestedField::Optional(1013, "bin", Type::Binary()),
      NestedField::Optional(1014, "dec38", Type::Decimal(38, 10)),
  }));
  return t;
}

bool HasNaN(const std::vector<ice::ManifestEntry>& entries) {
  for (const ice::ManifestEntry& e : entries) {
    for (const auto& v : e.data_file.partition) {
      if (!v) continue;
      if (const float* f = std::get_if<float>(&*v); f && std::isnan(*f)) return true;
      if (const double* d = std::get_if<double>(&*v); d && std::isnan(*d)) return true;
    }
  }
  return false;
}

void FuzzManifest(const std::string& bytes, const ice::TypePtr& partition_type) {
  MemoryFileIO io;
  io.files["m.avro"] = bytes;
  auto entries = ice::ReadManifest(io, "m.avro", *partition_type);
  if (!entries.ok()) return;
  const auto& fields = partition_type->fields();
  for (const ice::ManifestEntry& e : *entries) {
    if (e.data_file.partition.size() != fields.size()) std::abort();
    for (size_t i = 0; i < fields.size(); ++i) {
      const auto& v = e.data_file.partition[i];
      if (v && !ice::CheckLiteralType(*fields[i].type, *v).ok()) std::abort();
    }
  }

  // Written again by floe, it reads back the same.
  if (entries->empty() || HasNaN(*entries)) return;
  ice::ManifestWriteOptions options;
  options.schema_json = R"({"type":"struct","schema-id":0,"fields":[]})";
  options.partition_type = partition_type;
  options.codec = "null";
  options.content = entries->front().data_file.content == ice::DataFileContent::kData
                        ? ice::ManifestContent::kData
                        : ice::ManifestContent::kDeletes;
  if (!ice::WriteManifest(io, "again.avro", options, *entries).ok()) return;
  auto again = ice::ReadManifest(io, "again.avro", *partition_type);
  if (!again.ok() || *again != *entries) std::abort();
}

void FuzzManifestList(const std::string& bytes) {
  MemoryFileIO io;
  io.files["list.avro"] = bytes;
  auto manifests = ice::ReadManifestList(io, "list.avro");
  if (!manifests.ok() || manifests->empty()) return;

  // Written again by floe, it reads back the same (unassigned sequence numbers would
  // be replaced: not compared).
  for (const ice::ManifestFile& m : *manifests) {
    if (m.sequence_number == ice::kUnassignedSequenceNumber ||
        m.min_sequence_number == ice::kUnassignedSequenceNumber) {
      return;
    }
  }
  if (!ice::WriteManifestList(io, "again.avro", 1, std::nullopt, 1, *manifests, "null")
           .ok()) {
    return;
  }
  auto again = ice::ReadManifestList(io, "again.avro");
  if (!again.ok() || *again != *manifests) std::abort();
}

void FuzzMetadata(const std::string& bytes) {
  MemoryFileIO io;
  io.files["f.avro"] = bytes;
  auto metadata = ice::ReadAvroMetadata(io, "f.avro");
  if (metadata.ok() && !metadata->contains("avro.schema")) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ice::TypePtr> partition_types = MakePartitionTypes();
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] & 0x03) {
    case 1:
      FuzzManifestList(bytes);
      break;
    case 2:
      FuzzMetadata(bytes);
      break;
    default:
      FuzzManifest(bytes, partition_types[(data[0] >> 2) % partition_types.size()]);
      break;
  }
  return 0;
}
