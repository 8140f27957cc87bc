// FileIO: how the Iceberg library reads, writes, lists and deletes the files of a
// table, addressed by the locations stored in metadata (`file:///abs/path`,
// `file:/abs/path` as Java writes them, or a plain absolute path). Local disk
// today, behind an interface an object store can implement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

namespace floe::iceberg {

struct FileEntry {
  std::string location;
  int64_t size = 0;
  /// Last modification, milliseconds since the Unix epoch.
  int64_t modified_ms = 0;
};

class FileIO {
 public:
  virtual ~FileIO() = default;

  virtual arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> OpenInput(
      const std::string& location) = 0;
  virtual arrow::Result<std::string> ReadAll(const std::string& location);

  /// A new file (parents created, an existing file truncated). Call Sync() on the
  /// location after closing it to make it durable.
  virtual arrow::Result<std::shared_ptr<arrow::io::OutputStream>> OpenOutput(
      const std::string& location) = 0;

  /// Writes `data` so readers see all of it or nothing, durably. With
  /// `exclusive`, fails with AlreadyExists instead of replacing a file.
  virtual arrow::Status WriteAtomically(const std::string& location,
                                        std::string_view data, bool exclusive) = 0;

  /// Makes a closed file's contents and its directory entry durable.
  virtual arrow::Status Sync(const std::string& location) = 0;

  virtual arrow::Result<bool> Exists(const std::string& location) = 0;
  /// Deleting a missing file is not an error.
  virtual arrow::Status Delete(const std::string& location) = 0;
  /// Every file below the directory `prefix`, recursively; empty if it is absent.
  virtual arrow::Result<std::vector<FileEntry>> List(const std::string& prefix) = 0;
};

/// The local filesystem. Locations it returns from List use the `file://` form.
std::shared_ptr<FileIO> MakeLocalFileIO();

/// The absolute local path of a `file:` location or plain absolute path; Invalid
/// for other schemes or relative paths.
arrow::Result<std::string> LocalPath(std::string_view location);

}  // namespace floe::iceberg
