// A FileIO that counts the bytes read from and written to Parquet files through it,
// for a merge's I/O figures (MergeStats, the `floe.merge.*-bytes-*` snapshot-summary
// keys). Everything is forwarded to the wrapped FileIO; only `.parquet` locations
// (data and delete files) are counted, not metadata JSON or Avro manifests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floe/iceberg/file_io.h"

namespace floe::silver {

struct IoCounter {
  std::atomic<int64_t> bytes{0};
};

class CountingFileIO : public iceberg::FileIO {
 public:
  /// Bytes read from `.parquet` inputs are added to `*read`, bytes written to
  /// `.parquet` outputs to `*written` (either may be null: not counted). The
  /// counters must outlive every stream opened through this FileIO.
  CountingFileIO(std::shared_ptr<iceberg::FileIO> inner, IoCounter* read,
                 IoCounter* written);

  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) override;
  arrow::Result<std::string> ReadAll(const std::string& location) override;
  arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) override;
  arrow::Status WriteAtomically(const std::string& location, std::string_view data,
                                bool exclusive) override;
  arrow::Status Sync(const std::string& location) override;
  arrow::Result<bool> Exists(const std::string& location) override;
  arrow::Status Delete(const std::string& location) override;
  arrow::Result<std::vector<iceberg::FileEntry>> List(const std::string& prefix) override;

 private:
  std::shared_ptr<iceberg::FileIO> inner_;
  IoCounter* read_;
  IoCounter* written_;
};

}  // namespace floe::silver
