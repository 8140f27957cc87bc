// Position delete files: Parquet files of (data file path, row position) pairs that
// mark rows of data files as deleted (merge-on-read). Written with the spec's
// reserved schema so every engine can apply them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/manifest.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/position_delete.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/table.h"

namespace floe::iceberg {

/// `file_path` (string, required, id 2147483546) then `pos` (long, required, id
/// 2147483545).
arrow::Result<Schema> PositionDeleteSchema();

/// Writes `rows` (sorted by file_path then pos, duplicates dropped, as the spec
/// requires) as one Parquet position delete file of `partition` (the partition of
/// the data files it points into) with the table's writer settings, makes it
/// durable and returns its manifest contents: content position-deletes, record
/// count, full (untruncated) file_path bounds, pos bounds, and referenced_data_file
/// when every row points into one data file. Nothing is committed.
arrow::Result<DataFile> WritePositionDeleteFile(Table& table,
                                                const PartitionTuple& partition,
                                                std::vector<PositionDelete> rows);

/// Deleted positions by data file path (each file's in any order, duplicates
/// allowed): 8 bytes a row where PositionDelete holds the path in every row.
using PositionsByFile = std::map<std::string, std::vector<int64_t>>;

/// The same, from positions by file; the rows are built and written a batch at a
/// time, so a file of many deletes never holds every path string at once.
/// `spec`, when set, is the spec `partition` is of (deletes of an older spec's data
/// files; commit it with RowDeltaRequest::delete_file_specs), else the default one.
arrow::Result<DataFile> WritePositionDeleteFile(Table& table,
                                                const PartitionTuple& partition,
                                                PositionsByFile positions,
                                                const PartitionSpec* spec = nullptr);

}  // namespace floe::iceberg
