#include "floe/silver/counting_file_io.h"

#include <utility>

#include <arrow/buffer.h>

namespace floe::silver {
namespace {

bool IsParquet(const std::string& location) { return location.ends_with(".parquet"); }

class CountingInput : public arrow::io::RandomAccessFile {
 public:
  CountingInput(std::shared_ptr<arrow::io::RandomAccessFile> inner, IoCounter* counter)
      : inner_(std::move(inner)), counter_(counter) {}

  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Seek(int64_t position) override { return inner_->Seek(position); }
  arrow::Result<int64_t> GetSize() override { return inner_->GetSize(); }
  bool supports_zero_copy() const override { return inner_->supports_zero_copy(); }

  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    return Count(inner_->Read(nbytes, out));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    return Count(inner_->Read(nbytes));
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, bool allow_short_read,
                                void* out) override {
    return Count(inner_->ReadAt(position, nbytes, allow_short_read, out));
  }
  arrow::Result<int64_t> ReadAt(int64_t position, int64_t nbytes, void* out) override {
    return Count(inner_->ReadAt(position, nbytes, out));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position, int64_t nbytes,
                                                       bool allow_short_read) override {
    return Count(inner_->ReadAt(position, nbytes, allow_short_read));
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position,
                                                       int64_t nbytes) override {
    return Count(inner_->ReadAt(position, nbytes));
  }

 private:
  arrow::Result<int64_t> Count(arrow::Result<int64_t> n) {
    if (n.ok()) counter_->bytes += *n;
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Count(
      arrow::Result<std::shared_ptr<arrow::Buffer>> buffer) {
    if (buffer.ok() && *buffer != nullptr) counter_->bytes += (*buffer)->size();
    return buffer;
  }

  std::shared_ptr<arrow::io::RandomAccessFile> inner_;
  IoCounter* counter_;
};

class CountingOutput : public arrow::io::OutputStream {
 public:
  CountingOutput(std::shared_ptr<arrow::io::OutputStream> inner, IoCounter* counter)
      : inner_(std::move(inner)), counter_(counter) {}

  arrow::Status Close() override { return inner_->Close(); }
  arrow::Status Abort() override { return inner_->Abort(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  arrow::Status Flush() override { return inner_->Flush(); }
  arrow::Status Write(const void* data, int64_t nbytes) override {
    ARROW_RETURN_NOT_OK(inner_->Write(data, nbytes));
    counter_->bytes += nbytes;
    return arrow::Status::OK();
  }
  arrow::Status Write(const std::shared_ptr<arrow::Buffer>& data) override {
    ARROW_RETURN_NOT_OK(inner_->Write(data));
    counter_->bytes += data->size();
    return arrow::Status::OK();
  }

 private:
  std::shared_ptr<arrow::io::OutputStream> inner_;
  IoCounter* counter_;
};

}  // namespace

CountingFileIO::CountingFileIO(std::shared_ptr<iceberg::FileIO> inner, IoCounter* read,
                               IoCounter* written)
    : inner_(std::move(inner)), read_(read), written_(written) {}

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> CountingFileIO::OpenInput(
    const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto input, inner_->OpenInput(location));
  if (read_ == nullptr || !IsParquet(location)) return input;
  return std::make_shared<CountingInput>(std::move(input), read_);
}

arrow::Result<std::string> CountingFileIO::ReadAll(const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(std::string data, inner_->ReadAll(location));
  if (read_ != nullptr && IsParquet(location)) {
    read_->bytes += static_cast<int64_t>(data.size());
  }
  return data;
}

arrow::Result<std::shared_ptr<arrow::io::OutputStream>> CountingFileIO::OpenOutput(
    const std::string& location) {
  ARROW_ASSIGN_OR_RAISE(auto output, inner_->OpenOutput(location));
  if (written_ == nullptr || !IsParquet(location)) return output;
  return std::make_shared<CountingOutput>(std::move(output), written_);
}

arrow::Status CountingFileIO::WriteAtomically(const std::string& location,
                                              std::string_view data, bool exclusive) {
  ARROW_RETURN_NOT_OK(inner_->WriteAtomically(location, data, exclusive));
  if (written_ != nullptr && IsParquet(location)) {
    written_->bytes += static_cast<int64_t>(data.size());
  }
  return arrow::Status::OK();
}

arrow::Status CountingFileIO::Sync(const std::string& location) {
  return inner_->Sync(location);
}
arrow::Result<bool> CountingFileIO::Exists(const std::string& location) {
  return inner_->Exists(location);
}
arrow::Status CountingFileIO::Delete(const std::string& location) {
  return inner_->Delete(location);
}
arrow::Result<std::vector<iceberg::FileEntry>> CountingFileIO::List(
    const std::string& prefix) {
  return inner_->List(prefix);
}

}  // namespace floe::silver
