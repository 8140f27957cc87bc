// Avro object container files (the format of Iceberg manifests and manifest lists)
// built on Avro C, with the two things Iceberg needs that Avro C's file API lacks: the
// header keeps the schema JSON exactly as given (Iceberg's `field-id` attributes
// included; Avro C re-prints a parsed schema without them) and carries user metadata
// (`format-version`, `partition-spec`, ...). Every datum, the header and the block
// framing are encoded and decoded by Avro C; deflate blocks use zlib on read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>
#include <avro.h>

namespace floe::iceberg::avro_internal {

/// An Avro C error code plus avro_strerror() as an arrow::Status (OK for rc == 0).
arrow::Status AvroStatus(int rc, std::string_view what);

/// Owns an Avro C generic value and the class it was made from.
class GenericValue {
 public:
  GenericValue() = default;
  ~GenericValue();
  GenericValue(const GenericValue&) = delete;
  GenericValue& operator=(const GenericValue&) = delete;

  /// A fresh value of `schema`.
  static arrow::Result<std::unique_ptr<GenericValue>> Make(avro_schema_t schema);

  avro_value_t* get() { return &value_; }

 private:
  avro_value_iface_t* iface_ = nullptr;
  avro_value_t value_{};
  bool has_value_ = false;
};

/// Writes one container file in memory: Avro C's file writer produces the blocks
/// (null or deflate codec), then the header is re-encoded with the original schema
/// text and the user metadata.
class ContainerWriter {
 public:
  /// `codec` is "null" or "deflate". Metadata keys must not start with `avro.`.
  static arrow::Result<std::unique_ptr<ContainerWriter>> Make(
      std::string schema_json, std::vector<std::pair<std::string, std::string>> metadata,
      std::string codec);
  ~ContainerWriter();
  ContainerWriter(const ContainerWriter&) = delete;
  ContainerWriter& operator=(const ContainerWriter&) = delete;

  /// The record to fill before each Append(); Append() resets it.
  avro_value_t* record() { return record_->get(); }
  arrow::Status Append();

  /// Closes the writer and returns the whole file.
  arrow::Result<std::string> Finish();

 private:
  ContainerWriter() = default;

  std::string schema_json_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::string codec_;
  avro_schema_t schema_ = nullptr;
  std::unique_ptr<GenericValue> record_;
  char* buffer_ = nullptr;
  size_t buffer_size_ = 0;
  avro_file_writer_t writer_ = nullptr;
};

/// Reads one container file held in memory. Strict: a wrong magic or sync marker, an
/// unknown codec, a short or over-long block is an error, not an early end.
class ContainerReader {
 public:
  static arrow::Result<std::unique_ptr<ContainerReader>> Open(std::string bytes);
  ~ContainerReader();
  ContainerReader(const ContainerReader&) = delete;
  ContainerReader& operator=(const ContainerReader&) = delete;

  /// User metadata and the `avro.*` keys, as stored.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The writer's schema as JSON text (with any custom attributes).
  const std::string& schema_json() const { return metadata_.at("avro.schema"); }

  /// Reads the next datum into an internal value and points `*out` at it (valid until
  /// the next call); false at the end of the file.
  arrow::Result<bool> Next(avro_value_t** out);

 private:
  ContainerReader() = default;
  arrow::Status LoadBlock();

  std::string bytes_;
  size_t offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::string codec_;
  std::string sync_;
  avro_schema_t schema_ = nullptr;
  std::unique_ptr<GenericValue> datum_;
  // The current block, decompressed, a reader over it and how many of its datums
  // are still unread.
  std::string block_;
  avro_reader_t block_reader_ = nullptr;
  int64_t block_remaining_ = 0;
};

}  // namespace floe::iceberg::avro_internal
