// A RandomAccessFile made of one positioned read: a subclass gives ReadAt(position,
// nbytes, out) and GetSize; reads into a new buffer, and Read() from a position of
// the reader's own (Seek, Tell), are made of it here.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include <arrow/buffer.h>
#include <arrow/io/interfaces.h>
#include <arrow/result.h>

namespace floe::iceberg {

class PositionedInput : public arrow::io::RandomAccessFile {
 public:
  using arrow::io::RandomAccessFile::ReadAt;

  arrow::Result<int64_t> Tell() const override { return position_; }
  arrow::Status Seek(int64_t position) override {
    position_ = position;
    return arrow::Status::OK();
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t position,
                                                       int64_t nbytes) override {
    ARROW_ASSIGN_OR_RAISE(auto buffer, arrow::AllocateResizableBuffer(nbytes));
    ARROW_ASSIGN_OR_RAISE(const int64_t n,
                          ReadAt(position, nbytes, buffer->mutable_data()));
    ARROW_RETURN_NOT_OK(buffer->Resize(n, /*shrink_to_fit=*/false));
    return std::shared_ptr<arrow::Buffer>(std::move(buffer));
  }
  arrow::Result<int64_t> Read(int64_t nbytes, void* out) override {
    ARROW_ASSIGN_OR_RAISE(const int64_t n, ReadAt(position_, nbytes, out));
    position_ += n;
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t nbytes) override {
    ARROW_ASSIGN_OR_RAISE(auto buffer, ReadAt(position_, nbytes));
    position_ += buffer->size();
    return buffer;
  }

 private:
  int64_t position_ = 0;
};

}  // namespace floe::iceberg
