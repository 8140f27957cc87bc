// A local directory of its own for work spilled to disk (Silver merges, verify,
// backfills from an export, compaction): `floe-spill-<pid>-XXXXXX` under
// silver.spill_dir, removed with the object. A directory of that name whose process
// is gone (killed) is removed when the next one is made under the same parent.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <arrow/result.h>

namespace floe {

class SpillDirectory {
 public:
  ~SpillDirectory();
  SpillDirectory(const SpillDirectory&) = delete;
  SpillDirectory& operator=(const SpillDirectory&) = delete;

  /// Makes the directory under `parent` (created when missing; the system's
  /// temporary directory when empty). `work` names what spills, for the error.
  static arrow::Result<std::unique_ptr<SpillDirectory>> Make(
      const std::filesystem::path& parent, const std::string& work);

  const std::filesystem::path& path() const { return path_; }

  /// Spill directories under `base` of floe processes that are gone, removed.
  static void RemoveStale(const std::filesystem::path& base);

 private:
  SpillDirectory() = default;
  std::filesystem::path path_;
};

}  // namespace floe
