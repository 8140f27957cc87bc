#include "floe/silver/position_deletes.h"

#include "floe/iceberg/position_delete_writer.h"

namespace floe::silver {

arrow::Result<iceberg::DataFile> WriteRowPositions(
    iceberg::Table& table, const iceberg::PartitionTuple& partition,
    const std::vector<RowPosition>& rows) {
  std::vector<iceberg::PositionDelete> deletes;
  deletes.reserve(rows.size());
  for (const auto& r : rows) deletes.push_back({r.file_path, r.pos});
  return iceberg::WritePositionDeleteFile(table, partition, std::move(deletes));
}

}  // namespace floe::silver
