// Reading position delete files fast: the file_path column decoded as its dictionary
// (a merge-on-read bucket's delete file repeats a handful of paths over many rows),
// positions appended to each path's list without a string per row.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"

namespace floe::iceberg {

/// Adds the rows of `paths` (strings, or a dictionary of strings with int32
/// indices) and `positions` (longs) to `out` (only those of `only_path` when set),
/// skipping rows with a null in either; returns how many rows had both.
arrow::Result<int64_t> AddPositionRows(const arrow::Array& paths,
                                       const arrow::Array& positions,
                                       const std::string* only_path,
                                       std::map<std::string, std::vector<int64_t>>* out);

/// Adds the (file_path, pos) rows of the position delete file `deletes` to `out`
/// (only those of `only_path` when set; rows with a null in either column skipped),
/// reading a batch at a time. The columns are found by the spec's reserved field
/// ids; false when the file's columns carry no such ids (then nothing was added, and
/// the caller reads them by name).
arrow::Result<bool> StreamPositionDeletes(
    FileIO& io, const DataFile& deletes, const std::string* only_path,
    std::map<std::string, std::vector<int64_t>>* out);

}  // namespace floe::iceberg
