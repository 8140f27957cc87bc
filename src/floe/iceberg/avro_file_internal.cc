#include "floe/iceberg/avro_file_internal.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <algorithm>

#include <avro/allocation.h>
#include <zlib.h>

namespace floe::iceberg::avro_internal {
namespace {

// Avro C 1.11 allocates a string or bytes value at the length its input declares
// before it checks that the input holds that many bytes: an 11-byte file can ask for
// 2 GiB, a negative length for 2^64 bytes. While floe decodes bytes it read from a
// file (ReadBound), Avro C's allocations above a bound derived from the input's size
// fail instead, and so does the read, with an error. (Avro C still leaks what it
// allocated for a value the input then turned out too short for: at most that bound
// per failed read.)
thread_local size_t tl_allocation_bound = 0;  // 0: no bound

void* BoundedAllocator(void*, void* ptr, size_t, size_t nsize) {
  if (nsize == 0) {
    std::free(ptr);
    return nullptr;
  }
  if (tl_allocation_bound != 0 && nsize > tl_allocation_bound) return nullptr;
  return std::realloc(ptr, nsize);
}

// Installed before main: Avro C's default allocator is realloc / free as well, so
// memory allocated either way can be freed either way.
[[maybe_unused]] const bool kAllocatorInstalled = [] {
  avro_set_allocator(BoundedAllocator, nullptr);
  return true;
}();

// Bounds Avro C's allocations while it decodes `input_size` bytes. A value read
// from them needs at most a small multiple of their size in memory.
class ReadBound {
 public:
  explicit ReadBound(size_t input_size)
      : previous_(tl_allocation_bound),
        bound_(std::max<size_t>(input_size * 16, size_t{1} << 20)) {
    tl_allocation_bound = bound_;
  }
  ~ReadBound() { tl_allocation_bound = previous_; }
  ReadBound(const ReadBound&) = delete;
  ReadBound& operator=(const ReadBound&) = delete;

 private:
  size_t previous_;
  size_t bound_;
};

// The container header and block layouts from the Avro specification ("Object
// Container Files"), so that Avro C encodes and decodes them too.
constexpr std::string_view kHeaderSchema = R"({"type": "record",
  "name": "org.apache.avro.file.Header", "fields": [
  {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
  {"name": "meta", "type": {"type": "map", "values": "bytes"}},
  {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}}]})";
constexpr std::string_view kBlockSchema = R"({"type": "record",
  "name": "org.apache.avro.file.Block", "fields": [
  {"name": "count", "type": "long"},
  {"name": "data", "type": "bytes"},
  {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}}]})";
constexpr std::string_view kMagic("Obj\x01", 4);

// Largest block Avro C's writer buffers before flushing; one manifest entry must fit.
constexpr size_t kWriterBlockSize = 4 * 1024 * 1024;

struct SchemaDeleter {
  void operator()(avro_schema_t s) const { avro_schema_decref(s); }
};
using SchemaPtr = std::unique_ptr<std::remove_pointer_t<avro_schema_t>, SchemaDeleter>;

arrow::Result<SchemaPtr> ParseSchema(std::string_view json) {
  avro_schema_t schema = nullptr;
  ARROW_RETURN_NOT_OK(AvroStatus(
      avro_schema_from_json_length(json.data(), json.size(), &schema), "parsing schema"));
  return SchemaPtr(schema);
}

arrow::Result<SchemaPtr> HeaderSchema() { return ParseSchema(kHeaderSchema); }

// Decodes a header at the start of `bytes`; returns it and its encoded size.
struct Header {
  std::map<std::string, std::string> metadata;
  std::string sync;
  size_t size = 0;
};

arrow::Result<Header> DecodeHeader(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return arrow::Status::Invalid("not an Avro object container file (bad magic)");
  }
  ARROW_ASSIGN_OR_RAISE(SchemaPtr schema, HeaderSchema());
  ARROW_ASSIGN_OR_RAISE(auto value, GenericValue::Make(schema.get()));
  avro_reader_t reader =
      avro_reader_memory(bytes.data(), static_cast<int64_t>(bytes.size()));
  ReadBound bound(bytes.size());
  const int rc = avro_value_read(reader, value->get());
  avro_reader_free(reader);
  ARROW_RETURN_NOT_OK(AvroStatus(rc, "reading the container header"));
  Header header;
  ARROW_RETURN_NOT_OK(
      AvroStatus(avro_value_sizeof(value->get(), &header.size), "sizing"));
  avro_value_t meta, sync;
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_get_by_index(value->get(), 1, &meta, nullptr),
                                 "reading the header"));
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_get_by_index(value->get(), 2, &sync, nullptr),
                                 "reading the header"));
  size_t count = 0;
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_get_size(&meta, &count), "reading metadata"));
  for (size_t i = 0; i < count; ++i) {
    avro_value_t entry;
    const char* key = nullptr;
    ARROW_RETURN_NOT_OK(
        AvroStatus(avro_value_get_by_index(&meta, i, &entry, &key), "reading metadata"));
    const void* data = nullptr;
    size_t size = 0;
    ARROW_RETURN_NOT_OK(
        AvroStatus(avro_value_get_bytes(&entry, &data, &size), "reading metadata"));
    header.metadata[key] = std::string(static_cast<const char*>(data), size);
  }
  const void* data = nullptr;
  size_t size = 0;
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_get_fixed(&sync, &data, &size), "sync"));
  header.sync.assign(static_cast<const char*>(data), size);
  return header;
}

arrow::Result<std::string> EncodeHeader(
    const std::vector<std::pair<std::string, std::string>>& metadata,
    std::string_view sync) {
  ARROW_ASSIGN_OR_RAISE(SchemaPtr schema, HeaderSchema());
  ARROW_ASSIGN_OR_RAISE(auto value, GenericValue::Make(schema.get()));
  avro_value_t magic, meta, sync_value;
  avro_value_get_by_index(value->get(), 0, &magic, nullptr);
  avro_value_get_by_index(value->get(), 1, &meta, nullptr);
  avro_value_get_by_index(value->get(), 2, &sync_value, nullptr);
  ARROW_RETURN_NOT_OK(AvroStatus(
      avro_value_set_fixed(&magic, const_cast<char*>(kMagic.data()), kMagic.size()),
      "writing the header"));
  for (const auto& [key, text] : metadata) {
    avro_value_t entry;
    ARROW_RETURN_NOT_OK(
        AvroStatus(avro_value_add(&meta, key.c_str(), &entry, nullptr, nullptr),
                   "writing metadata"));
    ARROW_RETURN_NOT_OK(AvroStatus(
        avro_value_set_bytes(&entry, const_cast<char*>(text.data()), text.size()),
        "writing metadata"));
  }
  ARROW_RETURN_NOT_OK(AvroStatus(
      avro_value_set_fixed(&sync_value, const_cast<char*>(sync.data()), sync.size()),
      "writing the header"));
  size_t size = 0;
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_sizeof(value->get(), &size), "sizing"));
  std::string out(size, '\0');
  avro_writer_t writer = avro_writer_memory(out.data(), static_cast<int64_t>(size));
  const int rc = avro_value_write(writer, value->get());
  avro_writer_free(writer);
  ARROW_RETURN_NOT_OK(AvroStatus(rc, "writing the header"));
  return out;
}

// Raw deflate (RFC 1951), which is what the Avro "deflate" codec stores.
arrow::Result<std::string> Inflate(std::string_view in) {
  z_stream stream{};
  if (inflateInit2(&stream, -15) != Z_OK) {
    return arrow::Status::OutOfMemory("zlib inflateInit2 failed");
  }
  std::string out;
  std::string chunk(64 * 1024, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  stream.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
    stream.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&stream);
      return arrow::Status::Invalid("corrupt deflate block in Avro file (zlib error ", rc,
                                    ")");
    }
    out.append(chunk.data(), chunk.size() - stream.avail_out);
    if (rc == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return arrow::Status::Invalid("truncated deflate block in Avro file");
    }
  }
  inflateEnd(&stream);
  return out;
}

}  // namespace

arrow::Status AvroStatus(int rc, std::string_view what) {
  if (rc == 0) return arrow::Status::OK();
  const char* message = avro_strerror();
  return arrow::Status::IOError("Avro: ", what, ": ",
                                (message && *message) ? message : std::strerror(rc));
}

GenericValue::~GenericValue() {
  if (has_value_) avro_value_decref(&value_);
  if (iface_ != nullptr) avro_value_iface_decref(iface_);
}

arrow::Result<std::unique_ptr<GenericValue>> GenericValue::Make(avro_schema_t schema) {
  auto out = std::make_unique<GenericValue>();
  out->iface_ = avro_generic_class_from_schema(schema);
  if (out->iface_ == nullptr) return AvroStatus(EINVAL, "making a value class");
  ARROW_RETURN_NOT_OK(
      AvroStatus(avro_generic_value_new(out->iface_, &out->value_), "making a value"));
  out->has_value_ = true;
  return out;
}

// ---- ContainerWriter -------------------------------------------------------------

arrow::Result<std::unique_ptr<ContainerWriter>> ContainerWriter::Make(
    std::string schema_json, std::vector<std::pair<std::string, std::string>> metadata,
    std::string codec) {
  if (codec != "null" && codec != "deflate") {
    return arrow::Status::Invalid("Avro codec '", codec,
                                  "' is not supported; use 'null' or 'deflate'");
  }
  for (const auto& [key, value] : metadata) {
    if (key.starts_with("avro.")) {
      return arrow::Status::Invalid("metadata key '", key, "' is reserved by Avro");
    }
  }
  std::unique_ptr<ContainerWriter> w(new ContainerWriter());
  w->schema_json_ = std::move(schema_json);
  w->metadata_ = std::move(metadata);
  w->codec_ = std::move(codec);
  ARROW_ASSIGN_OR_RAISE(SchemaPtr schema, ParseSchema(w->schema_json_));
  w->schema_ = schema.release();
  ARROW_ASSIGN_OR_RAISE(w->record_, GenericValue::Make(w->schema_));
  FILE* fp = open_memstream(&w->buffer_, &w->buffer_size_);
  if (fp == nullptr)
    return arrow::Status::IOError("open_memstream: ", std::strerror(errno));
  // Avro C takes ownership of `fp` (should_close = 1), also when it fails.
  ARROW_RETURN_NOT_OK(AvroStatus(
      avro_file_writer_create_with_codec_fp(fp, "<memory>", 1, w->schema_, &w->writer_,
                                            w->codec_.c_str(), kWriterBlockSize),
      "creating the file writer"));
  return w;
}

ContainerWriter::~ContainerWriter() {
  if (writer_ != nullptr) avro_file_writer_close(writer_);
  record_.reset();
  if (schema_ != nullptr) avro_schema_decref(schema_);
  std::free(buffer_);
}

arrow::Status ContainerWriter::Append() {
  if (writer_ == nullptr) return arrow::Status::Invalid("Avro writer is finished");
  const int rc = avro_file_writer_append_value(writer_, record_->get());
  avro_value_reset(record_->get());
  return AvroStatus(rc, "appending a record");
}

arrow::Result<std::string> ContainerWriter::Finish() {
  if (writer_ == nullptr) return arrow::Status::Invalid("Avro writer is finished");
  const int rc = avro_file_writer_close(writer_);
  writer_ = nullptr;
  ARROW_RETURN_NOT_OK(AvroStatus(rc, "closing the file writer"));
  const std::string_view written(buffer_, buffer_size_);
  ARROW_ASSIGN_OR_RAISE(Header header, DecodeHeader(written));
  // Re-encoding what was decoded must give back Avro C's header byte for byte;
  // anything else means the blocks do not start where we think.
  std::vector<std::pair<std::string, std::string>> original(header.metadata.begin(),
                                                            header.metadata.end());
  ARROW_ASSIGN_OR_RAISE(std::string again, EncodeHeader(original, header.sync));
  if (again != written.substr(0, header.size)) {
    return arrow::Status::UnknownError(
        "Avro C wrote a container header floe cannot re-encode identically");
  }
  std::vector<std::pair<std::string, std::string>> meta;
  meta.emplace_back("avro.schema", schema_json_);
  meta.emplace_back("avro.codec", codec_);
  for (const auto& kv : metadata_) meta.push_back(kv);
  ARROW_ASSIGN_OR_RAISE(std::string out, EncodeHeader(meta, header.sync));
  out.append(written.substr(header.size));
  return out;
}

// ---- ContainerReader -------------------------------------------------------------

arrow::Result<std::unique_ptr<ContainerReader>> ContainerReader::Open(std::string bytes) {
  std::unique_ptr<ContainerReader> r(new ContainerReader());
  r->bytes_ = std::move(bytes);
  ARROW_ASSIGN_OR_RAISE(Header header, DecodeHeader(r->bytes_));
  r->metadata_ = std::move(header.metadata);
  r->sync_ = std::move(header.sync);
  r->offset_ = header.size;
  auto schema_it = r->metadata_.find("avro.schema");
  if (schema_it == r->metadata_.end()) {
    return arrow::Status::Invalid("Avro file header has no avro.schema");
  }
  auto codec_it = r->metadata_.find("avro.codec");
  r->codec_ = codec_it == r->metadata_.end() ? "null" : codec_it->second;
  if (r->codec_ != "null" && r->codec_ != "deflate") {
    return arrow::Status::NotImplemented("Avro codec '", r->codec_,
                                         "' is not supported (only null and deflate)");
  }
  ARROW_ASSIGN_OR_RAISE(SchemaPtr schema, ParseSchema(schema_it->second));
  r->schema_ = schema.release();
  ARROW_ASSIGN_OR_RAISE(r->datum_, GenericValue::Make(r->schema_));
  return r;
}

ContainerReader::~ContainerReader() {
  if (block_reader_ != nullptr) avro_reader_free(block_reader_);
  datum_.reset();
  if (schema_ != nullptr) avro_schema_decref(schema_);
}

arrow::Status ContainerReader::LoadBlock() {
  ARROW_ASSIGN_OR_RAISE(SchemaPtr schema, ParseSchema(kBlockSchema));
  ARROW_ASSIGN_OR_RAISE(auto block, GenericValue::Make(schema.get()));
  const std::string_view rest = std::string_view(bytes_).substr(offset_);
  avro_reader_t reader =
      avro_reader_memory(rest.data(), static_cast<int64_t>(rest.size()));
  ReadBound bound(rest.size());
  const int rc = avro_value_read(reader, block->get());
  avro_reader_free(reader);
  ARROW_RETURN_NOT_OK(AvroStatus(rc, "reading a block (truncated file?)"));
  size_t size = 0;
  ARROW_RETURN_NOT_OK(AvroStatus(avro_value_sizeof(block->get(), &size), "sizing"));
  offset_ += size;
  avro_value_t count, data, sync;
  avro_value_get_by_index(block->get(), 0, &count, nullptr);
  avro_value_get_by_index(block->get(), 1, &data, nullptr);
  avro_value_get_by_index(block->get(), 2, &sync, nullptr);
  int64_t n = 0;
  avro_value_get_long(&count, &n);
  const void* ptr = nullptr;
  size_t len = 0;
  avro_value_get_fixed(&sync, &ptr, &len);
  if (std::string_view(static_cast<const char*>(ptr), len) != sync_) {
    return arrow::Status::Invalid("Avro block ends with a wrong sync marker");
  }
  if (n < 0) return arrow::Status::Invalid("Avro block has a negative count");
  avro_value_get_bytes(&data, &ptr, &len);
  std::string_view payload(static_cast<const char*>(ptr), len);
  if (codec_ == "deflate") {
    ARROW_ASSIGN_OR_RAISE(block_, Inflate(payload));
  } else {
    block_.assign(payload);
  }
  if (block_reader_ != nullptr) avro_reader_free(block_reader_);
  block_reader_ = avro_reader_memory(block_.data(), static_cast<int64_t>(block_.size()));
  block_remaining_ = n;
  return arrow::Status::OK();
}

arrow::Result<bool> ContainerReader::Next(avro_value_t** out) {
  while (block_remaining_ == 0) {
    if (offset_ == bytes_.size()) return false;
    ARROW_RETURN_NOT_OK(LoadBlock());
  }
  avro_value_reset(datum_->get());
  ReadBound bound(block_.size());
  ARROW_RETURN_NOT_OK(
      AvroStatus(avro_value_read(block_reader_, datum_->get()), "reading a record"));
  --block_remaining_;
  *out = datum_->get();
  return true;
}

}  // namespace floe::iceberg::avro_internal
