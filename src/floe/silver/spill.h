// Local spill files for Silver work larger than its share of silver.memory_limit
// (docs/silver.md "Memory"): a directory of its own under silver.spill_dir, named
// `floe-spill-<pid>-XXXXXX` and removed with the object (a directory left by a
// process that was killed is removed by the next one made), holding one file per
// partition, each an append of Arrow IPC streams (LZ4).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/ipc/options.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "floe/common/spill_dir.h"

namespace floe::silver {

/// What a spill is for, in its error messages: the work and the room it needs.
struct SpillPurpose {
  /// e.g. "a Silver merge larger than its share of silver.memory_limit".
  std::string work;
  /// e.g. "about twice the increment's Bronze bytes".
  std::string room;
};

/// The merge's spill (increment.h).
extern const SpillPurpose kMergeSpill;

class PartitionSpill {
 public:
  ~PartitionSpill();
  PartitionSpill(const PartitionSpill&) = delete;
  PartitionSpill& operator=(const PartitionSpill&) = delete;

  /// Makes the directory under `parent` (the system's temporary directory when
  /// empty) for `partitions` partitions of rows of `schema`.
  static arrow::Result<std::unique_ptr<PartitionSpill>> Make(
      const std::filesystem::path& parent, int32_t partitions,
      std::shared_ptr<arrow::Schema> schema, SpillPurpose purpose);

  /// Appends `rows` to the partition's file as an IPC stream of its own: no writer
  /// (and no compression buffer) stays open per partition, so the spill's memory does
  /// not grow with the partition count.
  arrow::Status Write(int32_t partition, const std::shared_ptr<arrow::RecordBatch>& rows);

  /// Appends every batch the partition's file holds to `out`.
  arrow::Status ReadInto(int32_t partition,
                         std::vector<std::shared_ptr<arrow::RecordBatch>>* out) const;
  /// Hands `each` the partition's batches one at a time, as they are read.
  arrow::Status ForEach(
      int32_t partition,
      const std::function<arrow::Status(std::shared_ptr<arrow::RecordBatch>)>& each)
      const;

  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  const std::filesystem::path& dir() const { return dir_->path(); }

  /// Spill directories under `base` of floe processes that are gone, removed.
  static void RemoveStaleSpills(const std::filesystem::path& base);

 private:
  PartitionSpill() = default;
  std::string PathOf(int32_t partition) const;
  // A failure to write the spill, with what to do about it.
  arrow::Status Explained(const arrow::Status& status) const;

  std::unique_ptr<SpillDirectory> dir_;
  std::shared_ptr<arrow::Schema> schema_;
  arrow::ipc::IpcWriteOptions options_;
  SpillPurpose purpose_;
  /// Per partition: whether its file has rows.
  std::vector<bool> written_;
};

}  // namespace floe::silver
