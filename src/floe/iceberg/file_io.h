// FileIO: how the Iceberg library reads, writes, lists and deletes the files of a
// table, addressed by the locations stored in metadata (`file:///abs/path`,
// `file:/abs/path` as Java writes them, or a plain absolute path) on local disk, and
// `s3://bucket/key` (or `s3a://`, `s3n://` as Java engines write them) on an
// S3-compatible object store.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/common/s3_options.h"

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

/// Whether `location` is on an object store (`s3://`, `s3a://`, `s3n://`).
bool IsObjectStoreLocation(std::string_view location);

/// A FileIO for both local and object-store locations, each call going by its
/// location's scheme. The object store is reached with `s3` (no settings: AWS with
/// the default credential chain); its client is made at the first such location.
/// An object store has no rename: WriteAtomically is one PUT (readers see the whole
/// object or none), and `exclusive` only checks first that the object is absent,
/// since floe's exclusive names are unique (a UUID in each) and the catalog's
/// compare-and-swap is what makes a commit atomic. Sync is a no-op: an object exists
/// only once its upload completed. The small files it writes exclusively to the
/// object store (manifests, manifest lists, metadata; up to 4 MiB of the latest) are
/// read back from memory: a commit reads the manifest list the one before it wrote.
std::shared_ptr<FileIO> MakeFileIO(const S3Options& s3 = {});

/// For an object-store location: that its bucket exists and the settings reach it
/// (one request); Invalid naming the bucket and the fix when it does not, IOError
/// when the store cannot be reached. OK for local locations.
arrow::Status CheckObjectStore(const std::string& location, const S3Options& s3);

/// Once `*stop` reads true, object-store requests that fail are not retried (the
/// operation fails at once): a process asked to stop stops within one request. Set
/// once, before object stores are used; `stop` must outlive them.
void StopObjectStoreRetries(const std::atomic<bool>* stop);

/// Releases the object-store client library; call once before the process exits
/// (after every FileIO is gone). Nothing to do if no object store was used.
void FinalizeObjectStores();

/// The absolute local path of a `file:` location or plain absolute path; Invalid
/// for other schemes or relative paths.
arrow::Result<std::string> LocalPath(std::string_view location);

}  // namespace floe::iceberg
