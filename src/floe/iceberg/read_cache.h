// A local-disk cache of what is read from an object store's immutable table files, for
// work that reads the same files again and again: a Silver merge cut into slices,
// each of which reads the key columns (and manifests) of the same Silver files. On a
// local disk a re-read is a pread the page cache answers; on an object store it is a
// GET per range, a round trip and a request's fee each.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>

#include "floe/iceberg/file_io.h"

namespace floe::iceberg {

struct ReadCacheOptions {
  /// Where the cached bytes are kept: a directory made for them below it, removed
  /// with the FileIO.
  std::filesystem::path dir;
  /// The bytes kept at most; reads past that go to the store.
  int64_t max_bytes = int64_t{4} << 30;
  /// The free space the cache leaves on its disk (for the spill beside it): a block
  /// that would leave less is read from the store instead.
  int64_t min_free_bytes = int64_t{2} << 30;
  /// Cache local locations too (tests); by default only object-store ones are.
  bool local_too = false;
  /// Called once, the first time a block is read through instead of kept (the
  /// budget spent, the disk short of room or failing), with the bytes kept so far.
  std::function<void(int64_t kept)> on_full;
};

/// A FileIO forwarding to `inner` whose reads of `.parquet` (data and delete files)
/// and `.avro` (manifests, manifest lists) locations are kept on local disk in blocks
/// of a MiB: a range read once is served from there for as long as the FileIO
/// lives; an object is open on the store (a HEAD) only while a reader of it misses,
/// so no more than the readers at hand hold the store's buffers in memory. Iceberg never
/// rewrites such a file under its name, so a cached byte never goes stale. A missing span
/// of a read is fetched in one request. When the cache is full, its disk is short of room
/// or fails, reads go to the store: slower, never wrong. Thread-safe.
arrow::Result<std::shared_ptr<FileIO>> MakeReadCachingFileIO(
    std::shared_ptr<FileIO> inner, const ReadCacheOptions& options);

}  // namespace floe::iceberg
