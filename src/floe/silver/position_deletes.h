// Writing Silver's position delete files. A thin layer over
// iceberg::WritePositionDeleteFile, kept in a file of its own because
// position_delete_writer.h and scan.h both define the reserved delete-file field ids
// and cannot be included in one translation unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/manifest.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/table.h"

namespace floe::silver {

/// One live Silver row to delete: its data file (as the manifest names it) and its
/// 0-based position in that file.
struct RowPosition {
  std::string file_path;
  int64_t pos = 0;
};

/// Writes `rows` (any order) as one position delete file of `partition` of `table`;
/// nothing is committed.
arrow::Result<iceberg::DataFile> WriteRowPositions(
    iceberg::Table& table, const iceberg::PartitionTuple& partition,
    const std::vector<RowPosition>& rows);

}  // namespace floe::silver
